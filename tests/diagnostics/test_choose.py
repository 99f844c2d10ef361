"""`oomkb plan --choose NAME=a,b,c`: each choice compiled, and with --vary its own boundary, checked
against our own deviceless compiles at L and L+1 (no TPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from oomkb.diagnostics.choose import MAX_CHOICES, ChooseError, check_choose, choice_values, parse_choose
from oomkb.diagnostics.plan import VarySpec

PROGRAMS = Path(__file__).parents[1] / "programs"
CHOOSE_FILE = PROGRAMS / "choose_programs.py"

slow = pytest.mark.slow  # real compiles: `make test-quick` skips them


def make(batch=1024, remat="none", half=False, scale=1.0, layers=2, policy=None):
    """A factory signature to check names and conversions against (never called here)."""


def no_keywords(batch=1024):
    """A factory with nothing to choose."""


def required(batch=1024, *, dtype):
    """A keyword without a default: against the factory contract (called with no arguments)."""


def open_ended(batch=1024, **options):
    """Keywords through **options: --choose gives them as text."""


# --- the text and the values, before any compile ---------------------------------------------


def test_choose_text_is_a_name_and_its_values_in_order_without_repeats():
    spec = parse_choose("remat = none, full ,none,")
    assert spec.name == "remat" and spec.values == ["none", "full"]
    assert spec.describe() == "remat=none,full"
    assert check_choose(("dtype", ["float32", "bfloat16"])).values == ["float32", "bfloat16"]
    assert check_choose({"name": "remat", "values": ["full"]}).values == ["full"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("remat", "--choose takes NAME=a,b,c"), ("9x=a,b", "--choose takes NAME=a,b,c"),
     ("remat=", "an empty value"), ("remat=a,,b", "an empty value"),
     ("remat=" + ",".join(f"p{n}" for n in range(MAX_CHOICES + 1)), f"at most {MAX_CHOICES} values"),
     ("remat=" + "x" * 201, "1 to 200 characters")],
)
def test_bad_choose_text_is_a_clear_error(text, message):
    with pytest.raises(ChooseError, match=message):
        parse_choose(text)


def test_values_take_the_type_of_the_keywords_default_else_stay_text():
    assert choice_values(make, parse_choose("remat=none,full")) == [("none", "none"), ("full", "full")]
    assert choice_values(make, parse_choose("half=true,no")) == [("true", True), ("no", False)]
    assert choice_values(make, parse_choose("scale=1,0.5")) == [("1", 1.0), ("0.5", 0.5)]
    assert choice_values(make, parse_choose("layers=2,4")) == [("2", 2), ("4", 4)]
    assert choice_values(make, parse_choose("policy=None,dots")) == [("None", None), ("dots", "dots")]
    assert choice_values(open_ended, parse_choose("offload=none,1")) == [("none", "none"), ("1", "1")]


@pytest.mark.parametrize(
    ("factory", "text", "vary", "message"),
    [(no_keywords, "remat=none,full", None,
      r"the factory no_keywords takes no keyword argument 'remat', so there is nothing to "
      r"choose \(it takes: batch\)"),
     (make, "half=maybe", None, "is a bool; give true or false"),
     (make, "layers=two", None, r"is a number \(int\); 'two' is not one"),
     (make, "batch=1,2", VarySpec(name="batch", low=1, high=8), "name the same argument"),
     (make, "mesh=fsdp,tp", None, "gives the factory its mesh itself"),
     (required, "dtype=bfloat16,float32", None,
      r"the factory required has no default for 'dtype'; a factory is called with no arguments, "
      r"so give it one \(dtype='bfloat16'\)")],
)
def test_a_choice_the_factory_cannot_take_is_named_before_compiling(factory, text, vary, message):
    with pytest.raises(ChooseError, match=message):
        choice_values(factory, parse_choose(text), vary)


# --- with --vary: each choice's own boundary ------------------------------------------------


def own_total(batch: int, dtype: str):
    """Our own compile of choose_programs.scaled on v5e: (total bytes or None, error text)."""
    import jax
    from jax.sharding import SingleDeviceSharding

    from oomkb.diagnostics import tpu

    sys.path.insert(0, str(PROGRAMS))
    import choose_programs

    tpu.prepare_in_process()
    device = tpu.topology_devices(tpu.resolve_target("v5e", None))[0]
    fn, (arg,) = choose_programs.scaled(batch, dtype)
    spec = jax.ShapeDtypeStruct(arg.shape, arg.dtype, sharding=SingleDeviceSharding(device))
    try:
        m = jax.jit(fn).trace(spec).lower().compile().memory_analysis()
    except Exception as err:  # noqa: BLE001 - the compiler's out-of-memory error is the answer
        return None, str(err)
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            + m.generated_code_size_in_bytes - m.alias_size_in_bytes), None


@pytest.fixture(scope="module")
def dtype_plan(tmp_path_factory):
    from oomkb.diagnostics.plan import plan_factory

    sys.path.insert(0, str(PROGRAMS))
    import choose_programs

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OOMKB_HOME", str(tmp_path_factory.mktemp("oomkb_home")))
        yield plan_factory(choose_programs.scaled, target="v5e", vary=("batch", 1, 1 << 20),
                           choose="dtype=float32,bfloat16")


@slow
def test_each_choice_has_its_own_boundary_verified_at_l_and_l_plus_1(dtype_plan):
    rows = {row.value: row for row in dtype_plan.choices}
    assert list(rows) == ["float32", "bfloat16"]
    hbm = dtype_plan.target.hbm_bytes
    for dtype, row in rows.items():
        vary = row.vary
        largest = row.at_value
        assert row.fits and vary.searched and vary.boundary and vary.monotonic
        assert largest == vary.largest_fitting and vary.next_value == largest + 1
        assert vary.compiles <= vary.bisection_compiles
        total, error = own_total(largest, dtype)
        assert error is None and total == row.total_bytes <= hbm
        total, error = own_total(largest + 1, dtype)
        assert (total is not None and total > hbm) or "Ran out of memory" in error
    # bfloat16 halves the only arrays there are: about twice the rows fit
    assert 1.9 < rows["bfloat16"].at_value / rows["float32"].at_value < 2.1


@slow
def test_the_default_choice_reuses_the_plans_own_search_and_every_compile_is_counted(dtype_plan):
    default, other = dtype_plan.choices
    assert default.compiles == 0 and default.vary == dtype_plan.vary
    assert "the plan's own --vary search" in default.note
    assert other.compiles == other.vary.compiles > 0
    fixes = sum(f.compiles for f in dtype_plan.fixes + dtype_plan.no_saving)
    assert dtype_plan.compiles == 1 + fixes + dtype_plan.vary.compiles + other.compiles


@slow
def test_the_json_and_the_plot_carry_one_curve_per_choice(dtype_plan, tmp_path):
    from oomkb.diagnostics.plot import plot_plan

    data = json.loads(dtype_plan.model_dump_json())
    for row in data["choices"]:
        assert {"name", "value", "fits", "total_bytes", "vary"} <= set(row)
        assert {"largest_fitting", "boundary", "monotonic", "compiles"} <= set(row["vary"])
    from oomkb.api.mcp.server import summarize

    lines = summarize(dtype_plan).splitlines()  # what an agent reads (MCP read_report, plan_program)
    for row in dtype_plan.choices:
        assert any(line.startswith(f"- dtype={row.value}: largest batch that fits {row.at_value} ")
                   for line in lines)
    png = plot_plan(dtype_plan, tmp_path / "choices.png")
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000


# --- without --vary, and through the CLI ---------------------------------------------------


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


@slow
def test_cli_choices_without_vary_are_each_compiled_and_a_refused_value_says_why(cli):
    result = cli(f"{CHOOSE_FILE}:scaled", "--choose", "dtype=float32,bfloat16,float33", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{"):])
    rows = {row["value"]: row for row in data["choices"]}
    assert rows["float32"]["total_bytes"] == data["baseline"]["total_bytes"]
    assert rows["float32"]["compiles"] == 0 and rows["bfloat16"]["compiles"] == 1
    total, error = own_total(1024, "bfloat16")
    assert error is None and rows["bfloat16"]["total_bytes"] == total and rows["bfloat16"]["fits"]
    bad = rows["float33"]
    assert bad["status"] == "factory_error" and not bad["fits"] and bad["total_bytes"] is None
    assert "dtype='float33'" in bad["error"] and "float33" in bad["error"].split("raised", 1)[1]


@slow
def test_the_default_choice_listed_after_another_still_reuses_the_baseline(cli):
    # the default compared against a value, never against the measurement of the choice before it
    result = cli(f"{CHOOSE_FILE}:scaled", "--choose", "dtype=bfloat16,float32", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{"):])
    rows = {row["value"]: row for row in data["choices"]}
    assert rows["bfloat16"]["compiles"] == 1 and rows["float32"]["compiles"] == 0
    assert rows["float32"]["total_bytes"] == data["baseline"]["total_bytes"]


@slow
def test_cli_text_table_converts_a_bool_keyword(cli):
    result = cli(f"{CHOOSE_FILE}:flagged", "--choose", "half=false,true")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "choices of half, each compiled" in text
    from oomkb.units import format_bytes

    # the bool reached the factory (it refuses anything else): half=true is the bfloat16 program
    full, _ = own_total(1024, "float32")
    half, _ = own_total(1024, "bfloat16")
    assert f"half=false │ yes │ {format_bytes(full)} │ 0" in text
    assert f"half=true │ yes │ {format_bytes(half)} │ 1" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [pytest.param(["--choose", "remat=none,full"],
                  "takes no keyword argument 'remat', so there is nothing to choose", marks=slow),
     (["--choose", "batch=1,2", "--vary", "batch=1..4"], "name the same argument"),
     (["--choose", "remat"], "--choose takes NAME=a,b,c")],
)
def test_cli_bad_choose_is_one_line_and_exit_2(cli, args, message):
    result = cli(f"{CHOOSE_FILE}:fixed", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output


def test_the_python_api_checks_choose_before_starting_a_plan():
    import oomkb

    with pytest.raises(oomkb.UserInputError, match="name the same argument"):
        oomkb.plan(f"{CHOOSE_FILE}:scaled", target="v5e", vary="batch=1..8", choose="batch=1,2")
    with pytest.raises(ChooseError, match="--choose takes NAME=a,b,c"):
        oomkb.plan(f"{CHOOSE_FILE}:scaled", target="v5e", choose="dtype")
