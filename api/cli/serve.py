"""`oomkb serve`: the HTTP service (REST API, web page, Slack) under uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from oomkb.api.cli.boundary import EXIT_USAGE, fail

SERVE_HELP = (
    "Run the HTTP service: the REST API (/v1/ask, /v1/search, /v1/diagnose, /v1/docs), the web "
    "page (/), health probes (/healthz, /readyz) and, when SLACK_BOT_TOKEN and "
    "SLACK_SIGNING_SECRET are set, the Slack app (/slack/events).\n\n"
    "The model and the index load in the background at start-up (the index is built on first "
    "start if missing); /readyz answers 200 once they are loaded. Other settings come from "
    "OOMKB_* variables, e.g. OOMKB_ENABLE_ESTIMATE=1 enables POST /v1/estimate.\n\n"
    "--workers N runs N server processes on one port; they share one index folder read-only, "
    "and each switches to a new index generation (written by `oomkb index`) without a restart."
)
MAX_WORKERS = 64


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
    workers: Annotated[int, typer.Option(
        "--workers", help="server processes sharing the port and the index (each about 0.5 GB "
        "resident; the query model's token table is mapped, its pages shared between them)")] = 1,
) -> None:
    """Serve the REST API, the web page and Slack with uvicorn."""
    from oomkb.settings import Settings, SettingsError

    if not 1 <= workers <= MAX_WORKERS:
        fail(f"--workers must be between 1 and {MAX_WORKERS}, got {workers}", EXIT_USAGE)
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
    _prepare_process(settings, log_level)
    import uvicorn
    if workers > 1:
        # Each worker process builds its app from the environment: pass what the options set.
        import os

        from oomkb.settings import env_var

        for field in ("host", "port", "index_dir", "docs_dir"):
            value = getattr(settings, field)
            if value is not None:
                os.environ[env_var(Settings, field)] = str(value)
        os.environ["OOMKB_LOG_LEVEL"] = log_level.lower()
        # Build or refresh the index once, here, instead of in every worker at once.
        from oomkb.api.cli.boundary import user_errors
        from oomkb.kb.corpus import refresh_index

        with user_errors():
            refresh_index(index_dir=settings.index_dir, docs_dir=settings.docs_dir)
        app = "oomkb.api.cli.serve:worker_app"
    else:
        _prefetch(settings)
        from oomkb.api.http.app import create_app

        app = create_app(settings)
    shown = f"[{host}]" if ":" in host else host
    console = Console(stderr=True)
    console.print(f"oomkb serving on [bold]http://{shown}:{port}/[/] "
                  f"(OpenAPI at /openapi.json; ready when /readyz answers 200)")
    if settings.slack_enabled:
        console.print("Slack events at /slack/events")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=False,
                    workers=workers if workers > 1 else None, factory=workers > 1, **CONNECTION_LIMITS)
    except OSError as exc:  # e.g. the port is taken
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 1)


#: What one server process holds open for clients (uvicorn's options; see the README's deployment
#: section): past `limit_concurrency` connections and requests at once, new ones get 503 at once
#: instead of exhausting file descriptors (where /healthz itself stopped answering); an idle
#: keep-alive connection closes after 5 s; request headers over 64 KiB close the connection. A
#: request body must arrive within BODY_READ_SECONDS (api/http/app.py: 408). Header read time is not
#: bounded by uvicorn: a reverse proxy in front should bound it (and buffer slow clients).
CONNECTION_LIMITS = {"limit_concurrency": 256, "timeout_keep_alive": 5,
                     "h11_max_incomplete_event_size": 64 * 1024}


def _prepare_process(settings, log_level: str) -> None:
    """Per-process set-up of a server process (the single one, or each worker)."""
    import os

    from oomkb.indexer.query_model import set_default_batching, set_default_threads

    # Parallelism comes from serving requests in parallel threads; several intra-op threads per
    # request on top of that make every request wait for descheduled threads (measured with
    # torch: on 2 cores shared with one busy process, /v1/ask took ~1.6 s with 2 threads, ~70 ms
    # with 1). The query model runs in ONNX Runtime; the same holds there.
    set_default_threads(settings.torch_threads)
    # OOMKB_QUERY_BATCH=1: queries that arrive while one is being embedded go together into
    # the next embedding call (see benchmarks/query_path.py for when that pays).
    set_default_batching(os.environ.get("OOMKB_QUERY_BATCH", "").strip().lower()
                         in {"1", "true", "yes", "on"})
    level = "DEBUG" if log_level.lower() == "trace" else log_level.upper()
    logging.basicConfig(level="WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("oomkb").setLevel(level)


def worker_app():
    """The app of one `--workers` process (uvicorn calls this in each worker)."""
    import os

    from oomkb.api.http.app import create_app
    from oomkb.settings import Settings

    settings = Settings.from_env()
    _prepare_process(settings, os.environ.get("OOMKB_LOG_LEVEL", "info"))
    _prefetch(settings)
    return create_app(settings)


def _prefetch(settings) -> None:
    """A serving process starts loading the query model now, while the web framework is imported
    (about 0.7 s); the app's loader then takes it over."""
    from oomkb.indexer.query_model import prefetch
    from oomkb.settings import default_index_dir

    prefetch(settings.index_dir or default_index_dir())
