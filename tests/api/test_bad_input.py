"""Bad input, through the real service (model, index, assistant) and the real command line.

Whatever a caller sends — blank or huge questions, oversized bodies, invalid UTF-8, NUL bytes,
JSON nested a hundred thousand deep, wrong types, made-up language codes, ten-megabyte logs,
markup meant to be run or to ping a channel — the answer is a clear 4xx with a JSON `detail`, or
a correct answer. Never a 500, never a traceback, and never the caller's markup live in the web
page or in Slack.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from slack_sdk import WebClient
from typer.testing import CliRunner

from oomkb.api.http.app import create_app
from oomkb.api.http.holder import AssistantHolder
from oomkb.settings import Settings
from oomkb.api.http.slack import SlackBot, answer_blocks, markdown_to_mrkdwn
from tests.conftest import LOCAL
from tests.api.test_slack import SECRET, TOKEN, SlackStandIn, block_text, mention, post_event
from tests.api.test_web_browser import browser, page, server_url  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
RUNTIME_ERROR = ("ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                 "allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)")
# Markup of every kind a renderer could act on: HTML, a script link, a web link, Slack mentions
# and an entity, plus Markdown emphasis.
INJECTION = ("<script>alert(1)</script> <img src=x onerror=window.__xss=1> [click](javascript:alert(1)) "
             "[win a prize](https://evil.example/x) <!channel> <@U123> *bold* &amp;")


def vmem_log(custom_call_target: str) -> str:
    """A scoped-VMEM compile error whose kernel target (text the answer repeats) is chosen."""
    return (
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\n"
        "Ran out of memory in memory space vmem while allocating on stack for %gmm.1 = "
        f'f32[16384,512]{{1,0:T(8,128)}} custom-call(%p0.1, %p1.2), custom_call_target="{custom_call_target}", '
        'metadata={op_name="jit(gmm)/pallas_call" stack_frame_id=7}.\n'
        "Scoped allocation with size 18.00M and limit 16.00M exceeded scoped vmem limit by 2.00M.\n"
    )


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant):
    with TestClient(create_app(Settings(), assistant), raise_server_exceptions=False, base_url=LOCAL) as c:
        yield c


def refused(response, status: int) -> str:
    """Assert a clear refusal: this status, a JSON `detail` sentence, no internals; return it."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert isinstance(detail, str) and len(detail) > 10
    assert "Traceback" not in response.text and 'File "' not in response.text
    return detail


def answered(response) -> dict:
    assert response.status_code == 200, response.text[:500]
    return response.json()


def post_raw(client, path: str, body: bytes):
    return client.post(path, content=body, headers={"Content-Type": "application/json"})


# ------------------------------------------------------------------ blank and huge questions


@pytest.mark.parametrize("question", ["", "   ", "\n\t\r", "\u00a0\u3000\u2003"],
                         ids=["empty", "spaces", "newlines-and-tabs", "unicode-spaces"])
def test_a_blank_question_without_a_log_is_a_400_asking_for_one(client, question):
    detail = refused(client.post("/v1/ask", json={"question": question}), 400)
    assert "ask a question" in detail


def test_a_question_of_100k_characters_is_a_422_naming_the_limit(client):
    detail = refused(client.post("/v1/ask", json={"question": "HBM out of memory " * 5600}), 422)
    assert detail.startswith("invalid request: question:") and "20000" in detail


def test_a_question_at_the_20k_character_limit_is_answered(client):
    body = answered(client.post("/v1/ask", json={"question": ("How do I fix an HBM out of memory "
                                                               "error at compile time? " * 400)[:20_000]}))
    assert body["grounded"] and body["citations"]


# ------------------------------------------------------------------ bodies


def test_a_5_mib_body_is_refused_with_413(client):
    detail = refused(post_raw(client, "/v1/ask", json.dumps({"question": "x" * (5 * MIB)}).encode()), 413)
    assert "1.00 MiB" in detail


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"\xc3\x28", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"],
                         ids=["ff-fe", "truncated-sequence", "overlong", "five-byte-sequence"])
def test_invalid_utf8_in_the_body_is_a_400_saying_so(client, raw):
    detail = refused(post_raw(client, "/v1/ask", b'{"question": "HBM ' + raw + b' OOM"}'), 400)
    assert "not valid UTF-8" in detail and "position" in detail


@pytest.mark.parametrize("raw", [b"\\ud800", b"\xed\xa0\x80"], ids=["escaped", "utf8-encoded"])
def test_an_unpaired_surrogate_in_a_string_is_a_422_naming_the_field(client, raw):
    detail = refused(post_raw(client, "/v1/search", b'{"query": "HBM ' + raw + b'"}'), 422)
    assert detail.startswith("invalid request: query:")


@pytest.mark.parametrize("raw", [
    b"[" * 100_000,
    b'{"q":' * 100_000,
    b'{"question": "hbm", "report": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
], ids=["arrays", "objects", "inside-a-field"])
def test_json_nested_100k_deep_is_a_400_not_a_recursion_error(client, raw):
    detail = refused(post_raw(client, "/v1/ask", raw), 400)
    assert "nested too deeply" in detail
    assert client.get("/healthz").status_code == 200


def test_json_nested_just_below_the_parser_limit_is_a_422(client):
    raw = b'{"question": "hbm", "report": ' + b"[" * 900 + b"]" * 900 + b"}"
    assert refused(post_raw(client, "/v1/ask", raw), 422).startswith("invalid request: report")


def test_a_number_with_5000_digits_is_a_400(client):
    detail = refused(post_raw(client, "/v1/search", b'{"query": "hbm", "k": ' + b"9" * 5000 + b"}"), 400)
    assert "too many digits" in detail


# ------------------------------------------------------------------ NUL bytes


def test_nul_bytes_inside_a_question_are_read_as_spaces(client):
    body = answered(client.post("/v1/ask", json={"question": "How do I fix\u0000an HBM out-of-memory\u0000error?"}))
    assert body["grounded"] and "\u0000" not in body["answer"]


def test_a_question_of_nul_bytes_only_counts_as_blank(client):
    assert "ask a question" in refused(client.post("/v1/ask", json={"question": "\u0000" * 50}), 400)
    assert "empty" in refused(client.post("/v1/search", json={"query": "\u0000\u0000"}), 400)


def test_nul_bytes_inside_an_error_log_do_not_hide_its_figures(client):
    log = RUNTIME_ERROR.replace("Attempting", "\u0000Attempting") + "\u0000\u0000"
    body = answered(client.post("/v1/diagnose", json={"error_log": log}))
    assert body["category"] == "runtime_allocation" and body["requested_bytes"] == 8 * MIB
    ask = answered(client.post("/v1/ask", json={"question": "", "error_log": log}))
    assert ask["diagnosis"]["free_bytes"] == round(6.43 * MIB)


def test_a_nul_byte_in_a_language_code_is_a_422(client):
    assert "not a language code" in refused(client.post("/v1/ask", json={"question": "hbm", "language": "en\u0000"}), 422)


# ------------------------------------------------------------------ wrong types


WRONG_TYPES = [
    ("/v1/ask", {"question": "hbm"}, "question", [5, None, [], {}, True]),
    ("/v1/ask", {"question": "hbm"}, "error_log", [7, ["a log"], False]),
    ("/v1/ask", {"question": "hbm"}, "language", [7, True, ["en"]]),
    ("/v1/ask", {"question": "hbm"}, "report", ["a report", 5, []]),
    ("/v1/search", {"query": "hbm"}, "query", [5, None, ["hbm"]]),
    ("/v1/search", {"query": "hbm"}, "k", ["5", "many", True, 2.5, None]),
    ("/v1/search", {"query": "hbm"}, "language", [1, {"code": "zh"}]),
    ("/v1/diagnose", {"error_log": "x"}, "error_log", [None, 5, {"log": "x"}]),
    ("/v1/estimate", {"source": "x"}, "source", [5, None]),
    ("/v1/estimate", {"source": "x"}, "factory", [1, ["make"]]),
    ("/v1/estimate", {"source": "x"}, "tpu", [5, False]),
    ("/v1/estimate", {"source": "x"}, "topology", [22, ["2x2"]]),
    ("/v1/estimate", {"source": "x"}, "donation_check", ["yes", 1, 0, "false"]),
    ("/v1/estimate", {"source": "x"}, "top_n", ["10", 10.5, True]),
]


@pytest.mark.parametrize(("path", "base", "field", "values"), WRONG_TYPES,
                         ids=[f"{p.rsplit('/', 1)[1]}.{f}" for p, _, f, _ in WRONG_TYPES])
def test_a_value_of_the_wrong_type_is_a_422_naming_the_field_never_converted(client, path, base, field, values):
    for value in values:
        detail = refused(client.post(path, json={**base, field: value}), 422)
        assert detail.startswith(f"invalid request: {field}"), (value, detail)


def test_a_whole_number_written_as_a_float_counts_as_an_integer(client):
    body = answered(client.post("/v1/search", json={"query": "vmem_limit_bytes Pallas kernel", "k": 2.0}))
    assert len(body["results"]) == 2


def test_a_report_with_a_wrong_type_deep_inside_is_refused_not_converted(client):
    report = json.loads((ROOT / "tests/data/estimate_report.json").read_text())
    assert answered(client.post("/v1/ask", json={"question": "Will this fit?", "report": report}))["grounded"]
    for path, value in ((("temp_bytes",), "5"), (("temp_bytes",), True), (("target", "hbm_bytes"), "16G"),
                        (("fits",), 1), (("padding", "waste_bytes"), 1.5)):
        bad = json.loads(json.dumps(report))
        holder = bad
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
        detail = refused(client.post("/v1/ask", json={"question": "Will this fit?", "report": bad}), 422)
        assert f"report.EstimateReport.{'.'.join(path)}" in detail, (path, value, detail)


def test_an_estimate_enabled_server_refuses_wrong_types_before_running_anything(assistant):
    app = create_app(Settings(enable_estimate=True, estimate_timeout_s=20), assistant)
    with TestClient(app, raise_server_exceptions=False, base_url=LOCAL) as c:
        started = time.monotonic()
        for body in ({"source": "def make(): pass", "donation_check": "yes"},
                     {"source": "def make(): pass", "top_n": "3"}, {"source": ""}, ["source"]):
            refused(c.post("/v1/estimate", json=body), 422)
        assert time.monotonic() - started < 5, "nothing was run in the sandbox"


# ------------------------------------------------------------------ language codes


def test_a_well_formed_but_unknown_language_is_answered_in_english_saying_so(client):
    body = answered(client.post("/v1/ask", json={"question": "How do I fix an HBM OOM?", "language": "xx"}))
    assert body["language"] == "en" and body["language_note"]
    assert body["language_note"] in body["answer"]


@pytest.mark.parametrize(("code", "language"), [("en-US", "en"), ("ZH", "zh"), ("pt_BR", "pt"),
                                                ("zh-Hant-TW", "zh")])
def test_region_and_case_variants_of_a_language_code_are_that_language(client, code, language):
    body = answered(client.post("/v1/ask", json={"question": "How do I fix an HBM OOM?", "language": code}))
    assert body["language"] == language and body["language_note"] is None


@pytest.mark.parametrize("code", ["klingon", "e", "12", "en US", "x" * 40, "zh-"])
def test_text_that_is_not_a_language_code_is_a_422_saying_so(client, code):
    for path, body in (("/v1/ask", {"question": "hbm"}), ("/v1/search", {"query": "hbm"})):
        detail = refused(client.post(path, json={**body, "language": code}), 422)
        assert "is not a language code" in detail


def test_search_reads_a_language_filter_case_and_region_insensitively(client):
    body = answered(client.post("/v1/search", json={"query": "HBM", "language": "ZH"}))
    assert body["results"] and {r["language"] for r in body["results"]} == {"zh"}
    assert answered(client.post("/v1/search", json={"query": "HBM", "language": "pt-BR"}))["results"]
    detail = refused(client.post("/v1/search", json={"query": "HBM", "language": "en-US"}), 400)
    assert "no guide is written in language 'en-US'" in detail


# ------------------------------------------------------------------ large error logs


def test_an_error_log_of_10_mb_is_refused_with_413(client):
    log = "I0101 step 1 loss 0.1\n" * (10 * MIB // 22) + RUNTIME_ERROR
    for path, body in (("/v1/ask", {"question": "why?", "error_log": log}), ("/v1/diagnose", {"error_log": log})):
        refused(client.post(path, json=body), 413)


def test_an_error_log_of_0_9_mb_with_the_error_at_the_end_gets_a_correct_answer(client):
    log = "I0101 12:00:00.000 worker.cc:42] step 1000 loss 0.123\n" * 17_000 + RUNTIME_ERROR
    assert 0.85 * MIB < len(log) < MIB
    body = answered(client.post("/v1/ask", json={"question": "What went wrong?", "error_log": log}))
    assert body["diagnosis"]["category"] == "runtime_allocation"
    assert "8.00 MiB" in body["answer"] and "6.43 MiB" in body["answer"]
    assert any(c["doc_id"] == "runtime-buffer-allocation" for c in body["citations"])


# ------------------------------------------------------------------ markup injection


def test_markup_in_a_question_is_never_repeated_in_the_answer(client):
    body = answered(client.post("/v1/ask", json={"question": "How do I fix an HBM OOM? " + INJECTION}))
    for needle in ("<script", "<img", "javascript:", "evil.example", "<!channel>", "<@U123>"):
        assert needle not in body["answer"]


def test_markup_in_a_log_reaches_the_answer_only_inside_a_code_span(client):
    body = answered(client.post("/v1/ask", json={"question": "why?", "error_log": vmem_log(INJECTION)}))
    assert body["diagnosis"]["custom_call_target"] == INJECTION  # evidence is kept as it was
    assert f"`{INJECTION}`" in body["answer"]
    outside_code = re.sub(r"`[^`\n]*`", "", body["answer"])
    for needle in ("<script", "<img", "javascript:", "evil.example", "<!channel>", "<@U123>"):
        assert needle not in outside_code


def test_markup_in_a_report_reaches_the_answer_only_inside_a_code_span(client):
    report = json.loads((ROOT / "tests/data/estimate_report.json").read_text())
    report["target"]["topology"] = INJECTION
    body = answered(client.post("/v1/ask", json={"question": "", "report": report}))
    assert f"`{INJECTION}`" in body["answer"]
    assert "<script" not in re.sub(r"`[^`\n]*`", "", body["answer"])


def test_slack_blocks_escape_markup_from_a_log_and_carry_no_live_mention_or_link(assistant):
    from oomkb.api.schemas import AskRequest

    answer = assistant.ask(AskRequest(question="why?", error_log=vmem_log(INJECTION)))
    text = block_text(answer_blocks(answer))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;!channel&gt;" in text
    for live in ("<script", "<img", "<!channel>", "<@U123>", "<https://evil", "<javascript"):
        assert live not in text


def test_slack_converter_escapes_markup_and_links_only_web_addresses():
    out = markdown_to_mrkdwn("Try <b>this</b> & [it](javascript:alert(1)) or <!here> <@U9> [docs](https://openxla.org/x)")
    assert "&lt;b&gt;this&lt;/b&gt; &amp; [it](javascript:alert(1))" in out
    assert "&lt;!here&gt; &lt;@U9&gt;" in out
    assert "<https://openxla.org/x|docs>" in out  # a guide's own link stays a link
    assert re.findall(r"<[^>]*>", out) == ["<https://openxla.org/x|docs>"]


def test_slack_notice_escapes_its_text_in_the_blocks_and_the_notification():
    holder = AssistantHolder(Settings())
    holder.error = "cannot read the index at /srv/<!channel>/<@U123>&co"  # a load failure's message
    bot = SlackBot(holder, signing_secret=SECRET, bot_token=TOKEN, client=WebClient(base_url="http://127.0.0.1:9/"))
    blocks, fallback = bot.reply("how do I fix an HBM OOM?")
    for text in (block_text(blocks), fallback):
        assert "&lt;!channel&gt;/&lt;@U123&gt;&amp;co" in text
        assert "<!channel>" not in text and "<@U123>" not in text


@pytest.fixture(scope="module")
def slack_api():
    stand_in = SlackStandIn()
    yield stand_in
    stand_in.server.shutdown()


def test_a_slack_mention_with_markup_is_answered_without_live_markup(assistant, slack_api):
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET)
    app = create_app(settings, assistant, slack_client=WebClient(base_url=slack_api.url))
    # Slack sends the user's < > & escaped, mentions and links as <...>.
    question = ("why? <!channel> <@U123> &lt;script&gt;alert(1)&lt;/script&gt; ```"
                + vmem_log("&lt;img src=x onerror=alert(1)&gt; <!channel> <https://evil.example|x> *bold*")
                + "```")
    with TestClient(app, base_url=LOCAL) as c:
        assert post_event(c, mention(question, ts="1700000099.000100")).status_code == 200
        (posted,) = slack_api.wait_for("chat.postMessage")
    text = block_text(posted["blocks"]) + "\n" + posted["text"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    for live in ("<img", "<script", "<!channel>", "<@U123>", "<https://evil"):
        assert live not in text


def test_the_web_page_script_builds_the_page_from_text_nodes_only():
    script = re.sub(r"^\s*//.*$", "", (ROOT / "api/http/static/app.js").read_text(), flags=re.MULTILINE)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "createContextualFragment", "javascript:"):
        assert sink not in script, f"app.js uses {sink}: server or user text could become markup"
    # Links are made only by guideUrl(): a fixed same-origin path with encoded guide and section ids.
    hrefs = re.findall(r"href\s*:\s*([^,}]+)", script)
    assert hrefs and all(h.strip().startswith("guideUrl(") for h in hrefs), hrefs


def test_the_web_page_shows_markup_from_a_log_as_text_and_runs_nothing(page):  # noqa: F811 - fixture
    page.type_into("#question", "What went wrong? " + INJECTION)
    page.type_into("#error-log", vmem_log(INJECTION))
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("!document.getElementById('result').hidden && document.getElementById('answer').innerText")
    assert INJECTION in page.evaluate("document.getElementById('answer').textContent")
    assert INJECTION in page.evaluate("document.getElementById('diagnosis-figures').textContent")
    assert page.evaluate("document.querySelectorAll('#result script, #result img, #result iframe').length") == 0
    # the only links are the sources' own, to this server's guide pages
    links = page.evaluate("[...document.querySelectorAll('#result a')].map(a => a.getAttribute('href'))")
    assert all(link.startswith("/guides/") for link in links), links
    assert not page.evaluate("[...document.querySelectorAll('#answer a')].length")
    assert page.evaluate("window.__xss === undefined")
    assert page.exceptions() == []


# ------------------------------------------------------------------ the command line


@pytest.fixture(scope="module")
def cli():
    from oomkb.api.cli.main import app

    runner = CliRunner()

    def run(*args: str, stdin: bytes | None = None):
        result = runner.invoke(app, list(args), input=stdin)
        output = " ".join(result.output.split())
        assert "Traceback" not in output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        return result.exit_code, output

    return run


@pytest.fixture(scope="module")
def ten_mb_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "train.log"
    line = "I0101 12:00:00.000 worker.cc:42] step 1000 loss 0.123 noise noise noise noise\n"
    path.write_text(line * (10 * MIB // len(line)) + RUNTIME_ERROR + "\n")
    return path


BINARY = bytes(range(256)) * 800 + b"\x00\xff\xfe" * 1000


def test_cli_diagnose_reads_binary_stdin_and_says_no_error_was_found(cli):
    code, output = cli("diagnose", "-", stdin=BINARY)
    assert code == 0 and "No known out-of-memory message was found" in output


def test_cli_diagnose_finds_the_error_at_the_end_of_a_10_mb_log(cli, ten_mb_log):
    code, output = cli("diagnose", "--json", str(ten_mb_log))
    assert code == 0
    assert "reading its last 8 MiB" in output  # the note on stderr: a long log is read from its end
    parsed = json.JSONDecoder().raw_decode(output[output.index("{"):])[0]
    assert parsed["category"] == "runtime_allocation" and parsed["requested_bytes"] == 8 * MIB


def test_cli_ask_with_a_10_mb_log_answers_from_the_part_around_its_error(cli, ten_mb_log):
    code, output = cli("ask", "why?", "--json", "--log", str(ten_mb_log))
    assert code == 0
    assert json.JSONDecoder().raw_decode(output[output.index("{"):])[0]["diagnosis"]["category"] == "runtime_allocation"


@pytest.mark.parametrize("question", ["", "   "])
def test_cli_ask_with_a_blank_question_and_no_log_is_a_clear_error(cli, question):
    code, output = cli("ask", question)
    assert (code, output) == (2, "error: ask a question, paste an error log, or attach a report")


def test_cli_ask_with_binary_stdin_as_the_log_answers_without_a_diagnosis(cli):
    code, output = cli("ask", "--json", "--log", "-", stdin=BINARY)
    assert code == 0
    assert json.loads(output)["diagnosis"]["category"] == "unknown"


def test_cli_ask_with_a_made_up_language_code_is_a_clear_error(cli):
    code, output = cli("ask", "hbm oom", "--lang", "klingon")
    assert code == 2 and "'klingon' is not a language code" in output


def test_cli_search_with_an_empty_or_unreadable_query_is_a_clear_error(cli):
    assert cli("search", "") == (2, "error: the query is empty; type a question or an error message")
    assert cli("search", "\udcff\udcfe\udc80") == (2, "error: the query is not readable text (binary bytes?)")


def test_the_installed_command_reads_binary_stdin_without_a_traceback():
    result = subprocess.run([sys.executable, "-m", "oomkb.api.cli", "diagnose", "-"], input=BINARY,
                            capture_output=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"Traceback" not in result.stdout + result.stderr
    assert b"No known out-of-memory message was found" in result.stdout
