"""`oomkb` command line: a thin layer over the Python API; errors become messages, not tracebacks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rich.markup import escape

from oomkb.api.cli.options import JsonOption
from oomkb.api.cli.boundary import EXIT_FAILURE, EXIT_USAGE, fail, missing_extra_message, user_errors

app = typer.Typer(
    name="oomkb",
    help="Find and fix JAX/XLA out-of-memory errors: guides search, error diagnosis, TPU HBM "
    "estimates without a TPU, memory profiles, and an assistant that answers in your language.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console(soft_wrap=False)
err = Console(stderr=True)


def _clean_text(value: str, what: str) -> str:
    """Command-line text may hold undecodable bytes (surrogate escapes): replace them."""
    text = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if "\ufffd" in text and not any(ch.isalnum() for ch in text.replace("\ufffd", "")):
        fail(f"the {what} is not readable text (binary bytes?)", EXIT_USAGE)
    return text


@app.command("index")
def index_command(
    docs: Annotated[Optional[Path], typer.Option("--docs", help="folder of Markdown guides")] = None,
    index: Annotated[Optional[Path], typer.Option("--index", help="index folder")] = None,
    as_json: JsonOption = False,
) -> None:
    """Build or refresh the search index (incremental and atomic)."""
    from oomkb.kb.corpus import build

    with user_errors():
        stats = build(index_dir=index, docs_dir=docs, progress=not as_json and sys.stderr.isatty())
    if as_json:
        print(stats.model_dump_json(indent=2))
        return
    if stats.previous_index_problem:
        err.print(f"[yellow]replaced a bad index:[/] {stats.previous_index_problem}")
    out.print(
        f"index ready in {stats.index_dir} ({stats.items} texts: {stats.embedded} embedded, "
        f"{stats.reused} unchanged) in {stats.seconds:.1f} s"
    )


@app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="a question or an error message, any language")],
    k: Annotated[int, typer.Option("-k", "--k", help="number of results (1-50)")] = 5,
    lang: Annotated[Optional[str], typer.Option("--lang", help="only guides in this language")] = None,
    index: Annotated[Optional[Path], typer.Option("--index", help="index folder")] = None,
    docs: Annotated[Optional[Path], typer.Option("--docs", help="folder of Markdown guides")] = None,
    as_json: JsonOption = False,
) -> None:
    """Search the guides (offline)."""
    from oomkb.kb.search import Searcher, open_searcher

    query = _clean_text(query, "query")
    with user_errors():
        Searcher._check_query(query)
        searcher = open_searcher(index_dir=index, docs_dir=docs)
        response = searcher.search(query, k=k, language=lang)
    if as_json:
        print(response.model_dump_json(indent=2))
        return
    table = Table(title=f"{len(response.results)} results ({response.query_language} query)")
    table.add_column("#", no_wrap=True)
    table.add_column("guide", no_wrap=True)
    table.add_column("section", overflow="fold", max_width=28)
    table.add_column("lang", no_wrap=True)
    table.add_column("score", no_wrap=True)
    table.add_column("passage", overflow="fold", ratio=1)
    for r in response.results:
        snippet = " ".join(r.text.split())
        table.add_row(str(r.rank), r.doc_id, r.section_title, r.language, f"{r.score:.4f}",
                      snippet[:160] + ("…" if len(snippet) > 160 else ""))
    out.print(table)


def _register_optional_commands() -> None:
    """Commands that live in their own modules (diagnostics, assistant, server)."""
    import importlib

    for name in ("diagnose", "estimate", "plan", "diff", "profile", "run", "ask", "serve", "site", "mcp"):
        try:
            module = importlib.import_module(f"oomkb.api.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"oomkb.api.cli.{name}":
                continue
            raise
        module.register(app)


_register_optional_commands()


def main() -> None:
    """Console-script entry point: unexpected failures print one line (set OOMKB_DEBUG=1 for a trace)."""
    from oomkb.api import prepare_process

    prepare_process()
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        raise SystemExit(130)
    except ModuleNotFoundError as exc:
        message = missing_extra_message(exc)
        if message is None or os.environ.get("OOMKB_DEBUG"):
            raise
        err.print(f"[red]error:[/] {escape(message)}")
        raise SystemExit(EXIT_FAILURE)
    except Exception as exc:  # the edge of the program: report, don't dump
        if os.environ.get("OOMKB_DEBUG"):
            raise
        err.print(f"[red]internal error:[/] {type(exc).__name__}: {exc}")
        err.print("This is a bug in oomkb; rerun with OOMKB_DEBUG=1 for details.")
        raise SystemExit(70)


if __name__ == "__main__":
    main()

