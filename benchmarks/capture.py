"""What `capture` costs when nothing goes wrong, and what the OOM report costs when it does.

Prints one JSON object:

* ``steps``: a loop of N small jitted training steps (a 256x256 matmul with an update), run
  outside any capture, inside one `with capture(...)` around the loop, and with every step
  decorated by `@capture(...)` (the per-step worst case). Each variant is timed ``--rounds``
  times, interleaved, best and median reported; ``overhead_*`` are the differences to the bare
  loop in microseconds per step and in percent.
  ``enter_exit_ns`` is the cost of entering and leaving an error-free capture, measured alone
  (the loop figures on a shared machine are dominated by noise; see ``load_average_1min``).
* ``oom_report``: seconds to build and write the report of a real CPU out-of-memory error (a 4
  TiB request) with ``--live`` arrays alive, and the report's size.

    .venv/bin/python benchmarks/capture.py [--steps 1000] [--rounds 15] [--live 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oomkb.diagnostics import tpu  # noqa: E402

tpu.prepare_in_process()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from oomkb.diagnostics.capture import capture  # noqa: E402


@jax.jit
def train_step(w, x):
    loss = jnp.tanh(x @ w).sum()
    return w - 1e-3 * loss * w, loss


def bare(steps, w, x):
    for _ in range(steps):
        w, loss = train_step(w, x)
    return jax.block_until_ready(w)


def inside(steps, w, x, path):
    with capture(path):
        for _ in range(steps):
            w, loss = train_step(w, x)
        return jax.block_until_ready(w)


def per_step(steps, w, x, path):
    step = capture(path)(train_step)
    for _ in range(steps):
        w, loss = step(w, x)
    return jax.block_until_ready(w)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--live", type=int, default=200, help="arrays alive at the measured OOM")
    args = parser.parse_args()

    w = jnp.ones((256, 256)) * 0.01
    x = jnp.ones((64, 256))
    out = Path(tempfile.mkdtemp(prefix="oomkb-bench-capture-"))
    report = out / "never-written.json"
    variants = {
        "bare": lambda: bare(args.steps, w, x),
        "inside_capture": lambda: inside(args.steps, w, x, report),
        "decorated_step": lambda: per_step(args.steps, w, x, report),
    }
    for run in variants.values():  # compile and warm up
        run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, run in variants.items():  # interleaved, so drift hits all alike
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    base_best, base_median = min(times["bare"]), statistics.median(times["bare"])
    steps_result = {"steps": args.steps, "rounds": args.rounds}
    for name, samples in times.items():
        best, median = min(samples), statistics.median(samples)
        steps_result[name] = {"best_s": round(best, 6), "median_s": round(median, 6),
                              "us_per_step_median": round(median / args.steps * 1e6, 3)}
        if name != "bare":
            steps_result[f"overhead_{name}"] = {
                "us_per_step_best": round((best - base_best) / args.steps * 1e6, 3),
                "us_per_step_median": round((median - base_median) / args.steps * 1e6, 3),
                "percent_median": round((median - base_median) / base_median * 100, 2),
            }
    assert not report.exists(), "capture wrote a report without an error"
    # The cost itself, without the loop's noise: entering and leaving an error-free capture.
    catcher_cm = capture(report)
    reps = 200_000
    started = time.perf_counter()
    for _ in range(reps):
        with catcher_cm:
            pass
    with_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(reps):
        pass
    empty_s = time.perf_counter() - started
    steps_result["enter_exit_ns"] = round((with_s - empty_s) / reps * 1e9, 1)
    steps_result["load_average_1min"] = round(os.getloadavg()[0], 2)

    kept = [jnp.full((128, 64), float(i)) for i in range(args.live)]
    path = out / "oom.json"
    started = time.perf_counter()
    try:
        with capture(path, console=False) as catcher:
            jnp.zeros((1 << 40,)).block_until_ready()
    except Exception:
        pass
    oom_seconds = time.perf_counter() - started
    print(json.dumps({
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "loop": steps_result,
        "oom_report": {
            "live_arrays": catcher.report.live_array_count,
            "groups": len(catcher.report.live_buffers),
            "seconds_total": round(oom_seconds, 3),
            "seconds_report": catcher.report.seconds,
            "report_bytes": path.stat().st_size,
            "pprof_bytes": Path(catcher.report.pprof).stat().st_size,
        },
    }, indent=2))
    del kept


if __name__ == "__main__":
    main()
