"""Lexical scoring with bm25s, with a tokeniser for every script the guides and questions use.

Technical tokens stay whole (`E1000`, `--xla_tpu_scoped_vmem_limit_kib` → `xla_tpu_scoped_vmem_limit_kib`,
`donate_argnums`, `RESOURCE_EXHAUSTED`, `jax.profiler.trace`); compound ones also give their
parts so `profiler` finds `jax.profiler.trace`. Han, Kana and Hangul runs become character
bigrams (no spaces to split on); other scripts split on letters with their combining marks, so
Devanagari vowel signs and Arabic diacritics stay inside their words.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import regex

_TECH = regex.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_]*(?:[.:/-][A-Za-z0-9_]+)+|-{0,2}[A-Za-z_]*\d[A-Za-z0-9_]*|-{0,2}[A-Za-z]+_[A-Za-z0-9_]+")
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+")
_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}_]*")
_ARABIC_DIACRITICS = regex.compile(r"[\u064b-\u065f\u0670\u0640]")
_ARABIC_ARTICLE = regex.compile(r"^(?:وال|بال|لل|ال)(?=\p{L}{3,})")
_PARTS = regex.compile(r"[A-Za-z]+[0-9]*|[0-9]+")

STOPWORDS = frozenset(
    """a an and are as at be by can do does for from how i if in into is it its my of on or
    so that the this to was what when where which why with you your de da do das dos e em o os
    a um uma para por que com no na se el la los las en y es del al un una por qué cómo der die
    das und ist ein eine nicht mit wie was le la les et est un une des du pour que qui dans
    comment""".split()
)


def tokenize(text: str) -> list[str]:
    """Tokens for BM25: whole technical tokens (+ their parts), CJK bigrams, normalised words."""
    text = unicodedata.normalize("NFKC", text)
    tokens: list[str] = []
    for m in _TECH.finditer(text):
        tok = m.group().lstrip("-").lower()
        if len(tok) >= 2:
            tokens.append(tok)
            parts = _PARTS.findall(tok)
            if len(parts) > 1:
                tokens.extend(p for p in parts if len(p) >= 2 and p not in STOPWORDS)
    rest = _TECH.sub(" ", text)
    for m in _CJK.finditer(rest):
        run = m.group()
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
    rest = _CJK.sub(" ", rest)
    for m in _WORD.finditer(rest):
        word = _ARABIC_DIACRITICS.sub("", m.group().lower())
        word = _ARABIC_ARTICLE.sub("", word)
        if len(word) >= 2 and word not in STOPWORDS:
            tokens.append(word)
    return tokens


def _import_bm25s():
    """bm25s, imported without letting it import jax.

    bm25s probes for jax at import time (to pick a top-k backend this module never uses);
    with jax installed that costs seconds on every search from the command line. While bm25s
    loads, ``jax`` is marked unimportable (unless something already imported it), then unmarked,
    so later code in the process can still import jax."""
    import sys

    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    block = "jax" not in sys.modules
    if block:
        sys.modules["jax"] = None  # `import jax.lax` now raises ImportError
    try:
        import bm25s
    finally:
        if block and "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]
    return bm25s


class LexicalIndex:
    """BM25 over a fixed list of texts; scores for every text at once."""

    def __init__(self, texts: list[str]):
        bm25s = _import_bm25s()
        self._bm25 = bm25s.BM25()
        corpus = [tokenize(t) or ["\u2205"] for t in texts]
        self._bm25.index(corpus, show_progress=False)
        self._vocab = set(self._bm25.vocab_dict)
        self.size = len(texts)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of `query` against every text (zeros when no query token is known)."""
        tokens = [t for t in tokenize(query) if t in self._vocab]
        if not tokens:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)
