"""👍/👎 under Slack answers: interactive payloads, signed like events, stored once per click;
linked citations when the server knows its public URL; notices from the catalogue."""

from __future__ import annotations

import json
import sqlite3
import time
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from slack_sdk import WebClient

from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from tests.conftest import LOCAL
from tests.api.test_slack import (  # noqa: F401 - fixtures
    SECRET, TOKEN, assistant, mention, post_event, signed, slack_api,
)

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    return tmp_path_factory.mktemp("slack-db") / "oomkb.sqlite"


@pytest.fixture(scope="module")
def client(assistant, slack_api, db_path):
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET, db=db_path,
                        public_url="https://oomkb.example.org")
    app = create_app(settings, assistant, slack_client=WebClient(base_url=slack_api.url))
    with TestClient(app, base_url=LOCAL) as c:
        yield c


def click(client: TestClient, answer_id: str, action_id: str, action_ts: str, **headers: str):
    payload = {
        "type": "block_actions", "team": {"id": "T0TEST"}, "user": {"id": "U0ASKER"},
        "api_app_id": "A0TEST", "token": "legacy", "trigger_id": "1.2.3",
        "channel": {"id": "C0CHANNEL"}, "container": {"type": "message", "message_ts": "1700000000.000200"},
        "actions": [{"type": "button", "action_id": action_id, "block_id": "oomkb_feedback",
                     "value": answer_id, "action_ts": action_ts}],
    }
    body = urlencode({"payload": json.dumps(payload)})
    return client.post("/slack/events", content=body,
                       headers=signed(body, content_type="application/x-www-form-urlencoded", **headers))


def _answered(client, slack_api, text: str) -> dict:
    assert post_event(client, mention(text)).status_code == 200
    (posted,) = slack_api.wait_for("chat.postMessage")
    return posted


def test_an_answer_carries_feedback_buttons_and_linked_sources(client, slack_api):
    posted = _answered(client, slack_api, "How do I raise vmem_limit_bytes for one Pallas kernel?")
    blocks = json.loads(posted["blocks"]) if isinstance(posted["blocks"], str) else posted["blocks"]
    actions = [b for b in blocks if b["type"] == "actions"]
    assert len(actions) == 1
    ids = {e["action_id"] for e in actions[0]["elements"]}
    assert ids == {"oomkb_helpful", "oomkb_unhelpful"}
    context = next(b for b in blocks if b["type"] == "context")
    assert "<https://oomkb.example.org/guides/" in context["elements"][0]["text"]


def test_a_click_is_stored_once_even_when_slack_delivers_it_twice(client, slack_api, db_path):
    posted = _answered(client, slack_api, "Как отследить время жизни тензоров и найти утечку памяти на TPU?")
    blocks = json.loads(posted["blocks"]) if isinstance(posted["blocks"], str) else posted["blocks"]
    answer_id = next(b for b in blocks if b["type"] == "actions")["elements"][0]["value"]
    ts = f"{time.time():.6f}"
    assert click(client, answer_id, "oomkb_unhelpful", ts).status_code == 200
    assert click(client, answer_id, "oomkb_unhelpful", ts).status_code == 200  # the same interaction again
    deadline = time.monotonic() + 30
    rows = []
    while time.monotonic() < deadline:
        rows = sqlite3.connect(db_path).execute(
            "SELECT helpful, source FROM feedback WHERE answer_id = ?", (answer_id,)).fetchall()
        if rows:
            break
        time.sleep(0.2)
    time.sleep(1)
    rows = sqlite3.connect(db_path).execute(
        "SELECT helpful, source FROM feedback WHERE answer_id = ?", (answer_id,)).fetchall()
    assert rows == [(0, "slack")]
    slack_api.wait_for("chat.postEphemeral")


def test_an_unsigned_click_is_refused(client):
    body = urlencode({"payload": json.dumps({"type": "block_actions"})})
    r = client.post("/slack/events", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 401


def test_a_not_ready_notice_is_in_the_askers_language():
    from oomkb.api.http.holder import AssistantHolder

    holder = AssistantHolder(Settings())
    assert "загружает" in holder.not_ready_text("ru")
    holder.error = "the index is damaged; see the server log"
    assert holder.not_ready_text("de").startswith("Der Dienst kann gerade nicht antworten")
