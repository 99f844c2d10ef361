"""The HTTP service: REST (`/v1/...`), health probes, the web page and, when configured, Slack.

`create_app(settings, assistant)` builds a FastAPI app. The assistant (embedding model + index) is
loaded once, in a background thread started by the app's lifespan, so `/healthz` answers at once
and `/readyz` turns 200 when the answers can be given. Errors a caller can cause become 4xx with
`{"detail": "<a sentence>"}`; a genuine bug is logged with its traceback and answered with a
generic 500 that shows no internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import Response

from oomkb.api.core.conversation import ConversationStore, turn_of
from oomkb.api.http.feedback import absolute_links, record_answer, store_for
from oomkb.api.http.feedback import router as feedback_router
from oomkb.api.http.holder import AssistantHolder
from oomkb.api.http.jobs import EstimateBusy, EstimateRequest, run_estimate, sandbox_refusal
from oomkb.api.http.pages import router as pages_router
from oomkb.settings import Settings
from oomkb.units import MIB, format_bytes
from oomkb.errors import OomkbError
from oomkb.api.schemas import validation_detail as _validation_detail
from oomkb.api.schemas import (
    MAX_CONVERSATION_TURNS, AskRequest, AskResponse, DiagnoseRequest, ErrorResponse, GuidesResponse,
    SearchRequest,
)
from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.parse import ParsedError
from oomkb.kb.search import SearchResponse

if TYPE_CHECKING:
    from oomkb.api.core.assistant import Assistant
    from slack_sdk import WebClient

log = logging.getLogger("oomkb.api")

STATIC_DIR = Path(__file__).resolve().parent / "static"

# The page may load only what this server serves: no CDN, no inline script.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Headers of the page and of every file under /static.
PAGE_HEADERS = {"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff"}


def get_holder(request: Request) -> AssistantHolder:
    return request.app.state.holder


def get_assistant(request: Request) -> Assistant:
    """Dependency: the shared, loaded Assistant (503 while it is loading)."""
    return get_holder(request).require()


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


# ---------------------------------------------------------------------------------------------
# Request body limit (pure ASGI)


#: After a 413, at most this much of the rest of the body is read (and dropped), for at most
#: DRAIN_SECONDS, so that a client which reads only after sending all of it sees the answer.
DRAIN_BYTES = 16 * MIB
DRAIN_SECONDS = 10.0


class NoSniff:
    """Every response says `X-Content-Type-Options: nosniff` (JSON, errors and pages alike), so no
    browser reads a JSON answer carrying a question's text as HTML or script."""

    def __init__(self, app: Callable[..., Awaitable[None]]):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_nosniff(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-content-type-options"]
                message = {**message, "headers": [*headers, (b"x-content-type-options", b"nosniff")]}
            await send(message)

        await self.app(scope, receive, send_nosniff)


#: A request body must arrive within this long: a client that sends half a body and stalls gets
#: 408 and its connection closed, instead of holding a buffer and a connection indefinitely.
BODY_READ_SECONDS = 30.0


class BodyLimitMiddleware:
    """Answer 413 to any request whose body is over `max_bytes`.

    A declared Content-Length over the limit is refused before reading; otherwise the body is read
    and counted as it streams (chunked bodies have no length to trust), refused as soon as the count
    passes the limit, and replayed to the app when it fits.

    Closing a connection with unread request bytes makes the kernel reset it, and a client that
    sends its whole body before reading (urllib, httpx) then sees "connection reset" instead of the
    413. So the 413 is sent first and up to `drain_bytes` of the rest of the body are read and
    dropped before the connection closes; a client waiting for `100 Continue` has sent nothing yet
    and gets the 413 at once.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int,
                 drain_bytes: int = DRAIN_BYTES, drain_seconds: float = DRAIN_SECONDS,
                 read_seconds: float | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.read_seconds = BODY_READ_SECONDS if read_seconds is None else read_seconds
        self.drain_bytes = drain_bytes
        self.drain_seconds = drain_seconds

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(scope, receive, send, received=0, more_body=True)
            return
        chunks: list[bytes] = []
        size = 0
        deadline = asyncio.get_running_loop().time() + self.read_seconds
        while True:
            try:
                message = await asyncio.wait_for(receive(), deadline - asyncio.get_running_loop().time())
            except TimeoutError:
                await JSONResponse(
                    {"detail": f"the request body did not arrive within {self.read_seconds:g} s"},
                    status_code=408, headers={"Connection": "close"})({"type": "http"}, _no_receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send, received=size,
                                      more_body=message.get("more_body", False))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: dict, receive: Callable, send: Callable, *,
                         received: int, more_body: bool) -> None:
        response = JSONResponse(
            {"detail": f"the request body is larger than the limit of {format_bytes(self.max_bytes)}"},
            status_code=413,
            headers={"Connection": "close"},
        )
        declared = _content_length(scope)
        waiting_for_continue = received == 0 and _header(scope, b"expect").lower() == b"100-continue"
        too_much_to_drain = declared is not None and declared > self.drain_bytes
        if not more_body or waiting_for_continue or too_much_to_drain:
            await response({"type": "http"}, _no_receive, send)
            return
        await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body, "more_body": True})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drain(receive, received), self.drain_seconds)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _drain(self, receive: Callable, received: int) -> None:
        """Read and drop the rest of the body, up to `drain_bytes` in all."""
        while received <= self.drain_bytes:
            message = await receive()
            if message["type"] != "http.request":
                return
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


async def _no_receive() -> dict:
    return {"type": "http.disconnect"}


def _content_length(scope: Mapping[str, Any]) -> int | None:
    value = _header(scope, b"content-length")
    if not value or len(value) > 20 or not value.isdigit():
        return None
    return int(value)


def _header(scope: Mapping[str, Any], name: bytes) -> bytes:
    """The first value of header `name` (lower case) of an ASGI request, or b""."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return b""


class TrustedHosts:
    """Answer only requests whose Host header names this server (against DNS rebinding).

    The check is Starlette's TrustedHostMiddleware; a refused request gets a 400 with a JSON
    `detail`, like every other client error here, instead of its plain-text body. The probes
    (`GET /healthz`, `GET /readyz`) answer any host: orchestrators call them by the pod's address,
    and they disclose nothing (no paths, no data)."""

    _ADMITTED = "oomkb.host_admitted"
    PROBES = frozenset({"/healthz", "/readyz"})

    def __init__(self, app: Callable[..., Awaitable[None]], allowed_hosts: list[str]):
        self.app = app
        self.allowed_hosts = list(allowed_hosts)
        self._check = TrustedHostMiddleware(self._admit, allowed_hosts=self.allowed_hosts,
                                            www_redirect=False)

    async def _admit(self, scope: dict, receive: Callable, send: Callable) -> None:
        scope[self._ADMITTED] = True
        await self.app(scope, receive, send)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self._check(scope, receive, send)
            return
        if scope["path"] in self.PROBES and scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return

        async def send_if_admitted(message: dict) -> None:
            if scope.get(self._ADMITTED):  # the check's own plain-text refusal is dropped
                await send(message)

        await self._check(scope, receive, send_if_admitted)
        if not scope.get(self._ADMITTED):
            host = _header(scope, b"host").decode("latin-1")[:100]
            log.warning("refused a request for Host %r (allowed: %s)", host, ", ".join(self.allowed_hosts))
            await JSONResponse(
                {"detail": f"this server does not answer for the host {host!r}; the operator can "
                 "allow it with OOMKB_ALLOWED_HOSTS"},
                status_code=400, headers={"Connection": "close"},
            )(scope, _no_receive, send)


class PageFiles(StaticFiles):
    """The page's static files, each served with the page's security headers."""

    async def get_response(self, path: str, scope: dict) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(PAGE_HEADERS)
        return response


# ---------------------------------------------------------------------------------------------
# Errors → responses


def _unreadable_body_detail(cause: BaseException) -> str:
    """Why a request body could not be parsed as JSON, in a sentence."""
    if isinstance(cause, UnicodeDecodeError):
        return (f"the request body is not valid UTF-8 (byte 0x{cause.object[cause.start]:02x} at "
                f"position {cause.start}); send JSON encoded as UTF-8")
    if isinstance(cause, RecursionError):
        return "the request body is not usable JSON: its arrays or objects are nested too deeply"
    if "integer string conversion" in str(cause):
        return "the request body is not usable JSON: a number in it has too many digits"
    return "the request body is not valid JSON"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        brief = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                 for e in errors[:20]]
        return JSONResponse({"detail": _validation_detail(errors), "errors": brief}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI answers a body its JSON parser gave up on with a bare "There was an error
        # parsing the body"; say what was wrong with it instead.
        if exc.status_code == 400 and isinstance(exc.__cause__, (ValueError, RecursionError)):
            return JSONResponse({"detail": _unreadable_body_detail(exc.__cause__)}, status_code=400)
        return await http_exception_handler(request, exc)

    @app.exception_handler(OomkbError)
    async def project_error(request: Request, exc: OomkbError) -> JSONResponse:
        """The status and retry hint are properties of the error's class (most specific wins)."""
        headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else None
        if exc.user_fault or exc.expected:
            return JSONResponse({"detail": str(exc)}, status_code=exc.http_status, headers=headers)
        log.error("%s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"detail": f"the service cannot answer: {exc}"},
                            status_code=exc.http_status, headers=headers)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse(
            {"detail": "internal error: the server could not answer this request (the cause is logged)"},
            status_code=500,
        )


# ---------------------------------------------------------------------------------------------
# POST /v1/estimate


ESTIMATE_DISABLED = (
    "POST /v1/estimate runs the submitted program and is disabled on this server; the operator "
    "can enable it with OOMKB_ENABLE_ESTIMATE=1 (or run `oomkb estimate FILE.py:FACTORY` locally)"
)


def sandbox_readiness(settings: Settings) -> dict[str, Any]:
    """What `/readyz` says about running submitted programs."""
    body: dict[str, Any] = {"enabled": settings.enable_estimate, "sandbox": settings.estimate_sandbox}
    if settings.enable_estimate:
        if settings.estimate_isolated:
            from oomkb.diagnostics.isolation import isolation_status

            body["isolated"] = isolation_status().available
            if not body["isolated"]:
                body["detail"] = "bubblewrap is not usable here: submitted programs are refused (503)"
        else:
            body["isolated"] = False
            body["detail"] = ("OOMKB_ESTIMATE_SANDBOX=none: submitted programs run without "
                              "isolation (resource limits only)")
        from oomkb.diagnostics.cgroups import cgroup_support

        held = cgroup_support()
        body["limits"] = {
            "cgroup": held.kind,
            "memory": "cgroup" if held.memory else "RLIMIT_AS",
            "processes": "cgroup" if held.pids else "RLIMIT_NPROC",
            "detail": held.detail,
        }
    return body


# ---------------------------------------------------------------------------------------------
# The app


_ERRORS = {
    400: {"model": ErrorResponse, "description": "the input cannot be used (the message says why)"},
    413: {"model": ErrorResponse, "description": "the request body is over the limit"},
    422: {"model": ErrorResponse, "description": "invalid JSON or fields"},
    503: {"model": ErrorResponse, "description": "the model and index are not loaded yet"},
}


#: What POST /v1/estimate answers besides 200: the program's own faults are 400, a program the
#: sandbox had to stop (timeout, CPU or memory limit, crash) is 422.
ESTIMATE_ERRORS = {
    400: {"model": ErrorResponse, "description": "the program or the target cannot be used: a syntax "
          "or import error, no such factory, the factory raised or called sys.exit, JAX could not "
          "trace or compile it, an unknown TPU generation or topology (the message says which)"},
    403: {"model": ErrorResponse, "description": "disabled on this server"},
    503: {"model": ErrorResponse, "description": "enabled, but this server has no isolation sandbox "
          "(bubblewrap) and its operator did not opt out with OOMKB_ESTIMATE_SANDBOX=none"},
    422: {"model": ErrorResponse, "description": "invalid JSON or fields; or the program was stopped "
          "by the sandbox: over the wall-clock timeout, over the CPU-time or memory (address-space) "
          "limit, or killed by a signal such as a segmentation fault or an abort"},
    429: {"model": ErrorResponse, "description": "another estimate is running"},
}


_ASK_ERRORS = {**_ERRORS, 404: {"model": ErrorResponse,
                                 "description": "unknown or expired conversation_id, or another caller's"}}


def _caller(request: Request) -> str:
    """Who asks, as far as the server can tell: the peer address (behind a proxy, the proxy's
    own forwarded-address handling sets it). A conversation answers only its starter."""
    return request.client.host if request.client else "-"


def create_app(
    settings: Settings | None = None,
    assistant: Assistant | None = None,
    *,
    slack_client: WebClient | None = None,
) -> FastAPI:
    """Build the service. Without `assistant`, it is loaded in the background at start-up.

    `slack_client` replaces the Slack Web API client (tests point it at a local server)."""
    from oomkb.api import prepare_process

    prepare_process()
    settings = settings or Settings.from_env()
    holder = AssistantHolder(settings, assistant)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        holder.start_loading()
        async with contextlib.AsyncExitStack() as stack:
            if app.state.mcp_lifespan is not None:  # the MCP session manager of /mcp
                await stack.enter_async_context(app.state.mcp_lifespan())
            try:
                yield
            finally:
                if app.state.job_queue is not None:
                    app.state.job_queue.close()

    app = FastAPI(
        title="oomkb",
        summary="Find and fix JAX/XLA out-of-memory errors on TPU and GPU, in your language.",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,  # Swagger UI and ReDoc load from a CDN; the schema is at /openapi.json
        redoc_url=None,
        responses={500: {"model": ErrorResponse, "description": "a bug; the cause is logged"}},
    )
    app.state.settings = settings
    app.state.holder = holder
    app.state.estimate_gate = threading.Semaphore(1)
    app.state.job_queue = None
    if settings.ray_address:  # jobs on a Ray cluster instead of one at a time here
        from oomkb.api.http.queue import JobQueue

        app.state.job_queue = JobQueue(settings)
    app.state.feedback_store = store_for(settings)
    if settings.enable_estimate and not settings.estimate_isolated:
        log.warning("OOMKB_ESTIMATE_SANDBOX=none: submitted programs run without isolation "
                    "(no network or file system boundary; resource limits only)")
    elif settings.enable_estimate:
        sandbox_refusal(settings)  # says in the log, at start-up, what to install
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(TrustedHosts, allowed_hosts=settings.trusted_hosts)  # checked first
    app.add_middleware(NoSniff)  # outermost: on every response, refusals included
    _install_error_handlers(app)

    app.state.conversations = ConversationStore()

    @app.post("/v1/ask", response_model=AskResponse, responses=_ASK_ERRORS, tags=["assistant"])
    def ask(body: AskRequest, request: Request,
            assistant: Assistant = Depends(get_assistant)) -> AskResponse:
        """Answer a question (and/or a pasted error log) in the asker's language, citing the guides.

        Follow-ups: send the answer's `conversation_id` with the next question (the server keeps
        the last turns of each conversation for an hour, for the caller that started it only), or
        the earlier turns as `history`. A follow-up inherits the earlier error log, report and
        subject. The answer's metadata is recorded under its `answer_id` for feedback and the
        gaps report."""
        store: ConversationStore = app.state.conversations
        owner = _caller(request)
        cid = body.conversation_id
        turns = None
        if cid:  # the stored turns, then any the client adds
            turns = (store.turns(cid, owner) + list(body.history or []))[-MAX_CONVERSATION_TURNS:]
        answer = assistant.ask(body, turns)
        if cid or body.history is None:
            cid = cid or store.start(owner)
            store.add(cid, owner, turn_of(body))
            answer.conversation_id = cid
        answer = absolute_links(answer, settings.public_url)
        record_answer(app.state.feedback_store, body, answer, source="api")
        return answer

    @app.post("/v1/search", response_model=SearchResponse, responses=_ERRORS, tags=["assistant"])
    def search(body: SearchRequest, assistant: Assistant = Depends(get_assistant)) -> SearchResponse:
        """Search the guides (hybrid dense + lexical), any language."""
        return assistant.search(body)

    @app.post("/v1/diagnose", response_model=ParsedError, responses=_ERRORS, tags=["assistant"])
    def diagnose(body: DiagnoseRequest) -> ParsedError:
        """Parse an out-of-memory error log into its category and sizes in bytes."""
        from oomkb.diagnostics.parse import parse_error

        return parse_error(body.error_log)

    @app.get("/v1/docs", response_model=GuidesResponse, responses={503: _ERRORS[503]}, tags=["assistant"])
    def guides(assistant: Assistant = Depends(get_assistant)) -> GuidesResponse:
        """The guides: id, title, language and sections."""
        return assistant.guides()

    from oomkb.api.http.queue import QUEUED_RESPONSE, mount_jobs, queued

    @app.post(
        "/v1/estimate", response_model=EstimateReport, tags=["diagnostics"],
        responses={**QUEUED_RESPONSE, **_ERRORS, **ESTIMATE_ERRORS},
    )
    def estimate(body: EstimateRequest, request: Request) -> Any:
        """Estimate the TPU HBM a program needs (off unless the operator enables it).

        The program runs in a child process with a wall-clock timeout, CPU-time and address-space
        limits, a private working folder and no secrets in its environment; unless the operator
        opted out, inside a bubblewrap sandbox with no network, its own PID namespace and a
        read-only view of only the Python runtime and packages.

        On a server with a Ray cluster (OOMKB_RAY_ADDRESS) it is queued instead: 202 with a
        `job_id` for GET /v1/jobs/{job_id}; the workers run it under the same rules."""
        if not settings.enable_estimate:
            return JSONResponse({"detail": ESTIMATE_DISABLED}, status_code=403)
        if request.app.state.job_queue is not None:
            return queued(request.app.state.job_queue, "estimate", body, _caller(request))
        if refusal := sandbox_refusal(settings):
            return JSONResponse({"detail": refusal}, status_code=503)
        return run_estimate(body, settings, request.app.state.estimate_gate)

    # POST /v1/plan (api/http/plan.py): the estimate's switch, sandbox, limits and gate.
    from oomkb.api.http.plan import mount_plan

    mount_plan(app, settings, gate=app.state.estimate_gate, busy=EstimateBusy,
               responses={**QUEUED_RESPONSE, **_ERRORS, **ESTIMATE_ERRORS},
               refusal=sandbox_refusal, owner_of=_caller)
    mount_jobs(app, _caller, _ERRORS)

    @app.get("/healthz", tags=["probes"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["probes"], responses={503: {"description": "still loading, or failed"}})
    def readyz() -> JSONResponse:
        """Readiness: 200 once the model and the index are loaded; the index generation, its
        state and a short reason when it is not the newest (details, with paths, in the log)."""
        if holder.assistant is None:
            status = "failed" if holder.error else "loading"
            return JSONResponse({"status": status, "detail": holder.error or "loading the model and the index"},
                                status_code=503)
        body: dict[str, Any] = {"status": "ready", "load_seconds": round(holder.load_seconds or 0, 2),
                                "estimate": sandbox_readiness(settings)}
        live = holder.assistant.live
        if live is not None:  # which index generation answers, and whether it is stale
            body["index"] = _public_index_status(live.refresh(), app.state)
        return JSONResponse(body)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8",
                            headers={**PAGE_HEADERS, "Cache-Control": "no-cache"})

    app.include_router(feedback_router)
    app.include_router(pages_router)
    app.mount("/static", PageFiles(directory=STATIC_DIR), name="static")

    # /mcp: the MCP tools over streamable HTTP (api/mcp/server.py), when the `mcp` extra is installed
    from oomkb.api.mcp.server import mount_mcp

    app.state.mcp_lifespan = mount_mcp(app, settings, holder, app.state.estimate_gate)

    if settings.slack_enabled:
        from oomkb.api.http.slack import mount_slack

        mount_slack(app, settings, holder, client=slack_client)
    return app


def _public_index_status(status: Any, state: Any) -> dict[str, Any]:
    """What /readyz tells anyone about the index: generation, state and a short reason, never a
    path; the full problem text is logged once."""
    if status.problem and getattr(state, "logged_index_problem", None) != status.problem:
        state.logged_index_problem = status.problem
        log.error("index: %s (index folder %s)", status.problem, status.index_dir)
    if status.problem:
        index_state, reason = "degraded", ("a newer index generation could not be loaded; the "
                                           "previous one answers (see the server log)")
    elif status.docs_changed:
        index_state, reason = "stale", "the guides changed since this index was built; run `oomkb index`"
    else:
        index_state, reason = "current", None
    return {"generation": status.generation, "items": status.items, "state": index_state,
            "reason": reason, "docs_changed": status.docs_changed}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("oomkb")
    except Exception:  # pragma: no cover - running from a source tree without metadata
        return "0"

