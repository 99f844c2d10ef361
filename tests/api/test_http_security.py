"""What the HTTP service guarantees against hostile requests, each through the real app
(TestClient, or uvicorn on 127.0.0.1 where the transport matters): a 413 every client reads,
trusted hosts only (DNS rebinding), dependency floors, Slack signature headers that cannot crash
the check, bounded report integers, linear Slack-text patterns, no filesystem paths in /readyz,
the page's CSP on /static, ephemeral /oom answers, and `oomkb serve` reading OOMKB_HOST/PORT.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from packaging.requirements import Requirement
from packaging.version import Version
from slack_sdk import WebClient

from oomkb.api.http.app import DRAIN_BYTES, PAGE_CSP, create_app
from oomkb.api.http.slack_text import MAX_SLACK_TEXT_CHARS, question_from_slack
from oomkb.settings import Settings, SettingsError
from oomkb.units import MAX_BYTE_COUNT
from tests.conftest import LOCAL, ROOT
from tests.api.test_slack import SECRET, TOKEN, SlackStandIn, signed

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

MIB = 1 << 20
OVER_LIMIT_BODY = b'{"error_log": "' + b"x" * (5 * MIB) + b'"}'
TOO_BIG = '{"detail":"the request body is larger than the limit of 1.00 MiB"}'


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant):
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL, raise_server_exceptions=False) as c:
        yield c


@contextlib.contextmanager
def live_server(app):
    """`app` under uvicorn on a free 127.0.0.1 port (its lifespan off: nothing loads)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def live(assistant):
    with live_server(create_app(Settings(), assistant)) as url:
        yield url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ 413 that every client reads


def test_urllib_sending_a_5_mib_body_reads_the_413_not_a_connection_reset(live):
    request = urllib.request.Request(f"{live}/v1/diagnose", data=OVER_LIMIT_BODY,
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 413
    assert refused.value.read().decode() == TOO_BIG


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_httpx_sending_a_5_mib_body_reads_the_413(live, chunked):
    def pieces():
        for i in range(0, len(OVER_LIMIT_BODY), 64 * 1024):
            yield OVER_LIMIT_BODY[i:i + 64 * 1024]

    r = httpx.post(f"{live}/v1/diagnose", content=pieces() if chunked else OVER_LIMIT_BODY,
                   headers={"Content-Type": "application/json"}, timeout=60)
    assert (r.status_code, r.text) == (413, TOO_BIG)


@pytest.mark.parametrize("extra", [[], ["-H", "Expect:"], ["-H", "Transfer-Encoding: chunked"]],
                         ids=["expect-100-continue", "no-expect", "chunked"])
def test_curl_sending_a_5_mib_body_reads_the_413(live, tmp_path, extra):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    body = tmp_path / "body.json"
    body.write_bytes(OVER_LIMIT_BODY)
    done = subprocess.run(
        [curl, "-sS", "-H", "Content-Type: application/json", *extra, "--data-binary", f"@{body}",
         "-w", "\n%{http_code}", f"{live}/v1/diagnose"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [TOO_BIG, "413"]


def test_a_declared_body_too_big_to_drain_is_refused_at_once(live):
    """Past the drain bound nothing is read: the 413 comes before the client sends its body."""
    port = int(live.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(DRAIN_BYTES * 64).encode() + b"\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):  # the server closes the connection after its answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ") and TOO_BIG.encode() in answer


# ------------------------------------------------------------------ trusted hosts (DNS rebinding)


@pytest.mark.parametrize("host", ["rebind.attacker.example", "rebind.attacker.example:8000", "127.0.0.1.nip.io",
                                  "localhost.attacker.example", "testserver"])
def test_a_request_for_a_host_that_is_not_this_server_is_a_400_with_a_detail(client, host):
    for method, path, body in (("GET", "/", None), ("GET", "/static/app.js", None), ("GET", "/openapi.json", None),
                               ("POST", "/v1/ask", {"question": "How do I fix an HBM OOM?"}),
                               ("POST", "/v1/estimate", {"source": "def make(): pass"})):
        r = client.request(method, path, json=body, headers={"Host": host})
        assert r.status_code == 400, (path, r.status_code)
        assert host.split(":")[0] in r.json()["detail"] and "OOMKB_ALLOWED_HOSTS" in r.json()["detail"]


def test_the_probes_answer_any_host_since_orchestrators_call_them_by_address(client):
    for path in ("/healthz", "/readyz"):
        assert client.get(path, headers={"Host": "10.8.3.17:8000"}).status_code == 200
    assert client.post("/readyz", headers={"Host": "10.8.3.17:8000"}).status_code == 400


def test_an_enabled_estimate_never_runs_for_a_rebound_host(assistant, tmp_path):
    marker = tmp_path / "ran"
    source = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\ndef make():\n    return None\n"
    app = create_app(Settings(enable_estimate=True), assistant)
    with TestClient(app, base_url="http://rebind.attacker.example:8000") as c:
        r = c.post("/v1/estimate", json={"source": source, "factory": "make"})
    assert r.status_code == 400 and "rebind.attacker.example" in r.json()["detail"]
    assert not marker.exists()


def test_localhost_names_and_the_bound_address_are_answered_by_a_live_server(live):
    port = live.rsplit(":", 1)[1]
    for host in ("127.0.0.1", "localhost", "LOCALHOST", "[::1]", f"localhost:{port}", f"[::1]:{port}"):
        r = httpx.get(f"{live}/openapi.json", headers={"Host": host}, timeout=10)
        assert r.status_code == 200, host
    r = httpx.get(f"{live}/openapi.json", headers={"Host": "rebind.attacker.example"}, timeout=10)
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"


def test_the_default_trusted_hosts_are_the_bound_host_and_the_loopback_names():
    assert Settings().trusted_hosts == ["localhost", "127.0.0.1", "[::1]"]
    assert Settings(host="10.1.2.3").trusted_hosts == ["10.1.2.3", "localhost", "127.0.0.1", "[::1]"]
    assert Settings(host="::1").trusted_hosts == ["localhost", "127.0.0.1", "[::1]"]
    assert Settings(host="fd00::5").trusted_hosts[0] == "[fd00::5]"
    # listening on every address names no host: a deployment lists its own with OOMKB_ALLOWED_HOSTS
    assert Settings(host="0.0.0.0").trusted_hosts == ["localhost", "127.0.0.1", "[::1]"]


def test_allowed_hosts_from_the_environment_replace_the_defaults(assistant, monkeypatch):
    monkeypatch.setenv("OOMKB_ALLOWED_HOSTS", "oomkb.example.com, *.corp.example")
    settings = Settings.from_env()
    assert settings.trusted_hosts == ["oomkb.example.com", "*.corp.example"]
    with TestClient(create_app(settings, assistant), base_url="http://oomkb.example.com") as c:
        assert c.get("/openapi.json").status_code == 200
        assert c.get("/openapi.json", headers={"Host": "team.corp.example"}).status_code == 200
        assert c.get("/openapi.json", headers={"Host": "localhost"}).status_code == 400
    monkeypatch.setenv("OOMKB_ALLOWED_HOSTS", "exa*mple.com")
    with pytest.raises(SettingsError, match="OOMKB_ALLOWED_HOSTS"):
        Settings.from_env()


# ------------------------------------------------------------------ dependency floors


def test_the_declared_floors_exclude_the_known_bad_versions_and_are_installed():
    from importlib.metadata import version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    serve = project["optional-dependencies"]["serve"]  # the service's own extra
    declared = {Requirement(r).name: Requirement(r) for r in serve}
    for name, bad, good in (("fastapi", "0.131.0", "0.132.0"), ("starlette", "0.49.0", "0.49.1")):
        spec = declared[name].specifier
        assert not spec.contains(bad) and spec.contains(good), (name, str(spec))
        assert spec.contains(Version(version(name))), (name, version(name))


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_cross_site_simple_request_body_is_not_read_as_json(client, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    r = client.post("/v1/search", content=b'{"query": "vmem_limit_bytes"}', headers=headers)
    assert r.status_code == 422, r.text
    assert "Content-Type: application/json" in r.json()["detail"]


# ------------------------------------------------------------------ Slack signature headers


@pytest.fixture(scope="module")
def slack_client(assistant):
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET)
    app = create_app(settings, assistant, slack_client=WebClient(base_url="http://127.0.0.1:9/"))
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as c:
        yield c


MALFORMED = {
    "superscript-two-latin-1": ("X-Slack-Request-Timestamp", b"\xb2"),
    "superscript-two-utf-8": ("X-Slack-Request-Timestamp", "²".encode()),
    "arabic-indic-digits": ("X-Slack-Request-Timestamp", "١٧٠٠٠٠٠٠٠٠".encode()),
    "400-digit-timestamp": ("X-Slack-Request-Timestamp", b"1" + b"0" * 399),
    "4300-digit-timestamp": ("X-Slack-Request-Timestamp", b"1" + b"0" * 4299),
    "4301-digit-timestamp": ("X-Slack-Request-Timestamp", b"9" * 4301),
    "negative-timestamp": ("X-Slack-Request-Timestamp", b"-17"),
    "signature-e-acute-utf-8": ("X-Slack-Signature", "v0=é".encode()),
    "signature-e-acute-latin-1": ("X-Slack-Signature", b"v0=\xe9"),
    "signature-without-version": ("X-Slack-Signature", b"0" * 64),
}


@pytest.mark.parametrize("header", MALFORMED.values(), ids=MALFORMED.keys())
def test_every_malformed_slack_signature_header_is_a_401_never_a_500(slack_client, caplog, header):
    name, value = header
    body = json.dumps({"token": "legacy", "challenge": "c-1", "type": "url_verification"})
    headers = {k: v.encode() for k, v in signed(body).items()}
    headers[name] = value
    with caplog.at_level(logging.WARNING):
        r = slack_client.post("/slack/events", content=body, headers=headers)
    assert r.status_code == 401, r.text
    assert "signature" in r.json()["detail"]
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    # and the same body, properly signed, is answered
    assert slack_client.post("/slack/events", content=body, headers=signed(body)).status_code == 200


# ------------------------------------------------------------------ bounded report integers


def estimate_report() -> dict:
    return json.loads((ROOT / "tests/data/estimate_report.json").read_text())


@pytest.mark.parametrize(("path", "value"), [
    (("headroom_bytes",), -10**400),
    (("headroom_bytes",), -(MAX_BYTE_COUNT + 1)),
    (("total_bytes",), 2**64),
    (("target", "hbm_bytes"), 10**30),
    (("top_buffers", 0, "bytes"), 10**19),
    (("padding", "waste_bytes"), -10**100),
])
def test_a_report_byte_count_beyond_the_bound_is_a_422_naming_it(client, caplog, path, value):
    report = estimate_report()
    node = report
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with caplog.at_level(logging.ERROR):
        r = client.post("/v1/ask", json={"question": "Will this fit?", "report": report})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert f"report.EstimateReport.{'.'.join(map(str, path))}: Input should be" in detail, detail
    assert str(MAX_BYTE_COUNT) in detail
    assert not caplog.records


def test_a_profile_report_byte_count_beyond_the_bound_is_a_422(client):
    report = {"backend": "cpu", "calls": 2, "baseline_bytes": 0, "live_bytes_per_call": [1024, 10**40],
              "peak_bytes": 1024, "peak_call": 1, "growth_bytes_per_call": 0, "leak_suspects": [],
              "call_seconds": [0.1, 0.1], "trace_dir": "t", "xprof_command": "xprof --logdir t"}
    r = client.post("/v1/ask", json={"question": "Is this a leak?", "report": report})
    assert r.status_code == 422
    assert ["body", "report", "ProfileReport", "live_bytes_per_call", 1] in [e["loc"] for e in r.json()["errors"]]
    report["live_bytes_per_call"] = [1024, 2048]
    assert client.post("/v1/ask", json={"question": "Is this a leak?", "report": report}).status_code == 200


def test_report_byte_counts_at_the_bounds_are_answered(client):
    report = estimate_report()
    report.update(fits=False, total_bytes=MAX_BYTE_COUNT, headroom_bytes=-MAX_BYTE_COUNT)
    report["padding"]["waste_bytes"] = MAX_BYTE_COUNT
    r = client.post("/v1/ask", json={"question": "Will this fit?", "report": report})
    assert r.status_code == 200, r.text
    assert r.json()["facts"]["exceeded_by_bytes"] == MAX_BYTE_COUNT


def test_absurd_figures_in_a_reports_parsed_compile_error_are_answered_not_a_500(client):
    """A parsed error holds what the log said (however large); every computation on it is safe."""
    report = estimate_report()
    report["fits"] = False
    report["compile_error"] = {"category": "compile_hbm_oom", "requested_bytes": -10**400, "available_bytes": 3,
                               "used_bytes": 10**399, "exceeded_by_bytes": 10**400, "free_bytes": 10**300}
    r = client.post("/v1/ask", json={"question": "Will this fit?", "report": report})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("question", [
    "why does jacfwd OOM? a has " + "9" * 400 + " elements and sums to a scalar",
    "it went from " + "9" * 400 + " GB to 5 GB, how much is that in %?",
    "peak " + "9" * 300 + ".5 GiB with a limit of 16 GiB, how much over?",
    "by how much over: limit 1e400 GB, peak 5 GB",
    "jacrev returns a length-" + "9" * 30 + " vector and a has 1e15 elements: the full jacobian?",
])
def test_absurd_figures_in_the_question_are_answered_not_a_500_nor_read_as_a_tail_of_their_digits(client, question):
    r = client.post("/v1/ask", json={"question": question})
    assert r.status_code == 200, r.text
    assert "999.5 GiB" not in r.json()["answer"] and "400 GB" not in r.json()["answer"]


def test_the_schema_states_the_bounds_of_report_byte_counts(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model, field in (("EstimateReport", "headroom_bytes"), ("EstimateReport", "total_bytes"),
                         ("TargetInfo", "hbm_bytes"), ("ProfileReport", "peak_bytes")):
        prop = schemas[model]["properties"][field]
        assert (prop["minimum"], prop["maximum"]) == (-MAX_BYTE_COUNT, MAX_BYTE_COUNT), (model, field)
    items = schemas["ProfileReport"]["properties"]["live_bytes_per_call"]["items"]
    assert items["maximum"] == MAX_BYTE_COUNT


# ------------------------------------------------------------------ Slack text patterns


@pytest.mark.parametrize("unit", ["<@A|", "<a|", "<@A", "<"])
def test_slack_text_built_to_make_the_patterns_backtrack_is_read_in_linear_time(unit):
    def seconds(n: int) -> float:
        started = time.perf_counter()
        question_from_slack(unit * n)
        return time.perf_counter() - started

    seconds(100)  # warm up
    small, large = seconds(2_000), seconds(8_000)
    # 8,000 × "<@A|" took 3 s with the unbounded patterns (quadratic); linear takes milliseconds.
    assert large < 0.5, (unit, large)
    assert large < 16 * small + 0.05, (unit, small, large)  # 4 × the text, not 16 × the time


def test_slack_text_is_cut_to_slacks_own_limit_before_matching_and_still_converted():
    assert question_from_slack("<@U0BOT|oomkb> why <https://x.example/a|this> OOM?").question == "why this OOM?"
    long = "<@U0BOT> " + "word " * 20_000
    assert len(question_from_slack(long).question) <= MAX_SLACK_TEXT_CHARS


@pytest.fixture(scope="module")
def slack_api():
    stand_in = SlackStandIn()
    yield stand_in
    stand_in.server.shutdown()


def slash_command(c: TestClient, slack_api: SlackStandIn, text: str, n: int) -> dict:
    form = urlencode({
        "token": "legacy", "team_id": "T0TEST", "channel_id": "C0CHANNEL", "user_id": "U0ASKER",
        "command": "/oom", "text": text, "trigger_id": "1.2.3",
        "response_url": slack_api.url + f"commands/T0TEST/{n}/secret",
    })
    r = c.post("/slack/events", content=form, headers=signed(form, content_type="application/x-www-form-urlencoded"))
    assert r.status_code == 200
    (posted,) = slack_api.wait_for(f"commands/T0TEST/{n}/secret")
    return posted


@pytest.mark.parametrize(("configured", "expected"), [(None, "ephemeral"), ("in_channel", "in_channel")])
def test_oom_answers_only_the_asker_unless_the_operator_chooses_the_channel(assistant, slack_api, configured, expected):
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET}
    if configured:
        env["OOMKB_SLACK_COMMAND_RESPONSE"] = configured
    app = create_app(Settings.from_env(env), assistant, slack_client=WebClient(base_url=slack_api.url))
    with TestClient(app, base_url=LOCAL) as c:
        posted = slash_command(c, slack_api, "How do I fix `Ran out of memory in memory space hbm`?",
                               n=1 if configured is None else 2)
        assert posted["response_type"] == expected
        if configured is None:  # text made to make the old patterns backtrack is answered too
            posted = slash_command(c, slack_api, "<@A|" * 8_000, n=3)
            assert posted["response_type"] == "ephemeral" and posted["blocks"]


def test_an_unknown_slack_response_type_names_its_variable(monkeypatch):
    monkeypatch.setenv("OOMKB_SLACK_COMMAND_RESPONSE", "everyone")
    with pytest.raises(SettingsError, match="OOMKB_SLACK_COMMAND_RESPONSE"):
        Settings.from_env()


# ------------------------------------------------------------------ /readyz says no paths


def test_a_failed_load_is_explained_in_readyz_and_503s_without_paths(tmp_path, caplog):
    secret_place = tmp_path / "private-folder-7f3a" / "docs"
    app = create_app(Settings(docs_dir=secret_place))
    with caplog.at_level(logging.ERROR, logger="oomkb"), TestClient(app, base_url=LOCAL) as c:
        assert app.state.holder.wait(timeout=300) is False
        ready = c.get("/readyz")
        ask = c.post("/v1/ask", json={"question": "How do I fix an HBM OOM?"})
    assert ready.status_code == 503 and ready.json()["status"] == "failed"
    assert "guide" in ready.json()["detail"] and "server log" in ready.json()["detail"]
    assert ask.status_code == 503 and ready.json()["detail"] in ask.json()["detail"]
    for text in (ready.text, ask.text):
        assert "private-folder-7f3a" not in text and str(tmp_path) not in text
    assert any(str(secret_place) in rec.getMessage() for rec in caplog.records)  # the operator sees it


def test_a_damaged_new_generation_shows_in_readyz_as_degraded_without_paths(index_copy, embedder, caplog):
    from oomkb.api.core.assistant import Assistant
    from oomkb.indexer.store import CURRENT, VECTORS, load_index
    from oomkb.kb.corpus import load_corpus
    from oomkb.kb.live import LiveIndex
    from oomkb.kb.search import Searcher

    corpus = load_corpus()
    searcher = Searcher(load_index(index_copy), corpus.guides, corpus.cards, embedder)
    assistant = Assistant(LiveIndex(searcher, index_dir=index_copy, check_every_s=0))
    good = (index_copy / CURRENT).read_text().strip()
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL) as c:
        ready = c.get("/readyz").json()
        assert ready["index"]["generation"] == good and ready["index"]["state"] == "current"
        new = "gen-damaged-1"
        shutil.copytree(index_copy / good, index_copy / new)
        (index_copy / new / VECTORS).write_bytes(b"garbage")
        (index_copy / CURRENT).write_text(new)
        with caplog.at_level(logging.ERROR, logger="oomkb"):
            r = c.get("/readyz")
    body = r.json()
    assert r.status_code == 200 and body["status"] == "ready"
    assert body["index"]["generation"] == good and body["index"]["state"] == "degraded"
    assert body["index"]["reason"] and "index_dir" not in body["index"]
    assert str(index_copy) not in r.text and "/" not in json.dumps(body["index"])
    assert any(new in rec.getMessage() and str(index_copy) in rec.getMessage() for rec in caplog.records)


# ------------------------------------------------------------------ the page's CSP on /static


def test_the_page_under_static_has_the_same_csp_as_the_root(client):
    root = client.get("/")
    for path in ("/static/index.html", "/static/app.js", "/static/app.css"):
        r = client.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-security-policy"] == root.headers["content-security-policy"] == PAGE_CSP
        assert r.headers["x-content-type-options"] == "nosniff"


# ------------------------------------------------------------------ oomkb serve and OOMKB_HOST/PORT


def serve_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OOMKB_HOST", "OOMKB_PORT"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**env, **extra}


def test_serve_refuses_a_bad_oomkb_port_naming_the_variable():
    done = subprocess.run([sys.executable, "-m", "oomkb.api.cli", "serve"], env=serve_env(OOMKB_PORT="70000"),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "OOMKB_PORT" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_serve_listens_where_oomkb_host_and_oomkb_port_say():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "oomkb.api.cli", "serve", "--log-level", "warning"],
                               env=serve_env(OOMKB_HOST="127.0.0.1", OOMKB_PORT=str(port)), cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stderr.read()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "oomkb serve did not listen on OOMKB_PORT"
            time.sleep(0.3)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
