"""Estimates and plans asked for in Slack, on the server's job queue (a real Ray cluster on
127.0.0.1): queued at once, the result posted in the thread when the job ends.

Slack's Web API and file host are the local stand-in of test_slack_threads."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from slack_sdk import WebClient

ray = pytest.importorskip("ray")

from oomkb.api.http.app import create_app  # noqa: E402
from oomkb.api.http.slack_jobs import job_command  # noqa: E402
from oomkb.settings import Settings  # noqa: E402
from tests.api.test_slack import SECRET, TOKEN, mention, post_event  # noqa: E402
from tests.api.test_slack_threads import SlackWithThreads  # noqa: E402
from tests.conftest import LOCAL  # noqa: E402
from tests.ray_cluster import local_cluster  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster and real compiles

PROGRAM = b'''
import jax, jax.numpy as jnp

def make_step(batch=1024):
    return (lambda x: jnp.tanh(x) * 2), (jax.ShapeDtypeStruct((batch, 1024), jnp.float32),)
'''


@pytest.fixture(scope="module")
def slack_api():
    stand_in = SlackWithThreads()
    yield stand_in
    stand_in.server.shutdown()


@pytest.fixture(scope="module")
def client(slack_api, tmp_path_factory):
    with local_cluster(cpus=2):
        settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET,
                            slack_bot_user_id="U0BOT", enable_estimate=True,
                            ray_address=ray.get_runtime_context().gcs_address,
                            home=tmp_path_factory.mktemp("home"))
        app = create_app(settings, slack_client=WebClient(base_url=slack_api.url))
        try:
            yield TestClient(app, base_url=LOCAL)
        finally:
            app.state.job_queue.close()


def posts(slack_api, count: int, timeout_s: float = 180) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [body for _path, body, _headers in slack_api.requests("POST", "chat.postMessage")]
        if len(found) >= count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} posts: {slack_api.calls}")


def test_an_estimate_asked_in_slack_is_queued_and_its_result_posted_in_the_thread(client, slack_api,
                                                                               tmp_path):
    from oomkb.diagnostics.estimate import estimate_program
    from oomkb.units import format_bytes

    slack_api.reset()
    slack_api.add_file("F0PROG", PROGRAM, "train.py")
    ts = "1700000500.000100"
    r = post_event(client, mention("estimate make_step --tpu v5e", ts=ts,
                                   files=[{"id": "F0PROG", "name": "train.py"}]))
    assert r.status_code == 200
    queued, result = posts(slack_api, 2)
    assert queued["thread_ts"] == ts and "queued" in queued["text"] and "make_step" in queued["text"]
    assert result["thread_ts"] == ts and result["channel"] == "C0CHANNEL"
    # the figures are those of the same estimate made here
    path = tmp_path / "train.py"
    path.write_bytes(PROGRAM)
    local = estimate_program(f"{path}:make_step", donation_check=True)
    assert local.fits and f"fits ({format_bytes(local.total_bytes)} of 15.75 GiB per device)" \
        in result["text"], result["text"]


def test_a_plan_without_its_program_asks_for_the_file(client, slack_api):
    slack_api.reset()
    post_event(client, mention("plan make_step --vary batch=1..4096", ts="1700000600.000100"))
    (reply,) = posts(slack_api, 1)
    assert "attach the program" in reply["text"]


def test_the_command_words_are_read():
    assert job_command("<@U0BOT> plan make --vary batch=1..64 --tpu v6e") == (
        "plan", {"factory": "make", "vary": "batch=1..64", "tpu": "v6e"})
    assert job_command("what is vmem?") is None
    with pytest.raises(ValueError, match="unknown option --fast"):
        job_command("estimate make --fast")
