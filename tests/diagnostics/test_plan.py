"""`oomkb plan`: every fix is checked against our own independent deviceless compiles (no TPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from oomkb.diagnostics import tpu
from oomkb.diagnostics.plan import PlanError, parse_vary, plan_factory

PROGRAMS = Path(__file__).parents[1] / "programs"
PLAN_FILE = PROGRAMS / "plan_programs.py"
VMEM_FILE = PROGRAMS / "vmem_programs.py"
sys.path.insert(0, str(PROGRAMS))

import plan_programs  # noqa: E402
import vmem_programs  # noqa: E402

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

MiB, GiB = 1 << 20, 1 << 30


@pytest.fixture(scope="module", autouse=True)
def oomkb_home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OOMKB_HOME", str(tmp_path_factory.mktemp("oomkb_home")))
        yield


def own_compile(topology: str, factory, *, options=None, **jit_kwargs):
    """Our own compile of the factory's program on ``topology``: (total bytes or None, error)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    tpu.prepare_in_process()
    generation, grid = topology.split(":")
    devices = tpu.topology_devices(tpu.resolve_target(generation, grid))
    if "mesh" in factory.__code__.co_varnames[:factory.__code__.co_argcount]:
        mesh = Mesh(np.array(devices), ("data",))
        fn, args = factory(mesh=mesh)
        default = NamedSharding(mesh, PartitionSpec())
    else:
        fn, args = factory()
        default = SingleDeviceSharding(devices[0])
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding or default) for a in args]
    try:
        compiled = jax.jit(fn, **jit_kwargs).trace(*specs).lower().compile(compiler_options=options)
    except Exception as err:  # noqa: BLE001
        return None, str(err)
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            + m.generated_code_size_in_bytes - m.alias_size_in_bytes), None


def fix(report, fix_id):
    (found,) = [f for f in report.fixes if f.id == fix_id]
    return found


# --- a kernel over the scoped VMEM limit (v5e) -----------------------------------------------


@pytest.fixture(scope="module")
def vmem_plan():
    return plan_factory(vmem_programs.make, target="v5e")


def test_the_smallest_scoped_vmem_limit_that_compiles_is_found_and_verified(vmem_plan):
    raised = fix(vmem_plan, "raise_scoped_vmem_limit")
    assert raised.verified and raised.fits
    assert raised.setting == {"vmem_limit_bytes": 32 * MiB,
                              "flag": "--xla_tpu_scoped_vmem_limit_kib=32768"}
    assert "pltpu.CompilerParams(vmem_limit_bytes=33554432)" in raised.snippet
    total, error = own_compile("v5e:2x2", vmem_programs.make,
                               options={"xla_tpu_scoped_vmem_limit_kib": 32 * 1024})
    assert error is None and raised.total_bytes == total
    _, error = own_compile("v5e:2x2", vmem_programs.make,
                           options={"xla_tpu_scoped_vmem_limit_kib": 31 * 1024})
    assert "Scoped allocation" in error  # one MiB less does not compile: it is the smallest
    assert raised.compiles == 1 and vmem_plan.compiles == 3  # baseline, donation, the limit
    # How it was found, with the count (oomkb issue 23): the stated need compiled at once.
    assert raised.note.startswith("found by 1 compile: the kernel's stated need (32.00 MiB)")


def test_a_kernel_over_the_physical_vmem_says_no_limit_can_help():
    report = plan_factory(vmem_programs.over_capacity, target="v4")
    assert report.baseline.vmem.kind == "capacity"
    raised = fix(report, "raise_scoped_vmem_limit")
    assert raised.verified and not raised.fits and raised.compiles == 0
    assert "no limit can help" in raised.note and "16.00 MiB" in raised.note
    # every core with more VMEM, given the kernel's need, each compiled, the smallest VMEM first
    others = [f for f in report.fixes if f.id == "other_generation"]
    assert others and all(o.fits and o.verified for o in others)
    gens = tpu.generations()
    names = [o.setting["generation"] for o in others]
    assert [gens[n].vmem_bytes for n in names] == sorted(gens[n].vmem_bytes for n in names)
    # on TPU7x the answer says where the deviceless VMEM figure and the hardware may differ
    assert all(("jax-ml/jax#38988" in o.note) == (o.setting["generation"] == "TPU7x") for o in others)


# --- an HBM OOM of a sharded program (v5e 2x2) -----------------------------------------------


@pytest.fixture(scope="module")
def sharded_plan():
    return plan_factory(plan_programs.wide_sharded, target="v5e")


def test_each_hbm_fix_is_measured_by_its_own_compile(sharded_plan):
    report = sharded_plan
    assert not report.baseline.fits and report.baseline.oom_space == "hbm"
    donate = fix(report, "donate_arguments")
    total, _ = own_compile("v5e:2x2", plan_programs.wide_sharded, donate_argnums=0)
    assert donate.fits and donate.total_bytes == total
    assert donate.saving_bytes == report.baseline.total_bytes - total
    assert donate.snippet == "step = jax.jit(activation, donate_argnums=(0,))"

    bigger = fix(report, "larger_topology")
    total, _ = own_compile("v5e:2x4", plan_programs.wide_sharded)
    assert bigger.fits and bigger.setting == {"topology": "v5e:2x4", "devices": 8}
    assert bigger.total_bytes == total

    # every generation that fits is listed, each compiled, the smallest memory first
    others = [f for f in report.fixes if f.id == "other_generation"]
    assert all(o.fits and o.verified for o in others)
    assert [o.setting["generation"] for o in others] == ["v6e", "TPU7x", "v5p"]
    assert [o.capacity_bytes for o in others] == sorted(o.capacity_bytes for o in others)
    total, _ = own_compile("v6e:2x2", plan_programs.wide_sharded)
    assert others[0].total_bytes == total

    bf16 = fix(report, "bf16_arguments")
    assert bf16.fits and "numerics" in bf16.title and bf16.setting == {"arguments": ["x"]}
    assert bf16.total_bytes < report.baseline.total_bytes / 1.9
    assert report.compiles == 1 + sum(f.compiles for f in report.fixes)


# --- --vary ----------------------------------------------------------------------------------


def test_vary_skips_values_the_factory_refuses_and_keeps_searching():
    report = plan_factory(plan_programs.wide_even, target="v5e", vary=("batch", 1, 7))
    vary = report.vary
    assert vary.largest_fitting == 6 and vary.boundary is False  # 7 is refused, not too big
    statuses = {p.value: p.status for p in vary.curve}
    assert statuses[7] == "factory_error" and statuses[6] == "fits"
    assert "batch 7 is odd" in next(p.error for p in vary.curve if p.value == 7)
    assert "did not compile" in vary.note


def test_vary_finds_the_block_boundary_of_a_pallas_matmul_that_takes_only_divisors():
    # 128, 256 and 512 fit; 1024 and 2048 run out of v5e's scoped VMEM; other blocks are refused
    report = plan_factory(plan_programs.blocked_matmul, target="v5e",
                          vary=parse_vary("block=128..2048"))
    vary = report.vary
    assert vary.searched and vary.largest_fitting == 512 and vary.next_value == 1024
    statuses = {p.value: p.status for p in vary.curve}
    assert statuses[512] == "fits" and statuses[1024] == "oom" and vary.boundary
    assert vary.compiles <= vary.bisection_compiles
    _, error = own_compile("v5e:2x2", lambda: plan_programs.blocked_matmul(1024))
    assert "vmem" in error


def test_the_listed_form_gives_the_same_block_boundary():
    listed = plan_factory(plan_programs.blocked_matmul, target="v5e",
                          vary=parse_vary("block=128,256,512,1024,2048"))
    assert listed.vary.largest_fitting == 512 and listed.vary.values == [128, 256, 512, 1024, 2048]
    assert listed.vary.compiles <= listed.vary.bisection_compiles == 4


@pytest.mark.parametrize("text", ["seq=128..1048576", "seq=128..1048576:128"])
def test_vary_finds_the_sequence_boundary_of_a_kernel_that_takes_multiples_of_128(text):
    report = plan_factory(plan_programs.block_attention, target="v5e", vary=parse_vary(text))
    vary = report.vary
    largest = vary.largest_fitting
    assert vary.searched and largest % 128 == 0 and largest > 4096  # not the factory's default
    assert vary.next_value == largest + 128 and vary.boundary
    assert vary.compiles <= vary.bisection_compiles
    # verified by our own compiles: L fits and L + 128 does not
    total, error = own_compile("v5e:2x2", lambda: plan_programs.block_attention(largest))
    assert error is None and total <= report.target.hbm_bytes
    _, error = own_compile("v5e:2x2", lambda: plan_programs.block_attention(largest + 128))
    assert "Ran out of memory" in error


def test_a_factory_that_refuses_every_value_is_said_so_without_a_number():
    with pytest.raises(PlanError, match="could not search seq=129..255"):
        plan_factory(plan_programs.block_attention, target="v5e", vary=parse_vary("seq=129..255"))


@pytest.mark.slow
def test_vary_finds_the_batch_boundary_with_log_compiles():
    report = plan_factory(plan_programs.wide, target="v5e", vary=("batch", 1, 1 << 18))
    vary = report.vary
    boundary = vary.largest_fitting
    assert vary.boundary and vary.compiles <= vary.bisection_compiles == 20
    assert vary.next_value == boundary + 1
    total, error = own_compile("v5e:2x2", lambda: plan_programs.wide(boundary))
    assert error is None and total <= report.target.hbm_bytes
    _, error = own_compile("v5e:2x2", lambda: plan_programs.wide(boundary + 1))
    assert "Ran out of memory" in error
    compiled = [p for p in vary.curve if p.total_bytes is not None]
    assert compiled == sorted(compiled, key=lambda p: p.value) and vary.monotonic


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [("batch=9..3", "LO is greater than HI"), ("batch", "NAME=LO..HI"),
     ("batch=1..x", "NAME=LO..HI"), ("9x=1..2", "NAME=LO..HI")],
)
def test_bad_vary_text_is_a_clear_error(text, message):
    with pytest.raises(PlanError, match=message):
        parse_vary(text)


def test_a_vary_name_the_factory_does_not_take_is_named_before_compiling():
    with pytest.raises(PlanError, match=r"takes no argument 'seq_len' \(it takes: batch\)"):
        plan_factory(plan_programs.wide, target="v5e", vary=("seq_len", 1, 8))


@pytest.fixture(scope="module")
def cli():
    import typer
    from typer.testing import CliRunner

    from oomkb.api.cli.plan import register

    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["plan", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([f"{PLAN_FILE}:wide", "--vary", "batch=8..2"], "LO is greater than HI"),
        ([f"{PLAN_FILE}:wide", "--vary", "rows=1..2"], "takes no argument 'rows'"),
        ([f"{PLAN_FILE}:numpy_only"], "JAX could not trace total"),
        ([f"{PLAN_FILE}:wide", "--tpu", "v9"], "unknown TPU generation 'v9'"),
        ([f"{PLAN_FILE}:wide", "--plot", "x.svg"], "ending in .png"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(cli, args, message):
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output


def test_cli_json_and_plot(cli, tmp_path):
    plot = tmp_path / "curve.png"
    result = cli(f"{PLAN_FILE}:wide_even", "--vary", "batch=1..7", "--json", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{"):])
    for key in ("target", "baseline", "fixes", "vary", "compiles", "seconds"):
        assert key in data
    assert data["vary"]["largest_fitting"] == 6 and data["vary"]["name"] == "batch"
    assert {f["id"] for f in data["fixes"]} == {"donate_arguments"}
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_a_plan_over_the_sandbox_memory_limit_is_a_clear_error():
    # 2 GiB of address space is too little to load libtpu and compile: the sandbox stops the
    # child and says which limit it hit; nothing is half-written.
    from oomkb.diagnostics.exceptions import DiagnosticsError
    from oomkb.diagnostics.plan import plan_program
    from oomkb.diagnostics.sandbox import Limits

    with pytest.raises(DiagnosticsError) as info:
        plan_program(f"{PLAN_FILE}:wide", target="v5e", timeout_s=120,
                     limits=Limits(memory_bytes=2 << 30))
    message = str(info.value)
    assert message.startswith("the plan of plan_programs.py:wide")
    assert "memory" in message and "2.00 GiB" in message
