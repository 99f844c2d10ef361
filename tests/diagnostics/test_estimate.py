"""The TPU HBM estimator, checked against real deviceless XLA:TPU compiles (no TPU needed).

Compiles are shared through module-scoped fixtures; the CLI tests go through the sandbox (a child
process per run), the others call the Python API in this process.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from oomkb.diagnostics import tpu
from oomkb.units import parse_size

PROGRAMS = Path(__file__).parents[1] / "programs"
PROGRAM_FILE = PROGRAMS / "estimate_programs.py"
sys.path.insert(0, str(PROGRAMS))

import estimate_programs as programs  # noqa: E402

from oomkb.diagnostics.estimate import estimate, estimate_factory  # noqa: E402
from oomkb.diagnostics.estimate.compiling import TraceError  # noqa: E402
from oomkb.diagnostics.program import FactoryError  # noqa: E402

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it


def line_of(text: str) -> int:
    """1-based line of the first line of the test programs file containing ``text``."""
    for number, line in enumerate(PROGRAM_FILE.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {PROGRAM_FILE}")


@pytest.fixture(scope="module", autouse=True)
def oomkb_home(tmp_path_factory):
    """A private oomkb home, so the HBM cache starts empty and is inspected by the tests."""
    home = tmp_path_factory.mktemp("oomkb_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OOMKB_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def v5e_device():
    tpu.prepare_in_process()
    return tpu.topology_devices(tpu.resolve_target("v5e"))[0]


def compile_on(device, fn, *specs, **jit_kwargs):
    """Our own compile of ``fn`` on one TPU device, to compare the estimator against."""
    import jax
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(device)
    placed = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), specs
    )
    return jax.jit(fn, **jit_kwargs).trace(*placed).lower().compile()


def total_of(compiled) -> int:
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            + m.generated_code_size_in_bytes - m.alias_size_in_bytes)


@pytest.fixture(scope="module")
def oom_report():
    return estimate_factory(programs.seed_oom, target="v5e")


@pytest.fixture(scope="module")
def padded_report():
    return estimate_factory(programs.padded_argument, target="v5e")


@pytest.fixture(scope="module")
def mlp_report():
    return estimate(programs.train_step, *programs.mlp_shapes(), target="v5e")


@pytest.fixture(scope="module")
def sharded_report():
    return estimate_factory(programs.sharded_train_step, target="v5e", topology="2x2")


# --- a program that does not fit -------------------------------------------------------------


def test_seed_oom_program_does_not_fit_on_v5e(oom_report):
    assert oom_report.fits is False
    assert oom_report.compile_error is not None
    assert oom_report.compile_error.category == "compile_hbm_oom"
    assert oom_report.headroom_bytes < 0


def test_seed_oom_error_figures_equal_the_compilers_text(oom_report):
    text = oom_report.compile_error_text
    used, available = re.search(r"temporaries \(([\d.]+[KMGT])\) exceeds available HBM \(([\d.]+[KMGT])\)",
                                text).groups()
    assert oom_report.compile_error.used_bytes == parse_size(used) == 300 * 2**30
    assert oom_report.compile_error.available_bytes == parse_size(available)
    assert oom_report.target.hbm_bytes == parse_size(available) == parse_size("15.75G")


def test_seed_oom_still_lists_the_buffers_at_the_peak_with_source_lines(oom_report):
    biggest, second = oom_report.top_buffers[:2]
    assert biggest.bytes == 327680 * 327680 * 2 and biggest.kind == "output"
    assert biggest.shape.startswith("bf16[327680,327680]{")
    assert biggest.source.endswith(f"estimate_programs.py:{line_of('return a @ a')}")
    assert second.kind == "temp" and second.op_name.endswith("convert_element_type")
    assert oom_report.total_bytes == sum(b.bytes for b in oom_report.top_buffers) == 300 * 2**30


def test_seed_oom_attaches_libtpus_long_report(oom_report):
    assert oom_report.compile_error_log.startswith("Ran out of memory in memory space hbm")
    assert "Memory usage report" in oom_report.compile_error_log


# --- figures of programs that fit ------------------------------------------------------------


def test_an_f32_129x1024_argument_pads_28672_bytes(padded_report):
    assert padded_report.fits
    assert padded_report.padding.waste_bytes == 28_672
    (item,) = padded_report.padding.items
    assert item.shape == "f32[129,1024]{1,0:T(8,128)}"
    assert (item.bytes, item.unpadded_bytes, item.kind, item.op_name) == (557_056, 528_384, "argument", "x")


def test_totals_equal_memory_analysis_of_the_same_compile(padded_report, mlp_report, v5e_device):
    import jax.numpy as jnp

    for report, compiled in [
        (padded_report, compile_on(v5e_device, programs.column_sums,
                                   programs.jax.ShapeDtypeStruct((129, 1024), jnp.float32))),
        (mlp_report, compile_on(v5e_device, programs.train_step, *programs.mlp_shapes())),
    ]:
        m = compiled.memory_analysis()
        assert (report.argument_bytes, report.output_bytes, report.temp_bytes, report.alias_bytes,
                report.generated_code_bytes) == (
            m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes,
            m.alias_size_in_bytes, m.generated_code_size_in_bytes)
        assert report.total_bytes == total_of(compiled)
        assert report.headroom_bytes == report.target.hbm_bytes - report.total_bytes


def test_mlp_train_step_without_donation_shows_the_measured_saving(mlp_report, v5e_device):
    shapes = programs.mlp_shapes()
    without = total_of(compile_on(v5e_device, programs.train_step, *shapes))
    with_donation = total_of(compile_on(v5e_device, programs.train_step, *shapes, donate_argnums=0))
    donation = mlp_report.donation
    assert donation.checked
    assert donation.savings_bytes == without - with_donation > 0
    assert (donation.total_without_donation_bytes, donation.total_with_donation_bytes) == (
        without, with_donation)
    (candidate,) = donation.candidates
    assert (candidate.argument, candidate.argnum) == ("params", 0)
    assert sorted(candidate.leaves) == ["params['w1']", "params['w2']"]
    assert donation.suggestion == "jax.jit(train_step, donate_argnums=(0,))"


def test_arguments_the_user_already_donates_are_not_suggested_again():
    report = estimate_factory(programs.already_donated, target="v5e")
    assert report.donation.already_donated == ["params"]
    assert report.donation.candidates == [] and report.donation.savings_bytes == 0
    assert report.alias_bytes > 0


def test_jax_debug_print_is_flagged_with_its_source_line():
    report = estimate_factory(programs.debug_print, target="v6e", donation_check=False)
    (callback,) = report.host_callbacks
    assert callback.kind == "debug_print"
    assert callback.source.endswith(f"estimate_programs.py:{line_of('jax.debug.print(')}")
    assert report.target.generation == "v6e"
    assert report.donation.checked is False


def test_debug_callback_and_io_callback_are_flagged_with_their_lines():
    report = estimate_factory(programs.callbacks, target="v5e", donation_check=False)
    found = {c.kind: c.source for c in report.host_callbacks}
    assert set(found) == {"debug_callback", "io_callback"}
    assert found["debug_callback"].endswith(f":{line_of('# debug_callback line')}")
    assert found["io_callback"].endswith(f":{line_of('total = jax.experimental.io_callback(')}")


def test_concrete_arrays_are_read_only_for_shape_and_dtype(padded_report):
    report = estimate_factory(programs.concrete_arrays, target="v5e", donation_check=False)
    assert report.argument_bytes == padded_report.argument_bytes
    assert report.padding.waste_bytes == 28_672


# --- sharding on a multi-device topology -----------------------------------------------------


def test_a_mesh_factory_is_compiled_for_every_device_of_the_topology(sharded_report):
    assert sharded_report.target.topology == "v5e:2x2"
    assert sharded_report.target.devices == sharded_report.target.devices_used == 4


def test_replicated_parameters_are_reported_and_the_sharded_batch_is_not(sharded_report):
    found = {r.path: r for r in sharded_report.replicated_arguments}
    assert set(found) == {"params['w1']", "params['w2']"}
    assert found["params['w1']"].bytes == 256 * 1024 * 4
    assert found["params['w1']"].shape == "f32[256,1024]" and found["params['w1']"].devices == 4
    # Per device: both replicated matrices whole, the batch split four ways.
    batch_per_device = 2 * (512 // 4) * 256 * 4
    assert sharded_report.argument_bytes == 2 * 256 * 1024 * 4 + batch_per_device


def test_donation_candidates_are_per_device_on_a_sharded_program():
    # oomkb issue 23, defect 4: matching_bytes was the global size (4x the shard on 4 devices).
    report = estimate_factory(programs.fsdp_train_step, target="v5e", topology="2x2")
    assert report.target.devices_used == 4
    candidate = {c.argument: c for c in report.donation.candidates}["params"]
    assert candidate.matching_bytes == 2 * 256 * 1024 * 4 // 4
    # The same unit as the argument figure: the params' shards plus the batch's.
    assert report.argument_bytes == candidate.matching_bytes + 2 * (512 // 4) * 256 * 4


# --- targets ---------------------------------------------------------------------------------


def test_every_generation_builds_its_default_topology_with_its_devices_per_chip():
    for gen in tpu.generations().values():
        spec = tpu.resolve_target(gen.name)
        devices = tpu.topology_devices(spec)
        assert len(devices) == math.prod(spec.chip_grid) * gen.devices_per_chip, gen.name
        assert devices[0].device_kind == gen.device_kind


def test_hbm_capacity_is_measured_once_and_cached_per_libtpu_and_topology(oomkb_home, v5e_device):
    spec = tpu.resolve_target("v5e")
    value = tpu.hbm_capacity_bytes(spec, v5e_device)
    assert value == parse_size(tpu.generations()["v5e"].hbm_reported)
    cache = json.loads((oomkb_home / "tpu_hbm.json").read_text())
    assert cache[f"libtpu {tpu.libtpu_version()}|v5e:2x2"] == value


def test_measured_hbm_matches_the_figure_recorded_for_each_generation():
    for gen in tpu.generations().values():
        device = tpu.topology_devices(tpu.resolve_target(gen.name))[0]
        assert tpu.measure_hbm_bytes(device) == parse_size(gen.hbm_reported), gen.name


@pytest.mark.parametrize(
    ("generation", "topology", "expected"),
    [("V5E", None, "v5e:2x2"), ("v5litepod", "2x4", "v5e:2x4"), ("v4", "v4:2x2x2", "v4:2x2x2"),
     ("ironwood", None, "TPU7x:2x2x1"), ("v5e", "1x1", "v5e:1x1")],
)
def test_generation_aliases_and_topologies_resolve(generation, topology, expected):
    assert tpu.resolve_target(generation, topology).topology == expected


def test_a_1x1_topology_has_one_chip():
    assert len(tpu.topology_devices(tpu.resolve_target("v5e", "1x1"))) == 1


@pytest.mark.parametrize(
    ("generation", "topology", "message"),
    [
        ("v9", None, "unknown TPU generation 'v9'; choose one of: v2, v3, v4, v5e, v5p, v6e, TPU7x"),
        ("", None, "no TPU generation given"),
        ("v5e", "2x2x2", "v5e topologies have 2 positive numbers"),
        ("v5e", "big", "is not a chip grid"),
        ("v5e", "v4:2x2x1", "is for another generation"),
    ],
)
def test_bad_targets_are_clear_errors(generation, topology, message):
    with pytest.raises(tpu.TargetError, match=re.escape(message)):
        tpu.resolve_target(generation, topology)


# --- bad factories (Python API) --------------------------------------------------------------


def test_a_factory_named_factory_is_named_once_in_its_errors():
    with pytest.raises(FactoryError) as caught:
        estimate_factory(programs.factory, target="v5e")
    assert "factory returned int as fn" in str(caught.value)
    assert "factory factory" not in str(caught.value)


@pytest.mark.parametrize(
    ("factory", "error", "message"),
    [
        ("factory_raises", FactoryError,
         r"factory_raises raised RuntimeError: could not open the checkpoint at estimate_programs\.py:\d+"),
        ("returns_one_thing", FactoryError, r"returned function; a factory must return \(fn, args\)"),
        ("returns_non_callable", FactoryError, "returned int as fn, not a function"),
        ("needs_an_argument", FactoryError, r"needs arguments \(config\)"),
        ("not_jax", TraceError, r"TracerArrayConversionError.*at estimate_programs\.py:\d+"),
    ],
)
def test_bad_factories_raise_clear_errors(factory, error, message):
    with pytest.raises(error, match=message):
        estimate_factory(getattr(programs, factory), target="v5e")


# --- pictures --------------------------------------------------------------------------------


def test_plot_estimate_draws_a_png_for_a_program_that_does_not_fit(oom_report, padded_report, tmp_path):
    from matplotlib.image import imread

    from oomkb.diagnostics.plot import plot_estimate

    for name, report in [("oom", oom_report), ("padded", padded_report)]:
        path = plot_estimate(report, tmp_path / f"{name}.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width = imread(path).shape[:2]
        assert 1000 <= width <= 1400 and 300 <= height <= 1000


# --- the CLI (through the sandbox) -----------------------------------------------------------


@pytest.fixture(scope="module")
def cli():
    from oomkb.api.cli.estimate import register

    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:
        """A stand-in for the real `oomkb` app."""

    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["estimate", *args])


def test_cli_json_follows_the_contract(cli):
    result = cli(f"{PROGRAM_FILE}:padded_argument", "--tpu", "v5e", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("target", "fits", "argument_bytes", "output_bytes", "temp_bytes", "alias_bytes",
                "generated_code_bytes", "total_bytes", "headroom_bytes", "top_buffers", "padding",
                "donation", "host_callbacks", "replicated_arguments", "compile_error"):
        assert key in data
    assert data["target"]["generation"] == "v5e" and data["target"]["topology"] == "v5e:2x2"
    assert data["padding"]["waste_bytes"] == 28_672
    assert data["top_buffers"][0]["shape"] == "f32[129,1024]{1,0:T(8,128)}"
    assert data["total_bytes"] == (data["argument_bytes"] + data["output_bytes"] + data["temp_bytes"]
                                   + data["generated_code_bytes"] - data["alias_bytes"])


def test_cli_reports_a_program_that_does_not_fit_and_draws_it(cli, tmp_path):
    plot = tmp_path / "oom.png"
    result = cli(f"{PROGRAM_FILE}:seed_oom", "--tpu", "v5e", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    assert "does not fit" in result.output and "300.00 GiB" in result.output
    assert "bf16[327680,327680]" in result.output
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("missing_file.py:make", [], "no such file: missing_file.py"),
        (f"{PROGRAM_FILE}:no_such_factory", [], "has no 'no_such_factory'"),
        (f"{PROGRAM_FILE}:factory_raises", [], "could not open the checkpoint"),
        (f"{PROGRAM_FILE}:returns_one_thing", [], "a factory must return (fn, args)"),
        (f"{PROGRAM_FILE}:not_jax", [], "JAX could not trace to_numpy"),
        (f"{PROGRAM_FILE}:padded_argument", ["--tpu", "v9"], "unknown TPU generation 'v9'"),
        (f"{PROGRAM_FILE}:sleepy", ["--timeout", "3"], "ran longer than 3 s"),
        (f"{PROGRAM_FILE}:padded_argument", ["--plot", "out.svg"], "ending in .png"),
    ],
)
def test_cli_bad_input_is_a_clear_message_without_traceback(cli, target, options, message):
    result = cli(target, *options)
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert message in flat
    assert "Traceback" not in result.output


# --- the verdict: one rule, and the figure that decided (oomkb issue 23, defect 6) ------------


def test_verdict_compiler_accepted_with_the_peak_heap_under_capacity_fits_without_over_by():
    from oomkb.diagnostics.estimate import report_findings
    from oomkb.diagnostics.estimate.report import VERDICT_RULE, DonationReport, PaddingReport, verdict

    hbm = 16 * 2**30
    decided = verdict(True, total=hbm + 2**30, hbm=hbm, peak_heap=hbm - 2**30)
    assert (decided.fits, decided.basis, decided.headroom_bytes) == (True, "peak_heap_bytes", 2**30)
    notes = report_findings(decided, hbm + 2**30, PaddingReport(waste_bytes=0), DonationReport(), [], [])
    assert not any("over by" in n for n in notes) and "peak heap" in notes[0]
    assert "peak heap decides" in VERDICT_RULE
    # Over HBM by both figures: does not fit, decided by the total, over by the difference.
    decided = verdict(True, total=hbm + 2**30, hbm=hbm, peak_heap=hbm + 1)
    assert (decided.fits, decided.basis, decided.headroom_bytes) == (False, "total_bytes", -2**30)


def test_verdict_of_a_vmem_failure_never_has_positive_headroom():
    from oomkb.diagnostics.estimate.report import verdict
    from oomkb.diagnostics.parse import parse_error

    error = parse_error("Scoped allocation with size 36.25M and limit 32.00M exceeded scoped vmem "
                        "limit by 4.25M")
    decided = verdict(False, total=2**20, hbm=16 * 2**30, oom_space="vmem", error=error)
    assert (decided.fits, decided.basis, decided.memory_space) == (False, "compile_error", "vmem")
    assert decided.headroom_bytes == -(4 * 2**20 + 2**18)
    assert (decided.need_bytes, decided.capacity_bytes) == (parse_size("36.25M"), 32 * 2**20)
