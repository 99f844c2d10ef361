"""What makes a process's first answer quick: the query model prefetched while the process
imports, and the grounding descriptions' embeddings kept on disk. Real index, real model."""

from __future__ import annotations

import numpy as np
import pytest

from oomkb.indexer import query_model
from oomkb.indexer.query_model import load_query_encoder, prefetch
from oomkb.kb import grounding


@pytest.fixture
def no_prefetch_left():
    yield
    query_model._prefetched.clear()


def test_the_prefetched_encoder_is_the_one_the_index_then_uses(loaded_index, no_prefetch_left):
    index = loaded_index.index
    prefetch(index.path.parent)
    started = query_model._prefetched[index.path]
    assert load_query_encoder(index, background=True) is started
    assert index.path not in query_model._prefetched  # taken once
    assert load_query_encoder(index) is not started  # the next one loads its own


def test_a_second_prefetch_keeps_the_first_one_loading(loaded_index, no_prefetch_left):
    """`oomkb serve` prefetches, then its loader opens the index, which prefetches again."""
    index = loaded_index.index
    prefetch(index.path.parent)
    first = query_model._prefetched[index.path]
    prefetch(index.path.parent)
    assert query_model._prefetched[index.path] is first
    assert load_query_encoder(index, background=True) is first


def test_a_prefetch_with_other_settings_is_not_taken(loaded_index, no_prefetch_left):
    index = loaded_index.index
    prefetch(index.path.parent)
    started = query_model._prefetched[index.path]
    other = load_query_encoder(index, threads=started._threads + 1)
    assert other is not started and other._threads == started._threads + 1


def test_prefetching_where_there_is_no_index_does_nothing(tmp_path, no_prefetch_left):
    prefetch(tmp_path / "nowhere")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "CURRENT").write_text("gen-missing\n")
    prefetch(tmp_path / "bad")
    assert query_model._prefetched == {}


@pytest.fixture
def onnx_searcher(loaded_index):
    from oomkb.kb.search import Searcher

    li = loaded_index
    return Searcher(li.index, li.guides, li.cards, load_query_encoder(li.index, threads=1))


def test_grounding_descriptions_are_embedded_once_then_read_from_disk(onnx_searcher, monkeypatch):
    terms = grounding.load_terms()
    path = grounding._prototype_file(onnx_searcher.embedder, terms)
    path.unlink(missing_ok=True)
    fresh = grounding.prototype_vectors(onnx_searcher)
    assert path.is_file()
    grounding._PROTOTYPES.clear()
    calls = []
    monkeypatch.setattr(onnx_searcher, "embed_queries",
                        lambda texts: calls.append(texts) or np.zeros((len(texts), 384)))
    again = grounding.prototype_vectors(onnx_searcher)
    assert calls == []  # read, not embedded
    assert all(np.array_equal(a, b) for a, b in zip(fresh, again))


def test_a_damaged_descriptions_file_is_embedded_again(onnx_searcher):
    terms = grounding.load_terms()
    path = grounding._prototype_file(onnx_searcher.embedder, terms)
    grounding._PROTOTYPES.clear()
    reference = grounding.prototype_vectors(onnx_searcher)
    grounding._PROTOTYPES.clear()
    path.write_bytes(b"PK\x03\x04 truncated")
    recomputed = grounding.prototype_vectors(onnx_searcher)
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(reference, recomputed))
    with np.load(path) as z:  # and written whole again
        assert z["covered"].shape == reference[0].shape


def test_the_descriptions_file_changes_with_the_descriptions(onnx_searcher):
    terms = grounding.load_terms()
    changed = grounding._Terms({}, [], {"covered": terms.covered[:-1],
                                        "not_covered": terms.not_covered})
    assert grounding._prototype_file(onnx_searcher.embedder, terms) != \
        grounding._prototype_file(onnx_searcher.embedder, changed)


def test_an_unwritable_models_folder_still_gives_the_vectors(onnx_searcher, tmp_path, monkeypatch):
    blocker = tmp_path / "models"
    blocker.write_text("a file where the folder would be")
    monkeypatch.setattr("oomkb.settings.models_dir", lambda: blocker)
    grounding._PROTOTYPES.clear()
    covered, not_covered = grounding.prototype_vectors(onnx_searcher)
    assert covered.shape[0] == len(grounding.load_terms().covered) and not_covered.shape[1] == 384


def test_warm_up_loads_what_the_first_answer_would(loaded_index):
    from oomkb.api.core.assistant import Assistant
    from oomkb.diagnostics.parse import load_signatures
    from oomkb.kb.live import LiveIndex
    from oomkb.kb.search import Searcher

    li = loaded_index
    searcher = Searcher(li.index, li.guides, li.cards, load_query_encoder(li.index, threads=1))
    grounding._PROTOTYPES.clear()
    load_signatures.cache_clear()
    Assistant(LiveIndex(searcher)).warm_up()
    assert searcher.embedder in grounding._PROTOTYPES
    assert load_signatures.cache_info().currsize == 1
