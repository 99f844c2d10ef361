"""The Slack adapter: signed requests only, ack at once, one threaded answer per event.

Requests are signed with a test secret exactly as Slack signs them (slack_sdk's SignatureVerifier)
and posted to the real app; replies go to a small Slack Web API stand-in on 127.0.0.1 (Bolt's own
test pattern), which records what would have been posted. No external network.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest
from fastapi.testclient import TestClient
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from oomkb.api.http.slack import SECTION_CHARS, SeenEvents, answer_blocks, markdown_to_mrkdwn, split_sections
from oomkb.api.http.slack_text import question_from_slack
from tests.conftest import LOCAL

SECRET = "test-signing-secret-0123456789abcdef"
TOKEN = "xoxb-test-token"
REPLY_TIMEOUT_S = 120
CYRILLIC = re.compile(r"[\u0400-\u04FF]")


class SlackStandIn:
    """A local Slack Web API (and response_url) recording every POST it receives."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self._cond = threading.Condition()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "json" in (self.headers.get("Content-Type") or ""):
                    body = json.loads(raw or b"{}")
                else:
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                with stand_in._cond:
                    stand_in.calls.append((self.path, body))
                    stand_in._cond.notify_all()
                answer = json.dumps({"ok": True, "channel": body.get("channel"), "ts": "1700000000.000200"})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self, path: str) -> list[dict]:
        with self._cond:
            return [body for p, body in self.calls if p.endswith(path)]

    def wait_for(self, path: str, count: int = 1, timeout: float = REPLY_TIMEOUT_S) -> list[dict]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len([1 for p, _ in self.calls if p.endswith(path)]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {count} POST(s) to {path} within {timeout} s: {self.calls}")
                self._cond.wait(left)
        return self.posts(path)

    def clear(self) -> None:
        with self._cond:
            self.calls.clear()


@pytest.fixture(scope="module")
def slack_api():
    stand_in = SlackStandIn()
    yield stand_in
    stand_in.server.shutdown()


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant, slack_api):
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET)
    app = create_app(settings, assistant, slack_client=WebClient(base_url=slack_api.url))
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture(autouse=True)
def _fresh_calls(slack_api):
    slack_api.clear()


def signed(body: str, *, secret: str = SECRET, timestamp: int | None = None,
           content_type: str = "application/json", **extra: str) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature,
            "Content-Type": content_type, **extra}


_ids = iter(range(1, 10**6))


def event_body(event: dict, event_id: str | None = None) -> str:
    return json.dumps({
        "token": "legacy", "team_id": "T0TEST", "api_app_id": "A0TEST", "type": "event_callback",
        "event_id": event_id or f"Ev{next(_ids):08d}", "event_time": int(time.time()),
        "event": event,
    })


def mention(text: str, ts: str = "1700000000.000100", **more) -> dict:
    return {"type": "app_mention", "user": "U0ASKER", "text": f"<@U0BOT> {text}", "ts": ts,
            "channel": "C0CHANNEL", "event_ts": ts, **more}


def post_event(client: TestClient, event: dict, event_id: str | None = None, **headers: str):
    body = event_body(event, event_id)
    return client.post("/slack/events", content=body, headers=signed(body, **headers))


def block_text(blocks: list[dict]) -> str:
    parts = []
    for b in blocks:
        if b["type"] == "section":
            parts.append(b["text"]["text"])
        elif b["type"] == "context":
            parts.extend(e["text"] for e in b["elements"])
    return "\n".join(parts)


# ------------------------------------------------------------------ signatures


def test_url_verification_with_valid_signature_returns_the_challenge(client):
    body = json.dumps({"token": "legacy", "challenge": "c-123", "type": "url_verification"})
    r = client.post("/slack/events", content=body, headers=signed(body))
    assert r.status_code == 200
    assert r.json() == {"challenge": "c-123"}


def test_wrong_signature_is_rejected_with_401(client, slack_api):
    body = event_body(mention("hello"))
    r = client.post("/slack/events", content=body, headers=signed(body, secret="another-secret"))
    assert r.status_code == 401
    time.sleep(0.5)
    assert slack_api.calls == []


def test_missing_signature_is_rejected_with_401(client):
    body = event_body(mention("hello"))
    r = client.post("/slack/events", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 401


def test_stale_signature_older_than_five_minutes_is_rejected_with_401(client):
    body = event_body(mention("hello"))
    r = client.post("/slack/events", content=body, headers=signed(body, timestamp=int(time.time()) - 6 * 60))
    assert r.status_code == 401


def test_signature_over_a_different_body_is_rejected(client):
    body = event_body(mention("hello"))
    headers = signed(body)
    r = client.post("/slack/events", content=body.replace("hello", "HELLO"), headers=headers)
    assert r.status_code == 401


def test_undecodable_body_is_rejected_not_crashed(client):
    body = b"\xff\xfe{not utf-8"
    r = client.post("/slack/events", content=body,
                    headers={"X-Slack-Request-Timestamp": str(int(time.time())),
                             "X-Slack-Signature": "v0=" + "0" * 64, "Content-Type": "application/json"})
    assert r.status_code == 401


def test_slack_route_is_absent_without_token_and_secret(assistant):
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL) as c:
        body = event_body(mention("hello"))
        assert c.post("/slack/events", content=body, headers=signed(body)).status_code == 404
        assert c.get("/healthz").status_code == 200


# ------------------------------------------------------------------ answers


def test_app_mention_in_russian_is_acked_fast_and_answered_in_the_thread(client, slack_api):
    started = time.monotonic()
    r = post_event(client, mention("Как исправить ошибку нехватки памяти HBM при компиляции на TPU?"))
    assert r.status_code == 200
    assert time.monotonic() - started < 3.0, "Slack needs the ack within 3 s"

    (posted,) = slack_api.wait_for("chat.postMessage")
    assert posted["channel"] == "C0CHANNEL"
    assert posted["thread_ts"] == "1700000000.000100"
    text = block_text(posted["blocks"])
    assert len(CYRILLIC.findall(text)) > 40, text
    assert "e1000-compile-hbm-oom" in text
    # sources, then the 👍/👎 buttons (the service records answers for feedback)
    assert [b["type"] for b in posted["blocks"]][-2:] == ["context", "actions"]
    assert all(len(b["text"]["text"]) <= SECTION_CHARS for b in posted["blocks"] if b["type"] == "section")
    assert posted["text"]


def test_mention_inside_a_thread_is_answered_in_that_thread_with_the_errors_numbers(client, slack_api):
    question = ("why? ```Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. "
                "Exceeded hbm capacity by 17.34G.```")
    r = post_event(client, mention(question, ts="1700000000.000900", thread_ts="1700000000.000500"))
    assert r.status_code == 200
    (posted,) = slack_api.wait_for("chat.postMessage")
    assert posted["thread_ts"] == "1700000000.000500"
    text = block_text(posted["blocks"])
    assert "17.34 GiB" in text or "17.3 GiB" in text, text
    assert "e1000-compile-hbm-oom" in text


def test_repeated_delivery_with_retry_header_is_answered_once(client, slack_api):
    event = mention("How do I fix a scoped VMEM out-of-memory error in my Pallas kernel?", ts="1700000001.000100")
    first = post_event(client, event, event_id="EvRETRY0001")
    assert first.status_code == 200
    slack_api.wait_for("chat.postMessage")
    started = time.monotonic()
    again = post_event(client, event, event_id="EvRETRY0001",
                       **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert again.status_code == 200
    time.sleep(max(2.0, 2 * (time.monotonic() - started)))
    assert len(slack_api.posts("chat.postMessage")) == 1


def test_direct_message_in_spanish_is_answered_in_spanish(client, slack_api):
    event = {"type": "message", "channel_type": "im", "user": "U0ASKER", "channel": "D0DM",
             "text": "¿Cómo puedo encontrar qué tensores ocupan la memoria en el pico con el Memory Viewer?",
             "ts": "1700000002.000100", "event_ts": "1700000002.000100"}
    assert post_event(client, event).status_code == 200
    (posted,) = slack_api.wait_for("chat.postMessage")
    assert posted["channel"] == "D0DM"
    assert posted["thread_ts"] == "1700000002.000100"
    text = block_text(posted["blocks"]).lower()
    assert any(w in text for w in (" la ", " de ", " el ", " memoria")), text


@pytest.mark.parametrize("event", [
    {"type": "message", "channel_type": "im", "bot_id": "B0BOT", "channel": "D0DM",
     "text": "an answer", "ts": "1700000003.000100"},
    {"type": "message", "channel_type": "im", "subtype": "message_changed", "channel": "D0DM",
     "ts": "1700000003.000200"},
    {"type": "message", "channel_type": "channel", "user": "U0ASKER", "channel": "C0CHANNEL",
     "text": "just chatting about OOM", "ts": "1700000003.000300"},
], ids=["bot-message", "edited-message", "channel-message"])
def test_messages_that_are_not_plain_direct_messages_are_acked_but_not_answered(client, slack_api, event):
    assert post_event(client, event).status_code == 200
    time.sleep(1.5)
    assert slack_api.posts("chat.postMessage") == []


def test_slash_command_acks_and_responds_to_the_response_url(client, slack_api):
    form = urlencode({
        "token": "legacy", "team_id": "T0TEST", "channel_id": "C0CHANNEL", "user_id": "U0ASKER",
        "command": "/oom", "text": "Wie behebe ich einen Runtime-Buffer-Allocation-Fehler auf der TPU?",
        "response_url": slack_api.url + "commands/T0TEST/1/secret", "trigger_id": "1.2.3",
    })
    started = time.monotonic()
    r = client.post("/slack/events", content=form,
                    headers=signed(form, content_type="application/x-www-form-urlencoded"))
    assert r.status_code == 200
    assert time.monotonic() - started < 3.0
    (posted,) = slack_api.wait_for("commands/T0TEST/1/secret")
    assert posted["response_type"] == "ephemeral"  # only the asker sees it, by default
    text = block_text(posted["blocks"])
    assert "runtime-buffer-allocation" in text
    assert any(w in text.lower() for w in (" der ", " die ", " und ")), text


def test_empty_slash_command_gets_usage_help_in_the_ack(client):
    form = urlencode({"command": "/oom", "text": "", "team_id": "T0TEST", "user_id": "U0ASKER",
                      "channel_id": "C0CHANNEL", "response_url": "http://127.0.0.1:9/none"})
    r = client.post("/slack/events", content=form,
                    headers=signed(form, content_type="application/x-www-form-urlencoded"))
    assert r.status_code == 200
    assert "/oom" in r.text


# ------------------------------------------------------------------ formatting


def test_markdown_becomes_slack_mrkdwn_with_user_text_escaped():
    md = ("### What to do\n\n1. Use **donation** & check `a<b>`\n- item with <script>\n"
          "> quoted **guide** text\n**Diagnosis:** _note_")
    out = markdown_to_mrkdwn(md)
    assert "*What to do*" in out
    assert "*donation* &amp; check `a&lt;b&gt;`" in out
    assert "• item with &lt;script&gt;" in out
    assert ">quoted *guide* text" in out
    assert "*Diagnosis:* _note_" in out
    assert "**" not in out and "<script>" not in out


def test_long_answers_split_into_sections_of_at_most_3000_characters():
    text = "\n".join(f"line {n} " + "x" * 90 for n in range(200)) + "\n" + "y" * 7000
    pieces = split_sections(text)
    assert len(pieces) > 3
    assert all(len(p) <= SECTION_CHARS for p in pieces)
    assert "".join(pieces).replace("\n", "").count("y") == 7000


def test_code_block_split_across_sections_is_closed_and_reopened():
    text = "```\n" + "\n".join("a" * 100 for _ in range(60)) + "\n```"
    pieces = split_sections(text)
    assert len(pieces) >= 2
    assert all(p.startswith("```") and p.endswith("```") for p in pieces)


def test_answer_blocks_end_with_a_context_block_of_sources(assistant):
    answer = assistant.ask(question_from_slack("<@U0BOT> how do I set vmem_limit_bytes for a Pallas kernel?"))
    blocks = answer_blocks(answer)
    assert blocks[-1]["type"] == "context"
    assert any(c.doc_id in block_text(blocks) for c in answer.citations)
    assert len(blocks) <= 50


def test_slack_text_becomes_question_and_error_log():
    req = question_from_slack("<@U0BOT> why &lt;this&gt;? ```Error allocating device buffer: "
                              "Attempting to allocate 8.00M. That was not possible. There are 6.43M free.```")
    assert req.question == "why <this>?"
    assert req.error_log.startswith("Error allocating device buffer")


def test_seen_events_remember_ids_and_forget_the_oldest_past_the_bound():
    seen = SeenEvents(ttl_s=3600, max_size=3)
    assert seen.first_time("a") and not seen.first_time("a")
    for e in "bcd":
        assert seen.first_time(e)
    assert seen.first_time("a")  # evicted by size, so new again


def test_a_replayed_slash_command_is_answered_once(client, slack_api):
    """Issue 24: a slash command has no event id; the same signed request sent again within the
    signature's 5 minutes was answered again."""
    form = urlencode({"command": "/oom", "text": "What is E1000?", "team_id": "T0TEST", "user_id": "U0ASKER",
                      "channel_id": "C0CHANNEL", "response_url": slack_api.url + "commands/T0TEST/9/replay",
                      "trigger_id": "9.9.9"})
    headers = signed(form, content_type="application/x-www-form-urlencoded")
    assert client.post("/slack/events", content=form, headers=headers).status_code == 200
    slack_api.wait_for("commands/T0TEST/9/replay")
    assert client.post("/slack/events", content=form, headers=headers).status_code == 200
    time.sleep(2.0)
    assert len(slack_api.posts("commands/T0TEST/9/replay")) == 1


def test_a_lone_surrogate_in_a_mention_gets_a_clean_input_error(client, slack_api, caplog):
    """Issue 24: "\\ud800" in a mention got "Sorry, something went wrong" and a logged traceback."""
    body = event_body(mention("HBM OOM \\ud800 help", ts="1700000009.000100")).replace("\\\\ud800", "\\ud800")
    assert "\\ud800" in body
    assert client.post("/slack/events", content=body, headers=signed(body)).status_code == 200
    (posted,) = slack_api.wait_for("chat.postMessage")
    assert "cannot be read" in posted["text"] and "went wrong" not in posted["text"]
    assert not [r for r in caplog.records if r.exc_info]
