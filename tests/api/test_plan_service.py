"""A plan through the assistant (ask --report plan.json, /v1/ask) and POST /v1/plan."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from oomkb.api.core.assistant import Assistant
from oomkb.api.http.app import create_app
from oomkb.api.schemas import AskRequest
from oomkb.settings import Settings

PROGRAMS = Path(__file__).parents[1] / "programs"
sys.path.insert(0, str(PROGRAMS))

import plan_programs  # noqa: E402
import vmem_programs  # noqa: E402

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

WIDE_EVEN = (PROGRAMS / "plan_programs.py").read_text()
LOCAL = "http://127.0.0.1"  # a trusted host of the service


@pytest.fixture(scope="module")
def assistant(searcher):
    return Assistant(searcher)


@pytest.fixture(scope="module")
def hbm_plan():
    from oomkb.diagnostics.plan import plan_factory

    return plan_factory(plan_programs.wide_sharded, target="v5e")


@pytest.fixture(scope="module")
def vmem_plan():
    from oomkb.diagnostics.plan import plan_factory

    return plan_factory(vmem_programs.make, target="v5e")


def test_the_answer_leads_with_the_verified_fixes_in_the_askers_language(assistant, hbm_plan):
    r = assistant.ask(AskRequest(question="Como faço o programa caber na memória?", report=hbm_plan))
    assert r.language == "pt"
    answer = r.answer
    heading = answer.index("Verificado compilando para `v5e:2x2`")
    assert heading < answer.index("### O que fazer")
    assert "**Doe `x` (donation)**: cabe: 12.00 GiB por dispositivo, 12.00 GiB a menos" in answer
    assert "**Execute em `v5e:2x4` (8 dispositivos)**" in answer
    assert "step = jax.jit(activation, donate_argnums=(0,))" in answer
    assert "[`e1000-compile-hbm-oom#debugging`]" in answer
    assert r.diagnosis is None and r.grounded


def test_a_vmem_plan_names_the_raised_limit_and_the_vmem_diagnosis(assistant, vmem_plan):
    r = assistant.ask(AskRequest(question="How do I fix it?", report=vmem_plan))
    assert "Raise the scoped VMEM limit to 32.00 MiB**: fits" in r.answer
    assert "pltpu.CompilerParams(vmem_limit_bytes=33554432)" in r.answer
    # the verdict comes first and sets the limit the plan verified, not a computed one
    assert r.answer.startswith(f"**{r.verdict}**") and "vmem_limit_bytes=33554432" in r.verdict
    # the diagnosis line speaks of the kernel's VMEM, never of an HBM overflow
    first = next(line for line in r.answer.splitlines() if line.startswith("**Diagnosis:**"))
    assert "VMEM" in first and "32.00 MiB" in first and "16.00 MiB" in first


def test_a_plan_json_is_accepted_by_ask_on_the_command_line(hbm_plan, loaded_index, tmp_path):
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    path = tmp_path / "plan.json"
    path.write_text(hbm_plan.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(app, ["ask", "what fits?", "--report", str(path), "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)["answer"]
    assert "Verified by compiling for `v5e:2x2`" in answer and "Run on `v5e:2x4`" in answer


def test_http_plan_is_off_by_default_and_runs_in_the_sandbox_when_enabled(assistant):
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL) as client:
        r = client.post("/v1/plan", json={"source": WIDE_EVEN, "factory": "wide_even"})
        assert r.status_code == 403 and "OOMKB_ENABLE_ESTIMATE" in r.json()["detail"]
    from oomkb.diagnostics.isolation import isolation_status

    # in the bubblewrap sandbox, as /v1/estimate, where this machine has one
    sandbox = "bwrap" if isolation_status().available else "none"
    settings = Settings(enable_estimate=True, estimate_timeout_s=60, estimate_sandbox=sandbox)
    with TestClient(create_app(settings, assistant), base_url=LOCAL) as client:
        r = client.post("/v1/plan", json={"source": WIDE_EVEN, "factory": "wide_even",
                                          "vary": {"name": "batch", "low": 1, "high": 7}})
        assert r.status_code == 200, r.text
        assert r.json()["vary"]["largest_fitting"] == 6
        listed = client.post("/v1/plan", json={"source": WIDE_EVEN, "factory": "wide_even",
                                               "vary": {"name": "batch", "values": [2, 4, 6]}})
        assert listed.status_code == 200, listed.text
        assert listed.json()["vary"]["largest_fitting"] == 6
        assert listed.json()["vary"]["values"] == [2, 4, 6]
        bad = client.post("/v1/plan", json={"source": WIDE_EVEN, "factory": "wide_even",
                                            "vary": {"name": "batch", "low": 1}})
        assert bad.status_code == 400 and "give low and high, or values" in bad.text
        bad = client.post("/v1/plan", json={"source": WIDE_EVEN, "factory": "wide_even",
                                            "vary": {"name": "batch", "low": 9, "high": 1}})
        assert bad.status_code == 400 and "LO is greater than HI" in bad.json()["detail"]
        bad = client.post("/v1/plan", json={"source": WIDE_EVEN, "factory": "wide_even",
                                            "vary": {"name": "rows", "low": 1, "high": 2}})
        assert bad.status_code == 400 and "takes no argument 'rows'" in bad.json()["detail"]
        r = client.post("/v1/ask", json={"question": "what fits?", "report": r.json()})
        assert r.status_code == 200 and "Verified by compiling" in r.json()["answer"]


# --- --choose: the chosen rows in the answer, and POST /v1/plan's `choose` ---------------------

SCALED = (PROGRAMS / "choose_programs.py").read_text()


@pytest.fixture(scope="module")
def choose_plan():
    import choose_programs

    from oomkb.diagnostics.plan import parse_vary, plan_factory

    return plan_factory(choose_programs.scaled, target="v5e",
                        vary=parse_vary("batch=65536,131072,262144,524288"),
                        choose="dtype=float32,bfloat16")


def test_the_answer_leads_with_the_best_choice_and_lists_every_choice(assistant, choose_plan):
    rows = {row.value: row for row in choose_plan.choices}
    best, other = rows["bfloat16"].at_value, rows["float32"].at_value
    assert best > other  # measured, not assumed: bfloat16 fits more rows
    r = assistant.ask(AskRequest(question="Welchen dtype soll ich nehmen, damit es passt?",
                                 report=choose_plan))
    assert r.language == "de"
    assert r.answer.startswith(f"**{r.verdict}**")
    assert r.verdict.startswith("Von den 2 kompilierten Optionen passt mit `dtype=bfloat16`")
    assert f"{best}" in r.verdict and f"dtype=float32: {other}" in r.verdict
    assert f"- `dtype=float32`: Das größte `batch`, das passt: {other}" in r.answer
    assert f"- `dtype=bfloat16`: Das größte `batch`, das passt: {best}" in r.answer


def test_a_plan_with_choices_is_accepted_by_ask_on_the_command_line(choose_plan, loaded_index, tmp_path):
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    path = tmp_path / "plan.json"
    path.write_text(choose_plan.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(app, ["ask", "which dtype fits the most?", "--report", str(path), "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)["answer"]
    assert "Of the 2 choices compiled, `dtype=bfloat16` fits the largest `batch`" in answer


def test_http_plan_takes_choose_and_names_a_keyword_the_factory_lacks(assistant):
    from oomkb.diagnostics.isolation import isolation_status

    sandbox = "bwrap" if isolation_status().available else "none"
    settings = Settings(enable_estimate=True, estimate_timeout_s=60, estimate_sandbox=sandbox)
    with TestClient(create_app(settings, assistant), base_url=LOCAL) as client:
        r = client.post("/v1/plan", json={"source": SCALED, "factory": "scaled",
                                          "choose": {"name": "dtype", "values": ["float32", "bfloat16"]}})
        assert r.status_code == 200, r.text
        rows = {row["value"]: row for row in r.json()["choices"]}
        assert rows["float32"]["total_bytes"] == r.json()["baseline"]["total_bytes"]
        assert rows["bfloat16"]["fits"] and rows["bfloat16"]["total_bytes"] < rows["float32"]["total_bytes"]
        bad = client.post("/v1/plan", json={"source": SCALED, "factory": "fixed",
                                            "choose": {"name": "dtype", "values": ["bfloat16"]}})
        assert bad.status_code == 400 and "takes no keyword argument 'dtype'" in bad.json()["detail"]
        bad = client.post("/v1/plan", json={"source": SCALED, "factory": "scaled",
                                            "choose": {"name": "dtype", "values": []}})
        assert bad.status_code in (400, 422)
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert "choose" in schema["PlanRequest"]["properties"] and "ChooseRequest" in schema
