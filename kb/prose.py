"""The words a user wrote, apart from what they pasted: the language of a question comes from its
prose, not from the English error log, traceback or code wrapped in it.

Line by line: fenced code blocks and the lines that `kb/catalogue/log_lines.yaml` describes
(tracebacks, log lines, compiler reports, code) are dropped; what is left is the prose. Kept
apart from kb/language.py (which detects the language of a text) so that each stays small.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from oomkb.kb.catalogue_file import read_yaml
from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import Detection, detect_language, strip_code

__all__ = ["detect_prose_language", "prose_of"]

FILE = Path(__file__).resolve().parent / "catalogue" / "log_lines.yaml"
_LINE_CHARS = 2000  # how much of one line the patterns read
_MIN_LETTERS = 3
_FENCE = re.compile(r"^\s*(?:```|~~~)")


class _LogLines(BaseModel):
    patterns: list[str] = Field(min_length=1)


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], ...]:
    try:
        data = _LogLines.model_validate(read_yaml(FILE))
        return tuple(re.compile(p, re.IGNORECASE) for p in data.patterns)
    except (ValidationError, re.error) as exc:
        raise CatalogueError(f"{FILE}: {exc}") from exc


def _pasted(line: str) -> bool:
    head = line[:_LINE_CHARS]
    return any(p.search(head) for p in _patterns())


def prose_of(text: str) -> str:
    """The lines of `text` that the user wrote: without code blocks and pasted log lines."""
    kept: list[str] = []
    in_fence = False
    for line in (text or "").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.strip() or _pasted(line):
            continue
        kept.append(line)
    return "\n".join(kept)


#: A word of a pasted error or of code inside a sentence: an identifier (`RuntimeError:`,
#: `DataParallel`, `jax.jit`, `CUDA`), not a word of the sentence around it.
#: A quoted stretch long enough to be a pasted message rather than a word in quotes.
_QUOTED = re.compile(r"'[^'\n]{24,}'|\"[^\"\n]{24,}\"|“[^”\n]{24,}”|«[^»\n]{24,}»|`[^`\n]{24,}`")
_CODE_WORD = re.compile(r"\S*[_.:()=\[\]/]\S*|\b[A-Z][a-z]+[A-Z]\w*\b|\b[A-Z0-9]{2,}\b")


def detect_prose_language(text: str) -> Detection:
    """The language of the prose of `text`; the whole text's when it has too little prose, and
    that of its words without the identifiers when an error and the user's sentence share one
    line ("RuntimeError: CUDA out of memory en PyTorch ..., ¿cómo lo soluciono?")."""
    prose = prose_of(text)
    if sum(ch.isalpha() for ch in strip_code(prose)) >= _MIN_LETTERS:
        return detect_language(prose)
    # an error quoted inside the user's sentence ("... e deu 'torch.OutOfMemoryError: ...' como resolvo?"):
    # the sentence around the quote
    around = _CODE_WORD.sub(" ", _QUOTED.sub(" ", text[:_LINE_CHARS]))
    if _QUOTED.search(text[:_LINE_CHARS]) and sum(ch.isalpha() for ch in around) >= _MIN_LETTERS:
        found = detect_language(around)
        if found.method != "default":
            return found
    whole = detect_language(text)
    if whole.method != "default":
        return whole
    words = _CODE_WORD.sub(" ", text[:_LINE_CHARS])
    return detect_language(words) if sum(ch.isalpha() for ch in words) >= _MIN_LETTERS else whole
