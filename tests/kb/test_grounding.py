"""The "grounded" decision (kb/grounding.py) through the real assistant, model and index: the
held-out questions (written after the model was fitted) must meet the goals of issue 11."""

import pytest

from oomkb.api.core.assistant import Assistant
from oomkb.api.schemas import AskRequest
from benchmarks.grounding import heldout_set, training_set
from oomkb.kb import grounding
from oomkb.kb.language import SUPPORTED

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

ON_TOPIC_ACCEPTED_MIN = 0.98
OFF_TOPIC_REJECTED_MIN = 0.97


@pytest.fixture(scope="module")
def assistant(searcher):
    return Assistant(searcher)


@pytest.fixture(scope="module")
def heldout_answers(assistant):
    """Every held-out question asked once: (item, grounded)."""
    return [(it, assistant.ask(AskRequest(question=it["q"])).grounded) for it in heldout_set()]


def _rate(answers, covered: bool) -> tuple[float, list[str]]:
    group = [(it, g) for it, g in answers if it["covered"] is covered]
    wrong = [it["q"] for it, g in group if g is not covered]
    return 1 - len(wrong) / len(group), wrong


def test_the_labelled_sets_are_large_cover_11_languages_and_hold_traps():
    train, held = training_set(), heldout_set()
    assert len(train) + len(held) >= 300 and len(held) >= 100
    for part in (train, held):
        assert {it["lang"] for it in part} >= set(SUPPORTED)
        assert {it["covered"] for it in part} == {True, False}
        traps = {it["kind"] for it in part if str(it.get("kind", "")).startswith("trap-")}
        assert {"trap-java", "trap-db", "trap-phone", "trap-pytorch", "trap-python"} <= traps
    assert not {it["q"] for it in train} & {it["q"] for it in held}


def test_heldout_on_topic_questions_are_answered_as_covered(heldout_answers):
    rate, wrong = _rate(heldout_answers, True)
    assert rate >= ON_TOPIC_ACCEPTED_MIN, wrong


def test_heldout_off_topic_questions_are_answered_as_not_covered(heldout_answers):
    rate, wrong = _rate(heldout_answers, False)
    assert rate >= OFF_TOPIC_REJECTED_MIN, wrong


@pytest.mark.parametrize("question, lang", [
    ("मेरे फ़ोन की बैटरी बहुत जल्दी खत्म हो जाती है, क्या करूँ?", "hi"),
    ("MySQL 的索引为什么没有生效？查询还是很慢", "zh"),
    ("My Java application keeps leaking heap memory until it crashes with OutOfMemoryError, "
     "how do I find the leak?", "en"),
    ("Quem ganhou a Copa do Mundo de 2002?", "pt"),
])
def test_the_four_reported_failures_are_not_covered_and_keep_their_language(assistant, question,
                                                                            lang):
    r = assistant.ask(AskRequest(question=question))
    assert (r.grounded, r.language) == (False, lang)


def test_a_pasted_xla_error_is_covered_whatever_the_model_says(assistant):
    r = assistant.ask(AskRequest(question="RESOURCE_EXHAUSTED: Ran out of memory in memory space "
                                          "hbm. Used 20.1G of 16.00G hbm."))
    assert r.grounded and r.diagnosis is not None


def test_the_decision_exposes_its_probability_and_features(searcher):
    q = "How do I raise the scoped VMEM limit of a Pallas kernel?"
    d = grounding.decide(q, searcher.search(q, k=5).results, searcher)
    assert d.grounded and 0.5 <= d.probability <= 1
    assert set(d.features) == set(grounding.FEATURES)
    assert d.features["domain"] > 0 and d.features["foreign"] == 0


def test_the_model_file_matches_the_features_and_a_broken_one_is_a_clear_error(tmp_path):
    model = grounding.load_model()
    assert model.features == list(grounding.FEATURES)
    bad = tmp_path / "model.yaml"
    bad.write_text("features: [dense_top]\nmean: [0]\nscale: [1]\nweights: [1]\nbias: 0\n")
    with pytest.raises(grounding.GroundingError, match="does not match"):
        grounding.load_model(str(bad))
    with pytest.raises(grounding.GroundingError, match="unreadable"):
        grounding.load_model(str(tmp_path / "missing.yaml"))
