"""`oomkb serve`: the HTTP service (REST API, web page, Slack) under uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from api.cli.boundary import EXIT_USAGE, fail

SERVE_HELP = (
    "Run the HTTP service: the REST API (/v1/ask, /v1/search, /v1/diagnose, /v1/docs), the web "
    "page (/), health probes (/healthz, /readyz) and, when SLACK_BOT_TOKEN and "
    "SLACK_SIGNING_SECRET are set, the Slack app (/slack/events).\n\n"
    "The model and the index load in the background at start-up (the index is built on first "
    "start if missing); /readyz answers 200 once they are loaded. Other settings come from "
    "OOMKB_* variables, e.g. OOMKB_ENABLE_ESTIMATE=1 enables POST /v1/estimate."
)


def register(app: typer.Typer) -> None:
    """Add the `serve` command to `app`."""
    app.command("serve", help=SERVE_HELP)(serve_command)


def serve_command(
    host: Annotated[Optional[str], typer.Option(
        "--host", help="address to listen on [default: OOMKB_HOST, else 127.0.0.1]", show_default=False)] = None,
    port: Annotated[Optional[int], typer.Option(
        "--port", help="TCP port [default: OOMKB_PORT, else 8000]", show_default=False)] = None,
    index: Annotated[Optional[Path], typer.Option("--index", help="index folder")] = None,
    docs: Annotated[Optional[Path], typer.Option("--docs", help="folder of Markdown guides")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level")] = "info",
) -> None:
    """Serve the REST API, the web page and Slack with uvicorn."""
    import uvicorn

    from api.http.app import create_app
    from api.settings import Settings, SettingsError

    if port is not None and not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, got {port}", EXIT_USAGE)
    levels = ("critical", "error", "warning", "info", "debug", "trace")
    if log_level.lower() not in levels:
        fail(f"--log-level must be one of {', '.join(levels)}, got {log_level!r}", EXIT_USAGE)
    try:
        settings = Settings.from_env(host=host, port=port, index_dir=index, docs_dir=docs)
    except SettingsError as exc:
        fail(str(exc), EXIT_USAGE)
    host, port = settings.host, settings.port  # the options win over OOMKB_HOST / OOMKB_PORT
    import torch

    # Parallelism comes from serving requests in parallel threads; several intra-op threads per
    # request on top of that make every request wait for descheduled threads (measured: on 2
    # cores shared with one busy process, /v1/ask took ~1.6 s with 2 threads, ~70 ms with 1).
    torch.set_num_threads(settings.torch_threads)
    level = "DEBUG" if log_level.lower() == "trace" else log_level.upper()
    logging.basicConfig(level="WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("oomkb").setLevel(level)
    app = create_app(settings)
    shown = f"[{host}]" if ":" in host else host
    console = Console(stderr=True)
    console.print(f"oomkb serving on [bold]http://{shown}:{port}/[/] "
                  f"(OpenAPI at /openapi.json; ready when /readyz answers 200)")
    if settings.slack_enabled:
        console.print("Slack events at /slack/events")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=False)
    except OSError as exc:  # e.g. the port is taken
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 1)
