"""Cluster benchmark: a --vary plan on 1 and 2 workers, and 20 estimate jobs through the queue.

Prints one JSON object, measured in one run on this machine:

* ``vary``: ``oomkb plan tests/programs/plan_programs.py:step --vary batch=1..1048576`` (an MLP
  training step; each compile that fits takes 5-15 s on 2 cores) with ``--workers 1`` and
  ``--workers 2``, each with an empty compile cache: wall seconds, compiles, rounds and the
  compiles asked for in each round, the answer (the same for both) and the ratio of the walls
  (the issue's goal: <= 0.65 with 2 workers);
* ``queue``: a Ray cluster of 2 CPUs started in this process on 127.0.0.1, the HTTP service
  pointed at it (OOMKB_RAY_ADDRESS), and 4 clients each submitting 5 estimates at once and
  polling them: served (done), refused (not 202), lost (not finished within the time limit or
  failed), and the wall seconds.

    .venv/bin/python benchmarks/cluster.py [--range 1..1048576] [--skip-vary] [--skip-queue]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROGRAM = f"{ROOT}/tests/programs/plan_programs.py:step"
QUEUE_PROGRAM = '''
import jax, jax.numpy as jnp

def make():
    return (lambda x: jnp.tanh(x) * 2), (jax.ShapeDtypeStruct((4096, 1024), jnp.float32),)
'''


def vary_on(workers: int, text: str) -> dict:
    from oomkb.diagnostics.executors import ProcessExecutor
    from oomkb.diagnostics.plan import plan_program

    home = tempfile.mkdtemp(prefix="oomkb-bench-home-")
    os.environ["OOMKB_HOME"] = home  # an empty compile cache
    executor = ProcessExecutor(workers)
    started = time.perf_counter()
    try:
        report = plan_program(PROGRAM, target="v5e", vary=text, timeout_s=1800, executor=executor)
    finally:
        executor.close()
        shutil.rmtree(home, ignore_errors=True)
    wall = time.perf_counter() - started
    run = report.execution
    return {
        "workers": workers, "wall_s": round(wall, 1), "compiles": report.compiles,
        "vary_compiles": report.vary.compiles, "speculative": run.speculative,
        "rounds": run.rounds, "compiles_per_round": run.round_sizes,
        "vary_rounds": report.vary.rounds, "largest_fitting": report.vary.largest_fitting,
        "next_value": report.vary.next_value,
        "curve": [(p.value, p.status, p.total_bytes) for p in report.vary.curve],
    }


def queue_run(clients: int = 4, jobs_each: int = 5, limit_s: float = 900) -> dict:
    import ray
    from fastapi.testclient import TestClient

    from oomkb.api.http.app import create_app
    from oomkb.settings import Settings

    temp = tempfile.mkdtemp(prefix="oomkb-bench-ray-", dir="/tmp")
    home = tempfile.mkdtemp(prefix="oomkb-bench-home-")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address="local", include_dashboard=False, num_cpus=2, _node_ip_address="127.0.0.1",
             _temp_dir=temp, logging_level="ERROR", log_to_driver=False)
    app = create_app(Settings(enable_estimate=True, ray_address=ray.get_runtime_context().gcs_address,
                              home=Path(home)))
    outcome = {"served": 0, "refused": 0, "lost": 0, "failed": 0}
    lock = threading.Lock()
    started = time.perf_counter()

    def client(n: int) -> None:
        http = TestClient(app, base_url="http://127.0.0.1", client=(f"10.0.0.{n + 1}", 40000))
        ids = []
        for _ in range(jobs_each):
            r = http.post("/v1/estimate", json={"source": QUEUE_PROGRAM, "factory": "make"})
            if r.status_code == 202:
                ids.append(r.json()["job_id"])
            else:
                with lock:
                    outcome["refused"] += 1
        deadline = time.monotonic() + limit_s
        pending = set(ids)
        while pending and time.monotonic() < deadline:
            for job_id in list(pending):
                state = http.get(f"/v1/jobs/{job_id}").json().get("state")
                if state in ("done", "failed", "cancelled"):
                    pending.discard(job_id)
                    with lock:
                        outcome["served" if state == "done" else "failed"] += 1
            time.sleep(0.5)
        with lock:
            outcome["lost"] += len(pending)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        app.state.job_queue.close()
        ray.shutdown()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(temp, ignore_errors=True)
    return {"clients": clients, "jobs": clients * jobs_each, **outcome,
            "wall_s": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--range", default="1..1048576")
    parser.add_argument("--skip-vary", action="store_true")
    parser.add_argument("--skip-queue", action="store_true")
    args = parser.parse_args()
    out: dict = {"load_average_at_start": os.getloadavg(), "cpus": os.cpu_count()}
    if not args.skip_vary:
        one = vary_on(1, f"batch={args.range}")
        two = vary_on(2, f"batch={args.range}")
        out["vary"] = {"program": PROGRAM, "range": args.range, "one": one, "two": two,
                       "same_answer": (one["largest_fitting"], one["next_value"], one["curve"])
                       == (two["largest_fitting"], two["next_value"], two["curve"]),
                       "wall_ratio": round(two["wall_s"] / one["wall_s"], 3)}
    if not args.skip_queue:
        out["queue"] = queue_run()
    out["load_average_at_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
