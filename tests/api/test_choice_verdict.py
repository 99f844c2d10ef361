"""The chosen rows of a plan (--choose) as facts, and the verdict they give in every language."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomkb.api.core.evidence import facts_from
from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.plan import ChoiceReport, PlanReport, VaryPoint, VaryReport
from oomkb.kb.evidence_rules import load_rules
from oomkb.kb.language import SUPPORTED
from oomkb.kb.remedies import load_catalogue
from oomkb.units import format_bytes

BASELINE = EstimateReport.model_validate_json(
    (Path(__file__).parents[1] / "data" / "estimate_report.json").read_text())
MiB = 1 << 20


def plan(*choices: ChoiceReport) -> PlanReport:
    return PlanReport(function=BASELINE.function, target=BASELINE.target, baseline=BASELINE,
                      choices=list(choices), compiles=1, seconds=1.0)


def row(value: str, total: int | None, fits: bool = True) -> ChoiceReport:
    return ChoiceReport(name="remat", value=value, fits=fits, total_bytes=total,
                        status="fits" if fits else "does_not_fit")


def searched(value: str, largest: int | None, total: int | None, compiles: int) -> ChoiceReport:
    curve = [VaryPoint(value=largest, total_bytes=total, fits=True, status="fits")] if largest else []
    vary = VaryReport(name="batch", low=1, high=4096, largest_fitting=largest, curve=curve,
                      compiles=compiles, boundary=largest is not None,
                      next_value=largest + 1 if largest else None)
    return ChoiceReport(name="remat", value=value, fits=largest is not None, total_bytes=total,
                        at_value=largest, status="searched", vary=vary)


@pytest.fixture(scope="module")
def rules():
    return load_rules(load_catalogue())


def verdicts(rules, report: PlanReport) -> dict[str, tuple[list[str], str | None]]:
    facts = facts_from(None, report)
    out = {}
    for lang in SUPPORTED:
        outcome = rules.apply(facts, str(facts.get("category") or ""), lang, format_bytes)
        out[lang] = (outcome.rules, outcome.verdict)
    return out


def test_without_vary_the_fitting_choice_with_the_least_memory_leads_in_every_language(rules):
    report = plan(row("none", 900 * MiB), row("full", 600 * MiB), row("offload", None, fits=False))
    facts = facts_from(None, report)
    assert facts["choice_setting"] == "remat=full" and facts["choice_count"] == 3
    assert facts["choice_others"] == "remat=none: 900.00 MiB; remat=offload: does_not_fit"
    for lang, (ids, verdict) in verdicts(rules, report).items():
        assert ids[0] == "plan-best-choice", lang
        assert "remat=full" in verdict and "600.00 MiB" in verdict and "3" in verdict, (lang, verdict)


def test_with_vary_the_choice_that_fits_the_largest_value_leads_with_its_compiles(rules):
    report = plan(searched("none", 1024, 15 * 1024 * MiB, 9), searched("full", 2900, 15 * 1024 * MiB, 11))
    for lang, (ids, verdict) in verdicts(rules, report).items():
        assert ids[0] == "plan-best-choice", lang
        for figure in ("remat=full", "2900", "batch", "remat=none: 1024", "20"):
            assert figure in verdict, (lang, figure, verdict)


@pytest.mark.parametrize("choices", [
    (row("full", 600 * MiB),),  # one choice: nothing to compare
    (row("none", None, fits=False), row("full", None, fits=False)),  # none fits
    (searched("none", None, None, 5), searched("full", None, None, 6)),
])
def test_no_choice_verdict_without_two_choices_or_without_one_that_fits(rules, choices):
    for _lang, (ids, _verdict) in verdicts(rules, plan(*choices)).items():
        assert "plan-best-choice" not in ids
