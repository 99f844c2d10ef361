"""`oomkb export-site DIR` (the guides as static pages) and `oomkb gaps` (what oomkb fails to answer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from oomkb.api.cli.options import JsonOption
from oomkb.api.cli.boundary import EXIT_USAGE, fail, terminal_safe, user_errors


def register(app: typer.Typer) -> None:
    app.command("export-site")(export_site_command)
    app.command("gaps")(gaps_command)


def export_site_command(
    target: Annotated[Path, typer.Argument(help="folder to write the site into (created)")],
    lang: Annotated[str, typer.Option("--lang", help="language of the cards beside each section")] = "en",
    docs: Annotated[Optional[Path], typer.Option("--docs", help="folder of Markdown guides")] = None,
) -> None:
    """Write the guides as static HTML pages, with the cards and a search, for reading offline."""
    from oomkb.api.core.site import export_site
    from oomkb.indexer.guides import load_guides
    from oomkb.kb.cards import load_cards
    from oomkb.kb.language import base_language, is_supported

    code = base_language(lang)
    if not is_supported(code):
        fail(f"--lang {lang!r} is not one of the supported languages (en ar hi ru zh pt es ja de fr ko)")
    if target.exists() and not target.is_dir():
        fail(f"{target} exists and is not a folder")
    with user_errors():
        guides = load_guides(docs)
        cards = load_cards()
    try:
        with user_errors():  # a linked site folder: exit 2
            pages = export_site(target, guides, cards, reader=code)
    except OSError as exc:
        fail(f"cannot write the site into {target}: {exc.strerror or exc}", 1)
    Console(stderr=True).print(f"wrote {len(pages)} pages; open {escape(str(target / 'index.html'))}")


def gaps_command(
    since: Annotated[Optional[float], typer.Option("--since", help="only the last DAYS days")] = None,
    as_json: JsonOption = False,
    db: Annotated[Optional[Path], typer.Option("--db", help="the feedback database (default OOMKB_DB)")] = None,
) -> None:
    """Questions answered `grounded: false` or marked unhelpful, grouped by meaning, biggest first."""
    from oomkb.api.core.feedback import FeedbackStore
    from oomkb.api.core.gaps import GapsReport, group_questions, searcher_functions
    from oomkb.settings import Settings
    from oomkb.kb.search import open_searcher

    if since is not None and not 0 < since <= 36500:
        fail(f"--since takes a number of days above 0, got {since:g}", EXIT_USAGE)
    with user_errors():
        settings = Settings.from_env(db=db)
        path = settings.db_path
        if not path.is_file():
            fail(f"no feedback database at {path}: the server records answers there once it has "
                 "answered (set OOMKB_DB or --db to read another)", EXIT_USAGE)
        store = FeedbackStore(path, retention_days=None)
        records = store.unhelpful_or_unanswered(since)
        if records:  # the model and index load only when there is something to group
            embed, nearest = searcher_functions(open_searcher())
            report = group_questions(records, embed, nearest, since_days=since, store=store)
        else:
            report = GapsReport(since_days=since, questions=0, groups=[])
    if as_json:
        typer.echo(json.dumps(report.model_dump(), ensure_ascii=False, indent=2))
        return
    out = Console()
    if not report.groups:
        out.print("no gaps: every recorded question was answered from the guides and none was marked unhelpful")
        return
    out.print(f"[bold]{report.questions}[/] questions in {len(report.groups)} groups")
    for n, g in enumerate(report.groups, 1):
        out.print(f"\n[bold]{n}.[/] {g.size} × ({escape(terminal_safe(', '.join(g.languages)))}) nearest: "
                  f"{escape(terminal_safe(g.nearest_section or '—'))}")
        for e in g.examples:  # askers' text: no escape sequence reaches the operator's terminal
            out.print(f"   • {escape(terminal_safe(e))}")
