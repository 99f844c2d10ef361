"""Requests and replies between two processes through files in one folder.

A sandboxed child can be given a folder it may write, and nothing else (no network, no other
files): that folder is how it asks its trusted caller for work and how a long-lived worker takes
requests. One side writes ``NAME.request.json``, the other answers ``NAME.reply.json``; every file
is written to a temporary name and renamed into place, so a reader never sees half a message.
Each message is one JSON object of at most :data:`MAX_MESSAGE_BYTES`; anything else is ignored.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oomkb.errors import ServiceError

__all__ = ["ExchangeClosed", "ask", "serve_once", "write_atomic", "STOP_FILE"]

MAX_MESSAGE_BYTES = 16 << 20
#: A file of this name in the folder tells the serving side to stop.
STOP_FILE = "stop"
POLL_S = 0.02


class ExchangeClosed(ServiceError):
    """The other side stopped (or never answered in time)."""


def write_atomic(path: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``path``, renamed into place once complete."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> Any:
    if path.stat().st_size > MAX_MESSAGE_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_MESSAGE_BYTES} bytes")
    return json.loads(path.read_text("utf-8"))


def ask(folder: Path, message: Any, *, timeout_s: float | None = None,
        alive: Callable[[], bool] | None = None) -> Any:
    """Post ``message`` in ``folder`` and wait for its reply; :class:`ExchangeClosed` when the
    server stops (``alive()`` turns false, or the stop file appears) or ``timeout_s`` passes."""
    name = secrets.token_hex(8)
    reply = folder / f"{name}.reply.json"
    write_atomic(folder / f"{name}.request.json", message)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        if reply.exists():
            value = _read(reply)
            reply.unlink(missing_ok=True)
            return value
        if (alive is not None and not alive()) or (folder / STOP_FILE).exists():
            raise ExchangeClosed("the other side of the exchange stopped")
        if deadline is not None and time.monotonic() > deadline:
            raise ExchangeClosed(f"no reply within {timeout_s:g} s")
        time.sleep(POLL_S)


def serve_once(folder: Path, handle: Callable[[Any], Any]) -> int:
    """Answer every request waiting in ``folder`` with ``handle(message)``; how many were answered.

    A request that is not valid JSON (or too large) is answered ``{"error": ...}``."""
    answered = 0
    for request in sorted(folder.glob("*.request.json"), key=lambda p: p.stat().st_mtime):
        name = request.name[: -len(".request.json")]
        try:
            message = _read(request)
        except (OSError, ValueError) as err:
            reply: Any = {"error": f"unreadable request: {err}"}
        else:
            reply = handle(message)
        request.unlink(missing_ok=True)
        write_atomic(folder / f"{name}.reply.json", reply)
        answered += 1
    return answered
