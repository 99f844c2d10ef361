"""A JAX memory question that nothing here answers (no guide section, short answer, figure or
step) is neither refused as off-topic nor answered with passages found by meaning (issue 21,
rounds 45-46: four and six in-scope turns were answered "the guides do not cover this"). It says
so, in the asker's language, and gives what can be done: how to measure the figure asked on their
own program, or the evidence that would decide it. Through the real app (REST, real index and
model)."""

from __future__ import annotations

from tests.api.rest import ask_json as _ask, client  # noqa: F401  (client: a fixture)

TREE = ("using mctx muzero_policy with num_simulations=5000 and 300 actions per node, batch 32, on an "
        "A100 40GB. how big does the search tree get in memory?")


def test_a_figure_nothing_here_computes_gets_how_to_measure_it_not_passages(client):
    r = _ask(client, {"question": TREE})
    assert r["grounded"] and r["language"] == "en"
    assert r["answer"].startswith("This is a JAX memory question, but the guides have no section on it")
    assert "jax.eval_shape(" in r["answer"] and ".memory_analysis()" in r["answer"]
    assert "```python" in r["answer"] and "jax.tree_util.tree_leaves_with_path(shapes)" in r["answer"]  # the code that measures it
    assert "### From the guides" not in r["answer"] and not r["citations"]
    assert "The guides do not cover this question" not in r["answer"]


def test_a_how_question_nothing_here_answers_asks_for_the_evidence_in_its_language(client):
    r = _ask(client, {"question": "Ich nutze jaxley, um 200 Zellen gleichzeitig zu simulieren, und der Speicher "
                                  "auf meiner RTX 4090 läuft voll. Wie stelle ich das am besten um, damit es durchläuft?"})
    assert r["grounded"] and r["language"] == "de"
    assert r["answer"].startswith("Das ist eine Frage zum Speicher von JAX, aber die Leitfäden haben keinen Abschnitt")
    assert "vollständigen Text" in r["answer"] and not r["citations"]


def test_its_follow_up_is_answered_the_same_way_and_off_topic_is_still_declined(client):
    first = _ask(client, {"question": TREE})
    second = _ask(client, {"question": "and with 2000 simulations instead?",
                           "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and second["grounded"]
    assert "the guides have no section on it" in second["answer"] and not second["citations"]
    off = _ask(client, {"question": "how do I get a red wine stain out of a white linen shirt?"})
    assert not off["grounded"] and "The guides do not cover this question" in off["answer"]


def test_the_jax_libraries_and_cards_named_make_a_memory_question_in_scope(client):
    # JAX libraries the guides never name, on a card named by its model: not refused as off-topic
    for question in ("用 evojax 的 CMA_ES，param_size=200000，单卡 RTX 3090 24G 一跑就爆显存，为什么？",
                     "computing an empirical NTK with neural-tangents on 5000 CIFAR images on a V100, "
                     "how much memory does the kernel need?"):
        r = _ask(client, {"question": question})
        assert r["grounded"], question
        assert "The guides do not cover this question" not in r["answer"] and "指南没有涉及这个问题" not in r["answer"]
