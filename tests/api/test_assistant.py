"""The assistant answers in the asker's language, with the asker's numbers and cited guides."""

import re

import pytest
import yaml

from oomkb.api.core.assistant import Assistant
from oomkb.api.schemas import AskRequest
from oomkb.units import format_bytes
from oomkb.kb.remedies.rendering import message
from oomkb.kb.errors import QueryError
from oomkb.kb.language import detect_language
from tests.conftest import ROOT

OFFTOPIC = yaml.safe_load((ROOT / "tests/data/offtopic.yaml").read_text(encoding="utf-8"))["questions"]

QUESTIONS = [
    ("en", "How do I raise the VMEM limit for my Pallas kernel?", "scoped-vmem-oom"),
    ("ar", "كيف أستخدم عارض الذاكرة في XProf لمعرفة سبب نفاد الذاكرة؟", "xprof-debug-oom"),
    ("hi", "रनटाइम पर बफ़र ऐलोकेशन की गड़बड़ी क्यों आती है?", "runtime-buffer-allocation"),
    ("ru", "Как найти утечку памяти тензоров с помощью Memory Profile?", "tensor-lifetime-leaks"),
    ("zh", "编译时 HBM 内存不足，怎么用 jax.checkpoint 减少内存？", "e1000-compile-hbm-oom"),
    ("pt", "O que é Vmem com escopo e como ajustar vmem_limit_bytes?", "scoped-vmem-oom"),
    ("es", "¿Cómo encuentro una fuga de memoria si el montón crece en cada paso?", "tensor-lifetime-leaks"),
    ("ja", "XProf でメモリのピークを確認するにはどうすればいいですか？", "xprof-debug-oom"),
    ("de", "Wie kann ich die Fragmentierung des Speichers zur Laufzeit auf der TPU vermeiden?", "runtime-buffer-allocation"),
    ("fr", "Comment réduire la mémoire HBM à la compilation avec donate_argnums ?", "e1000-compile-hbm-oom"),
    ("ko", "커스텀 커널에서 VMEM 메모리가 부족할 때 어떻게 하나요?", "scoped-vmem-oom"),
]

HBM_LOG = """Traceback (most recent call last):
  File "/home/me/train.py", line 88, in <module>
    state = train_step(state, batch)
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.
"""


@pytest.fixture(scope="module")
def assistant(searcher):
    return Assistant(searcher)


def _prose(answer: str) -> str:
    """The answer without quoted guide lines, the source list (guide titles in their language)
    and code blocks (snippets and commands are code in any language)."""
    answer = re.sub(r"^```.*?^```$", "", answer, flags=re.MULTILINE | re.DOTALL)
    return "\n".join(line for line in answer.splitlines() if not line.startswith((">", "- **")))


@pytest.mark.parametrize("lang, question, doc_id", QUESTIONS, ids=[q[0] for q in QUESTIONS])
def test_answers_in_the_question_language_and_cites_the_right_guide(assistant, lang, question, doc_id):
    r = assistant.ask(AskRequest(question=question))
    assert r.language == lang
    assert r.grounded
    assert doc_id in [c.doc_id for c in r.citations]  # top-1 accuracy: test_retrieval_quality
    heading = message(assistant.catalogue, "from_the_guides", lang)
    # a question that its figures answer (the VMEM limits) gets no general guide card after them
    assert (heading in r.answer) != bool(r.figures)
    assert detect_language(_prose(r.answer)).language == lang


def test_a_pasted_error_gets_a_diagnosis_with_the_users_numbers(assistant):
    r = assistant.ask(AskRequest(question="Why does my training step not compile?", error_log=HBM_LOG))
    assert r.diagnosis is not None and r.diagnosis.category == "compile_hbm_oom"
    for figure in (49.34, 32.00, 17.34):
        assert format_bytes(round(figure * 2**30)) in r.answer
    assert r.remedies and all(rem.cite.startswith("e1000-compile-hbm-oom#") for rem in r.remedies[:3])
    assert "{" not in _prose(r.answer)


def test_a_non_english_question_with_a_pasted_english_error_is_answered_in_its_language(assistant):
    r = assistant.ask(AskRequest(question="Почему программа не компилируется?", error_log=HBM_LOG))
    assert r.language == "ru"
    assert "17.34 GiB" in r.answer
    assert message(assistant.catalogue, "what_to_do", "ru") in r.answer


def test_an_error_pasted_into_the_question_is_diagnosed_too(assistant):
    r = assistant.ask(AskRequest(question="Error allocating device buffer: Attempting to allocate 8.00M. "
                                 "That was not possible. There are 6.43M free.; (0x0x1_HBM0)"))
    assert r.diagnosis is not None and r.diagnosis.category == "runtime_allocation"
    assert "8.00 MiB" in r.answer and "6.43 MiB" in r.answer


def test_guide_quotes_appear_only_as_blockquote_lines(assistant):
    r = assistant.ask(AskRequest(question="什么是 Vmem？"))
    assert r.citations
    prose = _prose(r.answer)
    for c in r.citations:
        for line in c.quote.splitlines():
            if len(line) > 20:
                assert f"> {line}" in r.answer
                assert line not in prose


@pytest.mark.parametrize("item", OFFTOPIC, ids=[q["lang"] + str(i) for i, q in enumerate(OFFTOPIC)])
def test_off_topic_questions_are_not_grounded_and_say_so_in_the_users_language(assistant, item):
    r = assistant.ask(AskRequest(question=item["q"]))
    assert r.grounded is False
    assert r.language == item["lang"]
    assert message(assistant.catalogue, "not_covered", item["lang"]) in r.answer
    assert r.citations == []


def test_an_explicit_language_wins_over_detection(assistant):
    r = assistant.ask(AskRequest(question="What does --xla_tpu_scoped_vmem_limit_kib do?", language="ja"))
    assert r.language == "ja"
    assert message(assistant.catalogue, "sources", "ja") in r.answer and "のデフォルトは" in r.answer


def test_an_unsupported_language_is_answered_in_english_saying_so(assistant):
    r = assistant.ask(AskRequest(question="Come posso aumentare il limite di VMEM per il mio kernel Pallas?"))
    assert r.language == "en" and r.detected_language == "it"
    assert r.language_note and "Italian" in r.language_note
    assert r.language_note in r.answer


def test_an_estimate_report_drives_remedies_with_its_measured_figures(assistant):
    from oomkb.diagnostics.estimate.report import EstimateReport

    report = EstimateReport.model_validate_json((ROOT / "tests/data/estimate_report.json").read_text())
    r = assistant.ask(AskRequest(question="Will this fit?", report=report))
    assert r.grounded
    assert r.facts["padding_waste_bytes"] == report.padding.waste_bytes
    ids = [rem.id for rem in r.remedies]
    assert any(rem.triggered_by_evidence for rem in r.remedies), ids


def test_an_empty_request_is_a_clear_error(assistant):
    with pytest.raises(QueryError, match="ask a question"):
        assistant.ask(AskRequest(question="   "))


@pytest.mark.parametrize("lang", ["en", "de", "ja"])
def test_pytorch_oom_is_named_and_declined_without_jax_remedies(assistant, lang):
    # wxian3/NeuroLens#2: a PyTorch CUDA OOM pasted into a JAX assistant (oomkb issue 23).
    log = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 55.57 GiB. GPU 0 has a total "
           "capacty of 12.00 GiB of which 9.02 GiB is free. Of the allocated memory 984.52 MiB is allocated "
           "by PyTorch, and 463.48 MiB is reserved by PyTorch but unallocated.")
    response = assistant.ask(AskRequest(question="", error_log=log, language=lang))
    assert response.diagnosis.category == "other_framework_oom"
    assert not response.grounded and response.remedies == [] and response.citations == []
    assert "torch.OutOfMemoryError" in response.answer  # what it recognised, in every language
    assert "55.57 GiB" in response.answer and "9.02 GiB" in response.answer
    assert "XLA_PYTHON_CLIENT" not in response.answer and "jax.checkpoint" not in response.answer
    assert response.out_of_scope and "JAX/XLA" in response.answer  # what the guides are about, said
