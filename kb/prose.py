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
#: An error's name starts the pasted part of a sentence; two sizes make a sentence a log line.
_ERROR_NAME = re.compile(r"\S*(?:Error|Exception|EXHAUSTED)\b:?")
_SIZE = re.compile(r"\d+(?:\.\d+)?\s?[KMGT]i?B\b")
_SENTENCE_END = re.compile(r"(?<=[.?!。？！])\s+")


def _around_errors(text: str) -> str:
    """`text` less what was pasted into it: each sentence cut at an error's name, and sentences
    that are a log's figures ("Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total ...)") left out."""
    kept = []
    in_error = False  # the sentences after an error's name are its message while they carry sizes
    for sentence in _SENTENCE_END.split(text):
        m = _ERROR_NAME.search(sentence)
        sizes = len(_SIZE.findall(sentence))
        if m:
            kept.append(sentence[:m.start()])
            in_error = True
        elif in_error and sizes:
            continue
        elif sizes < 2:
            kept.append(sentence)
            in_error = False
    return " ".join(kept)


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
    # an error pasted into the middle of the sentence, unquoted ("... von Mistral-7B kommt
    # torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate ... Hilft X?"): the words
    # before each error and the sentences that carry no error figures (first: a French sentence's
    # apostrophes, "j'ai ... l'inférence", are no quotes)
    kept = _CODE_WORD.sub(" ", _around_errors(text[:_LINE_CHARS]))
    if sum(ch.isalpha() for ch in kept) >= _MIN_LETTERS and kept.strip() != text[:_LINE_CHARS].strip():
        found = detect_language(kept)
        if found.method != "default" and found.language != "en":
            return found
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
