"""`oomkb run` and `diagnostics.capture`: an OOM caught where it happens, on the real CPU backend.

Asking XLA:CPU for 4 TiB raises `RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104
bytes.` at once, with the arrays created before it still alive: the report must name the lines
that created them and what keeps them alive, and the error must still reach the caller.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from oomkb.api.core.evidence import facts_from
from oomkb.diagnostics.capture import CaptureReport, capture, is_oom

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

ROOT = Path(__file__).resolve().parents[2]
FOUR_TIB = 1 << 42

LEAKY_SCRIPT = textwrap.dedent(
    """\
    import sys
    import jax.numpy as jnp

    print("args:", sys.argv[1:], flush=True)
    GRADS = []
    params = jnp.ones((256, 128))


    def train_step(i):
        grads = params * i
        GRADS.append(grads)


    for step in range(5):
        train_step(step)
    jnp.zeros((1 << 40,)).block_until_ready()
    """
)


def _line(source: str, text: str) -> int:
    """1-based number of the line of `source` that contains `text`."""
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def _run(tmp_path: Path, script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`oomkb run OPTIONS train.py SCRIPT_ARGS` where `args` is OPTIONS [`--` SCRIPT_ARGS]."""
    path = tmp_path / "train.py"
    path.write_text(script)
    options, script_args = (args[: args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, ())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "oomkb.api.cli", "run", *options, str(path), *script_args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path,
    )


# --------------------------------------------------------------------------- the Python API


def test_capture_names_the_creating_lines_and_the_holder_and_reraises(tmp_path):
    import jax.numpy as jnp

    # Large enough to be the largest group, so its holder is among those looked for whatever arrays
    # earlier tests left alive (a CI run found none for three (321, 7) arrays).
    kept = [jnp.ones((2053, 1031)) for _ in range(3)]  # created on this line
    created_at = f"{__file__}:{sys._getframe().f_lineno - 1}"
    report_path = tmp_path / "oom.json"
    with pytest.raises(Exception) as raised:
        with capture(report_path, console=False) as catcher:
            jnp.zeros((1 << 40,)).block_until_ready()
    assert "RESOURCE_EXHAUSTED" in str(raised.value)
    report = CaptureReport.model_validate_json(report_path.read_text())
    assert report == catcher.report
    assert report.error.category == "host_oom" and report.error.backend == "cpu"
    assert report.error.requested_bytes == FOUR_TIB
    group = next(g for g in report.live_buffers if g.shape == "(2053, 1031)")
    assert (group.count, group.dtype, group.bytes) == (3, "float32", 3 * 2053 * 1031 * 4)
    assert group.source == created_at
    holder = group.held_by[0]
    assert holder.kind == "local_variable" and holder.path.startswith("kept[")
    assert report.live_bytes_total == sum(d.live_bytes for d in report.devices) >= group.bytes
    assert Path(report.pprof).read_bytes()[:2] == b"\x1f\x8b"  # gzipped pprof
    assert report.pprof == str(report_path.with_suffix(".prof"))
    del kept


def test_capture_costs_nothing_and_writes_nothing_without_an_error(tmp_path):
    import jax.numpy as jnp

    import oomkb

    assert oomkb.capture is capture and "capture" in dir(oomkb)
    with oomkb.capture(tmp_path / "oom.json") as catcher:
        total = float(jnp.ones(3).sum())
    assert total == 3.0 and catcher.report is None and not any(tmp_path.iterdir())


def test_a_report_that_cannot_be_written_never_hides_the_oom(tmp_path, capsys):
    import jax.numpy as jnp

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(Exception, match="RESOURCE_EXHAUSTED"):
        with capture(blocker / "oom.json", console=False):
            jnp.zeros((1 << 40,)).block_until_ready()
    assert f"could not write the report to {blocker / 'oom.json'}" in capsys.readouterr().err


def test_python_memory_error_is_reported_as_host_oom(tmp_path):
    with pytest.raises(MemoryError):
        with capture(tmp_path / "oom.json", console=False) as catcher:
            raise MemoryError("cannot allocate the replay buffer")
    assert catcher.report.error.category == "host_oom"
    assert catcher.report.error.message == "cannot allocate the replay buffer"
    assert (tmp_path / "oom.json").exists()


def test_capture_passes_other_errors_through_untouched(tmp_path):
    decorated = capture(tmp_path / "oom.json")(lambda: {}["missing"])
    with pytest.raises(KeyError):
        decorated()
    assert not any(tmp_path.iterdir())


def test_oom_recognised_in_memory_error_allocator_wordings_and_chained_errors():
    assert is_oom(MemoryError())
    assert is_oom(RuntimeError("Resource exhausted: Failed to allocate request for 32.00MiB (33554432B) on device ordinal 0"))
    try:
        try:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.")
        except RuntimeError as inner:
            raise ValueError("step 3 failed") from inner
    except ValueError as outer:
        assert is_oom(outer)
    assert not is_oom(ValueError("shapes (3,) and (4,) do not match"))


def test_ask_accepts_a_run_report_and_its_facts_name_the_holder(tmp_path):
    import jax.numpy as jnp

    from oomkb.api.schemas import AskRequest

    # Large enough to be the largest group held by a name, whatever arrays earlier tests left alive
    # (a CI run once found an array held by `x` above two (99, 5) arrays).
    kept = [jnp.ones((2053, 2048)) for _ in range(2)]
    with pytest.raises(Exception):
        with capture(tmp_path / "oom.json", console=False):
            jnp.zeros((1 << 40,)).block_until_ready()
    request = AskRequest.model_validate({"question": "", "report": json.loads((tmp_path / "oom.json").read_text())})
    assert isinstance(request.report, CaptureReport)
    facts = facts_from(None, request.report)
    assert facts["category"] == "host_oom" and facts["backend"] == "cpu"
    assert facts["requested_bytes"] == FOUR_TIB
    assert facts["live_bytes_total"] >= 2 * 2053 * 2048 * 4
    assert "held_by" not in facts and facts["live_group_held_by"].split(" ")[0].startswith(("kept[", "kept"))
    del kept


# ------------------------------------------------------------------------------ oomkb run


def test_run_reports_creating_lines_and_the_module_list_that_keeps_the_gradients(tmp_path):
    result = _run(tmp_path, LEAKY_SCRIPT, "--json", "--no-answer", "--", "--lr", "3e-4", "--json")
    assert result.returncode == 1, result.stderr[-2000:]
    assert "args: ['--lr', '3e-4', '--json']" in result.stdout  # passed through untouched
    report = CaptureReport.model_validate_json(result.stdout[result.stdout.index("{"):])
    script = str(tmp_path / "train.py")
    assert report.error.category == "host_oom" and report.error.requested_bytes == FOUR_TIB
    grads = report.live_buffers[0]
    assert (grads.shape, grads.dtype, grads.count, grads.bytes) == ("(256, 128)", "float32", 5, 5 * 256 * 128 * 4)
    assert grads.source == f"{script}:{_line(LEAKY_SCRIPT, 'grads = params * i')}"
    assert grads.function == "train_step"
    holder = grads.held_by[0]
    assert (holder.kind, holder.name, holder.module, holder.container) == ("module_global", "GRADS", "__main__", "list")
    assert holder.source == f"{script}:{_line(LEAKY_SCRIPT, 'GRADS = []')}"
    params = next(g for g in report.live_buffers if g.count == 1 and g.shape == "(256, 128)")
    assert params.source == f"{script}:{_line(LEAKY_SCRIPT, 'params = jnp.ones')}"
    assert report.raised_at == f"train.py:{_line(LEAKY_SCRIPT, 'block_until_ready')}"
    assert "RESOURCE_EXHAUSTED" in result.stderr  # the script's own traceback is shown too


def test_run_prints_the_table_and_writes_the_report_file(tmp_path):
    result = _run(tmp_path, LEAKY_SCRIPT, "--report", "out/oom.json", "--no-answer")
    assert result.returncode == 1
    assert "GRADS" in result.stderr and "held by" in result.stderr
    report = json.loads((tmp_path / "out" / "oom.json").read_text())
    assert report["live_buffers"][0]["held_by"][0]["name"] == "GRADS"
    assert Path(report["pprof"]) == tmp_path / "out" / "oom.prof"


def test_run_keeps_the_exit_status_of_a_script_that_ends_normally(tmp_path):
    result = _run(tmp_path, "import sys\nprint('done')\nsys.exit(3)\n")
    assert (result.returncode, result.stdout) == (3, "done\n")
    assert _run(tmp_path, "print('fine')\n").returncode == 0


def test_run_shows_another_exception_with_its_traceback_and_exit_code(tmp_path):
    script = "def load():\n    raise ValueError('no such dataset: imagenet')\n\nload()\n"
    result = _run(tmp_path, script, "--no-answer")
    assert result.returncode == 1
    assert "ValueError: no such dataset: imagenet" in result.stderr
    assert 'train.py", line 2, in load' in result.stderr and "runpy" not in result.stderr
    assert "out of memory" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("script", "message"),
    [(None, "no such script"), ("def broken(:\n    pass\n", "train.py:1: the script does not parse"),
     ("print('never run')\n", "--lang: '12!' is not a language code")],
)
def test_run_refuses_a_missing_or_unparsable_script_in_one_line(tmp_path, script, message):
    if message.startswith("--lang"):
        result = _run(tmp_path, script, "--lang", "12!")
        assert "never run" not in result.stdout
    elif script is None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        result = subprocess.run([sys.executable, "-m", "oomkb.api.cli", "run", str(tmp_path / "nope.py")],
                                capture_output=True, text=True, timeout=60, env=env)
    else:
        result = _run(tmp_path, script)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_catches_an_oom_raised_inside_a_debug_callback(tmp_path):
    script = textwrap.dedent(
        """\
        import jax, jax.numpy as jnp

        def log_stats(x):
            jnp.zeros((1 << 40,)).block_until_ready()

        @jax.jit
        def step(x):
            jax.debug.callback(log_stats, x)
            return x + 1

        kept = jnp.ones((64, 64))
        step(kept).block_until_ready()
        """
    )
    result = _run(tmp_path, script, "--json", "--no-answer")
    assert result.returncode == 1
    report = CaptureReport.model_validate_json(result.stdout[result.stdout.index("{"):])
    assert report.error.requested_bytes == FOUR_TIB
    kept = next(g for g in report.live_buffers if g.shape == "(64, 64)")
    assert kept.source.endswith(f"train.py:{_line(script, 'kept = jnp.ones')}")


def test_run_stops_on_ctrl_c(tmp_path):
    path = tmp_path / "forever.py"
    path.write_text("import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.1)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Ctrl-C as a terminal delivers it: SIGINT at its default in the child, whatever this test
    # process inherited (a test run started with SIGINT ignored passes SIG_IGN on, and Python then
    # installs no KeyboardInterrupt handler)
    process = subprocess.Popen([sys.executable, "-m", "oomkb.api.cli", "run", str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130 and "interrupted" in stderr


# ------------------------------------------------------------------ held_by in a live profile


def test_profile_leak_suspect_is_held_by_the_module_level_list(tmp_path):
    from oomkb.diagnostics.profile import profile_callable

    source = textwrap.dedent(
        """\
        import jax.numpy as jnp

        HISTORY = []
        weights = jnp.ones((64, 32))


        def train_step():
            grads = weights * 2.0
            HISTORY.append(grads)
            return grads.sum()
        """
    )
    path = tmp_path / "leaky_train.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("leaky_train", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["leaky_train"] = module
    try:
        spec.loader.exec_module(module)
        report = profile_callable(module.train_step, repeat=4, logdir=tmp_path / "trace")
    finally:
        sys.modules.pop("leaky_train", None)
    suspect = next(s for s in report.leak_suspects if s.shape == "(64, 32)")
    assert suspect.source.startswith(f"{path}:{_line(source, 'grads = weights')}")
    holder = suspect.held_by[0]
    assert (holder.kind, holder.name, holder.module, holder.container) == ("module_global", "HISTORY", "leaky_train", "list")
    assert holder.source == f"{path}:{_line(source, 'HISTORY = []')}"
    facts = facts_from(None, report)
    assert facts["leak_suspect_held_by"].startswith("HISTORY[")
    # The assistant's step names the holder (a profile without an error is read as a runtime leak).
    from oomkb.units import format_bytes
    from oomkb.kb.remedies import load_catalogue
    from oomkb.kb.remedies.choice import choose_remedies
    from oomkb.kb.remedies.rendering import remedy_text

    catalogue = load_catalogue()
    chosen = choose_remedies(catalogue, facts, "runtime_allocation")
    leak = next(r for r in chosen if r.id == "rt-leak-references")
    text = remedy_text(catalogue, leak, facts, "fr", format_bytes)
    assert "HISTORY[" in text and "leaky_train" in text and "maintenus en vie par" in text
    module.HISTORY.clear()


@pytest.mark.slow
def test_run_answers_in_the_asked_language_with_the_holder_and_the_numbers(tmp_path):
    home = os.environ.get("OOMKB_HOME")
    if not home or not (Path(home) / "index").exists():
        pytest.skip("needs the built index (OOMKB_HOME)")
    result = _run(tmp_path, LEAKY_SCRIPT, "--lang", "de", timeout=300)
    assert result.returncode == 1
    assert "Der Host (CPU-RAM) konnte 4.00 TiB nicht allozieren" in result.stderr
    assert "GRADS[4]" in result.stderr and "runtime-buffer-allocation#debugging" in result.stderr
