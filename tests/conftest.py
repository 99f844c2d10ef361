"""Shared fixtures: the real embedding model and the real index, loaded once per test session.

Tests use the user's oomkb home (so the converted model and the built-in index are reused across
runs) unless OOMKB_HOME is set; tests that change an index work on a copy in tmp_path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import api  # noqa: F401  (sets libtpu's process defaults before jax is imported)

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "tests" / "data" / "queries.yaml"


@pytest.fixture(scope="session")
def embedder():
    from indexer.model import load_embedder

    return load_embedder()


@pytest.fixture(scope="session")
def loaded_index(embedder):
    """The built-in guides and cards, indexed at the default place (built on first use)."""
    from kb.corpus import ensure_index

    return ensure_index(embedder=embedder)


@pytest.fixture(scope="session")
def searcher(loaded_index):
    from kb.search import Searcher

    li = loaded_index
    return Searcher(li.index, li.guides, li.cards, li.embedder)


def _copy_or_link(src: str, dst: str) -> None:
    """Copy an index file; hard-link the large query model files (immutable: a test that damages
    one must unlink it and write a new file, never write into it)."""
    from indexer.store import QUERY_ONNX, QUERY_TOKENIZER

    if Path(src).name in (QUERY_ONNX, QUERY_TOKENIZER):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


@pytest.fixture
def index_copy(loaded_index, tmp_path) -> Path:
    """A private copy of the built-in index that a test may damage or rebuild."""
    dst = tmp_path / "index"
    shutil.copytree(loaded_index.index.path.parent, dst, ignore=shutil.ignore_patterns(".lock"),
                    copy_function=_copy_or_link)
    return dst
