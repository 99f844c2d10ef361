"""The catalogue's rule for translated texts, for catalogue files beyond the four that
kb.remedies loads (figures, next steps): the same check, so every file keeps to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomkb.kb.language import SUPPORTED
from oomkb.kb.remedies.schema import Texts
from oomkb.kb.remedies.validation import CatalogueValidator

__all__ = ["check_texts"]


def check_texts(path: Path | str, item: str, texts: Texts, allowed: Any,
                languages: tuple[str, ...] = SUPPORTED) -> None:
    """Every language present and non-blank, only `allowed` placeholders, the same ones in every
    language; else a CatalogueError naming `path` and `item`."""
    path = Path(path)
    CatalogueValidator(path.parent, {}, [], languages)._check_texts(path.name, item, texts, allowed)
