"""The HTTP service: every endpoint with the real assistant (model + index), the CONTRACT shapes,
the body limit, clear 4xx messages for bad input, readiness, and /v1/estimate behind its switch."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from fastapi.testclient import TestClient

from oomkb.api.http.app import ESTIMATE_DISABLED, create_app
from oomkb.settings import Settings, SettingsError
from tests.conftest import LOCAL

ASK_KEYS = {"language", "diagnosis", "answer", "citations", "grounded"}
CITATION_KEYS = {"doc_id", "section", "language", "quote"}
SEARCH_KEYS = {"query", "query_language", "results"}
RESULT_KEYS = {"rank", "doc_id", "section", "language", "score", "text"}
DIAGNOSE_KEYS = {
    "category", "backend", "memory_space", "requested_bytes", "available_bytes", "used_bytes",
    "exceeded_by_bytes", "free_bytes", "tensorcore_bytes", "sparsecore_bytes", "shape",
    "instruction", "custom_call_target",
}
HBM_ERROR = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
             "hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.")
RUNTIME_ERROR = ("ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                 "allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)")
MIB = 1 << 20


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant):
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL) as c:
        yield c


# ------------------------------------------------------------------ probes and page


def test_healthz_and_readyz_answer_200_when_loaded(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_before_the_model_is_loaded_readyz_and_ask_say_503_but_healthz_is_200():
    app = create_app(Settings())  # no lifespan run: nothing starts loading
    c = TestClient(app, base_url=LOCAL)
    assert c.get("/healthz").status_code == 200
    ready = c.get("/readyz")
    assert ready.status_code == 503 and ready.json()["status"] == "loading"
    r = c.post("/v1/ask", json={"question": "How do I fix an HBM OOM?"})
    assert r.status_code == 503
    assert "loading" in r.json()["detail"] and r.headers["retry-after"]


def test_web_page_is_served_with_its_own_script_and_no_external_resources(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert not re.search(r"""(src|href)=["']https?://""", page.text)
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/app.css").status_code == 200


def test_openapi_schema_lists_the_routes_and_the_models(client):
    schema = client.get("/openapi.json").json()
    for path in ("/v1/ask", "/v1/search", "/v1/diagnose", "/v1/docs", "/v1/estimate", "/healthz", "/readyz"):
        assert path in schema["paths"], path
    assert {"AskRequest", "AskResponse", "SearchResponse", "ParsedError"} <= set(schema["components"]["schemas"])


# ------------------------------------------------------------------ /v1/ask


@pytest.mark.parametrize(("lang", "question", "guide", "script"), [
    ("ru", "Как найти утечку памяти и отследить время жизни тензоров на TPU?", "tensor-lifetime-leaks", r"[\u0400-\u04FF]"),
    ("zh", "编译时 HBM 内存不足 E1000 应该怎么解决？", "e1000-compile-hbm-oom", r"[\u4e00-\u9fff]"),
    ("ar", "كيف أستخدم عارض الذاكرة في XProf لتصحيح أخطاء نفاد الذاكرة؟", "xprof-debug-oom", r"[\u0600-\u06FF]"),
    ("hi", "TPU पर रनटाइम बफ़र आवंटन त्रुटि को कैसे ठीक करें?", "runtime-buffer-allocation", r"[\u0900-\u097F]"),
    ("es", "¿Cómo soluciono un error de memoria VMEM con alcance en mi kernel de Pallas?", "scoped-vmem-oom", None),
])
def test_ask_answers_in_the_questions_language_and_cites_the_right_guide(client, lang, question, guide, script):
    r = client.post("/v1/ask", json={"question": question})
    assert r.status_code == 200, r.text
    body = r.json()
    assert ASK_KEYS <= set(body)
    assert body["language"] == lang
    assert body["grounded"] is True
    assert guide in {c["doc_id"] for c in body["citations"]}
    assert all(CITATION_KEYS <= set(c) for c in body["citations"])
    if script:
        prose = "\n".join(line for line in body["answer"].splitlines() if not line.startswith(">"))
        assert len(re.findall(script, prose)) > 30


def test_ask_with_pasted_error_log_puts_its_numbers_in_the_answer(client):
    r = client.post("/v1/ask", json={"question": "What went wrong?", "error_log": HBM_ERROR})
    body = r.json()
    assert r.status_code == 200
    assert body["diagnosis"]["category"] == "compile_hbm_oom"
    assert DIAGNOSE_KEYS <= set(body["diagnosis"])
    assert "17.34 GiB" in body["answer"] and "32.00 GiB" in body["answer"]
    assert any(c["doc_id"] == "e1000-compile-hbm-oom" for c in body["citations"])


def test_ask_explicit_language_wins(client):
    r = client.post("/v1/ask", json={"question": "How do I fix a runtime buffer allocation error?",
                                     "language": "fr"})
    assert r.status_code == 200 and r.json()["language"] == "fr"


def test_off_topic_question_is_not_grounded_and_answered_in_its_language(client):
    body = client.post("/v1/ask", json={"question": "¿Cuál es la mejor receta de paella valenciana con mariscos?"}).json()
    assert body["language"] == "es"
    assert body["grounded"] is False


def test_ask_with_neither_question_nor_log_is_a_clear_400(client):
    r = client.post("/v1/ask", json={"question": "   "})
    assert r.status_code == 400
    assert "question" in r.json()["detail"]


# ------------------------------------------------------------------ search, diagnose, docs


def test_search_returns_the_contract_shape(client):
    body = client.post("/v1/search", json={"query": "vmem_limit_bytes Pallas kernel", "k": 3}).json()
    assert SEARCH_KEYS <= set(body)
    assert 1 <= len(body["results"]) <= 3
    assert all(RESULT_KEYS <= set(r) for r in body["results"])
    assert body["results"][0]["doc_id"] == "scoped-vmem-oom"


def test_search_with_a_language_no_guide_is_written_in_is_a_clear_400(client):
    r = client.post("/v1/search", json={"query": "HBM", "language": "xx"})
    assert r.status_code == 400
    assert "no guide is written in language" in r.json()["detail"]


def test_diagnose_returns_the_parsed_error_in_bytes(client):
    body = client.post("/v1/diagnose", json={"error_log": RUNTIME_ERROR}).json()
    assert DIAGNOSE_KEYS <= set(body)
    assert body["category"] == "runtime_allocation"
    assert body["requested_bytes"] == 8 * MIB


def test_docs_lists_the_five_guides_with_their_sections(client):
    guides = client.get("/v1/docs").json()["guides"]
    assert {g["doc_id"] for g in guides} == {
        "xprof-debug-oom", "runtime-buffer-allocation", "tensor-lifetime-leaks",
        "e1000-compile-hbm-oom", "scoped-vmem-oom",
    }
    assert all(g["sections"] and g["title"] and g["language"] for g in guides)


# ------------------------------------------------------------------ body limit


def test_two_mib_body_with_content_length_is_refused_with_413(client):
    body = json.dumps({"error_log": "x" * (2 * MIB)})
    r = client.post("/v1/diagnose", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert "1.00 MiB" in r.json()["detail"]


def test_two_mib_chunked_body_without_content_length_is_refused_with_413(client):
    def chunks():
        yield b'{"error_log": "'
        for _ in range(32):
            yield b"x" * (64 * 1024)
        yield b'"}'

    r = client.post("/v1/diagnose", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_a_lying_small_content_length_does_not_let_a_big_body_through():
    from oomkb.api.http.app import BodyLimitMiddleware
    import asyncio

    seen: list[int] = []

    async def app(scope, receive, send):  # records what reaches the app
        seen.append(len((await receive())["body"]))

    sent: list[dict] = []
    messages = ([{"type": "http.request", "body": b"x" * (512 * 1024), "more_body": True}] * 3
                + [{"type": "http.request", "body": b"x" * (512 * 1024), "more_body": False}])

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "headers": [(b"content-length", b"10")]}
    asyncio.run(BodyLimitMiddleware(app, max_bytes=MIB)(scope, receive, send))
    assert seen == []
    assert sent[0]["status"] == 413
    # the rest of the body was read and dropped before the answer ended (the client reads the 413)
    assert messages == [] and sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_body_just_under_the_limit_is_accepted(client):
    log = "noise line\n" * 80_000 + RUNTIME_ERROR  # ~0.9 MB
    r = client.post("/v1/diagnose", json={"error_log": log})
    assert r.status_code == 200
    assert r.json()["category"] == "runtime_allocation"


# ------------------------------------------------------------------ 422 with clear messages


def test_invalid_json_is_a_422_that_says_so(client):
    r = client.post("/v1/ask", content=b'{"question": "oops",', headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert "not valid JSON" in r.json()["detail"]


def test_wrong_type_is_a_422_naming_the_field(client):
    r = client.post("/v1/search", json={"query": "hbm", "k": "many"})
    assert r.status_code == 422
    assert "k:" in r.json()["detail"]


def test_missing_field_is_a_422_naming_the_field(client):
    r = client.post("/v1/diagnose", json={})
    assert r.status_code == 422
    assert r.json()["detail"] == "invalid request: error_log: this field is required"


def test_unknown_field_and_out_of_range_values_are_422(client):
    assert client.post("/v1/ask", json={"question": "hbm", "colour": "red"}).status_code == 422
    assert client.post("/v1/search", json={"query": "hbm", "k": 0}).status_code == 422
    assert client.post("/v1/search", json={"query": ""}).status_code == 422


def test_body_that_is_not_a_json_object_is_a_422_asking_for_json(client):
    r = client.post("/v1/ask", content=b"question=hi", headers={"Content-Type": "text/plain"})
    assert r.status_code == 422
    assert "application/json" in r.json()["detail"]


def test_undecodable_bytes_are_a_client_error_not_a_500(client):
    r = client.post("/v1/ask", content=b'{"question": "\xff\xfe"}', headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500


def test_a_bug_becomes_a_generic_500_without_internals(assistant):
    class BrokenAssistant:
        def ask(self, req):
            raise RuntimeError("secret internal state /etc/passwd")

    with TestClient(create_app(Settings(), BrokenAssistant()), raise_server_exceptions=False, base_url=LOCAL) as c:
        r = c.post("/v1/ask", json={"question": "hbm"})
    assert r.status_code == 500
    assert "secret" not in r.text and "Traceback" not in r.text
    assert r.json()["detail"].startswith("internal error")


# ------------------------------------------------------------------ /v1/estimate


TINY_PROGRAM = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    def make():
        return jax.jit(lambda x: jnp.sin(x) @ x), (jax.ShapeDtypeStruct((256, 256), jnp.float32),)
""")


def test_estimate_is_disabled_by_default_with_a_clear_403(client):
    r = client.post("/v1/estimate", json={"source": TINY_PROGRAM, "factory": "make", "tpu": "v5e"})
    assert r.status_code == 403
    assert r.json()["detail"] == ESTIMATE_DISABLED


@pytest.fixture(scope="module")
def estimating_client(assistant):
    settings = Settings(enable_estimate=True, estimate_timeout_s=20)
    with TestClient(create_app(settings, assistant), base_url=LOCAL) as c:
        yield c


def test_enabled_estimate_runs_the_program_in_the_sandbox(estimating_client):
    r = estimating_client.post("/v1/estimate", json={"source": TINY_PROGRAM, "tpu": "v5e",
                                                     "donation_check": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["fits"] is True and body["target"]["generation"] == "v5e"
    assert body["total_bytes"] > 256 * 256 * 4


def test_enabled_estimate_reports_user_errors_as_400(estimating_client):
    broken = estimating_client.post("/v1/estimate", json={"source": "def make(:\n", "tpu": "v5e"})
    assert broken.status_code == 400 and "syntax error in program.py:1" in broken.json()["detail"]
    unknown_tpu = estimating_client.post("/v1/estimate", json={"source": TINY_PROGRAM, "tpu": "v99"})
    assert unknown_tpu.status_code == 400 and "v5e" in unknown_tpu.json()["detail"]


# ------------------------------------------------------------------ settings


def test_settings_come_from_the_environment_and_bad_values_name_the_variable(monkeypatch):
    monkeypatch.setenv("OOMKB_ENABLE_ESTIMATE", "1")
    monkeypatch.setenv("OOMKB_PORT", "9000")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s3cret")
    s = Settings.from_env()
    assert s.enable_estimate and s.port == 9000 and not s.slack_enabled
    assert s.slack_signing_secret.get_secret_value() == "s3cret"
    assert Settings.from_env(port=9100).port == 9100  # a command-line value wins
    monkeypatch.setenv("OOMKB_PORT", "eighty")
    with pytest.raises(SettingsError, match="OOMKB_PORT"):
        Settings.from_env()
    with pytest.raises(SettingsError, match="port"):
        Settings.from_env(port=-1)


def test_a_bad_service_setting_does_not_stop_offline_storage_settings(monkeypatch, tmp_path):
    from oomkb.settings import default_index_dir

    monkeypatch.setenv("OOMKB_PORT", "eighty")
    monkeypatch.setenv("OOMKB_HOME", str(tmp_path))
    assert default_index_dir() == tmp_path / "index"


def test_importing_the_project_writes_nothing_to_the_environment():
    import subprocess
    import sys

    code = ("import os; before = dict(os.environ); import oomkb, oomkb.api, oomkb.api.cli.main, "
            "oomkb.api.http.app, oomkb.indexer.model, oomkb.kb.search, oomkb.diagnostics.estimate; import sys; "
            "sys.exit(0 if dict(os.environ) == before else 1)")
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
                        "ALLOW_MULTIPLE_LIBTPU_LOAD", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES"}}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == 0


def test_serve_command_is_registered_and_rejects_a_bad_port():
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app as cli

    runner = CliRunner()
    assert "serve" in runner.invoke(cli, ["--help"]).output
    result = runner.invoke(cli, ["serve", "--port", "70000"])
    assert result.exit_code == 2
    assert "--port must be between 0 and 65535" in result.output
