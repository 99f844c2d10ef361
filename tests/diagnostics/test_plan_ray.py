"""Plans on a real Ray cluster on 127.0.0.1: the serial plan's answer, a worker killed mid-compile
retried on another, an address that cannot be reached.

Most tests share one cluster started in this process (``ray.init``, 2 CPUs, its own temporary
folder); one starts ``ray start --head`` on free ports in a folder of its own, drives it from a
separate process through its ADDRESS, and stops exactly the processes it started (never a
machine-wide ``ray stop``: other clusters may run here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from oomkb.diagnostics.executors import ClusterUnavailable, RayExecutor, connect_executor  # noqa: E402
from oomkb.diagnostics.plan import plan_program  # noqa: E402
from tests.ray_cluster import (  # noqa: E402
    NO_TOKEN, free_port, local_cluster, processes_under, stop_processes,
)

pytestmark = pytest.mark.slow  # a Ray cluster and real compiles

ROOT = Path(__file__).parents[2]
PROGRAMS = ROOT / "tests" / "programs"
PLAN_FILE = PROGRAMS / "plan_programs.py"


@pytest.fixture(scope="module", autouse=True)
def oomkb_home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OOMKB_HOME", str(tmp_path_factory.mktemp("oomkb_home")))
        for name, value in NO_TOKEN.items():
            mp.setenv(name, value)
        yield


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster of 2 CPUs in this process, on 127.0.0.1, in a temporary folder of its own."""
    with local_cluster() as temp:
        yield temp


def test_a_plan_on_the_cluster_is_the_serial_plan(cluster):
    program = f"{PLAN_FILE}:wide_sharded"
    serial = plan_program(program, target="v5e", timeout_s=300)
    executor = RayExecutor(None)
    try:
        parallel = plan_program(program, target="v5e", timeout_s=300, executor=executor)
    finally:
        executor.close()
    assert executor.slots == 2
    assert parallel.execution.executor == "ray" and parallel.execution.rounds == 1
    assert parallel.baseline.total_bytes == serial.baseline.total_bytes
    key = lambda f: (f.id, f.title, f.fits, f.total_bytes, f.compiles)  # noqa: E731
    assert sorted(map(key, parallel.fixes)) == sorted(map(key, serial.fixes))
    # the workers are gone with the plan: every actor it started is dead
    from ray._private.state import actors

    mine = [a for a in actors().values() if "RayWorkerActor" in str(a.get("ActorClassName"))]
    assert len(mine) == 2 and all(str(a.get("State")) in ("DEAD", "2") for a in mine), mine


def test_an_unreachable_address_is_a_service_error_at_once(cluster):
    started = time.monotonic()
    with pytest.raises(ClusterUnavailable) as caught:
        connect_executor(2, f"127.0.0.1:{free_port()}")
    assert time.monotonic() - started < 10
    assert caught.value.http_status == 503 and caught.value.retry_after_s
    assert "cannot be reached" in str(caught.value)


def test_the_cli_says_the_cluster_is_unreachable_and_plans_here(tmp_path):
    env = {**os.environ, "OOMKB_RAY_ADDRESS": f"127.0.0.1:{free_port()}",
           "PYTHONPATH": str(ROOT)}
    program = tmp_path / "small.py"
    program.write_text("import jax, jax.numpy as jnp\n"
                       "def make(batch=8):\n"
                       "    return jnp.tanh, (jax.ShapeDtypeStruct((batch, 128), jnp.float32),)\n")
    done = subprocess.run([sys.executable, "-m", "oomkb", "plan", f"{program}:make", "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "cannot be reached" in done.stderr and "running the plan locally" in done.stderr
    report = json.loads(done.stdout)
    assert report["execution"] is None and report["baseline"]["fits"]


DRIVER = textwrap.dedent('''
    import json, sys, threading
    sys.path.insert(0, {tests!r})
    from diagnostics.test_plan_workers import kill_when_started
    from oomkb.diagnostics.executors import RayExecutor, WorkerSpec
    from oomkb.diagnostics.measure import MeasureRequest
    from oomkb.diagnostics.plan import plan_program
    from pathlib import Path

    executor = RayExecutor({address!r})
    out = {{"slots": executor.slots}}
    try:
        plan = plan_program({plan_program!r}, target="v5e", vary="batch=1..64", timeout_s=300,
                            executor=executor)
        out["plan"] = {{"largest": plan.vary.largest_fitting, "executor": plan.execution.executor}}
        folder = Path({folder!r})
        executor.start(WorkerSpec(program=f"{{folder}}/killable.py:make", timeout_s=200,
                                  read_only=[str(folder)]))
        killer = kill_when_started(folder, times=1, parent=True)
        (result,) = executor.run([MeasureRequest(generation="v5e", topology="v5e:2x2",
                                                 kwargs={{"batch": 64}})])
        killer.join(timeout=10)
        out["after_kill"] = result.measured["status"]
        out["killed"] = not (folder / "started").exists() and (folder / "spare").exists()
    finally:
        executor.close()
    print(json.dumps(out))
''')


def test_an_address_started_with_ray_start_serves_a_plan_and_retries_a_killed_worker(tmp_path):
    temp = tempfile.mkdtemp(prefix="oomkb-raystart-", dir="/tmp")
    scratch = os.path.join(temp, "tmp")  # what a killed worker leaves goes with the cluster
    os.mkdir(scratch)
    port = free_port()
    ray_cli = str(Path(sys.executable).with_name("ray"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0",
           "OOMKB_TEST_RAY_CLUSTER": temp, "TMPDIR": scratch, **NO_TOKEN}
    ports = {"--ray-client-server-port": free_port(),"--dashboard-agent-listen-port": free_port(), "--dashboard-agent-grpc-port": free_port(),
             "--metrics-export-port": free_port(), "--runtime-env-agent-port": free_port(),
             "--node-manager-port": free_port(), "--object-manager-port": free_port()}
    start = [ray_cli, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
             "--include-dashboard=false", "--num-cpus", "2", "--temp-dir", temp,
             "--disable-usage-stats", *[str(x) for kv in ports.items() for x in kv]]
    try:
        started = subprocess.run(start, capture_output=True, text=True, env=env, timeout=180)
        assert started.returncode == 0, started.stderr[-2000:]
        shutil.copy(PROGRAMS / "killable.py", tmp_path / "killable.py")
        driver = tmp_path / "driver.py"
        driver.write_text(DRIVER.format(tests=str(ROOT / "tests"), address=f"127.0.0.1:{port}",
                                        plan_program=f"{PROGRAMS}/plan_programs.py:wide",
                                        folder=str(tmp_path)))
        done = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True,
                              env=env, timeout=400)
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["slots"] == 2
        assert out["plan"] == {"largest": 64, "executor": "ray"}
        # the worker was killed mid-measurement; the measurement was retried on a fresh one
        assert out["killed"] and out["after_kill"] == "fits"
    finally:
        stop_processes(processes_under(temp))
        shutil.rmtree(temp, ignore_errors=True)
    assert processes_under(temp) == []
