"""The MCP server (api/mcp/server.py), driven by the `mcp` SDK's own client: over stdio (`python -m
oomkb mcp` in a child process) and over HTTP (`/mcp` of a live uvicorn on 127.0.0.1)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the `mcp` extra is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402

from oomkb.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"
PLAN_PROGRAMS = PROGRAMS / "plan_programs.py"
ESTIMATE_REPORT = ROOT / "tests" / "data" / "estimate_report.json"
TOOLS = {"search_guides", "diagnose_log", "ask", "estimate_program", "plan_program", "read_report"}
#: What XLA prints when `wide_sharded` (plan_programs.py) is compiled for a v5e 2x2: 24 GiB per device.
COMPILE_OOM_LOG = """Traceback (most recent call last):
  File "train.py", line 41, in <module>
    compiled = jax.jit(activation).lower(x).compile()
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of \
memory in memory space hbm. Used 24.00G of 15.75G hbm. Exceeded hbm capacity by 8.25G.
"""


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))


def _sandbox() -> str:
    from oomkb.diagnostics.isolation import isolation_status

    return "bwrap" if isolation_status().available else "none"


def _stdio(**env: str) -> StdioServerParameters:
    """`python -m oomkb mcp` with this test session's import path and oomkb home."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OOMKB_") or k == "OOMKB_HOME"}
    base["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return StdioServerParameters(command=sys.executable, args=["-m", "oomkb", "mcp"], env={**base, **env},
                                 cwd=str(ROOT))


def run(fn, *args):
    return anyio.run(fn, *args)


# ---------------------------------------------------------------------------------------------
# in process: quick


def test_schemas_come_from_the_rest_models_and_bad_input_is_a_tool_error(tmp_path):
    from oomkb.api.http.holder import AssistantHolder
    from oomkb.api.mcp.server import build_server
    from oomkb.api.schemas import SearchRequest

    settings = Settings()
    server = build_server(settings, AssistantHolder(settings), threading.Semaphore(1), remote=False)

    async def go():
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            assert all(len(t.description) > 40 for t in tools.values())
            search = tools["search_guides"].input_schema["properties"]
            rest = SearchRequest.model_json_schema()["properties"]
            assert search["k"]["maximum"] == rest["k"]["maximum"] == 50
            assert search["language"] == rest["language"]
            assert "report" in tools["ask"].input_schema["properties"]
            assert tools["plan_program"].input_schema["required"] == ["path"]
            # --choose: the same fields and bounds as POST /v1/plan's `choose`
            from oomkb.api.http.plan import ChooseRequest

            schema = tools["plan_program"].input_schema
            choose = schema["$defs"]["ChooseArgument"]["properties"]
            rest = ChooseRequest.model_json_schema()["properties"]
            assert choose["values"]["maxItems"] == rest["values"]["maxItems"] == 16
            assert choose["name"]["pattern"] == rest["name"]["pattern"]

            r = await client.call_tool("search_guides", {"query": "oom", "k": 500})
            assert r.is_error and "less than or equal to 50" in _text(r)
            r = await client.call_tool("read_report", {"path": str(tmp_path / "nope.json")})
            assert r.is_error and f"report file not found: {tmp_path / 'nope.json'}" in _text(r)
            (tmp_path / "bad.json").write_text('{"x": 1}')
            r = await client.call_tool("read_report", {"path": str(tmp_path / "bad.json")})
            assert r.is_error and "is not the JSON of `oomkb estimate --json`" in _text(r)
            r = await client.call_tool("read_report", {"path": str(ESTIMATE_REPORT)})
            assert not r.is_error and r.structured_content["function"] == "train_step"
            assert _text(r).startswith("train_step on ") and "fits" in _text(r)
            # the enable switch holds over MCP too, and comes before the file is run
            r = await client.call_tool("estimate_program", {"path": str(PLAN_PROGRAMS), "factory": "wide"})
            assert r.is_error and "OOMKB_ENABLE_ESTIMATE=1" in _text(r)
            r = await client.call_tool("plan_program", {"path": str(tmp_path)})
            assert r.is_error and "program path is a folder, not a file" in _text(r)

            res = await client.read_resource("oomkb://guides/e1000-compile-hbm-oom?lang=fr")
            text = res.contents[0].text
            assert text.startswith("<!-- oomkb guide e1000-compile-hbm-oom") and "cards in fr" in text
            assert "> **" in text
            with pytest.raises(Exception, match="no guide 'nope'"):
                await client.read_resource("oomkb://guides/nope")
            with pytest.raises(Exception, match="unknown language"):
                await client.read_resource("oomkb://guides/e1000-compile-hbm-oom?lang=xx")
            # the server still answers after every refusal
            r = await client.call_tool("diagnose_log", {"text": "Ran out of memory in memory space hbm."})
            assert not r.is_error

    run(go)


# ---------------------------------------------------------------------------------------------
# over stdio: the command an agent starts


@pytest.mark.slow
def test_stdio_tools_resource_and_the_end_to_end_fix(tmp_path):
    """An agent's session: read the compile-time OOM log, diagnose it, plan the program in the
    sandbox, and get a verified fix with its figures; plus search, ask and a resource."""
    params = _stdio(OOMKB_ENABLE_ESTIMATE="1", OOMKB_ESTIMATE_SANDBOX=_sandbox(),
                    OOMKB_ESTIMATE_TIMEOUT_S="300")
    log_file = tmp_path / "train.log"
    log_file.write_text(COMPILE_OOM_LOG)

    async def go():
        async with Client(params, read_timeout_seconds=600) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            r = await client.call_tool("diagnose_log", {"text": log_file.read_text()})
            assert not r.is_error, _text(r)
            d = r.structured_content
            assert "compile" in d["category"] and d["used_bytes"] == 24 * 2**30

            r = await client.call_tool("plan_program", {"path": str(PLAN_PROGRAMS), "factory": "wide_sharded",
                                                        "tpu": "v5e"})
            assert not r.is_error, _text(r)
            plan = r.structured_content
            assert plan["baseline"]["fits"] is False and plan["baseline"]["total_bytes"] >= 24 * 2**30
            verified = [f for f in plan["fixes"] if f["verified"] and f["fits"]]
            assert verified, plan["fixes"]
            assert any(f["total_bytes"] <= 12 * 2**30 + 2**26 for f in verified)
            summary = _text(r)
            assert "does not fit" in summary and "(verified, fits)" in summary

            r = await client.call_tool("ask", {"question": "how do I fix this?", "error_log": COMPILE_OOM_LOG})
            assert not r.is_error and r.structured_content["grounded"], _text(r)
            r = await client.call_tool("search_guides", {"query": "Ran out of memory in memory space hbm",
                                                         "k": 3})
            assert not r.is_error and len(r.structured_content["results"]) == 3
            r = await client.call_tool("search_guides", {"query": "oom", "language": "!!"})
            assert r.is_error and "language" in _text(r)
            res = await client.read_resource("oomkb://guides/e1000-compile-hbm-oom?lang=ja")
            assert "cards in ja" in res.contents[0].text

    run(go)


# ---------------------------------------------------------------------------------------------
# over HTTP: /mcp of the service


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _LiveServer:
    """The service on 127.0.0.1:<free port> in a thread (uvicorn), for the duration of a `with`."""

    def __init__(self, app):
        import uvicorn

        self.port = _free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}/mcp"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.mark.slow
def test_http_tools_token_sandbox_and_timeout(searcher):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from oomkb.api.core.assistant import Assistant
    from oomkb.api.http.app import create_app

    settings = Settings(enable_estimate=True, estimate_timeout_s=20, estimate_sandbox=_sandbox(),
                        mcp_token="s3cret-token")
    source = PLAN_PROGRAMS.read_text()
    slow = "import time\ntime.sleep(120)\ndef make():\n    pass\n"

    async def go(url: str):
        with pytest.raises(Exception):  # no token: refused before any MCP message
            async with Client(url) as client:
                await client.list_tools()
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}, timeout=120) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools) == TOOLS
                assert tools["estimate_program"].input_schema["required"] == ["source"]
                r = await client.call_tool("search_guides", {"query": "VMEM limit of a Pallas kernel", "k": 2})
                assert not r.is_error and r.structured_content["results"], _text(r)
                r = await client.call_tool("diagnose_log", {"text": COMPILE_OOM_LOG})
                assert not r.is_error and "compile" in r.structured_content["category"]
                r = await client.call_tool("ask", {"question": "x" * 25_000})
                assert r.is_error and "question" in _text(r)
                # a program through the sandbox: the batch of 2^10 rows fits on v5e
                r = await client.call_tool("estimate_program", {"source": source, "factory": "wide"})
                assert not r.is_error and r.structured_content["fits"] is True, _text(r)
                r = await client.call_tool("plan_program", {"source": source, "factory": "wide_even",
                                                            "vary": {"name": "batch", "low": 9, "high": 1}})
                assert r.is_error and "LO is greater than HI" in _text(r)
                r = await client.call_tool("estimate_program", {"source": source, "factory": "nope"})
                assert r.is_error and "nope" in _text(r)
                r = await client.call_tool("estimate_program", {"source": slow})
                assert r.is_error and "ran longer than 20 s and was stopped" in _text(r)
                # a path is not accepted over HTTP: the report travels as text
                r = await client.call_tool("read_report", {"report": ESTIMATE_REPORT.read_text()})
                assert not r.is_error and r.structured_content["function"] == "train_step"
                r = await client.call_tool("read_report", {"report": "not json"})
                assert r.is_error and "is not the JSON of" in _text(r)
                res = await client.read_resource("oomkb://guides/e1000-compile-hbm-oom")
                assert "cards in en" in res.contents[0].text

    with _LiveServer(create_app(settings, Assistant(searcher))) as url:
        run(go, url)


def test_http_mcp_refuses_other_machines_without_a_token_and_a_wrong_token():
    from fastapi.testclient import TestClient

    from oomkb.api.http.app import create_app

    class NoAssistant:  # /mcp answers the refusal before any tool could need one
        pass

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with TestClient(create_app(Settings(), NoAssistant()), base_url="http://127.0.0.1") as client:
        r = client.post("/mcp", json=body)  # TestClient's peer is "testclient", not loopback
        assert r.status_code == 403 and "OOMKB_MCP_TOKEN" in r.json()["detail"]
    with TestClient(create_app(Settings(admin_token="adm"), NoAssistant()), base_url="http://127.0.0.1") as client:
        r = client.post("/mcp", json=body, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and "Bearer" in r.headers["WWW-Authenticate"]
        r = client.post("/mcp", json=body, headers={"Authorization": "Bearer adm"})
        assert r.status_code != 401 and r.status_code != 403
