"""The one SHA-256 file helper: the index manifest, the model conversion and the exported query
model all checksum files with it."""

from __future__ import annotations

import hashlib
from pathlib import Path

_BLOCK = 1 << 22


def sha256_file(path: Path | str) -> str:
    """Hex SHA-256 of a file's bytes, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()
