"""`oomkb ask`: the assistant on the command line (same object as REST and Slack)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import TypeAdapter, ValidationError
from rich.console import Console

from oomkb.api.cli.options import JsonOption
from oomkb.api.cli.boundary import EXIT_USAGE, fail, terminal_safe, user_errors


def _read_text(path: Path, what: str) -> str:
    """A --log or --report file ('-': standard input): a regular file only; a log's last 8 MiB,
    a report whole up to 16 MiB (api/cli/files.py)."""
    from oomkb.api.cli.files import read_log_bytes, read_whole

    data = read_log_bytes(str(path), what) if what == "log" else read_whole(str(path), what)
    return data.decode("utf-8", "replace")


def _fit_log(text: str) -> str:
    """A log within the request limit: the part around the OOM message the parser finds (logs
    of training runs are long; the error is what matters), else the end of the log."""
    from oomkb.api.schemas import MAX_ERROR_LOG_CHARS
    from oomkb.diagnostics.parse import parse_error

    if len(text) <= MAX_ERROR_LOG_CHARS:
        return text
    lines = text.splitlines(keepends=True)
    found = parse_error(text).line
    centre = (found - 1) if found else len(lines) - 1
    start = end = centre
    size = len(lines[centre]) if lines else 0
    while size < MAX_ERROR_LOG_CHARS // 2 and (start > 0 or end < len(lines) - 1):
        if start > 0:
            start -= 1
            size += len(lines[start])
        if end < len(lines) - 1:
            end += 1
            size += len(lines[end])
    return "".join(lines[start : end + 1])[-MAX_ERROR_LOG_CHARS:]


def _read_report(path: Path):
    from oomkb.api.schemas import Report

    text = _read_text(path, "report")
    try:
        return TypeAdapter(Report).validate_json(text)
    except ValidationError:
        fail(f"{path} is not the JSON of `oomkb estimate --json`, `oomkb profile --json`, "
             "`oomkb run --json`, `oomkb plan --json` or `oomkb diff --json`", EXIT_USAGE)


def register(app: typer.Typer) -> None:
    @app.command("ask")
    def ask_command(
        question: Annotated[str, typer.Argument(help="your question, in any language")] = "",
        log: Annotated[Optional[Path], typer.Option("--log", help="error log file (- for stdin)")] = None,
        report: Annotated[Optional[Path], typer.Option("--report", help="JSON from estimate/profile/plan/run/diff")] = None,
        lang: Annotated[Optional[str], typer.Option("--lang", help="answer language")] = None,
        index: Annotated[Optional[Path], typer.Option("--index", help="index folder")] = None,
        as_json: JsonOption = False,
    ) -> None:
        """Ask the assistant; paste your error with --log for a diagnosis with your numbers."""
        from oomkb.api.core.assistant import load_assistant
        from oomkb.api.schemas import AskRequest

        question = question.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        error_log = _fit_log(_read_text(log, "log")) if log else None
        parsed_report = _read_report(report) if report else None
        try:
            request = AskRequest(question=question, error_log=error_log, report=parsed_report,
                                 language=lang)
        except ValidationError as exc:
            first = exc.errors()[0]
            fail(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}", EXIT_USAGE)
        with user_errors():
            response = load_assistant(index_dir=index).ask(request)
        if as_json:
            print(response.model_dump_json(indent=2))
            return
        from rich.markdown import Markdown

        Console().print(Markdown(terminal_safe(response.answer)))


__all__ = ["register"]
