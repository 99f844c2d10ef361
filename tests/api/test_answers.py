"""Answers that answer: the figure asked for first with its source, each remedy's snippet, and
the oomkb command that would settle the question, in the asker's language."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from oomkb.diagnostics.tpu import generations
from oomkb.units import parse_size
from oomkb.kb.errors import CatalogueError
from oomkb.kb.figures import load_figures
from oomkb.kb.next_steps import load_next_steps, names_from_log
from oomkb.kb.remedies import default_catalogue_dir, load_catalogue

CATALOGUE = load_catalogue()
FIGURES = load_figures(CATALOGUE)
NEXT = load_next_steps(CATALOGUE)
MiB = 1 << 20

TRACEBACK = """Traceback (most recent call last):
  File "/home/me/project/train.py", line 88, in <module>
    main()
  File "/home/me/project/train.py", line 80, in main
    state, loss = train_step(state, batch)
  File "/home/me/project/train.py", line 41, in train_step
    grads = jax.grad(loss_fn)(state.params, batch)
  File "/home/me/.venv/lib/python3.11/site-packages/jax/_src/traceback_util.py", line 180, in reraise_with_filtered_traceback
    return fun(*args, **kwargs)
jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)
"""


# ------------------------------------------------------------------ figures, recognised by data


@pytest.mark.parametrize("question,language,kind,subject", [
    ("How much HBM does one TPU v6e chip have?", "en", "hbm", "v6e"),
    ("Quanta memória HBM tem um chip TPU v5p?", "pt", "hbm", "v5p"),
    ("¿Cuánta memoria HBM tiene un chip v4?", "es", "hbm", "v4"),
    ("v5 lite のHBMはどのくらいですか", "ja", "hbm", "v5e"),
    ("Trillium 칩의 HBM 용량은 얼마인가요?", "ko", "hbm", "v6e"),
    ("What is the default scoped VMEM limit on TPU v5e?", "en", "scoped_vmem", "v5e"),
    ("TPU v6e 的默认 scoped VMEM 限制是多少？", "zh", "scoped_vmem", "v6e"),
    ("Сколько VMEM у TPU v5e?", "ru", "vmem", "v5e"),
    ("Wie viele Kerne hat ein TPU-v4-Chip?", "de", "cores", "v4"),
    ("Combien de cœurs a une puce v5p ?", "fr", "cores", "v5p"),
    ("TPU v5e में कितनी HBM मेमोरी होती है?", "hi", "hbm", "v5e"),
    ("كم حجم ذاكرة HBM في شريحة v5e؟", "ar", "hbm", "v5e"),
])
def test_figure_questions_are_recognised_in_every_language(question, language, kind, subject):
    answers = FIGURES.answer(question, language)
    assert [(a.kind, a.subject) for a in answers] == [(kind, subject)]
    assert answers[0].text.startswith(f"**{subject}")
    assert answers[0].sources


def test_a_question_asking_for_two_figures_gets_both_in_order():
    answers = FIGURES.answer("Wie viel HBM hat ein TPU-v5e-Chip und wie groß ist das "
                             "Standardlimit für scoped VMEM?", "de")
    assert [(a.kind, a.subject) for a in answers] == [("scoped_vmem", "v5e"), ("hbm", "v5e")]


def test_a_setting_question_is_not_also_answered_as_the_limit_of_every_generation():
    answers = FIGURES.answer("What is the default value of vmem_limit_bytes?", "en")
    assert [a.kind for a in answers] == ["setting_default"]


def test_default_scoped_vmem_limits_are_the_measured_ones():
    v5e, = FIGURES.answer("default scoped VMEM limit of v5e", "en")
    v6e, = FIGURES.answer("default scoped VMEM limit of v6e", "en")
    assert (v5e.value_bytes, v6e.value_bytes) == (16 * MiB, 32 * MiB)
    assert "16.00 MiB" in v5e.text and "128.00 MiB" in v5e.text and "measured here" in v5e.text
    assert v5e.remedies == ["vmem-limit-bytes", "vmem-global-limit"]


def test_a_scoped_limit_that_is_all_the_vmem_says_no_setting_raises_it_and_rules_the_settings_out():
    v4, = FIGURES.answer("Какой лимит scoped VMEM по умолчанию на v4 для Pallas-ядра?", "ru")
    assert "это уже вся физическая VMEM ядра, 16.00 MiB" in v4.text and "можно поднять" not in v4.text
    assert v4.remedies == ["vmem-block-sizes"] and set(v4.excludes) == {"vmem-limit-bytes", "vmem-global-limit"}
    v5e, = FIGURES.answer("default scoped VMEM limit of v5e", "en")
    assert v5e.excludes == [] and "can be raised to below the physical VMEM" in v5e.text


def test_a_vmem_oom_on_v4_gets_smaller_blocks_and_no_64_mib_limit(assistant):
    r = ask(assistant, "Pallas kernel on TPU v4-8 fails to compile with a scoped VMEM OOM at block 1024x512; "
                       "what is the default scoped VMEM limit on v4 and what should I do?")
    ids = [x.id for x in r.remedies]
    assert "vmem-limit-bytes" not in ids and "vmem-global-limit" not in ids and "vmem-block-sizes" in ids
    assert "64 * 1024 * 1024" not in r.answer and "65536" not in r.answer
    # a Pallas kernel is not a question about the chip's cores (ядро)
    r = ask(assistant, "Пишу Pallas-ядро под TPU v4, сколько весит f32-тайл [1024, 512] в VMEM?")
    assert not any(f.kind == "cores" for f in r.figures)


def test_usable_hbm_is_the_measured_per_device_figure_times_devices_per_chip():
    for name, gen in generations().items():
        if name not in FIGURES.data.generations:
            continue
        answer, = FIGURES.answer(f"How much HBM does a {name} chip have?", "en")
        assert answer.value_bytes == parse_size(gen.hbm_reported) * gen.devices_per_chip
        assert FIGURES.data.generations[name].hbm_public.value in answer.text


def test_a_generation_without_a_recorded_figure_says_so_instead_of_guessing():
    answer, = FIGURES.answer("What is the default scoped VMEM limit of TPU v3?", "en")
    assert answer.value_bytes is None and "no measured or public figure" in answer.text


def test_vmem_question_without_a_generation_lists_every_generation_with_a_figure():
    subjects = [a.subject for a in FIGURES.answer("What is the default scoped VMEM limit?", "en")]
    assert {"v5e", "v6e", "v5p"} <= set(subjects) and "v3" not in subjects


def test_setting_default_is_answered_with_its_source():
    answer, = FIGURES.answer("What is the default value of XLA_PYTHON_CLIENT_MEM_FRACTION?", "en")
    assert answer.kind == "setting_default" and "`0.75`" in answer.text
    assert "docs.jax.dev" in answer.text
    de, = FIGURES.answer("Was ist der Standardwert von donate_argnums?", "de")
    assert "`()`" in de.text and "gespendet" in de.text


@pytest.mark.parametrize("question", [
    "How do I fix Ran out of memory in memory space hbm?",
    "How much HBM does my model need?",
    "Quem ganhou a Copa do Mundo de 2002?",
])
def test_questions_that_ask_for_no_figure_get_none(question):
    assert FIGURES.answer(question, "en") == []


def _figures_copy(tmp_path: Path, change) -> Path:
    folder = tmp_path / "catalogue"
    shutil.copytree(default_catalogue_dir(), folder)
    path = folder / "figures.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return folder


def test_figures_for_an_unknown_generation_are_refused(tmp_path):
    folder = _figures_copy(tmp_path, lambda d: d["generations"].__setitem__("v9z", {}))
    with pytest.raises(CatalogueError, match="v9z"):
        load_figures(CATALOGUE, folder)


def test_vmem_figures_come_from_tpu_generations_and_this_file_only_fills_gaps(tmp_path):
    gen = generations()["v5e"]
    v5e, = FIGURES.answer("physical VMEM of v5e", "en")
    assert v5e.value_bytes == gen.vmem_bytes
    assert generations()["v3"].scoped_vmem_default_bytes is None

    def change(d):
        d["generations"]["v3"]["scoped_vmem"] = {"value": "12.00M", "source": "jax-tpu-info"}
        d["generations"]["v5e"]["scoped_vmem"] = {"value": "99.00M", "source": "jax-tpu-info"}
    figures = load_figures(CATALOGUE, _figures_copy(tmp_path, change))
    v3, = figures.answer("default scoped VMEM limit of v3", "en")
    v5e, = figures.answer("default scoped VMEM limit of v5e", "en")
    assert v3.value_bytes == 12 * MiB and "tpu_info.py" in v3.text
    assert v5e.value_bytes == gen.scoped_vmem_default_bytes  # tpu_generations.yaml wins


def test_a_figure_message_missing_a_language_is_refused(tmp_path):
    folder = _figures_copy(tmp_path, lambda d: d["messages"]["hbm"]["text"].pop("ko"))
    with pytest.raises(CatalogueError, match="ko"):
        load_figures(CATALOGUE, folder)


def test_a_figure_message_with_other_numbers_in_one_language_is_refused(tmp_path):
    def change(d):
        d["messages"]["vmem"]["text"]["fr"] = "**{generation} :** VMEM ({source})."
    folder = _figures_copy(tmp_path, change)
    with pytest.raises(CatalogueError, match="placeholders"):
        load_figures(CATALOGUE, folder)


def test_a_setting_tied_to_a_remedy_that_does_not_name_it_is_refused(tmp_path):
    def change(d):
        d["settings"][0]["remedies"] = ["hbm-batch-size"]
    folder = _figures_copy(tmp_path, change)
    with pytest.raises(CatalogueError, match="hbm-batch-size.*names none of it"):
        load_figures(CATALOGUE, folder)


# ------------------------------------------------------------------ next steps


def test_names_come_from_the_users_traceback_not_from_jax():
    assert names_from_log(TRACEBACK) == {"script": "train.py", "target": "train.py:train_step"}
    assert names_from_log("no traceback here") == {}


@pytest.mark.parametrize("question,language", [
    ("How do I find which tensor grows every training step?", "en"),
    ("Как найти утечку памяти, которая растёт на каждом шаге?", "ru"),
    ("如何找到每一步都在增长的张量？", "zh"),
    ("Wie finde ich heraus, welcher Tensor mit jedem Schritt wächst?", "de"),
])
def test_growth_questions_get_oomkb_profile(question, language):
    steps = NEXT.choose(question, {}, language)
    assert steps and steps[0].tool == "profile"
    assert steps[0].command == "oomkb profile FILE.py:FUNCTION --repeat 5"


def test_will_it_fit_gets_oomkb_estimate_with_the_generation_named():
    steps = NEXT.choose("Will my model fit on a v5e?", {}, "en", {"tpu": "v5e"})
    assert [s.tool for s in steps] == ["estimate"]
    assert steps[0].command == "oomkb estimate FILE.py:FACTORY --tpu v5e"


def test_a_runtime_oom_with_a_traceback_gets_profile_and_run_with_the_users_names():
    steps = NEXT.choose("", {"category": "runtime_allocation"}, "pt", names_from_log(TRACEBACK))
    assert [s.command for s in steps] == ["oomkb profile train.py:train_step --repeat 5",
                                          "oomkb run train.py"]
    assert all(s.user_names for s in steps) and "oomkb" in steps[0].text


def test_an_estimate_that_does_not_fit_gets_plan_for_its_generation():
    steps = NEXT.choose("", {"fits": False, "target_generation": "v6e",
                             "largest_allocation_source": "model.py:12"}, "en")
    assert "oomkb plan model.py:FACTORY --tpu v6e" in [s.command for s in steps]


def test_names_that_could_carry_markup_are_not_put_into_commands():
    steps = NEXT.choose("", {"category": "runtime_allocation"}, "en",
                        {"target": "x.py:f`; rm -rf /", "script": "<b>.py"})
    assert steps[0].command == "oomkb profile FILE.py:FUNCTION --repeat 5"


# ------------------------------------------------------------------ the assistant's answers


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


def ask(assistant, question, **kw):
    from oomkb.api.schemas import AskRequest

    return assistant.ask(AskRequest(question=question, **kw))


def test_scoped_vmem_question_gets_the_figure_first_and_the_vmem_limit_snippet(assistant):
    r = ask(assistant, "What is the default scoped VMEM limit on TPU v5e and how do I raise it "
                       "for a single Pallas kernel?")
    assert r.answer.startswith("**v5e:** the default scoped VMEM limit is 16.00 MiB")
    assert "compiler_params=pltpu.CompilerParams(vmem_limit_bytes=" in r.answer
    assert "```python" in r.answer
    ids = [x.id for x in r.remedies]
    assert "vmem-limit-bytes" in ids and r.remedies[ids.index("vmem-limit-bytes")].snippet
    assert r.figures[0].value_bytes == 16 * MiB


def test_hbm_question_in_portuguese_gets_the_figure_in_portuguese(assistant):
    r = ask(assistant, "Quanta memória HBM tem um chip TPU v6e?")
    assert r.language == "pt"
    assert r.answer.startswith("**v6e:** 32 GB de HBM por chip")
    assert "31.25 GiB" in r.answer and "medido aqui" in r.answer


def test_growth_question_names_oomkb_profile(assistant):
    r = ask(assistant, "How do I find which tensor grows every training step?")
    assert "oomkb profile FILE.py:FUNCTION --repeat 5" in r.answer
    assert r.next_steps[0].tool == "profile"


def test_runtime_error_with_traceback_gets_commands_with_the_users_names(assistant):
    r = ask(assistant, "Почему падает обучение?", error_log=TRACEBACK)
    assert r.language == "ru" and r.diagnosis.category == "runtime_allocation"
    assert "oomkb profile train.py:train_step --repeat 5" in r.answer
    assert "oomkb run train.py" in r.answer
    assert "Следующий шаг" in r.answer


def test_remedy_snippets_are_shown_once_with_their_steps(assistant):
    log = ("RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00M. "
           "That was not possible. There are 6.43M free.; (0x0x1_HBM0)")
    r = ask(assistant, "", error_log=log)
    assert r.remedies and all(x.snippet for x in r.remedies)
    for x in r.remedies:  # at most once; after the verdict, a general step's toy example is left out
        assert r.answer.count(x.snippet.splitlines()[-1]) == (1 if x.triggered_by_evidence or not r.verdict else 0)
    order = [r.answer.index(s) for s in ("### ", "```python", "oomkb profile", "### Sources")]
    assert order == sorted(order)


def test_off_topic_question_gets_no_figure_and_no_command(assistant):
    r = ask(assistant, "What is a good recipe for banana bread?")
    assert not r.grounded and r.figures == [] and r.next_steps == []
    assert "oomkb " not in r.answer


def test_figure_and_next_step_texts_keep_the_house_style():
    """The glossary, register and code-in-backticks rules of kb/editorial.py, applied to the
    texts of figures.yaml and next_steps.yaml as to the rest of the catalogue."""
    from oomkb.kb.editorial import Text, load_glossary, text_problems

    glossary = load_glossary()
    texts = [(f"figures message {k}", m.text) for k, m in FIGURES.data.messages.items()]
    texts += [(f"figures setting {s.name}", s.note) for s in FIGURES.data.settings]
    texts += [("next_steps heading", NEXT.data.heading)]
    texts += [(f"next_steps tool {t.id}", t.text) for t in NEXT.data.tools]
    problems = [p for where, by_lang in texts for lang, text in by_lang.items()
                for p in text_problems(Text(where=where, language=lang, text=text), glossary)]
    assert problems == []
