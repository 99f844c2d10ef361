"""Language detection: script first, then langdetect on the prose without pasted code and errors."""

import pytest

from oomkb.kb.language import SUPPORTED, detect_language, language_name, strip_code


@pytest.mark.parametrize(
    "text, lang",
    [
        ("How do I fix a compile-time HBM OOM?", "en"),
        ("كيف أصلح خطأ نفاد الذاكرة؟", "ar"),
        ("मेमोरी खत्म होने की गड़बड़ी कैसे ठीक करें?", "hi"),
        ("Как исправить нехватку памяти?", "ru"),
        ("什么是 Vmem？", "zh"),
        ("Como corrigir o erro de falta de memória?", "pt"),
        ("¿Cómo soluciono el error de memoria insuficiente?", "es"),
        ("メモリ不足エラーを直すには？", "ja"),
        ("Wie behebe ich den Speicherfehler?", "de"),
        ("Comment corriger l'erreur de mémoire insuffisante ?", "fr"),
        ("메모리 부족 오류를 어떻게 고치나요?", "ko"),
    ],
)
def test_each_supported_language_is_detected(text, lang):
    assert detect_language(text).language == lang


def test_a_pasted_english_error_does_not_turn_a_russian_question_english():
    text = ("Почему падает компиляция?\nXlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in "
            "memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.")
    assert detect_language(text).language == "ru"


def test_a_portuguese_question_full_of_flags_stays_portuguese():
    text = "Como ajusto --xla_tpu_scoped_vmem_limit_kib e vmem_limit_bytes no meu kernel?"
    assert detect_language(text).language == "pt"


def test_short_questions_with_technical_tokens_are_decided_by_function_words():
    assert detect_language("What does --xla_tpu_scoped_vmem_limit_kib do?").language == "en"
    assert detect_language("O que é VMEM?").language == "pt"


def test_an_unsupported_language_falls_back_to_english_and_says_what_it_saw():
    d = detect_language("Come posso risolvere un errore di memoria esaurita sulla TPU?")
    assert (d.language, d.detected, d.supported) == ("en", "it", False)


def test_a_word_or_two_is_not_called_an_unsupported_language():
    assert detect_language("help").supported
    assert detect_language("").language == "en"


def test_strip_code_removes_code_logs_and_identifiers():
    prose = strip_code("Why does `jax.jit(f, donate_argnums=0)` fail?\nTraceback (most recent call last):")
    assert "donate_argnums" not in prose and "Traceback" not in prose and "Why" in prose


def test_language_names_come_from_cldr_in_the_answer_language():
    assert language_name("it") == "Italian"
    assert language_name("it", "ja") == "イタリア語"
    assert len(SUPPORTED) == 11


# --- short questions: the labelled sets of benchmarks/language.py ---------------------------------

import yaml  # noqa: E402

from tests.conftest import ROOT  # noqa: E402


def _short_set(name: str) -> list[dict]:
    return yaml.safe_load((ROOT / "tests" / "data" / name).read_text(encoding="utf-8"))["questions"]


def test_the_short_question_sets_are_short_cover_11_languages_and_hold_300():
    items = _short_set("language_short.yaml") + _short_set("language_short_heldout.yaml")
    assert len(items) >= 300
    assert {it["lang"] for it in items} == set(SUPPORTED)
    for it in items:
        if it["lang"] not in ("zh", "ja"):  # no spaces between words there
            assert 3 <= len(it["q"].split()) <= 12, it["q"]


@pytest.mark.parametrize("name", ["language_short.yaml", "language_short_heldout.yaml"])
def test_short_questions_are_detected_at_least_98_percent(name):
    items = _short_set(name)
    got = [(it["q"], it["lang"], detect_language(it["q"]).language) for it in items]
    wrong = [g for g in got if g[1] != g[2]]
    assert 1 - len(wrong) / len(items) >= 0.98, wrong


@pytest.mark.parametrize("text, lang", [
    ("Quem ganhou a Copa do Mundo de 2002?", "pt"),
    ("Onde fica o memory viewer do XProf?", "pt"),
    ("Ayuda, mi kernel de Pallas no compila", "es"),
    ("Quels flags XLA aident ici ?", "fr"),
    ("Kompilieren scheitert, aber zur Laufzeit geht es", "de"),
    ("Donation did not reduce memory at all", "en"),
])
def test_latin_languages_are_told_from_english_despite_technical_words(text, lang):
    assert detect_language(text).language == lang


def _all_data_texts() -> list[str]:
    import glob

    texts: list[str] = []

    def walk(x):
        if isinstance(x, str):
            texts.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for path in sorted(glob.glob(str(ROOT / "tests" / "data" / "*.yaml"))):
        with open(path, encoding="utf-8") as fh:
            walk(yaml.safe_load(fh))
    return texts


@pytest.mark.parametrize("every", [
    pytest.param(8, id="every-8th-text"),
    pytest.param(1, id="every-text", marks=pytest.mark.slow),
])
def test_langdetect_is_skipped_only_where_it_cannot_change_the_result(monkeypatch, every):
    """Latin-script detection asks langdetect only when the word evidence leaves it a say; on
    the texts of the test data the result equals the one that always asks."""
    import unicodedata

    from oomkb.kb import language

    asked = []
    real = language._langdetect
    monkeypatch.setattr(language, "_langdetect", lambda text: asked.append(text) or real(text))
    compared = 0
    for text in _all_data_texts()[::every]:
        prose = language.strip_code(unicodedata.normalize("NFC", text))
        if sum(ch.isalpha() for ch in prose) < 3:
            continue
        before = len(asked)
        quick = language._latin(prose)
        skipped = len(asked) == before
        full = language._latin(prose, exhaustive=True)
        # the language found is the same; the scores differ by langdetect's share when it was asked
        assert quick.model_dump(exclude={"scores"}) == full.model_dump(exclude={"scores"}), text[:80]
        compared += 1 if skipped else 0
    assert compared > 100 // every  # the shortcut is taken, and each time it agreed
    asked.clear()
    assert detect_language("How do I find out why the buffer of my model is so large?").language == "en"
    assert asked == []


def test_japanese_with_code_and_numbers_glued_into_its_clauses_stays_japanese():
    from oomkb.kb.prose import detect_prose_language
    q = "推論でKV cacheのサイズを見積もりたいです。28層、KV heads 16、head_dim 256、bf16 だと何GiBになりますか？"
    assert detect_prose_language(q).language == "ja"
    assert detect_prose_language("v5e-8 上训练一个 ~3B 的模型，compile 的时候就 OOM 了。").language == "zh"


def test_an_error_pasted_inside_a_sentence_does_not_decide_the_language():
    from oomkb.kb.prose import detect_prose_language

    q = ("hab jetzt überall P('fsdp') gesetzt, aber jetzt kommt: ValueError: One of device_put args was given the "
         "sharding of NamedSharding(mesh=Mesh('fsdp': 4), spec=PartitionSpec('fsdp',)), which implies that the global "
         "size of its dimension 0 should be divisible by 4, but it is equal to 32001 (full shape: (32001,)). was nun?")
    assert detect_prose_language(q).language == "de"


def test_a_french_sentence_with_an_error_pasted_on_its_line_is_french_despite_its_apostrophes():
    from oomkb.kb.prose import detect_prose_language
    q = ("Bonjour, j'ai ce message en lançant l'inférence sur une GPU 32GB, comment je règle ça ? "
         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total capacity of "
         "31.47 GiB of which 12.73 GiB is free. Including non-PyTorch memory, this process has 18.73 GiB memory in use.")
    assert detect_prose_language(q).language == "fr"


def test_hinglish_with_relative_pronouns_and_postpositions_is_hindi():
    from oomkb.kb.prose import detect_prose_language
    assert detect_prose_language("ok exact code de do jisme params FSDP me 8 GPUs pe shard ho, bf16 params aur "
                                 "donate bhi ho").language == "hi"
