"""Slack threads and files: a follow-up in a thread is answered with the evidence posted earlier
in the thread (fetched with conversations.replies), in the follow-up's language; a log or report
attached as a file is read (files.info, then url_private with the bot token) as if pasted.

Slack's Web API and its file host are a local stand-in on 127.0.0.1 that serves the thread and
the files each test sets up and records every request, with its Authorization header."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from fastapi.testclient import TestClient
from slack_sdk import WebClient

from oomkb.api.http.app import create_app
from oomkb.api.http.slack_evidence import MAX_FILE_BYTES
from oomkb.settings import Settings
from oomkb.units import format_bytes
from tests.conftest import LOCAL, ROOT
from tests.api.test_slack import SECRET, TOKEN, block_text, mention, post_event

HBM_LOG = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
           "hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.")
VMEM_LOG = ("Ran out of memory in memory space vmem while allocating on stack for %k = bf16[2048,4096]"
            "{1,0} custom-call(%a), custom_call_target=\"tpu_custom_call\". Scoped allocation with "
            "size 34.00M and limit 16.00M exceeded scoped vmem limit by 18.00M.")
THREAD = "1700000100.000100"
WAIT_S = 120


class SlackWithThreads:
    """Web API methods (conversations.replies, files.info, chat.postMessage) and file downloads."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict, dict]] = []  # (verb, path, body, headers)
        self.threads: dict[str, list[dict]] = {}
        self.files: dict[str, tuple[dict, bytes]] = {}
        self._cond = threading.Condition()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self, verb: str, body: dict) -> None:
                with stand_in._cond:
                    stand_in.calls.append((verb, self.path, body, dict(self.headers)))
                    stand_in._cond.notify_all()

            def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "json" in (self.headers.get("Content-Type") or ""):
                    body = json.loads(raw or b"{}")
                else:
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                self._record("POST", body)
                answer: dict = {"ok": True, "ts": "1700000999.000100"}
                if self.path.endswith("conversations.replies"):
                    answer["messages"] = stand_in.threads.get(body.get("ts"), [])
                elif self.path.endswith("files.info"):
                    info = stand_in.files.get(body.get("file"))
                    answer = {"ok": True, "file": info[0]} if info else {"ok": False, "error": "file_not_found"}
                self._send(200, json.dumps(answer).encode())

            def do_GET(self):  # noqa: N802
                self._record("GET", {})
                file_id = self.path.rsplit("/", 1)[-1]
                if self.headers.get("Authorization") != f"Bearer {TOKEN}" or file_id not in stand_in.files:
                    self._send(403, b"no")
                    return
                self._send(200, stand_in.files[file_id][1], "text/plain")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_file(self, file_id: str, content: bytes, name: str, url: str | None = None, size: int | None = None):
        self.files[file_id] = ({"id": file_id, "name": name, "size": len(content) if size is None else size,
                                "url_private": url or f"{self.url}files-pri/T0/{file_id}"}, content)

    def requests(self, verb: str, path_end: str) -> list[tuple[str, dict, dict]]:
        with self._cond:
            return [(p, b, h) for v, p, b, h in self.calls if v == verb and p.endswith(path_end)]

    def wait_for_post(self, timeout: float = WAIT_S) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(v == "POST" and p.endswith("chat.postMessage") for v, p, _, _ in self.calls):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no answer posted within {timeout} s: {self.calls}")
                self._cond.wait(left)
        return self.requests("POST", "chat.postMessage")[0][1]

    def reset(self) -> None:
        with self._cond:
            self.calls.clear()
        self.threads.clear()
        self.files.clear()


@pytest.fixture(scope="module")
def slack_api():
    stand_in = SlackWithThreads()
    yield stand_in
    stand_in.server.shutdown()


@pytest.fixture(scope="module")
def client(searcher, slack_api):
    from oomkb.api.core.assistant import Assistant

    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET, slack_bot_user_id="U0BOT")
    app = create_app(settings, Assistant(searcher), slack_client=WebClient(base_url=slack_api.url))
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture(autouse=True)
def _fresh(slack_api):
    slack_api.reset()


def _message(text: str, ts: str, user: str = "U0ASKER", **more) -> dict:
    return {"type": "message", "user": user, "text": text, "ts": ts, "thread_ts": THREAD, **more}


def test_follow_up_in_a_thread_is_answered_with_the_first_messages_log_in_its_own_language(client, slack_api):
    slack_api.threads[THREAD] = [
        _message(f"my training step does not compile ```{HBM_LOG}```", THREAD),
        # the bot's own earlier answer carries code too; it is never taken as evidence
        _message(f"answer with a snippet ```{VMEM_LOG}```", "1700000100.000200", user="U0BOT", bot_id="B0BOT"),
        _message("<@U0BOT> ¿Y cómo lo soluciono en mi modelo?", "1700000100.000300"),
    ]
    r = post_event(client, mention("¿Y cómo lo soluciono en mi modelo?", ts="1700000100.000300", thread_ts=THREAD))
    assert r.status_code == 200
    posted = slack_api.wait_for_post()
    assert posted["thread_ts"] == THREAD
    text = block_text(posted["blocks"])
    assert "17.34 GiB" in text and "e1000-compile-hbm-oom" in text, text
    assert "Diagnóstico" in text and "Qué hacer" in text  # Spanish, like the follow-up
    assert "scoped-vmem-oom" not in text
    (_, body, headers), = slack_api.requests("POST", "conversations.replies")
    assert body["ts"] == THREAD and body["channel"] == "C0CHANNEL"
    assert headers.get("Authorization") == f"Bearer {TOKEN}"


def test_follow_up_with_its_own_log_keeps_its_own_evidence(client, slack_api):
    slack_api.threads[THREAD] = [_message(f"first ```{HBM_LOG}```", THREAD)]
    post_event(client, mention(f"and now this? ```{VMEM_LOG}```", ts="1700000100.000400", thread_ts=THREAD))
    text = block_text(slack_api.wait_for_post()["blocks"])
    assert "scoped-vmem-oom" in text and "18.00 MiB" in text, text


def test_an_error_pasted_without_code_block_earlier_in_the_thread_is_used(client, slack_api):
    slack_api.threads[THREAD] = [_message(f"my step fails: {VMEM_LOG}", THREAD)]
    post_event(client, mention("was soll ich tun?", ts="1700000100.000600", thread_ts=THREAD))
    text = block_text(slack_api.wait_for_post()["blocks"])
    assert "scoped-vmem-oom" in text and "18.00 MiB" in text and "Diagnose" in text, text


def test_an_attached_log_file_is_read_with_the_bot_token_as_if_pasted(client, slack_api):
    slack_api.add_file("F0LOG", HBM_LOG.encode(), "error.log")
    r = post_event(client, mention("Как это исправить?", ts="1700000200.000100", files=[{"id": "F0LOG"}]))
    assert r.status_code == 200
    text = block_text(slack_api.wait_for_post()["blocks"])
    assert "17.34 GiB" in text and "Диагноз" in text, text
    (_, body, _), = slack_api.requests("POST", "files.info")
    assert body["file"] == "F0LOG"
    (_, _, headers), = slack_api.requests("GET", "/F0LOG")
    assert headers.get("Authorization") == f"Bearer {TOKEN}"


def test_an_attached_report_json_in_the_thread_is_read_as_the_report(client, slack_api):
    report = (ROOT / "tests/data/estimate_report.json").read_bytes()
    slack_api.add_file("F0REP", report, "report.json")
    slack_api.threads[THREAD] = [_message("here is my estimate", THREAD, files=[{"id": "F0REP"}])]
    post_event(client, mention("does it fit?", ts="1700000100.000500", thread_ts=THREAD))
    text = block_text(slack_api.wait_for_post()["blocks"])
    assert "v5e:2x2" in text and format_bytes(4678656) in text, text


def test_a_file_over_the_size_limit_is_not_downloaded(client, slack_api):
    slack_api.add_file("F0BIG", HBM_LOG.encode(), "huge.log", size=MAX_FILE_BYTES + 1)
    post_event(client, mention("what is wrong?", ts="1700000300.000100", files=[{"id": "F0BIG"}]))
    text = block_text(slack_api.wait_for_post()["blocks"])
    assert slack_api.requests("GET", "/F0BIG") == []
    assert "17.34 GiB" not in text


def test_a_file_url_on_another_host_never_gets_the_token(client, slack_api):
    other = SlackWithThreads()
    try:
        other.files["F0EVIL"] = ({}, HBM_LOG.encode())
        slack_api.add_file("F0EVIL", HBM_LOG.encode(), "error.log", url=f"{other.url}files/F0EVIL")
        post_event(client, mention("what is wrong?", ts="1700000400.000100", files=[{"id": "F0EVIL"}]))
        slack_api.wait_for_post()
        assert other.calls == []
    finally:
        other.server.shutdown()
