"""The edge where errors raised deep inside become one clear line for a person (CLI) and an exit code."""

from __future__ import annotations

import contextlib
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

EXIT_FAILURE = 1  # the environment is at fault: damaged index, missing model
EXIT_USAGE = 2  # the input is at fault: empty query, unknown language, missing file

_err = Console(stderr=True, soft_wrap=True)  # one line, however long the path in it


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    _err.print(f"[red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def known_errors() -> dict[type[BaseException], int]:
    """Exception classes that carry a message meant for the user, with their exit codes."""
    from diagnostics.exceptions import DiagnosticsError
    from indexer.errors import GuideError, IndexerError
    from indexer.model import ModelError
    from kb.errors import KnowledgeBaseError, QueryError

    return {
        QueryError: EXIT_USAGE,
        GuideError: EXIT_USAGE,
        DiagnosticsError: EXIT_USAGE,
        KnowledgeBaseError: EXIT_FAILURE,
        IndexerError: EXIT_FAILURE,
        ModelError: EXIT_FAILURE,
    }


@contextlib.contextmanager
def user_errors():
    """Turn the project's own exceptions into `error: <message>` and a non-zero exit."""
    try:
        yield
    except Exception as exc:
        for cls, code in known_errors().items():
            if isinstance(exc, cls):
                fail(str(exc), code)
        raise


def check_png_path(path) -> None:
    """Refuse a `--plot` name that is not a PNG before any work is done."""
    if path is not None and path.suffix.lower() != ".png":
        fail(f"--plot writes a PNG image; give a file name ending in .png, not {path.name}")


def draw_or_fail(draw, report, path) -> None:
    """Draw `report` to `path` with `draw`, turning a write failure into a message."""
    if path is None:
        return
    try:
        draw(report, path)
    except OSError as exc:
        fail(f"cannot write the plot to {path}: {exc.strerror or exc}")
