"""Shared fixtures: the real embedding model and the real index, loaded once per test session.

Tests never touch the user's own oomkb home: they use `OOMKB_TEST_HOME` if set, else
`.oomkb/test-home` in the checkout (ignored by git), so the converted model and the built-in index
are built once and reused across runs. Tests that change an index work on a copy in tmp_path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ["OOMKB_HOME"] = os.environ.get("OOMKB_TEST_HOME") or str(ROOT / ".oomkb" / "test-home")

from oomkb.api import prepare_process

prepare_process()  # libtpu's process defaults and an offline model hub, before jax is imported

QUERIES = ROOT / "tests" / "data" / "queries.yaml"
#: Base URL of in-process test clients. The server answers only the hosts it trusts (by default
#: the bound host, localhost, 127.0.0.1, [::1]); Starlette's TestClient would send "testserver".
LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="session")
def embedder():
    from oomkb.indexer.model import load_embedder

    return load_embedder()


@pytest.fixture(scope="session")
def loaded_index(embedder):
    """The built-in guides and cards, indexed at the default place (built on first use)."""
    from oomkb.kb.corpus import ensure_index

    return ensure_index(embedder=embedder)


@pytest.fixture(scope="session")
def searcher(loaded_index):
    from oomkb.kb.search import Searcher

    li = loaded_index
    return Searcher(li.index, li.guides, li.cards, li.embedder)


def _copy_or_link(src: str, dst: str) -> None:
    """Copy an index file; hard-link the large query model files (immutable: a test that damages
    one must unlink it and write a new file, never write into it)."""
    from oomkb.indexer.store import QUERY_ONNX, QUERY_TABLE, QUERY_TOKENIZER, QUERY_VOCAB

    if Path(src).name in (QUERY_ONNX, QUERY_TOKENIZER, QUERY_TABLE, QUERY_VOCAB):
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
