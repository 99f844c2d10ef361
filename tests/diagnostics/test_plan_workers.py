"""Parallel plans on local worker processes, and the compile cache they share.

Every figure is checked against the serial plan of the same program (its own real deviceless
compiles): the workers must change how long a plan takes, never what it answers.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from oomkb.diagnostics.compile_cache import CompileCache
from oomkb.diagnostics.executors import ProcessExecutor, WorkerLost, WorkerSpec
from oomkb.diagnostics.measure import MeasureRequest
from oomkb.diagnostics.plan import plan_program

pytestmark = pytest.mark.slow  # real compiles in worker processes

PROGRAMS = Path(__file__).parents[1] / "programs"
PLAN_FILE = PROGRAMS / "plan_programs.py"


@pytest.fixture(scope="module", autouse=True)
def oomkb_home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OOMKB_HOME", str(tmp_path_factory.mktemp("oomkb_home")))
        yield


@pytest.fixture(scope="module")
def executor():
    workers = ProcessExecutor(2)
    yield workers
    workers.close()


def fixes_of(report):
    return sorted((f.id, f.title, f.fits, f.total_bytes, f.saving_bytes, f.compiles)
                  for f in [*report.fixes, *report.no_saving])


def curve_of(report):
    return [(p.value, p.status, p.total_bytes, p.reported_bytes) for p in report.vary.curve]


@pytest.fixture(scope="module")
def serial_vary():
    return plan_program(f"{PLAN_FILE}:wide", target="v5e", vary="batch=1..262144", timeout_s=300)


@pytest.fixture(scope="module")
def parallel_vary(executor, serial_vary):
    return plan_program(f"{PLAN_FILE}:wide", target="v5e", vary="batch=1..262144",
                        timeout_s=300, executor=executor)


def test_vary_on_two_workers_reads_exactly_what_the_serial_plan_reads(serial_vary, parallel_vary):
    serial, parallel = serial_vary.vary, parallel_vary.vary
    assert (parallel.largest_fitting, parallel.next_value, parallel.boundary) == (
        serial.largest_fitting, serial.next_value, True)
    # the same values compiled, with the same bytes, as the serial search (nothing speculative)
    assert curve_of(parallel_vary) == curve_of(serial_vary)
    assert parallel.compiles == serial.compiles
    run = parallel_vary.execution
    assert run.executor == "processes" and run.workers == 2
    # each round measured the value asked for and the one it would ask next: fewer rounds
    assert parallel.rounds < serial.compiles
    assert parallel_vary.compiles == serial_vary.compiles + run.speculative
    assert run.seconds > 0 and run.rounds >= parallel.rounds


def test_a_plan_run_again_compiles_nothing(executor, parallel_vary):
    again = plan_program(f"{PLAN_FILE}:wide", target="v5e", vary="batch=1..262144",
                         timeout_s=300, executor=executor)
    assert again.compiles == 0 and again.vary.compiles == 0
    assert again.execution.cached >= again.vary.rounds > 0
    assert curve_of(again) == curve_of(parallel_vary)
    assert again.baseline.total_bytes == parallel_vary.baseline.total_bytes


def test_the_fixes_on_workers_are_the_serial_fixes(executor):
    program = f"{PLAN_FILE}:wide_sharded"
    serial = plan_program(program, target="v5e", timeout_s=300)
    parallel = plan_program(program, target="v5e", timeout_s=300, executor=executor)
    assert not serial.baseline.fits
    assert fixes_of(parallel) == fixes_of(serial)
    assert parallel.baseline.total_bytes == serial.baseline.total_bytes
    # every fix's compile went out in one round, with the larger topologies past the first
    # that fits measured ahead of need
    assert parallel.execution.rounds == 1
    assert parallel.compiles == serial.compiles + parallel.execution.speculative


def test_choices_on_workers_are_the_serial_choices(executor):
    # --choose: each value a keyword argument of the measurement, on the workers like any other;
    # a bool and a float travel as themselves (the factory refuses anything else)
    program = f"{PROGRAMS / 'choose_programs.py'}:flagged"
    for choose, vary in (("half=false,true", None), ("scale=1.0,2.5", "batch=1..4096")):
        serial = plan_program(program, target="v5e", choose=choose, vary=vary, timeout_s=300)
        parallel = plan_program(program, target="v5e", choose=choose, vary=vary, timeout_s=300,
                                executor=executor)
        rows = lambda r: [(c.value, c.status, c.fits, c.total_bytes, c.at_value)  # noqa: E731
                          for c in r.choices]
        assert rows(parallel) == rows(serial) and all(c.status != "factory_error"
                                                     for c in parallel.choices)


def test_a_changed_program_is_compiled_again(executor, tmp_path):
    source = tmp_path / "grows.py"
    source.write_text(
        "import jax, jax.numpy as jnp\n"
        "ROWS = 1024\n"
        "def make(batch=8):\n"
        "    return (lambda x: jnp.tanh(x) * 2), (jax.ShapeDtypeStruct((batch, ROWS), jnp.float32),)\n")
    first = plan_program(f"{source}:make", target="v5e", vary="batch=1..64", timeout_s=300,
                         executor=executor)
    cached = plan_program(f"{source}:make", target="v5e", vary="batch=1..64", timeout_s=300,
                          executor=executor)
    source.write_text(source.read_text().replace("ROWS = 1024", "ROWS = 2048"))
    changed = plan_program(f"{source}:make", target="v5e", vary="batch=1..64", timeout_s=300,
                           executor=executor)
    assert first.compiles > 0 and cached.compiles == 0 and changed.compiles > 0
    assert changed.baseline.total_bytes > first.baseline.total_bytes


def test_the_command_line_plans_on_workers_and_says_how(tmp_path):
    import json
    import subprocess
    import sys

    program = tmp_path / "small.py"
    program.write_text("import jax, jax.numpy as jnp\n"
                       "def make(batch=8):\n"
                       "    return jnp.tanh, (jax.ShapeDtypeStruct((batch, 1 << 20), jnp.float32),)\n")
    command = [sys.executable, "-m", "oomkb", "plan", f"{program}:make", "--vary", "batch=1..8192",
               "--workers", "2"]
    env = {**os.environ, "PYTHONPATH": str(PROGRAMS.parents[1])}
    env.pop("OOMKB_RAY_ADDRESS", None)
    report = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True,
                                       env=env, timeout=300, check=True).stdout)
    run = report["execution"]
    assert run["executor"] == "processes" and run["workers"] == 2
    assert run["rounds"] == len(run["round_sizes"]) and max(run["round_sizes"]) == 2
    # the serial plan of the same program, by the same command without --workers
    serial = json.loads(subprocess.run([*command[:-2], "--json"], capture_output=True, text=True,
                                       env=env, timeout=300, check=True).stdout)
    assert serial["execution"] is None
    assert report["vary"]["curve"] == serial["vary"]["curve"]
    assert report["vary"]["boundary"] and report["vary"]["largest_fitting"] == serial["vary"]["largest_fitting"]
    text = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300,
                          check=True).stdout
    assert "on 2 local worker process(es)" in text and "from the compile cache" in text


def test_cache_entries_are_written_whole_and_keyed_by_what_decides_them(tmp_path):
    cache = CompileCache(tmp_path / "cache")
    request = MeasureRequest(generation="v5e", topology="v5e:2x2", kwargs={"batch": 8})
    key = cache.key("source-hash", "make", "measure", request.cache_fields())
    assert cache.get(key) is None
    cache.put(key, {"status": "fits", "total_bytes": 1})
    assert cache.get(key) == {"status": "fits", "total_bytes": 1}
    assert not list((tmp_path / "cache").rglob(".tmp-*"))  # nothing half-written left
    other = [
        cache.key("other-source", "make", "measure", request.cache_fields()),
        cache.key("source-hash", "make", "measure",
                  request.model_copy(update={"kwargs": {"batch": 16}}).cache_fields()),
        cache.key("source-hash", "make", "measure",
                  request.model_copy(update={"topology": "v5e:2x4"}).cache_fields()),
        cache.key("source-hash", "make", "measure", request.model_copy(
            update={"options": {"xla_tpu_scoped_vmem_limit_kib": 32768}}).cache_fields()),
        cache.key("source-hash", "make", "measure", request.cache_fields(),
                  versions={"jax": "0.0.1"}),
    ]
    assert len({key, *other}) == 6
    # the label is not part of the key
    assert cache.key("source-hash", "make", "measure",
                     request.model_copy(update={"what": "x"}).cache_fields()) == key


def killable_copy(folder: Path) -> Path:
    """A copy of tests/programs/killable.py in ``folder`` (its markers are written beside it)."""
    target = folder / "killable.py"
    shutil.copy(PROGRAMS / "killable.py", target)
    return target


def kill_when_started(folder: Path, times: int, *, parent: bool = False) -> threading.Thread:
    """Kill the worker that writes ``folder/started``, ``times`` times over (each a fresh
    worker), then let the next one be (``spare``); ``parent``: kill the process that started the
    worker's sandbox too (a Ray worker)."""
    marker = folder / "started"

    def run() -> None:
        for _ in range(times):
            deadline = time.monotonic() + 120
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not marker.exists():
                return
            pid, ppid = (int(n) for n in marker.read_text().split())
            marker.unlink()
            for victim in ([ppid] if parent else []) + [pid]:
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        (folder / "spare").touch()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_worker_killed_twice_mid_measurement_ends_in_a_clear_error(tmp_path):
    program = killable_copy(tmp_path)
    workers = ProcessExecutor(1)
    workers.start(WorkerSpec(program=f"{program}:make", timeout_s=120,
                             read_only=[str(tmp_path)]))
    try:
        # the first value compiles; batch=64 kills its worker, and the fresh one too
        ok = workers.run([MeasureRequest(generation="v5e", topology="v5e:2x2", kwargs={"batch": 8})])
        assert ok[0].measured["status"] == "fits"
        killer = kill_when_started(tmp_path, times=2)
        with pytest.raises(WorkerLost, match="retried once on a fresh worker"):
            workers.run([MeasureRequest(generation="v5e", topology="v5e:2x2",
                                        kwargs={"batch": 64})])
        killer.join(timeout=10)
    finally:
        workers.close()
    shutil.rmtree(tmp_path, ignore_errors=True)
