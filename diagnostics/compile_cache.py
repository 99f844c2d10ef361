"""Compile results kept on disk, so that a measurement made once is never compiled again.

A result is keyed by everything that decides it: the program's source (a hash of the program
file and of the ``.py`` files beside it, which it may import), the factory's name and arguments,
the target (generation and topology), the compile settings (compiler options, donation, bfloat16
what-if, ``LIBTPU_INIT_ARGS``/``XLA_FLAGS``) and the versions of jax, jaxlib and libtpu. Entries
live under ``OOMKB_HOME/compile-cache/`` as one JSON file each, written atomically (a temporary
file renamed into place), so workers of one machine and concurrent plans share them safely.

Only the trusted side (the plan's caller, never the sandboxed child) writes entries, and only
under the key of the program it ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["CompileCache", "program_fingerprint", "toolchain_versions"]

#: The most ``.py`` files beside the program hashed into its fingerprint (then only the program).
MAX_SIBLINGS = 200
#: The largest entry kept (a plan's baseline report with its buffers is well under this).
MAX_ENTRY_BYTES = 8 << 20


def toolchain_versions() -> dict[str, str | None]:
    """The installed versions of what compiles: jax, jaxlib and libtpu (None when absent)."""
    found: dict[str, str | None] = {}
    for name in ("jax", "jaxlib", "libtpu", "libtpu-nightly"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def program_fingerprint(path: Path) -> str:
    """A hash of the program file and of the ``.py`` files in its folder (what it may import)."""
    path = Path(path).resolve()
    digest = hashlib.sha256()
    digest.update(path.read_bytes())
    siblings = sorted(p for p in path.parent.glob("*.py") if p != path)
    if len(siblings) <= MAX_SIBLINGS:
        for sibling in siblings:
            try:
                digest.update(sibling.name.encode() + b"\0" + sibling.read_bytes())
            except OSError:
                continue
    return digest.hexdigest()


class CompileCache:
    """Compile results under ``folder`` keyed by :meth:`key`; ``get``/``put`` JSON objects."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @classmethod
    def default(cls) -> CompileCache:
        from oomkb.settings import oomkb_home

        return cls(oomkb_home() / "compile-cache")

    @staticmethod
    def key(fingerprint: str, factory: str, kind: str, request: Mapping[str, Any],
            versions: Mapping[str, Any] | None = None) -> str:
        """The entry's name: a hash of the program, the factory, the request and the toolchain."""
        settings = {name: os.environ.get(name, "") for name in ("LIBTPU_INIT_ARGS", "XLA_FLAGS")}
        text = json.dumps({
            "program": fingerprint, "factory": factory, "kind": kind, "request": request,
            "settings": settings, "versions": dict(versions or toolchain_versions()),
        }, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or None (a missing or unreadable entry is a miss)."""
        try:
            data = json.loads(self._path(key).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key`` atomically; a full disk or a read-only home is not an error."""
        text = json.dumps(value)
        if len(text) > MAX_ENTRY_BYTES:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            pass
