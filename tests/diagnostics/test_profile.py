"""Live memory profiler: growth, leak suspects, trace files, the `profile` command and its errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from oomkb.api.cli.profile import register
from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.profile import ProfileError, growth_per_call, profile_callable, resolve_target
from oomkb.diagnostics.program import load_program_object, resolve_program

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

PROGRAMS = Path(__file__).parents[1] / "programs"
LEAKY = PROGRAMS / "profile_leaky.py"
CLEAN = PROGRAMS / "profile_clean.py"
BROKEN = PROGRAMS / "profile_broken.py"


def _line_of(path: Path, text: str) -> int:
    """1-based number of the only line of `path` that contains `text`."""
    lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, lines
    return lines[0]


def _target(path: Path, name: str):
    spec = resolve_program(f"{path}:{name}")
    return resolve_target(load_program_object(spec), spec)


def _cli(*args: str):
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:  # keeps `profile` a subcommand, as in the real app
        pass

    return CliRunner().invoke(app, ["profile", *args])


# --------------------------------------------------------------------------- in-process API


def test_growth_per_call_is_the_least_squares_slope_in_whole_bytes():
    assert growth_per_call([100, 100, 100, 100]) == 0
    assert growth_per_call([0, 8192, 16384, 24576]) == 8192
    assert growth_per_call([500]) == 0
    assert growth_per_call([10, 12, 11, 13]) == 1  # slope 0.8 rounds to 1
    assert growth_per_call([100, 90, 80]) == -10


def test_leaky_factory_grows_by_the_bytes_it_appends_and_names_the_appending_line(tmp_path):
    kind, fn, args, kwargs = _target(LEAKY, "factory")
    assert kind == "factory"
    report = profile_callable(fn, args, kwargs, repeat=4, logdir=tmp_path)

    leaked = 64 * 32 * 4
    assert report.growth_bytes_per_call == leaked
    diffs = [b - a for a, b in zip(report.live_bytes_per_call, report.live_bytes_per_call[1:])]
    assert diffs == [leaked] * 3
    assert report.peak_bytes == max(report.live_bytes_per_call) == report.live_bytes_per_call[-1]
    assert report.peak_call == 4
    [suspect] = report.leak_suspects
    assert (suspect.shape, suspect.dtype, suspect.count) == ("(64, 32)", "float32", 4)
    assert suspect.bytes == 4 * leaked
    assert suspect.count_per_call == [1, 2, 3, 4]
    line = _line_of(LEAKY, "_history.append(_double(x))")
    assert suspect.source == f"{LEAKY.resolve()}:{line} (_append_update)"


def test_leaky_step_function_counts_only_arrays_leaked_during_the_measured_calls(tmp_path):
    kind, fn, args, kwargs = _target(LEAKY, "step")
    assert kind == "step"  # its first call (inside _target) was the warm-up
    report = profile_callable(fn, args, kwargs, repeat=3, logdir=tmp_path)

    assert report.growth_bytes_per_call == 64 * 32 * 4
    [suspect] = report.leak_suspects
    assert suspect.count == 3
    line = _line_of(LEAKY, "out = _double(")
    assert suspect.source == f"{LEAKY.resolve()}:{line} (step)"


@pytest.mark.parametrize("name", ["step", "factory", "sharded_factory"])
def test_clean_program_has_no_growth_and_no_suspects(tmp_path, name):
    _, fn, args, kwargs = _target(CLEAN, name)
    report = profile_callable(fn, args, kwargs, repeat=4, logdir=tmp_path)

    assert report.growth_bytes_per_call == 0
    assert len(set(report.live_bytes_per_call)) == 1
    assert report.leak_suspects == []
    assert report.calls == 4 and len(report.call_seconds) == 4


def test_trace_dir_holds_an_xplane_and_a_gzipped_pprof_beside_it(tmp_path):
    _, fn, args, kwargs = _target(CLEAN, "factory")
    report = profile_callable(fn, args, kwargs, repeat=2, logdir=tmp_path / "trace")

    assert Path(report.trace_dir) == (tmp_path / "trace").resolve()
    xplanes = list(Path(report.trace_dir).glob("plugins/profile/*/*.xplane.pb"))
    assert [str(p) for p in xplanes] == [report.xplane_path]
    assert xplanes[0].stat().st_size > 0
    pprof = Path(report.pprof_path)
    assert pprof.name == "memory.prof" and pprof.parent == xplanes[0].parent
    assert len(gzip.decompress(pprof.read_bytes())) > 0
    assert report.xprof_command == f"xprof --logdir {report.trace_dir}"
    assert report.backend == "cpu" and report.memory_stats_peak_bytes is None


def test_bad_repeat_and_non_callable_are_profile_errors(tmp_path):
    with pytest.raises(ProfileError, match="positive whole number"):
        profile_callable(lambda: None, repeat=0, logdir=tmp_path)
    with pytest.raises(ProfileError, match="not a function"):
        _target(BROKEN, "NOT_A_FUNCTION")


def test_function_raising_during_the_run_names_the_call_and_the_user_line(tmp_path):
    _, fn, args, kwargs = _target(BROKEN, "factory_raising_later")
    with pytest.raises(ProfileError) as info:
        profile_callable(fn, args, kwargs, repeat=2, logdir=tmp_path)
    line = _line_of(BROKEN, 'raise RuntimeError("boom')
    assert "call 1" in str(info.value)
    assert f"RuntimeError: boom inside the profiled function at profile_broken.py:{line}" in str(
        info.value
    )
    assert isinstance(info.value, DiagnosticsError)


# --------------------------------------------------------------------------- the CLI


CONTRACT_TYPES = {
    "backend": str,
    "calls": int,
    "live_bytes_per_call": list,
    "peak_bytes": int,
    "growth_bytes_per_call": int,
    "leak_suspects": list,
    "trace_dir": str,
}


def test_profile_json_has_the_contract_shape_and_runs_in_a_child(tmp_path):
    result = _cli(f"{LEAKY}:step", "--repeat", "3", "--logdir", str(tmp_path / "logs"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key, kind in CONTRACT_TYPES.items():
        assert isinstance(data[key], kind), key
    assert data["calls"] == 3 and len(data["live_bytes_per_call"]) == 3
    assert all(isinstance(b, int) for b in data["live_bytes_per_call"])
    assert data["growth_bytes_per_call"] == 64 * 32 * 4
    [suspect] = data["leak_suspects"]
    assert set(suspect) >= {"shape", "dtype", "count", "bytes", "source"}
    assert (suspect["shape"], suspect["dtype"], suspect["count"]) == ("(64, 32)", "float32", 3)
    assert data["target_kind"] == "step"
    assert data["trace_dir"] == str((tmp_path / "logs").resolve())
    assert Path(data["pprof_path"]).is_file()


def test_profile_human_output_shows_growth_suspects_and_the_xprof_command(tmp_path):
    result = _cli(f"{LEAKY}:factory", "-n", "2", "--logdir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "growth per call: 8.00 KiB" in result.stdout
    assert "(64, 32)" in result.stdout and "float32" in result.stdout
    assert f"xprof --logdir {tmp_path.resolve()}" in result.stdout


def test_clean_program_reports_no_suspects_on_the_command_line(tmp_path):
    result = _cli(f"{CLEAN}:factory", "-n", "3", "--logdir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["growth_bytes_per_call"] == 0 and data["leak_suspects"] == []


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_dir/train.py:step", "no such file"),
        (f"{BROKEN}:nope", "has no 'nope'"),
        (f"{BROKEN}:raises", "raised on its first call: ValueError: the step exploded"),
        (f"{BROKEN}:factory_raising_later", "RuntimeError: boom inside the profiled function"),
        (f"{BROKEN}:NOT_A_FUNCTION", "not a function"),
        (f"{BROKEN}", "expected FILE.py:NAME"),
        (f"{BROKEN}:donating_factory", "a function that donates them fails from the second call"),
    ],
)
def test_bad_targets_give_a_clear_message_and_exit_2(tmp_path, target, message):
    result = _cli(target, "-n", "2", "--logdir", str(tmp_path))
    assert result.exit_code == 2
    text = " ".join(result.output.split())  # rich wraps long lines
    assert message in text
    assert "Traceback" not in result.output


def test_bad_options_exit_2_before_running_anything(tmp_path):
    for args in (["-n", "0"], ["--timeout", "0"], ["--plot", str(tmp_path / "p.jpg")]):
        result = _cli(f"{LEAKY}:step", *args)
        assert result.exit_code == 2, args
        assert "error:" in result.output and "Traceback" not in result.output


def test_program_running_past_the_timeout_is_stopped(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n\ndef step():\n    time.sleep(60)\n")
    result = _cli(f"{slow}:step", "--timeout", "3", "--logdir", str(tmp_path / "logs"))
    assert result.exit_code == 2
    assert "ran longer than 3 s" in " ".join(result.output.split())


# --------------------------------------------------------------------------- the picture


def test_plot_option_writes_a_png_of_the_profile(tmp_path):
    from PIL import Image

    png = tmp_path / "profile.png"
    result = _cli(f"{LEAKY}:step", "-n", "3", "--logdir", str(tmp_path / "logs"), "--plot", str(png))
    assert result.exit_code == 0, result.output
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.size == (1200, 690)  # 8 x 4.6 inches at 150 dpi: legible in a chat message


@pytest.mark.parametrize("calls", [1, 40])
def test_plot_profile_draws_one_call_and_many_calls(tmp_path, calls):
    from PIL import Image

    from oomkb.diagnostics.plot import plot_profile
    from oomkb.diagnostics.profile import LeakSuspect, ProfileReport

    live = [1 << 20 + i % 3 for i in range(calls)]
    report = ProfileReport(
        backend="gpu", calls=calls, baseline_bytes=1 << 19, live_bytes_per_call=live,
        peak_bytes=max(live), peak_call=live.index(max(live)) + 1,
        growth_bytes_per_call=growth_per_call(live), call_seconds=[0.01] * calls,
        leak_suspects=[LeakSuspect(shape="(1024,)", dtype="bfloat16", count=2, bytes=4096,
                                   count_per_call=[1, 2], source=None)],
        memory_stats_peak_bytes=3 << 30, trace_dir=str(tmp_path), xprof_command="xprof --logdir x",
    )
    path = plot_profile(report, tmp_path / "deep" / "p.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == (1200, 690)
