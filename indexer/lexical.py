"""The lexical (BM25) half of the index, with a tokeniser for every script the guides and questions use.

Technical tokens stay whole (`E1000`, `--xla_tpu_scoped_vmem_limit_kib` → `xla_tpu_scoped_vmem_limit_kib`,
`donate_argnums`, `RESOURCE_EXHAUSTED`, `jax.profiler.trace`); compound ones also give their
parts so `profiler` finds `jax.profiler.trace`. Han, Kana and Hangul runs become character
bigrams (no spaces to split on); other scripts split on letters with their combining marks, so
Devanagari vowel signs and Arabic diacritics stay inside their words.

bm25s computes the BM25 weight of every (term, text) pair once, when the index is built; the
generation stores that sparse matrix (``lexical.npz``: one column of weights per term, and the
term list). A query then sums the columns of its terms with numpy, the sum bm25s's own
``get_scores`` makes, so searching neither imports bm25s (nor scipy) nor tokenises the corpus.
"""

from __future__ import annotations

import unicodedata
import zipfile
from pathlib import Path

import numpy as np
import regex

_TECH = regex.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_]*(?:[.:/-][A-Za-z0-9_]+)+|-{0,2}[A-Za-z_]*\d[A-Za-z0-9_]*|-{0,2}[A-Za-z]+_[A-Za-z0-9_]+")
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+")
_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}_]*")
_ARABIC_DIACRITICS = regex.compile(r"[\u064b-\u065f\u0670\u0640]")
_ARABIC_ARTICLE = regex.compile(r"^(?:وال|بال|لل|ال)(?=\p{L}{3,})")
_PARTS = regex.compile(r"[A-Za-z]+[0-9]*|[0-9]+")
EMPTY_TEXT = "\u2205"  # the one token of a text with no words, so every text has a column entry

STOPWORDS = frozenset(
    """a an and are as at be by can do does for from how i if in into is it its my of on or
    so that the this to was what when where which why with you your de da do das dos e em o os
    a um uma para por que com no na se el la los las en y es del al un una por qué cómo der die
    das und ist ein eine nicht mit wie was le la les et est un une des du pour que qui dans
    comment""".split()
)


#: _TECH matches only within a stretch of its own characters (ASCII letters, digits and `_.:/-`),
#: so it is applied one such stretch at a time, and only to stretches holding a digit or one of
#: `_.:/-` (without one it cannot match). It rescans a stretch from each position it tries (a
#: 20,000-letter question took 1.1 s), so a stretch longer than MAX_TECH_CHARS is read in pieces of
#: that length: the cost stays linear in the text. The guides' tokens are the same either way
#: (tests/indexer/test_lexical.py checks).
MAX_TECH_CHARS = 128
_STRETCH = regex.compile(r"[A-Za-z0-9_.:/-]+")
_TECH_NEEDS = regex.compile(r"[0-9_.:/-]")


def tokenize(text: str) -> list[str]:
    """Tokens for BM25: whole technical tokens (+ their parts), CJK bigrams, normalised words."""
    text = unicodedata.normalize("NFKC", text)
    tokens: list[str] = []

    def technical(stretch: regex.Match) -> str:
        s = stretch.group()
        if _TECH_NEEDS.search(s) is None:
            return s
        return "".join(_technical(s[i : i + MAX_TECH_CHARS], tokens) for i in range(0, len(s), MAX_TECH_CHARS))

    rest = _STRETCH.sub(technical, text)
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


def _technical(piece: str, tokens: list[str]) -> str:
    """`piece` with its technical tokens replaced by a space; the tokens (+ parts) go to `tokens`."""
    for m in _TECH.finditer(piece):
        tok = m.group().lstrip("-").lower()
        if len(tok) >= 2:
            tokens.append(tok)
            parts = _PARTS.findall(tok)
            if len(parts) > 1:
                tokens.extend(p for p in parts if len(p) >= 2 and p not in STOPWORDS)
    return _TECH.sub(" ", piece)


def _import_bm25s():
    """bm25s, imported without letting it import jax.

    bm25s probes for jax at import time (to pick a top-k backend this module never uses);
    with jax installed that costs seconds. While bm25s loads, ``jax`` is marked unimportable
    (unless something already imported it), then unmarked, so later code in the process can
    still import jax."""
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
    """BM25 over a fixed list of texts: the precomputed weights, scored with numpy."""

    def __init__(self, terms: list[str], data: np.ndarray, indices: np.ndarray,
                 indptr: np.ndarray, size: int):
        if len(indptr) != len(terms) + 1 or len(data) != len(indices) or int(indptr[-1]) != len(data):
            raise ValueError("the lexical index arrays do not fit together")
        if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= size):
            raise ValueError("the lexical index names texts it does not have")
        self.terms = {t: i for i, t in enumerate(terms)}
        self._data, self._indices, self._indptr = data, indices, indptr
        self.size = size

    @classmethod
    def build(cls, texts: list[str]) -> LexicalIndex:
        """Tokenise `texts` and let bm25s weigh every term in every text (index time)."""
        if not texts:
            return cls([], np.zeros(0, np.float32), np.zeros(0, np.int32), np.zeros(1, np.int64), 0)
        bm25 = _import_bm25s().BM25()
        bm25.index([tokenize(t) or [EMPTY_TEXT] for t in texts], show_progress=False)
        s = bm25.scores
        terms = [""] * (len(s["indptr"]) - 1)
        for term, i in bm25.vocab_dict.items():
            if i < len(terms):  # bm25s also names an empty term, which has no column
                terms[i] = term
        return cls(terms, np.asarray(s["data"], np.float32), np.asarray(s["indices"], np.int32),
                   np.asarray(s["indptr"], np.int64), int(s["num_docs"]))

    def save(self, path: Path) -> None:
        terms = sorted(self.terms, key=self.terms.__getitem__)
        with open(path, "wb") as fh:
            np.savez(fh, terms=np.array(terms, dtype=str), data=self._data,
                     indices=self._indices, indptr=self._indptr,
                     size=np.array([self.size], np.int64))

    @classmethod
    def load(cls, path: Path) -> LexicalIndex:
        """Read a saved index (no pickled objects); a damaged file raises ValueError or OSError."""
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls(z["terms"].tolist(), z["data"], z["indices"], z["indptr"],
                           int(z["size"][0]))
        except (KeyError, IndexError, TypeError, EOFError, zipfile.BadZipFile) as exc:  # zip, npy
            raise ValueError(f"{path.name} is not a lexical index ({exc})") from exc

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of `query` against every text (zeros when no query term is known).
        A term the query repeats counts each time, as in bm25s."""
        out = np.zeros(self.size, dtype=np.float32)
        for token in tokenize(query):
            t = self.terms.get(token)
            if t is not None:
                start, end = self._indptr[t], self._indptr[t + 1]
                out[self._indices[start:end]] += self._data[start:end]
        return out
