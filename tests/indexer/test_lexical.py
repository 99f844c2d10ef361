"""The lexical index stored in a generation scores exactly as bm25s does, without bm25s.

Reference: bm25s's own ``BM25.get_scores`` over the same tokenised texts; under test: the
precomputed weights the generation stores (``lexical.npz``), loaded and summed with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from oomkb.indexer.errors import IndexCorruptError
from oomkb.indexer.lexical import EMPTY_TEXT, LexicalIndex, _import_bm25s, tokenize
from oomkb.indexer.store import CURRENT, LEXICAL, load_index

QUESTIONS = [
    "scoped vmem limit for my Pallas kernel",
    "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm",
    "E1000 编译时 HBM 内存不足",
    "как найти утечку тензоров",
    "बफर आवंटन विफल",
    "عارض الذاكرة في XProf",
    "vmem vmem vmem",  # a repeated term counts each time, as in bm25s
    "--xla_tpu_scoped_vmem_limit_kib",
    "nothing here matches zzzqqq",
]


@pytest.fixture(scope="module")
def texts(loaded_index) -> list[str]:
    return [item.embed_text for item in loaded_index.index.items]


def test_the_stored_scores_equal_bm25s_scores(loaded_index, texts):
    reference = _import_bm25s().BM25()
    reference.index([tokenize(t) or [EMPTY_TEXT] for t in texts], show_progress=False)
    stored = loaded_index.index.lexical
    assert stored is not None and stored.size == len(texts)
    for q in QUESTIONS + [t[:300] for t in texts[::25]]:
        known = [t for t in tokenize(q) if t in reference.vocab_dict]
        expected = (np.asarray(reference.get_scores(known), np.float32) if known
                    else np.zeros(len(texts), np.float32))
        assert np.array_equal(stored.scores(q), expected), q[:60]
    assert stored.scores("nothing here matches zzzqqq").max() == 0.0
    assert stored.scores("scoped vmem limit").max() > 0.0


def test_a_saved_index_reads_back_the_same(tmp_path, texts):
    built = LexicalIndex.build(texts[:50])
    built.save(tmp_path / LEXICAL)
    loaded = LexicalIndex.load(tmp_path / LEXICAL)
    for q in QUESTIONS:
        assert np.array_equal(loaded.scores(q), built.scores(q))


def test_an_empty_corpus_scores_nothing(tmp_path):
    empty = LexicalIndex.build([])
    empty.save(tmp_path / LEXICAL)
    assert LexicalIndex.load(tmp_path / LEXICAL).scores("vmem").shape == (0,)


def test_arrays_that_do_not_fit_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="do not fit"):
        LexicalIndex(["a", "b"], np.ones(2, np.float32), np.zeros(2, np.int32),
                     np.array([0, 1], np.int64), 1)
    with pytest.raises(ValueError, match="texts it does not have"):
        LexicalIndex(["a"], np.ones(1, np.float32), np.array([5], np.int32),
                     np.array([0, 1], np.int64), 2)
    for junk in (b"not a zip file", b"PK\x03\x04 a zip file cut short"):
        (tmp_path / LEXICAL).write_bytes(junk)
        with pytest.raises((ValueError, OSError)):
            LexicalIndex.load(tmp_path / LEXICAL)


def test_a_damaged_lexical_file_is_a_clear_error(index_copy):
    gen = index_copy / (index_copy / CURRENT).read_text().strip()
    data = bytearray((gen / LEXICAL).read_bytes())
    data[len(data) // 3] ^= 0xFF
    (gen / LEXICAL).unlink()
    (gen / LEXICAL).write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match=f"{LEXICAL}.*oomkb index"):
        load_index(index_copy)
