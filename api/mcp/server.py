"""oomkb as tools for coding agents: a Model Context Protocol server (the official `mcp` SDK).

`oomkb mcp` serves it over stdio (what editors and terminal agents start); the HTTP service
mounts the streamable-HTTP transport at `/mcp` (`mount_mcp`). The tools are the service's own
operations with the REST models' fields as their input schemas; the program tools go through
the service's one path for submitted programs (the enable switch, the sandbox, the limits, one
at a time), so an agent gets no more than a REST caller. Errors a caller can cause are MCP tool
errors carrying the message the CLI prints; nothing a tool raises stops the server.
"""

import functools
import hmac
import ipaddress
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from rich.text import Text

from oomkb.api.schemas import AskRequest, DiagnoseRequest, ProgramRequest, SearchRequest, validation_detail
from oomkb.errors import OomkbError, UserInputError
from oomkb.settings import Settings

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from oomkb.api.http.holder import AssistantHolder

#: The text part of a tool result is cut here (the structured part is the report itself, whose
#: lists the models already bound: k <= 50 results, top_n <= 100 buffers).
MAX_TEXT_CHARS = 20_000
#: How long a stdio tool waits for the embedding model and the index on its first call.
LOAD_WAIT_S = 600.0

INSTRUCTIONS = (
    "oomkb helps fix JAX/XLA out-of-memory errors on TPU and GPU. Start with diagnose_log on the "
    "error text; search_guides or ask for the fix in any language; estimate_program and "
    "plan_program compile the program for a TPU (no TPU needed) and report figures and verified "
    "fixes; read_report summarises a saved report."
)


class McpInputError(UserInputError):
    """A tool argument the server cannot use."""


def _field(model: type[BaseModel], name: str) -> Any:
    """The REST model's field `name` as an annotation, so a tool's schema is the REST schema."""
    info = model.model_fields[name]
    return Annotated[info.annotation, info]


class VaryArgument(BaseModel):
    """An integer keyword argument of the factory and the range to search (`--vary NAME=LO..HI`)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    low: int = Field(ge=-(1 << 40), le=1 << 40)
    high: int = Field(ge=-(1 << 40), le=1 << 40)


class ChooseArgument(BaseModel):
    """A categorical keyword argument of the factory and the values to compile (`--choose
    NAME=a,b,c`); with `vary`, the largest fitting value under each."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    values: list[str] = Field(min_length=1, max_length=16)


# ---------------------------------------------------------------------------------------------
# Text summaries of the reports


def _plain(markup: str) -> str:
    return Text.from_markup(markup).plain


def _fb(n: int | None) -> str:
    from oomkb.units import format_bytes

    return "-" if n is None else format_bytes(n)


def summarize(report: Any) -> str:
    """A few lines an agent can quote: the verdict and the figures that matter."""
    from oomkb.api.cli.estimate import verdict_lines
    from oomkb.diagnostics.capture import CaptureReport
    from oomkb.diagnostics.diff import DiffReport
    from oomkb.diagnostics.estimate.report import EstimateReport
    from oomkb.diagnostics.plan import PlanReport
    from oomkb.diagnostics.profile import ProfileReport

    if isinstance(report, EstimateReport):
        lines = [f"{report.function} on {report.target.topology} ({report.target.device_kind})"]
        lines += [_plain(line) for line in verdict_lines(report)]
        if report.top_buffers:
            lines.append("largest buffers per device:")
        for b in report.top_buffers[:5]:
            lines.append(f"  {_fb(b.bytes)} {b.kind} {b.shape} {b.op_name or ''} {b.source or ''}".rstrip())
        lines += [f"finding: {f}" for f in report.findings[:5]]
        return "\n".join(lines)
    if isinstance(report, PlanReport):
        lines = [f"{report.function} on {report.target.topology} ({report.target.device_kind}): "
                 f"{report.compiles} compiles in {report.seconds:.1f} s"]
        lines += [_plain(line) for line in verdict_lines(report.baseline)]
        for fix in report.fixes:
            state = ("verified" if fix.verified else "not verified") + (", fits" if fix.fits else ", does not fit")
            saving = f", saves {_fb(fix.saving_bytes)}" if fix.saving_bytes else ""
            lines.append(f"- {fix.title} ({state}): {_fb(fix.total_bytes)} per device{saving}")
        if report.vary is not None:
            v = report.vary
            lines.append(f"largest {v.name} that fits: {v.largest_fitting}")
        for row in report.choices:
            if row.vary is not None:
                lines.append(f"- {row.name}={row.value}: largest {row.vary.name} that fits "
                             f"{row.at_value} ({_fb(row.total_bytes)} per device; "
                             f"{row.vary.compiles} compiles)")
            else:
                lines.append(f"- {row.name}={row.value}: {'fits' if row.fits else row.status}, "
                             f"{_fb(row.total_bytes)} per device")
        return "\n".join(lines)
    if isinstance(report, DiffReport):
        verdict = lambda fits: "fits" if fits else "does not fit"  # noqa: E731
        lines = [f"{report.function_before} ({report.target_before}, {verdict(report.fits_before)}) -> "
                 f"{report.function_after} ({report.target_after}, {verdict(report.fits_after)})",
                 f"total per device changed by {report.total_delta_bytes:+,} bytes"]
        for f in report.figures:
            if f.delta_bytes:
                lines.append(f"  {f.name}: {_fb(f.before)} -> {_fb(f.after)}")
        roles = {role: d for role, d in (report.by_role_delta or {}).items() if d}
        if roles:
            lines.append("at the peak, by role: " + ", ".join(
                f"{role} {d:+,} bytes" for role, d in sorted(roles.items(), key=lambda kv: -kv[1])))
        if not report.changed:
            lines.append("nothing changed")
        for b in report.buffers[:5]:
            shapes = " -> ".join(s for s in (b.shape_before, b.shape_after) if s)
            lines.append(f"  {b.delta_bytes:+,} bytes {b.status} {b.role or ''} "
                         f"{b.op_name or b.instruction or '?'} {shapes} {b.source or ''}".rstrip())
        return "\n".join(lines)
    if isinstance(report, CaptureReport):
        lines = [f"out of memory on {report.backend} ({report.error.category}); "
                 f"{_fb(report.live_bytes_total)} live in {report.live_array_count} arrays"]
        if report.raised_at:
            lines.append(f"raised at {report.raised_at}")
        for group in report.live_buffers[:5]:
            lines.append(f"  {group.model_dump_json()[:200]}")
        return "\n".join(lines)
    if isinstance(report, ProfileReport):
        return (f"{report.target or 'profile'} on {report.backend}: peak {_fb(report.peak_bytes)} at call "
                f"{report.peak_call} of {report.calls}; growth {_fb(report.growth_bytes_per_call)} per "
                f"call; {len(report.leak_suspects)} leak suspect(s)")
    return ""


def _result(model: BaseModel, summary: str) -> Any:
    """A tool result: the summary and the JSON (bounded) as text, the report as structured content."""
    from mcp.types import CallToolResult, TextContent

    data = model.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False, indent=1)
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n... (cut at {MAX_TEXT_CHARS} characters; the structured result is whole)"
    return CallToolResult(content=[TextContent(text=summary), TextContent(text=text)],
                          structured_content=data)


def _validated(model: type[BaseModel], **fields: Any) -> Any:
    """The REST request model from the tool's arguments; its errors in the REST service's words."""
    try:
        return model(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise McpInputError(validation_detail(list(exc.errors()))) from None


def _read_file(path: str, what: str) -> str:
    """A local file's text (stdio only), or the CLI's message for a missing or unreadable one."""
    p = Path(path).expanduser()
    if not p.exists():
        raise McpInputError(f"{what} file not found: {path}")
    if p.is_dir():
        raise McpInputError(f"{what} path is a folder, not a file: {path}")
    try:
        return p.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise McpInputError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------------------------------
# The server


def build_server(settings: Settings, holder: "AssistantHolder", gate: threading.Semaphore,
                 *, remote: bool, load_wait_s: float = 0.0) -> "MCPServer":
    """The MCP server over `holder`'s assistant.

    `remote` (HTTP): programs and reports arrive as text, never as paths on the server's disk.
    `gate` is the service's one-submitted-program-at-a-time semaphore."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("oomkb", instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")

    def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
        """A tool function whose project errors become tool errors carrying their message (the
        SDK runs plain functions in a worker thread and hides the text of any other exception)."""

        @functools.wraps(fn)
        def tool(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except OomkbError as exc:
                raise ToolError(str(exc)) from None

        return tool

    def assistant() -> Any:
        holder.start_loading()
        holder.wait(load_wait_s)
        return holder.require()

    @server.tool(description="Search the oomkb guides (JAX/XLA out-of-memory fixes, six languages) "
                 "for a question or an error message in any language; ranked passages with citations.")
    @guarded
    def search_guides(query: _field(SearchRequest, "query"), language: _field(SearchRequest, "language") = None,
                      k: _field(SearchRequest, "k") = 5):
        req = _validated(SearchRequest, query=query, language=language, k=k)
        response = assistant().search(req)
        lines = [f"{r.rank}. {r.citation} [{r.language}] {r.section_title}: {' '.join(r.text.split())[:200]}"
                 for r in response.results]
        return _result(response, "\n".join(lines) or "no passage matched")

    @server.tool(description="Parse a JAX/XLA out-of-memory error log into its category (HBM, VMEM, "
                 "host, compile-time or runtime) and its sizes in bytes: the first step on an OOM.")
    @guarded
    def diagnose_log(text: _field(DiagnoseRequest, "error_log")):
        from oomkb.diagnostics.parse import parse_error

        req = _validated(DiagnoseRequest, error_log=text)
        parsed = parse_error(req.error_log)
        facts = ", ".join(f"{k}={v}" for k, v in parsed.model_dump(mode="json").items()
                          if v not in (None, [], {}, "") and not isinstance(v, (dict, list)))
        return _result(parsed, facts[:2000])

    @server.tool(description="Ask the oomkb assistant how to fix an out-of-memory error: a question "
                 "in any language, optionally the error log and a report from estimate/plan/run; the "
                 "answer is in the question's language and cites the guides.")
    @guarded
    def ask(question: _field(AskRequest, "question") = "", error_log: _field(AskRequest, "error_log") = None,
            report: _field(AskRequest, "report") = None):
        req = _validated(AskRequest, question=question, error_log=error_log, report=report)
        answer = assistant().ask(req)
        return _result(answer, answer.answer)

    from oomkb.api.http.jobs import EstimateBusy, EstimateRequest, run_estimate, sandbox_refusal
    from oomkb.api.http.plan import ChooseRequest, PlanRequest, VaryRequest, run_plan

    def run_program(kind: str, source: str, factory: str, tpu: str, topology: str | None,
                    vary: VaryArgument | None = None, choose: ChooseArgument | None = None) -> Any:
        """Estimate or plan `source` through the service's path for submitted programs: its
        switch, its sandbox and limits, one program at a time."""
        if not settings.enable_estimate:
            raise ToolError(f"{kind}_program runs the program and is disabled on this server; the "
                            "operator can enable it with OOMKB_ENABLE_ESTIMATE=1")
        if refusal := sandbox_refusal(settings):
            raise ToolError(refusal)
        common = dict(source=source, factory=factory, tpu=tpu, topology=topology)
        if kind == "estimate":
            report = run_estimate(_validated(EstimateRequest, **common), settings, gate)
        else:
            vary_req = _validated(VaryRequest, **vary.model_dump()) if vary else None
            choose_req = _validated(ChooseRequest, **choose.model_dump()) if choose else None
            report = run_plan(_validated(PlanRequest, **common, vary=vary_req, choose=choose_req),
                              settings, gate, EstimateBusy)
        return _result(report, summarize(report))

    estimate_doc = ("Compile a JAX program for a TPU generation with the real XLA:TPU compiler (no TPU "
                    "needed) and report the HBM it needs per device: fits or not, the largest buffers. "
                    "The program defines FACTORY() returning (function, args).")
    plan_doc = ("Find what makes a JAX program fit on a TPU by compiling each remedy (donation, VMEM "
                "limit, larger topology, other generations, bfloat16) and, with `vary`, the largest "
                "value of an integer argument that fits; with `choose`, each value of a categorical "
                "argument (remat policy, dtype, mesh layout) compiled, and with both the largest "
                "fitting value per choice; every fix marked verified was compiled.")
    factory_t = _field(ProgramRequest, "factory")
    tpu_t = _field(ProgramRequest, "tpu")
    topology_t = _field(ProgramRequest, "topology")
    source_t = _field(ProgramRequest, "source")
    path_t = Annotated[str, Field(min_length=1, max_length=4096, description="path of the file")]
    report_t = Annotated[str, Field(min_length=1, max_length=4_000_000, description="the report's JSON")]

    if remote:
        @server.tool(name="estimate_program", description=estimate_doc + " Send the program's source.")
        @guarded
        def estimate_remote(source: source_t, factory: factory_t = "make", tpu: tpu_t = "v5e",
                            topology: topology_t = None):
            return run_program("estimate", source, factory, tpu, topology)

        @server.tool(name="plan_program", description=plan_doc + " Send the program's source.")
        @guarded
        def plan_remote(source: source_t, factory: factory_t = "make", tpu: tpu_t = "v5e",
                        topology: topology_t = None, vary: VaryArgument | None = None,
                        choose: ChooseArgument | None = None):
            return run_program("plan", source, factory, tpu, topology, vary, choose)
    else:
        @server.tool(name="estimate_program", description=estimate_doc + " Give the program file's path.")
        @guarded
        def estimate_local(path: path_t, factory: factory_t = "make", tpu: tpu_t = "v5e",
                           topology: topology_t = None):
            return run_program("estimate", _read_file(path, "program"), factory, tpu, topology)

        @server.tool(name="plan_program", description=plan_doc + " Give the program file's path.")
        @guarded
        def plan_local(path: path_t, factory: factory_t = "make", tpu: tpu_t = "v5e",
                       topology: topology_t = None, vary: VaryArgument | None = None,
                       choose: ChooseArgument | None = None):
            return run_program("plan", _read_file(path, "program"), factory, tpu, topology, vary,
                               choose)

    report_help = ("the JSON of `oomkb estimate --json`, `oomkb plan --json`, `oomkb run --json` "
                   "(a capture), `oomkb profile --json` or `oomkb diff --json`")

    def read(text: str, where: str) -> Any:
        try:
            parsed = TypeAdapter(_report_types()).validate_json(text)
        except ValidationError:
            raise McpInputError(f"{where} is not {report_help}") from None
        return _result(parsed, summarize(parsed))

    if remote:
        @server.tool(name="read_report", description="Summarise a saved oomkb report (estimate, plan, "
                     "capture, profile or diff): its verdict and figures. Send the report's JSON text.")
        @guarded
        def read_report_remote(report: report_t):
            return read(report, "the report")
    else:
        @server.tool(name="read_report", description="Summarise a saved oomkb report (estimate, plan, "
                     "capture, profile or diff): its verdict and figures. Give the JSON file's path.")
        @guarded
        def read_report_local(path: path_t):
            return read(_read_file(path, "report"), path)

    _add_guide_resources(server, settings)
    return server


def _report_types() -> Any:
    """The saved reports read_report reads (imported on first use: the imports are heavy)."""
    from oomkb.diagnostics.capture import CaptureReport
    from oomkb.diagnostics.diff import DiffReport
    from oomkb.diagnostics.estimate.report import EstimateReport
    from oomkb.diagnostics.plan import PlanReport
    from oomkb.diagnostics.profile import ProfileReport

    return Union[EstimateReport, PlanReport, CaptureReport, ProfileReport, DiffReport]


def guide_markdown(settings: Settings, doc_id: str, lang: str | None) -> str:
    """One guide as Markdown, each section followed by its card in `lang` (English by default)."""
    from oomkb.indexer.guides import load_guides
    from oomkb.kb.cards import load_cards
    from oomkb.kb.language import LANGUAGES

    reader = lang or "en"
    if reader not in LANGUAGES:
        raise McpInputError(f"unknown language {reader[:35]!r}; use one of {', '.join(LANGUAGES)}")
    guides = load_guides(settings.docs_dir)
    guide = next((g for g in guides if g.doc_id == doc_id), None)
    if guide is None:
        raise McpInputError(f"no guide {doc_id[:80]!r}; the guides are: {', '.join(g.doc_id for g in guides)}")
    cards = {c.section: c for c in load_cards() if c.doc_id == guide.doc_id}
    parts = [f"<!-- oomkb guide {guide.doc_id} ({guide.language}); cards in {reader} -->"]
    for section in guide.sections:
        parts.append(section.text.strip() if section.level <= 1 else
                     f"{'#' * min(section.level, 6)} {section.title}\n\n{section.text.strip()}")
        card = cards.get(section.id)
        text = card.text(reader) if card else None
        if text is not None:
            actions = "".join(f"\n> {i}. {a}" for i, a in enumerate(text.actions, 1))
            parts.append(f"> **{text.title}** ({section.id}): {text.summary}{actions}")
    return "\n\n".join(parts) + "\n"


def _add_guide_resources(server: "MCPServer", settings: Settings) -> None:
    """`oomkb://guides/{doc_id}` (and `?lang=xx` for the cards' language): each guide as Markdown."""
    from mcp.server.mcpserver.exceptions import ResourceError

    def read(doc_id: str, lang: str | None) -> str:
        try:
            return guide_markdown(settings, doc_id, lang)
        except OomkbError as exc:
            raise ResourceError(str(exc)) from None

    @server.resource("oomkb://guides/{doc_id}{?lang}", name="guide", mime_type="text/markdown",
                     description="an oomkb guide with each section's card in language `lang` "
                     "(en, fr, de, es, ja, zh, ...)")
    def guide(doc_id: str, lang: str | None = None) -> str:
        return read(doc_id, lang)


# ---------------------------------------------------------------------------------------------
# Transports


def serve_stdio(settings: Settings | None = None) -> None:
    """`oomkb mcp`: the server over stdin/stdout until the client closes it."""
    from oomkb.api.http.holder import AssistantHolder

    settings = settings or Settings.from_env()
    holder = AssistantHolder(settings)
    server = build_server(settings, holder, threading.Semaphore(1), remote=False, load_wait_s=LOAD_WAIT_S)
    server.run("stdio")


def _loopback(scope: dict) -> bool:
    client = scope.get("client")
    try:
        return client is not None and ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


class McpEndpoint:
    """`/mcp` of the HTTP service (ASGI): the SDK's streamable-HTTP transport behind a token.

    With `OOMKB_MCP_TOKEN` (or else `OOMKB_ADMIN_TOKEN`) set, every request needs
    `Authorization: Bearer <token>`; with neither, only clients on this machine (loopback) may
    use it, since its tools can run programs and read the knowledge base on the caller's behalf."""

    def __init__(self, server: "MCPServer", settings: Settings):
        self.server = server
        secret = settings.mcp_token or settings.admin_token
        self.token = secret.get_secret_value() if secret else ""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        from starlette.responses import JSONResponse

        if self.token:
            scheme, _, given = dict(scope.get("headers", ())).get(b"authorization", b"").decode(
                "latin-1").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                await JSONResponse({"detail": "/mcp needs the operator's token: Authorization: Bearer "
                                    "<OOMKB_MCP_TOKEN, or OOMKB_ADMIN_TOKEN when that is unset>"},
                                   status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        elif not _loopback(scope):
            await JSONResponse({"detail": "/mcp answers only this machine unless the operator sets "
                                "OOMKB_MCP_TOKEN (or OOMKB_ADMIN_TOKEN)"}, status_code=403)(scope, receive, send)
            return
        await self.server.session_manager.handle_request(scope, receive, send)


def mount_mcp(app: Any, settings: Settings, holder: "AssistantHolder", gate: threading.Semaphore) -> Any:
    """Add `/mcp` to the FastAPI `app`; returns a function giving the lifespan context the app must
    enter each time it starts (a fresh SDK session manager: one runs only once). Without the `mcp`
    package, nothing is added and None is returned."""
    try:
        from mcp.server.transport_security import TransportSecuritySettings
    except ModuleNotFoundError:
        return None
    server = build_server(settings, holder, gate, remote=True)

    def lifespan():
        # The app's TrustedHosts already refuses foreign Host headers (DNS rebinding).
        server.streamable_http_app(stateless_http=True, json_response=True,
                                   transport_security=TransportSecuritySettings(
                                       enable_dns_rebinding_protection=False))
        return server.session_manager.run()

    app.add_route("/mcp", McpEndpoint(server, settings), methods=["GET", "POST", "DELETE"],
                  include_in_schema=False)
    return lifespan


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("oomkb")
    except Exception:  # pragma: no cover - a source tree without metadata
        return "0"
