"""Conversations (issue 21 item 4) through the real app: a follow-up inherits the subject, the
evidence and what was tried from earlier turns, over REST (`conversation_id` kept server-side,
`history` for stateless clients) and Slack threads (signed requests); an OOM follow-up is never
"not covered", an off-topic question is still declined. The store's bounds (turn count, size,
expiry, callers) are tested on the store and through the app."""

from __future__ import annotations


import pytest
import yaml
from fastapi.testclient import TestClient
from slack_sdk import WebClient

from oomkb.api.core.assistant import Assistant
from oomkb.api.core.conversation import ConversationStore, UnknownConversation, merge
from oomkb.api.http.app import create_app
from oomkb.api.schemas import AskRequest, ConversationTurn
from oomkb.kb.remedies.rendering import message
from oomkb.settings import Settings
from tests.conftest import LOCAL, ROOT
from tests.api.test_slack import SECRET, TOKEN, block_text, mention, post_event
from tests.api.test_slack_threads import SlackWithThreads
from tests.api.test_web_browser import browser, page, server_url  # noqa: F401  (fixtures)

DATA = yaml.safe_load((ROOT / "tests/data/conversations.yaml").read_text(encoding="utf-8"))
OFFTOPIC = yaml.safe_load((ROOT / "tests/data/offtopic.yaml").read_text(encoding="utf-8"))["questions"]
CHAINS = DATA["chains"] + DATA["heldout"]
HBM_LOG = DATA["chains"][0]["turns"][0]["error_log"]


@pytest.fixture(scope="module")
def assistant(searcher):
    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant):
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL) as c:
        yield c


def _not_covered(assistant, language: str) -> str:
    return message(assistant.catalogue, "not_covered", language)


def _ask(client, body: dict, status: int = 200) -> dict:
    r = client.post("/v1/ask", json=body)
    assert r.status_code == status, r.text
    return r.json()


# ------------------------------------------------------------------ REST, conversation_id


@pytest.mark.parametrize("chain", CHAINS, ids=[f"{c['lang']}-{n}" for n, c in enumerate(CHAINS)])
def test_every_follow_up_of_a_chain_is_answered_in_its_language_never_as_not_covered(
        client, assistant, chain):
    first = chain["turns"][0]
    body = {"question": first["q"], **({"error_log": first["error_log"]} if "error_log" in first else {})}
    answer = _ask(client, body)
    cid = answer["conversation_id"]
    assert answer["follow_up"] is False and len(cid) == 32
    for turn in chain["turns"][1:]:
        answer = _ask(client, {"question": turn["q"], "conversation_id": cid})
        assert answer["conversation_id"] == cid
        assert answer["follow_up"] is True, turn["q"]
        assert answer["grounded"] is True, (turn["q"], answer["answer"])
        assert answer["language"] == chain["lang"], turn["q"]
        assert _not_covered(assistant, chain["lang"]) not in answer["answer"]
        assert answer["citations"], turn["q"]
        for name in turn.get("inherits", []):
            assert name in answer["inherited"], turn["q"]
        if "error_log" in turn.get("inherits", []):  # the figures of the first turn's log
            assert answer["diagnosis"]["category"] != "unknown"
            diagnosed = _ask(client, {"question": "", "error_log": first["error_log"]})["diagnosis"]
            assert answer["diagnosis"] == diagnosed
        assert set(turn.get("tried", [])) <= set(answer["tried"]), turn["q"]


def test_the_padding_question_with_the_users_numbers_is_covered_and_cites_the_padding_section(client):
    q = DATA["heldout"][0]["turns"][0]["q"]
    answer = _ask(client, {"question": q})
    assert answer["grounded"] is True
    assert any(c["citation"] == "e1000-compile-hbm-oom#scenario-3c-padding" for c in answer["citations"])


def test_a_follow_up_asking_for_the_code_gets_the_code_for_what_the_turn_before_was_about(client):
    # a training state, then "and with the moments on the host?", then "how do I switch that on?":
    # the code that puts the optimizer state in host memory, not the first turn's subject again
    cid = _ask(client, {"question": "Llama 8B, AdamW fp32, FSDP on a v5e-64: how much HBM per chip for the "
                                    "params and optimizer state?"})["conversation_id"]
    _ask(client, {"question": "and if I offload mu and nu to host memory, what is left per chip?",
                  "conversation_id": cid})
    code = _ask(client, {"question": "ok, how do I switch that on? exact code please", "conversation_id": cid})
    assert "pinned_host" in code["answer"] and "```python" in code["answer"], code["answer"]
    # inference over a whole dataset at once, then "the code so it runs in batches": the chunked map
    cid = _ask(client, {"question": "inference over the whole eval set at once OOMs on my A100 with jax"})["conversation_id"]
    chunks = _ask(client, {"question": "give me the code so it runs in batches", "conversation_id": cid})
    assert "jax.lax.map" in chunks["answer"] and "```python" in chunks["answer"], chunks["answer"]


def test_a_follow_up_asking_for_the_code_gets_the_kernel_limit_computed_from_the_changed_blocks(client):
    # a kernel's VMEM, then one block changed, then "the code for it": the code holds the changed block
    cid = _ask(client, {"question": "Pallas w8a8 matmul auf v5e: batch_block 512, in_block 1024, out_block 1024, "
                                    "x in bf16, w int8, out bf16, acc int32 in scratch. Wie viel VMEM?"})["conversation_id"]
    second = _ask(client, {"question": "und mit out_block auf 4096, passt das noch ins Default-Limit?",
                           "conversation_id": cid})
    blocks = [f for f in second["figures"] if f["subject"] == "pallas_blocks"]
    # 2 × (1 + 4 + 4) MiB + 8 MiB accumulator = 26 MiB, over v5e's 16 MiB
    assert blocks and blocks[0]["value_bytes"] == 26 << 20, second["answer"]
    third = _ask(client, {"question": "gib mir bitte den genauen Code dafür, mit etwas Puffer",
                          "conversation_id": cid})
    code = [f["snippet"] for f in third["figures"] if f["subject"] == "pallas_blocks" and f["snippet"]]
    assert code and "bm, bk, bn = 512, 1024, 4096" in code[0] and "jnp.int8" in code[0], third["answer"]
    assert "bm, bk, bn = 512, 1024, 4096" in third["answer"]


def test_a_follow_up_with_its_own_answer_gets_it_beside_the_earlier_arithmetic(client):
    # (held-out round 70: "which memory_stats() values matter, what should bytes_limit show at .98?" after
    # the pool's shares got the first turn's lines again, word for word)
    cid = _ask(client, {"question": "our training sets XLA_PYTHON_CLIENT_MEM_FRACTION=0.98 on an H100 80GB. how much "
                                    "does JAX reserve per GPU compared to the default, and what is left?"})["conversation_id"]
    second = _ask(client, {"question": "after init we print memory_stats(). which values matter and what should "
                                       "bytes_limit show at 0.98?", "conversation_id": cid})
    assert second["follow_up"] and "The keys of `jax.local_devices()[0].memory_stats()` that matter" in second["answer"], \
        second["answer"]


def test_a_follow_up_asking_for_the_saving_in_percent_gets_it_from_every_turns_figures_first(client):
    # a drop measured on two slices beside their baselines, then a third measured from → to, and the
    # saving asked in %: each one's percentage and new value lead, not the slices' chip counts again
    cid = _ask(client, {"question": "we switched maxtext to the nested block scan with per-sub-layer remat. "
                                    "per-device memory dropped by 5.129 GB on v5p-128 and by 5.105 GB on tpu7x-64, "
                                    "even though the baselines were different (16.16 GB vs 19.81 GB). why the same "
                                    "saving?"})["conversation_id"]
    r = _ask(client, {"question": "ok. on v5p-512 it went from 11.99 GB to 6.74 GB. can you give me the saving in % "
                                  "for all three and the new per-device numbers?", "conversation_id": cid})
    first = r["answer"].split("\n", 1)[0]
    assert "v5p-128: 16.16 GB → 11.031 GB" in first and "(−31.7 %)" in first, r["answer"]
    assert "tpu7x-64: 19.81 GB → 14.705 GB" in first and "(−43.8 %)" in first, r["answer"]
    assert "counts TensorCores" not in r["answer"], r["answer"]
    # a later turn asking another figure does not get the percentages again
    third = _ask(client, {"question": "roughly how big is one sub-layer's gathered expert kernel per device then?",
                          "conversation_id": cid})
    assert "(−31.7 %)" not in third["answer"], third["answer"]


@pytest.mark.parametrize("question", [
    "How do I add padding to a div in CSS?", "패딩 세탁은 어떻게 하나요?",  # a padded jacket
    "CSS 的 padding 和 margin 有什么区别？",
])
def test_padding_of_other_things_is_still_declined(client, question):
    assert _ask(client, {"question": question})["grounded"] is False


def test_the_same_follow_up_in_a_new_conversation_has_no_inherited_evidence(client):
    answer = _ask(client, {"question": "still OOM after reducing batch size, what next?"})
    assert answer["follow_up"] is False and answer["inherited"] == [] and answer["diagnosis"] is None


@pytest.mark.parametrize("item", OFFTOPIC, ids=[f"{it['lang']}-{n}" for n, it in enumerate(OFFTOPIC)])
def test_an_off_topic_question_is_declined_new_and_inside_an_oom_conversation(client, assistant, item):
    answer = _ask(client, {"question": item["q"]})
    assert answer["grounded"] is False, item["q"]
    cid = _ask(client, {"question": "my jax step OOMs on TPU", "error_log": HBM_LOG})["conversation_id"]
    answer = _ask(client, {"question": item["q"], "conversation_id": cid})
    assert answer["grounded"] is False and answer["follow_up"] is False, item["q"]
    assert answer["diagnosis"] is None and answer["remedies"] == []


def test_an_off_topic_conversation_does_not_make_its_follow_up_covered(client):
    cid = _ask(client, {"question": "How do I bake sourdough bread at home?"})["conversation_id"]
    answer = _ask(client, {"question": "and now what?", "conversation_id": cid})
    assert answer["grounded"] is False


# ------------------------------------------------------------------ REST, history


def test_history_from_a_stateless_client_gives_the_same_inheritance_without_server_state(client):
    before = len(client.app.state.conversations)
    answer = _ask(client, {"question": "Batchgröße halbiert, immer noch OOM. Was jetzt?",
                           "history": [{"question": "mein Schritt kompiliert nicht", "error_log": HBM_LOG}]})
    assert answer["follow_up"] is True and answer["grounded"] is True and answer["language"] == "de"
    assert answer["inherited"] == ["error_log"] and "4.35 GiB" in answer["answer"]
    assert answer["conversation_id"] is None and len(client.app.state.conversations) == before


def test_history_sent_with_a_conversation_id_follows_the_stored_turns(client):
    cid = _ask(client, {"question": "my jax step OOMs on TPU"})["conversation_id"]
    answer = _ask(client, {"question": "what next?", "conversation_id": cid,
                           "history": [{"question": "it fails to compile", "error_log": HBM_LOG}]})
    assert answer["inherited"] == ["error_log"] and answer["conversation_id"] == cid
    assert _ask(client, {"question": "and now?", "conversation_id": cid})["inherited"] == []


def test_bad_conversation_input_is_a_clear_client_error(client):
    r = client.post("/v1/ask", json={"question": "x", "conversation_id": "not-an-id"})
    assert r.status_code == 422
    r = client.post("/v1/ask", json={"question": "x", "history": [{"question": "a"}] * 9})
    assert r.status_code == 422
    r = client.post("/v1/ask", json={"question": "x", "conversation_id": "f" * 32})
    assert r.status_code == 404 and "conversation_id" in r.json()["detail"]


def test_a_conversation_is_never_shared_with_another_caller(assistant):
    app = create_app(Settings(), assistant)
    with TestClient(app, base_url=LOCAL, client=("10.0.0.1", 5000)) as alice, \
            TestClient(app, base_url=LOCAL, client=("10.0.0.2", 5000)) as mallory:
        cid = _ask(alice, {"question": "my step OOMs", "error_log": HBM_LOG})["conversation_id"]
        r = mallory.post("/v1/ask", json={"question": "what next?", "conversation_id": cid})
        assert r.status_code == 404
        assert "4.35 GiB" not in r.text
        assert _ask(alice, {"question": "what next?", "conversation_id": cid})["inherited"] == ["error_log"]


def test_openapi_documents_conversations(client):
    spec = client.get("/openapi.json").json()
    ask = spec["components"]["schemas"]["AskRequest"]["properties"]
    assert "conversation_id" in ask and "history" in ask
    assert "ConversationTurn" in spec["components"]["schemas"]
    assert "conversation_id" in spec["components"]["schemas"]["AskResponse"]["properties"]
    assert "404" in spec["paths"]["/v1/ask"]["post"]["responses"]


# ------------------------------------------------------------------ the store's bounds


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_store_keeps_the_last_turns_only():
    store = ConversationStore(max_turns=3)
    cid = store.start("a")
    for n in range(5):
        store.add(cid, "a", ConversationTurn(question=f"q{n}"))
    assert [t.question for t in store.turns(cid, "a")] == ["q2", "q3", "q4"]


def test_store_bounds_a_conversations_size_and_each_turns_log():
    store = ConversationStore(max_chars=1_000)
    cid = store.start("a")
    for n in range(4):
        store.add(cid, "a", ConversationTurn(question=f"q{n}", error_log="x" * 400))
    kept = store.turns(cid, "a")
    assert sum(len(t.question) + len(t.error_log) for t in kept) <= 1_000 and kept[-1].question == "q3"
    store.add(cid, "a", ConversationTurn(question="big", error_log="y" * 300_000 + HBM_LOG))
    last = store.turns(cid, "a")[-1]
    assert len(last.error_log) == 200_000 and last.error_log.endswith(HBM_LOG)


def test_store_expires_conversations_and_bounds_their_number():
    clock = Clock()
    store = ConversationStore(max_conversations=2, ttl_s=60, clock=clock)
    old = store.start("a")
    clock.now = 61
    with pytest.raises(UnknownConversation):
        store.turns(old, "a")
    first, second, third = store.start("a"), store.start("a"), store.start("a")
    assert len(store) == 2
    with pytest.raises(UnknownConversation):
        store.turns(first, "a")
    assert store.turns(second, "a") == [] and store.turns(third, "a") == []


def test_store_refuses_another_owner_as_if_the_id_did_not_exist():
    store = ConversationStore()
    cid = store.start("a")
    with pytest.raises(UnknownConversation) as exc:
        store.add(cid, "b", ConversationTurn(question="x"))
    assert exc.value.http_status == 404
    assert store.turns(cid, "a") == []


def test_merge_inherits_the_most_recent_evidence_and_keeps_the_new_turns_own():
    turns = [ConversationTurn(question="first", error_log="old log"),
             ConversationTurn(question=f"second {HBM_LOG}")]
    effective, context = merge(turns, AskRequest(question="what next?"))
    assert effective.error_log == f"second {HBM_LOG}" and context.inherited == ["error_log"]
    assert context.subject.endswith(f"second {HBM_LOG}"[:600])
    own, _ = merge(turns, AskRequest(question="this one", error_log="mine"))
    assert own.error_log == "mine"


@pytest.mark.parametrize("text, rid", [
    ("still OOM after reducing batch size", "hbm-batch-size"),
    ("Batchgröße halbiert, immer noch OOM", "hbm-batch-size"),
    ("Уменьшил батч, всё равно падает", "hbm-batch-size"),
    ("Já ativei donate_argnums e ainda dá erro", "hbm-donate"),
])
def test_what_a_follow_up_says_was_tried_comes_from_the_question_analysis(text, rid):
    _, context = merge([ConversationTurn(question="compile OOM on v5e")], AskRequest(question=text))
    assert rid in context.tried


# ------------------------------------------------------------------ Slack threads

THREAD = "1700000500.000100"


@pytest.fixture(scope="module")
def slack_api():
    stand_in = SlackWithThreads()
    yield stand_in
    stand_in.server.shutdown()


@pytest.fixture(scope="module")
def slack_client(assistant, slack_api):
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET, slack_bot_user_id="U0BOT")
    app = create_app(settings, assistant, slack_client=WebClient(base_url=slack_api.url))
    with TestClient(app, base_url=LOCAL) as c:
        yield c


def _message(text: str, ts: str, user: str = "U0ASKER", **more) -> dict:
    return {"type": "message", "user": user, "text": text, "ts": ts, "thread_ts": THREAD, **more}


@pytest.mark.parametrize("chain", [c for c in CHAINS if "error_log" not in c["turns"][0]][:4],
                         ids=lambda c: c["lang"])
def test_a_reply_in_a_slack_thread_sees_the_threads_earlier_turns(slack_client, slack_api, assistant, chain):
    slack_api.reset()
    first, follow = chain["turns"][0]["q"], chain["turns"][1]["q"]
    slack_api.threads[THREAD] = [
        _message(f"<@U0BOT> {first}", THREAD),
        _message("an earlier answer", "1700000500.000200", user="U0BOT", bot_id="B0BOT"),
        _message(f"<@U0BOT> {follow}", "1700000500.000300"),
    ]
    r = post_event(slack_client, mention(follow, ts="1700000500.000300", thread_ts=THREAD))
    assert r.status_code == 200
    posted = slack_api.wait_for_post()
    text = block_text(posted["blocks"])
    assert posted["thread_ts"] == THREAD
    assert _not_covered(assistant, chain["lang"]) not in text, text
    assert "`" in text and "#" in text  # cites a guide section


def test_a_slack_follow_up_inherits_the_log_pasted_earlier_in_the_thread(slack_client, slack_api):
    slack_api.reset()
    slack_api.threads[THREAD] = [
        _message(f"<@U0BOT> my step fails ```{HBM_LOG}```", THREAD),
        _message("<@U0BOT> still OOM after reducing batch size, what next?", "1700000500.000400"),
    ]
    post_event(slack_client, mention("still OOM after reducing batch size, what next?",
                                     ts="1700000500.000400", thread_ts=THREAD))
    text = block_text(slack_api.wait_for_post()["blocks"])
    assert "4.35 GiB" in text and "e1000-compile-hbm-oom" in text, text


# ------------------------------------------------------------------ the web page, in Chromium


@pytest.mark.slow
def test_the_web_page_keeps_its_conversation_and_sends_it(page):
    q, a = "document.getElementById('question')", "document.getElementById('answer')"
    page.type_into("#question", "my jax training on v5e dies at compile time")
    page.type_into("#error-log", HBM_LOG)
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("document.body.dataset.turns === '1'")
    assert page.evaluate(f"{a}.dataset.followUp") == "false"
    page.evaluate(f"{q}.value = ''; document.getElementById('error-log').value = ''")
    page.type_into("#question", "still OOM after reducing batch size, what next?")
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("document.body.dataset.turns === '2'")
    assert page.evaluate(f"{a}.dataset.followUp") == "true"
    assert page.evaluate(f"{a}.dataset.grounded") == "true"
    assert "4.35 GiB" in page.evaluate(f"{a}.innerText")  # the first turn's log, inherited
    assert "2 earlier questions" in page.evaluate("document.getElementById('conversation-meta').textContent")
    page.evaluate("document.getElementById('new-conversation').click()")
    assert page.evaluate("document.body.dataset.turns") == "0"
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("document.body.dataset.turns === '1'")
    assert page.evaluate(f"{a}.dataset.followUp") == "false"
    assert "4.35 GiB" not in page.evaluate(f"{a}.innerText")
    assert page.exceptions() == []


# ------------------------------------------------------------------ GPU pool settings asked for


def test_a_follow_up_asking_for_the_flag_gets_the_setting_of_the_earlier_turn(client):
    """hi: "why does JAX grab 75% of my GPU?" then "how do I switch that off, which variable?"."""
    first = _ask(client, {"question": "JAX शुरू होते ही मेरे GPU की 75% मेमोरी क्यों पकड़ लेता है?"})
    # the short answer about the pool ("not a leak: 75% at the first operation") first, then the setting's line
    assert first["grounded"] is True and first["answer"].startswith("यह लीक नहीं है")
    assert "**XLA_PYTHON_CLIENT_MEM_FRACTION**" in first["answer"]
    assert "jax.checkpoint" not in first["answer"]  # no remedy guessed from the question's meaning
    answer = _ask(client, {"question": "इसे कैसे बंद करें? कौन सा flag लगाना होगा?",
                           "conversation_id": first["conversation_id"]})
    assert answer["follow_up"] is True and answer["grounded"] is True and answer["language"] == "hi"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in answer["answer"]


@pytest.mark.parametrize("language, question, wanted", [
    ("pt", "qual env var desliga a pré-alocação da GPU no JAX?", "XLA_PYTHON_CLIENT_PREALLOCATE=false"),
    ("ja", "XLA_PYTHON_CLIENT_ALLOCATOR を platform にすると何が変わりますか", "BFC"),
    ("de", "Welches XLA-Flag schreibt das Buffer-Assignment meines jit-Programms in Dateien?", "--xla_dump_to="),
])
def test_a_setting_asked_about_is_the_first_line(client, language, question, wanted):
    answer = _ask(client, {"question": question})
    assert answer["grounded"] is True and answer["language"] == language
    first = answer["answer"].split("\n\n")[0]
    assert wanted in first, first


def test_a_follow_up_naming_a_python_api_the_guides_lack_is_still_answered(client):
    cid = _ask(client, {"question": "Pourquoi la mémoire GPU ne redescend pas quand je supprime mes "
                                    "tableaux JAX ?"})["conversation_id"]
    answer = _ask(client, {"question": "Et gc.collect() ou jax.clear_caches(), ça sert à quelque chose ?",
                           "conversation_id": cid})
    assert answer["follow_up"] is True and answer["grounded"] is True and answer["language"] == "fr"


def test_a_greeting_that_opens_a_question_does_not_take_it_out_of_scope():
    from oomkb.api.core.conversation import without_greeting
    assert without_greeting("hello, how do I stop jax grabbing all gpu memory?").startswith("how do I stop")
    assert without_greeting("大佬们 我用 jax.jit") == "我用 jax.jit"
    assert without_greeting("history of jax memory") == "history of jax memory"  # not a greeting
    assert without_greeting("hello") == "hello"  # nothing would be left


# ------------------------------------------------------------------ nothing said twice


def test_a_follow_up_does_not_repeat_the_earlier_answer_and_says_so_when_it_has_nothing_new(client, assistant):
    first = _ask(client, {"question": "my lax.scan over 10000 steps returns the whole state as ys and OOMs "
                                      "on an A100, why?"})
    assert first["answer"].count("```") == 2  # the short answer and its code
    again = _ask(client, {"question": "and why is that?", "conversation_id": first["conversation_id"]})
    assert again["grounded"] and "```" not in again["answer"]
    assert again["answer"].startswith(message(assistant.catalogue, "nothing_new", "en"))
    assert "From the guides" not in again["answer"]  # no passages found by three words
    # asked for, the code is shown again
    code = _ask(client, {"question": "show me the code again", "conversation_id": first["conversation_id"]})
    assert code["answer"].count("```") == 2


def test_a_follow_up_asking_a_figure_of_a_logged_failure_gets_neither_its_diagnosis_nor_its_steps_again(client, assistant):
    # (held-out round 72: keypoint-moseq on Colab; the second and third turns were the first again, word for word)
    log = "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 16381782600 bytes."
    first = _ask(client, {"question": "Uso keypoint-moseq en Colab Pro y al ajustar el modelo completo me sale esto. ¿qué hago?",
                          "error_log": log})
    assert "**Diagnóstico:**" in first["answer"] and "### Qué hacer" in first["answer"]
    second = _ask(client, {"question": "y segun la regla de la FAQ de ~1 MB por cada 100 frames, ¿cuánta memoria de GPU "
                                       "necesitaría? ¿y si uso set_mixed_map_iters(4)?",
                           "conversation_id": first["conversation_id"]})
    assert second["grounded"] and second["language"] == "es" and second["inherited"] == ["error_log"]
    assert "**Diagnóstico:**" not in second["answer"] and "### Qué hacer" not in second["answer"], second["answer"]
    assert second["answer"].startswith(message(assistant.catalogue, "nothing_new_after_log", "es"))
    # asking what next on the same log still gets the steps: they are the answer to that
    then = _ask(client, {"question": "sigue fallando, ¿qué hago ahora?", "conversation_id": first["conversation_id"]})
    assert "### Qué hacer" in then["answer"]


def test_the_limit_a_follow_up_asks_to_set_goes_into_the_kernel_code_not_the_one_the_log_computed(client):
    # (held-out round 72) after a VMEM log whose need rounds up to 24 MiB, the asker wants 64 MiB after all
    log = "Scoped allocation with size 22.50M and limit 16.00M exceeded scoped vmem limit by 6.50M"
    first = _ask(client, {"question": "Mein fused MLP Pallas-Kernel auf Colab v5e bricht beim Kompilieren so ab. Was tun?",
                          "error_log": log})
    assert "vmem_limit_bytes=25165824" in first["answer"]
    then = _ask(client, {"question": "und falls ich das Limit doch auf 64 MiB hochsetzen will: wie sieht das genau in "
                                     "meinem pallas_call aus?", "conversation_id": first["conversation_id"]})
    assert "vmem_limit_bytes=64 * 1024 * 1024" in then["answer"], then["answer"]


def test_a_thread_message_the_bot_answered_is_said_and_one_nobody_asked_about_is_not():
    from oomkb.api.http.slack_evidence import SlackEvidence

    class Replies:
        def conversations_replies(self, channel, ts, limit):
            return {"messages": [
                {"ts": "1.0", "user": "U1", "text": "first, a log nobody asked the bot about"},
                {"ts": "2.0", "user": "U1", "text": "<@UBOT> what does this mean?"},
                {"ts": "3.0", "user": "UBOT", "bot_id": "B1", "text": "the bot's answer"},
                {"ts": "4.0", "user": "U1", "text": "<@UBOT> and now?"}]}

    earlier = SlackEvidence("xoxb-test", "UBOT")._thread(Replies(), "C1", "1.0", "4.0")
    assert [(m["ts"], m["_answered"]) for m in earlier] == [("1.0", False), ("2.0", True)]


def test_a_follow_up_does_not_get_the_same_sharding_code_under_another_answer_s_name(client):
    # pmap's answer shows the FSDP code; the follow-up that did it and asks about MultiSteps gets its cost
    first = _ask(client, {"question": "fine-tuning 2.7B with pmap on a v4-8 (4 chips), adamw fp32, OOM before step 1. "
                                      "isn't 30 GB per chip enough?"})
    assert "NamedSharding" in first["answer"] and "40.23 GiB" in first["answer"]
    second = _ask(client, {"question": "ok switched to jit + NamedSharding with params and opt state sharded over the 4 "
                                       "chips (fsdp) and it runs. how much extra HBM per chip will optax.MultiSteps(k=4) "
                                       "cost?", "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and "2.51 GiB" in second["answer"]  # 2.7e9 × 4 B / 4 chips
    assert "FSDP in JAX is a choice of shardings" not in second["answer"]


def test_how_much_slower_after_offloading_is_the_transfer_s_cost_and_how_do_i_do_that_is_the_code(client):
    first = _ask(client, {"question": "v5e-16 で 7B を FSDP で学習中。activation を host に offload するにはどう書けばいいですか？"})
    assert first["language"] == "ja" and "pinned_host" in first["answer"]
    slower = _ask(client, {"question": "それで step はどれくらい遅くなりますか？", "conversation_id": first["conversation_id"]})
    assert slower["follow_up"] and "PCIe 4.0 x16" in slower["answer"] and "XProf" in slower["answer"]
    assert "104.31 GiB" not in slower["answer"]  # not the model's state again
    # "and how do I do it right?" after a short answer with code: that code
    leak = _ask(client, {"question": "my JAX training on a 4090 keeps growing; I do losses.append(loss) every step"})
    code = _ask(client, {"question": "and how do I do that right?", "conversation_id": leak["conversation_id"]})
    assert "float(loss)" in code["answer"] and "```python" in code["answer"]


def test_a_verdict_given_on_a_log_is_not_given_again_to_a_follow_up_on_the_same_log(client):
    from tests.diagnostics.test_parse import HBM_REPORT_LOG  # arguments alone over the chip's HBM

    first = _ask(client, {"question": "why does this OOM?", "error_log": HBM_REPORT_LOG})
    assert first["verdict"]
    more = _ask(client, {"question": "hmm, anything else I should look at?", "conversation_id": first["conversation_id"]})
    assert f"**{first['verdict']}**" not in more["answer"]


def test_a_follow_up_finds_what_the_earlier_turn_showed_without_answering_it_again(searcher):
    from oomkb.api.core.conversation import turn_of

    fresh = Assistant(searcher)
    first = AskRequest(question="my lax.scan over 8000 steps returns its whole state as ys every step and OOMs, why?")
    answered = fresh.ask(first)
    fresh.ask = lambda *a, **k: (_ for _ in ()).throw(AssertionError("answered again"))  # noqa: E731
    kept = fresh._shown_before([turn_of(first)], answered.language)
    assert kept is not None and kept.code and kept.lines


def test_what_to_change_about_what_the_earlier_short_answer_covered_gets_that_answer_again(client, assistant):
    first = _ask(client, {"question": "v5p-64, 8 hosts: every Orbax checkpoint save gets the process oom-killed on "
                                      "the host (host RAM, not HBM). why?"})
    again = _ask(client, {"question": "ok so what can I change to reduce that?",
                          "conversation_id": first["conversation_id"]})
    assert again["grounded"]
    assert again["answer"].startswith(message(assistant.catalogue, "earlier_answer_again", "en"))
    assert "save_concurrent_gb" in again["answer"]


def test_a_follow_up_opened_with_a_continuation_word_asks_the_conversations_arithmetic_again(client):
    # "du coup combien de séquences max ?" was answered as a new, uncovered question
    first = _ask(client, {"question": "sur v5e-8 je veux servir llama 13B en bf16, batch 16, contexte 4096. "
                                      "le kv cache ça tient ?"})
    second = _ask(client, {"question": "du coup combien de séquences max en même temps ?",
                           "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and second["grounded"] and second["language"] == "fr"
    assert "au plus 32 séquences" in second["answer"] and "en tout" not in second["answer"]


def test_a_how_to_follow_up_after_arithmetic_opens_with_the_way_asked_for(client):
    first = _ask(client, {"question": "Можно ли обучить модель на 20B параметров на TPU v3-8? AdamW, веса fp32."})
    assert "298.02 GiB" in first["answer"]  # 20e9 × 16 B
    # the slice changes (the figures with it), but what is asked is how to start it
    follow = _ask(client, {"question": "Хорошо, беру v3-32 (4 хоста). Как запускать — один и тот же скрипт на "
                                       "всех хостах? Дай команды запуска.",
                           "conversation_id": first["conversation_id"]})
    assert follow["language"] == "ru" and follow["follow_up"]
    opening = follow["answer"].split("\n\n")[0]
    assert "--worker=all" in opening and "jax.distributed.initialize()" in opening
    assert "jax.distributed.initialize()" in follow["answer"].split("```python")[1]


def test_a_follow_up_asking_each_core_s_share_gets_the_conversation_s_arithmetic_again(client):
    # the weights of a 1.55B model on a v2-8 (an Arabic question), then "split over the 8 cores, each one's share?"
    cid = _ask(client, {"question": "كم تحتاج أوزان نموذج فيه 1.55 مليار معامل في fp32 على TPU v2-8؟"})["conversation_id"]
    second = _ask(client, {"question": "وإذا قسمتها على الـ8 cores، كم يصبح نصيب كل core؟", "conversation_id": cid})
    assert second["language"] == "ar" and "739.10 MiB" in second["answer"], second["answer"]


def test_a_kernel_s_shared_memory_asked_again_on_another_card_is_set_against_that_card(client):
    from tests.api.rest import ask_json

    first = ask_json(client, {"question": "Pallas Triton attention backward on an A100 fails to compile. GPU memory? "
                                          "how much is missing?",
                              "error_log": "RESOURCE_EXHAUSTED: Shared memory size limit exceeded: requested 203136, "
                                           "available: 166912"})
    assert "(35.38 KiB short)" in first["answer"]
    second = ask_json(client, {"question": "and on an H100, does the same config pass?",
                               "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and second["answer"].startswith(
        "**On the H100, a thread block may use up to 227.00 KiB of shared memory:**")
    assert "it fits, 28.63 KiB to spare" in second["answer"] or "28.63 KiB" in second["answer"]
    assert "75%" not in second["answer"]  # not JAX's pool on the card


def test_a_follow_up_changing_the_number_of_microbatches_gets_the_new_split_and_no_code_again(client):
    first = _ask(client, {"question": "Vou pré-treinar um ByT5 com o T5X numa TPU v3-8. Pensei em BATCH_SIZE = 1024 e "
                                      "trainer.num_microbatches = 16. Isso dá 64 exemplos por step, 8 por core, e ele "
                                      "atualiza o gradiente a cada 16 steps, certo?"})
    assert first["answer"].startswith("**Microbatches:** 1024 exemplos em 16 microbatches dão 64 por microbatch")
    assert "não uma vez a cada 16 steps" in first["answer"]
    second = _ask(client, {"question": "E se eu usar num_microbatches = 8? quantos exemplos por core por microbatch, "
                                       "e a memória de ativação dobra?", "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and second["language"] == "pt"
    assert "16 por dispositivo" in second["answer"] and "De 16 para 8 microbatches" in second["answer"]
    assert "```" not in second["answer"]  # no code was asked for: the earlier turn's code is not shown again


def test_a_follow_up_asking_for_two_pieces_of_code_gets_both(client):
    # the table's state first (2^24 × 1024 float32 with Adam over 64 chips: 4 GiB each), then "write me a
    # train_step with donation for my state, and a way to see which arrays are still alive on the device"
    first = _ask(client, {"question": "الجدول عندي 2^24 صف × 1024 بعد float32 ومعاه Adam (mu و nu)، كله متقسم على "
                                      "الـ64 chip في TPU v4-128. كم ياخذ لكل chip؟ ولو ما سويت donation للـ state كم يزيد؟"})
    assert "4.00 GiB" in first["answer"] and "3.00 GiB" in first["answer"]
    second = _ask(client, {"question": "اكتب لي train_step مع donation يناسب الـ state حقي، وطريقة أشوف فيها أي arrays "
                                       "لسا عايشة على الجهاز", "conversation_id": first["conversation_id"]})
    assert second["language"] == "ar" and second["follow_up"]
    blocks = second["answer"].split("```python")[1:]
    assert any("donate_argnums" in b for b in blocks) and any("jax.live_arrays()" in b for b in blocks)


def test_a_configuration_asked_for_that_the_earlier_answer_already_holds_is_not_given_again_word_for_word(client, assistant):
    first = _ask(client, {"question": "Je lance avec launchpad un learner + des acteurs sur une seule A100 40GB. Les process "
                                      "ont XLA_PYTHON_CLIENT_MEM_FRACTION=.2 et XLA_PYTHON_CLIENT_PREALLOCATE=false. Du coup "
                                      "avec preallocate=false chaque process peut prendre ce qu'il veut non ?"})
    assert "**XLA_PYTHON_CLIENT_PREALLOCATE**" in first["answer"]
    third = _ask(client, {"question": "Écris-moi la config launchpad (PythonProcess env) pour mon setup.",
                          "conversation_id": first["conversation_id"]})
    assert third["follow_up"] and third["grounded"] and third["language"] == "fr"
    assert "**XLA_PYTHON_CLIENT_PREALLOCATE**" not in third["answer"]  # not the same paragraph again
    said = [message(assistant.catalogue, key, "fr")[:40] for key in ("same_as_before", "nothing_new")]
    assert third["answer"].startswith(tuple(said)), third["answer"]


def test_a_command_asked_for_after_a_maxtext_conversation_carries_the_settings_it_stated(client):
    # gemma2-2b on a v5e-8: the logits (4 × 8192 × 256128 × 4 B = 31.27 GiB) without being named, then one
    # vocabulary tile (2048 tokens: 1.95 GiB), then "the train command for my setup"
    first = _ask(client, {"question": "MaxText로 gemma2-2b (vocab_size 256128) 를 v5e-8에서 per_device_batch_size=4, "
                                      "max_target_length=8192 로 학습하려는데 컴파일에서 HBM OOM 나요. 뭐가 이렇게 먹는 거죠?"})
    assert "31.27 GiB" in first["answer"]
    cid = first["conversation_id"]
    second = _ask(client, {"question": "num_vocab_tiling=16 으로 하면 logits 타일 하나가 얼마나 돼요?", "conversation_id": cid})
    assert "1.95 GiB" in second["answer"] and "2048" in second["answer"]
    third = _ask(client, {"question": "그럼 제 설정 그대로 돌릴 train 커맨드 좀 써주세요", "conversation_id": cid})
    assert third["language"] == "ko" and third["follow_up"]
    code = third["answer"].split("```bash")[1]
    for setting in ("python3 -m MaxText.train", "model_name=gemma2-2b", "per_device_batch_size=4",
                    "max_target_length=8192", "num_vocab_tiling=16"):
        assert setting in code, code
    assert "31.27 GiB" not in third["answer"]  # the figures already given are not repeated under it


def test_code_named_in_a_follow_up_is_given_for_the_slice_it_names_not_the_earlier_arithmetic_s_code(client):
    first = _ask(client, {"question": "our train_step dies with CompileTimeHbmOom on v4-8, global batch 512 x seq 4096, "
                                      "the biggest buffer is bf16[2097152,1024]. the same config is fine on v5p-8."})
    third = _ask(client, {"question": "can u give me a snippet that AOT-compiles our jitted train_step(state, batch) for "
                                      "the v4-8 mesh and prints the per-device memory, so we know before burning a retry?",
                          "conversation_id": first["conversation_id"]})
    code = third["answer"].split("```python")[1]
    assert 'get_topology_desc("v4:2x2x1", "tpu")' in code and "memory_analysis()" in code
    assert "v5e:2x2" not in third["answer"] and "make((2097152, 1024)" not in third["answer"]


def test_the_topology_named_for_deviceless_compiles_follows_the_slice():
    from oomkb.kb.sizing import load_sizing
    sizing = load_sizing()
    names = {t: sizing.topology_named(f"on a {t}") for t in ("v4-8", "v4-32", "v5e-8", "v5p-8", "v6e-64", "v3-8")}
    assert names == {"v4-8": "v4:2x2x1", "v4-32": "v4:2x2x4", "v5e-8": "v5e:2x4", "v5p-8": "v5p:2x2x1",
                     "v6e-64": "v6e:8x8", "v3-8": "v3:2x2"}
    assert sizing.topology_named("v4-8 and v5e-8") is None  # two slices: none chosen


def test_a_figure_asked_in_a_follow_up_that_the_conversation_cannot_give_is_said_so_not_answered_by_a_repeat(client, assistant):
    first = _ask(client, {"question": "Servus, NTK mit neural_tangents für MNIST auf zwei RTX 3090 mit je 24G. Zwei Karten = "
                                      "48G sollten doch locker reichen??"})
    assert any(f["subject"] == "gpus_not_pooled" for f in first["figures"])  # the cards' memory does not add up
    second = _ask(client, {"question": "ok. und wenn ich erstmal nur 20000 train-beispiele nehm — wie groß sind dann "
                                       "k_train_train und ein einzelner block?", "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and second["language"] == "de"
    assert second["answer"].startswith(message(assistant.catalogue, "figure_not_computed", "de")[:40])
    assert "zusammengelegt" not in second["answer"]  # the earlier answer is not pasted again


def test_a_solve_s_saved_states_are_sized_turn_by_turn_and_its_code_is_given_when_asked(client):
    first = _ask(client, {"question": "Wave simulator in diffrax: y0 is a tuple (u, v), each float32 of shape (256,256,256), "
                                      "4000 steps, backprop with RecursiveCheckpointAdjoint and checkpoints=4000. How much "
                                      "memory do I need on an A100 80GB?"})
    assert "= 500.00 GiB" in first["answer"]
    cid = first["conversation_id"]
    second = _ask(client, {"question": "and with checkpoints=300? what is the most that fits if I leave 10 GiB free?",
                           "conversation_id": cid})
    assert "= 37.50 GiB" in second["answer"] and "at most 400 fit" in second["answer"]
    third = _ask(client, {"question": "give me the code for that", "conversation_id": cid})
    assert "diffrax.RecursiveCheckpointAdjoint(checkpoints=" in third["answer"] and "max_steps=" in third["answer"]


def test_the_launch_script_asked_after_the_fraction_was_worked_out_carries_that_fraction(client):
    # (round 62: "write me the top of the launch script" got the notebook cell with .5, after a turn about
    # letting each GPU spill 96 GB into host RAM)
    first = _ask(client, {"question": "on our nvidia boxes big jobs spill into host RAM with TF_FORCE_UNIFIED_MEMORY=1 "
                                      "and XLA_PYTHON_CLIENT_MEM_FRACTION > 1. can jax do that on our A100 40GB nodes?"})
    second = _ask(client, {"question": "ok so I want each GPU to be able to go ~96 GB past its memory. the node has 256 GB "
                                       "RAM and 4 GPUs. what fraction do I set, and does the host RAM even add up?",
                           "conversation_id": first["conversation_id"]})
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=2.44` in each process" in second["answer"]
    third = _ask(client, {"question": "write me the top of the launch script with the env vars + a one-liner to check "
                                      "the allocator actually picked up the bigger limit",
                          "conversation_id": first["conversation_id"]})
    assert third["follow_up"] and 'os.environ["TF_FORCE_UNIFIED_MEMORY"] = "1"' in third["answer"]
    assert 'os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "2.44"' in third["answer"]
    assert '"3.2"' not in third["answer"] and '= ".5"' not in third["answer"]
