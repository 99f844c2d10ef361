"""QA on inputs nobody on the team wrote: real error texts from public trackers, user programs."""

from pathlib import Path

import pytest

from oomkb.diagnostics.parse import parse_error

DATA = Path(__file__).parents[1] / "data" / "qa"
G, M = 1 << 30, 1 << 20


def test_runtime_reservation_report_takes_every_figure_and_exact_bytes():
    # The runtime's report under a failed program reservation (pytorch/xla#1735): the exact byte
    # counts in parentheses win over the rounded ones, and the "Program hbm requirement" report
    # that follows belongs to this error (it is not a second, compile-time error).
    result = parse_error((DATA / "tpu_reserve_report.txt").read_text())
    assert (result.category, result.backend, result.memory_space) == ("runtime_allocation", "tpu", "hbm")
    assert result.requested_bytes == 4_237_689_856
    assert result.available_bytes == 8 * G
    assert result.exceeded_by_bytes == 2_735_391_744
    assert result.free_bytes == result.reservable_bytes == round(1.92 * G)
    assert result.total_hbm_usage_bytes == round(10.94 * G)
    assert result.program_requirement_bytes == round(4.34 * G)
    assert result.argument_bytes == round(478.07 * M)
    assert result.scoped_bytes == round(17.43 * M)
    assert result.hlo_temp_bytes == round(3.93 * G)
    assert result.hlo_temp_unpadded_bytes == round(3.81 * G)
    assert result.fragmentation_bytes == round(14.68 * M)


def test_reservation_without_report_keeps_the_rounded_request():
    result = parse_error(
        "RESOURCE_EXHAUSTED: Attempting to reserve 12.50G at the bottom of memory. That was not "
        "possible. There are 11.21G free, 0B reserved, and 11.21G reservable.\n"
    )
    assert result.requested_bytes == round(12.50 * G)
    assert result.available_bytes is None and result.hlo_temp_bytes is None


# ------------------------------------------------------------------------ plan: snippets

PROGRAMS = Path(__file__).parents[1] / "programs"


def test_call_source_keeps_the_bound_arguments_of_a_partial():
    import functools

    from oomkb.diagnostics.plan import _call_source

    def matmul(x, y, bm, bn):
        return x

    assert _call_source(matmul) == "matmul"
    assert _call_source(functools.partial(matmul, bm=128, bn=256)) == (
        "functools.partial(matmul, bm=128, bn=256)")
    assert _call_source(functools.partial(functools.partial(matmul, 1), bn=object())) == (
        "functools.partial(matmul, 1, bn=...)")  # Python flattens nested partials


@pytest.mark.slow
def test_plan_snippets_run_as_written_for_a_partial_step():
    # The donation snippet is Python the user pastes next to their function: it must keep the
    # partial's lr/nesterov and run; the other-generation command names the user's own file.
    import functools

    import jax
    import jax.numpy as jnp

    from oomkb.diagnostics.plan import plan_factory
    from oomkb.diagnostics.program import load_factory

    program = f"{PROGRAMS / 'qa_partial_step.py'}:make"
    report = plan_factory(load_factory(program), target="v5e", program=program)
    fix = next(f for f in report.fixes if f.id == "donate_arguments")
    assert "functools.partial(sgd, lr=0.1, nesterov=True)" in fix.snippet
    import importlib.util

    spec = importlib.util.spec_from_file_location("qa_partial_step", PROGRAMS / "qa_partial_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    namespace = {"jax": jax, "functools": functools, "sgd": module.sgd}
    exec(fix.snippet, namespace)
    params = {"w": jnp.ones((4, 4))}
    out = namespace["step"](params, {"w": jnp.ones((4, 4))})
    assert float(out["w"][0, 0]) == pytest.approx(1 - 0.1 * 0.5)


@pytest.mark.slow
def test_plan_other_generation_command_names_the_users_program():
    from oomkb.diagnostics.plan import plan_factory
    from oomkb.diagnostics.program import load_factory

    program = f"{PROGRAMS / 'qa_partial_step.py'}:make_big"
    report = plan_factory(load_factory(program), target="v5e", program=program)
    assert report.baseline.fits is False
    other = next(f for f in report.fixes if f.id == "other_generation")
    assert other.fits, other
    assert other.snippet.startswith(f"oomkb estimate {program} --tpu ")


# --------------------------------------------------------- estimate/plan: --tpu and --topology


def test_target_generation_follows_the_topology_prefix_when_no_tpu_is_given():
    from oomkb.api.cli.options import target_generation

    assert target_generation(None, None) == "v5e"
    assert target_generation(None, "2x4") == "v5e"
    assert target_generation(None, "v6e:2x4") == "v6e"
    assert target_generation("v5p", None) == "v5p"


@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_topology_of_another_generation_than_tpu_is_refused_before_compiling(command):
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    program = f"{PROGRAMS / 'qa_partial_step.py'}:make"
    result = CliRunner().invoke(app, [command, program, "--tpu", "v5e", "--topology", "v6e:2x4"])
    assert result.exit_code == 2
    assert "another generation" in result.output and "compiling" not in result.output
    result = CliRunner().invoke(app, [command, program, "--topology", "v6e:1x2x3"])
    assert result.exit_code == 2 and "v6e topologies have 2" in " ".join(result.output.split())


@pytest.mark.slow
def test_estimate_with_only_a_prefixed_topology_compiles_for_that_generation():
    import json

    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    program = f"{PROGRAMS / 'qa_partial_step.py'}:make"
    result = CliRunner().invoke(app, ["estimate", program, "--topology", "v6e:2x4", "--json"])
    assert result.exit_code == 0, result.output
    target = json.loads(result.stdout)["target"]
    assert target["topology"] == "v6e:2x4" and target["devices"] == 8


# ------------------------------------------------------------------ capture: what holds an array


class _Trainer:
    def __init__(self):
        import jax.numpy as jnp

        self.params = {"w": jnp.ones((64, 64))}


QA_TRAINER = None


def test_held_by_follows_an_object_whose_attribute_dict_python_has_materialised():
    # Python 3.11+ keeps instance attributes inline until something asks for `vars(obj)`; from
    # then on the garbage collector shows the instance's __dict__ as the referrer, and the walk
    # must step through it (it stopped there: the trainer holding the params was never found).
    global QA_TRAINER
    from oomkb.diagnostics.holders import held_by

    QA_TRAINER = _Trainer()
    try:
        first = held_by(QA_TRAINER.params["w"])
        vars(QA_TRAINER)  # what any first walk, a debugger or a repr does
        again = held_by(QA_TRAINER.params["w"])
        for found in (first, again):
            assert [(h.kind, h.name, h.path) for h in found] == [
                ("module_global", "QA_TRAINER", "QA_TRAINER.params['w']")]
    finally:
        QA_TRAINER = None


def test_capture_names_the_holder_of_a_live_array_without_failing(tmp_path, capsys):
    import json

    from oomkb.diagnostics.capture import capture

    global QA_TRAINER
    QA_TRAINER = _Trainer()
    try:
        with pytest.raises(MemoryError):
            with capture(tmp_path / "oom.json"):
                raise MemoryError("host out of memory")
        assert "could not tell" not in capsys.readouterr().err
        report = json.loads((tmp_path / "oom.json").read_text())
        group = next(g for g in report["live_buffers"] if g["shape"] == "(64, 64)")
        assert any(h["path"] == "QA_TRAINER.params['w']" for h in group["held_by"]), group
    finally:
        QA_TRAINER = None


def _allocate_then_fail():
    import jax.numpy as jnp

    activations = jnp.ones((48, 48))
    raise MemoryError(f"host out of memory after {activations.shape}")


def test_capture_lists_a_local_variable_of_a_finished_frame_once(tmp_path):
    # The failing function's frame is both searched (it is in the traceback) and seen as a referrer
    # by the garbage collector: one holder, not the same `activations` twice.
    import json

    from oomkb.diagnostics.capture import capture

    with pytest.raises(MemoryError):
        with capture(tmp_path / "oom.json"):
            _allocate_then_fail()
    report = json.loads((tmp_path / "oom.json").read_text())
    group = next(g for g in report["live_buffers"] if g["shape"] == "(48, 48)")
    assert [(h["kind"], h["path"]) for h in group["held_by"]] == [("local_variable", "activations")]


# ------------------------------------------------------------------------- --python FOLDER


def test_python_given_a_virtualenv_folder_names_its_executable(tmp_path):
    # Users pass the env they activate (`--python .venv`), not its interpreter.
    import sys

    from oomkb.diagnostics.exceptions import DiagnosticsError
    from oomkb.diagnostics.interpreter import _probe

    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    with pytest.raises(DiagnosticsError) as raised:
        _probe(str(env))
    assert str(raised.value) == (
        f"--python {env} is a folder; give its Python executable, e.g. --python {env / 'bin' / 'python'}")
    bare = tmp_path / "project"
    bare.mkdir()
    with pytest.raises(DiagnosticsError, match="is a folder; give its Python executable"):
        _probe(str(bare))


# ------------------------------------------------------------- estimate: a sharded train step


@pytest.mark.slow
def test_sharded_step_arguments_are_split_over_the_mesh():
    # w1 (1024, 4096) f32 sharded on columns, w2 (4096, 1024) on rows, x (512, 1024) on rows, over
    # 4 devices: 4 MiB + 4 MiB + 0.5 MiB per device; the outputs are the two updated weights.
    from oomkb.diagnostics.estimate import estimate_factory
    from oomkb.diagnostics.program import load_factory

    report = estimate_factory(load_factory(f"{PROGRAMS / 'qa_sharded.py'}:make_small"), target="v5e")
    assert report.target.devices_used == 4
    assert report.argument_bytes == 8 * M + M // 2
    assert 8 * M <= report.output_bytes < 8 * M + 4096  # plus the output tuple's table
    assert report.fits


# ------------------------------------------------------------------ run/capture: --report paths


def test_capture_that_cannot_write_its_report_does_not_claim_it(tmp_path, capsys):
    from oomkb.diagnostics.capture import capture

    blocker = tmp_path / "results"
    blocker.write_text("a file where a folder was expected")
    catcher = capture(blocker / "oom.json")
    with pytest.raises(MemoryError):
        with catcher:
            raise MemoryError("host out of memory")
    err = capsys.readouterr().err
    assert f"could not write the report to {blocker / 'oom.json'}" in err
    assert catcher.report is not None and catcher.report.report_path is None
    assert "report:" not in err.replace("could not write the report", "")
    assert "live arrays" in err  # the table is still shown


@pytest.mark.parametrize("where, message", [
    ("file/oom.json", "is a file, not a folder"),
    (".", "is a folder; give a file name"),
])
def test_run_refuses_an_unwritable_report_before_the_script_runs(tmp_path, where, message):
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    (tmp_path / "file").write_text("x")
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = CliRunner().invoke(app, ["run", "--no-answer", "--report", str(tmp_path / where), str(script)])
    assert result.exit_code == 2 and message in " ".join(result.output.split())
    assert not marker.exists()
