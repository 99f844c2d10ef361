"""The index: incremental builds re-embed only what changed; damage is detected, not crashed on."""

import json
import shutil
from pathlib import Path

import pytest

from oomkb.indexer.errors import IndexCorruptError, IndexMismatchError
from oomkb.indexer.store import CURRENT, ITEMS, MANIFEST, VECTORS, load_index
from oomkb.kb.corpus import build, ensure_index, load_corpus


def _generation(index_dir: Path) -> Path:
    return index_dir / (index_dir / CURRENT).read_text().strip()


def test_rebuilding_with_unchanged_docs_embeds_nothing(index_copy, embedder):
    stats = build(index_dir=index_copy, embedder=embedder)
    assert stats.embedded == 0
    assert stats.reused == stats.items > 0


def test_a_changed_section_is_the_only_text_embedded_again(index_copy, embedder, tmp_path):
    from oomkb.indexer.guides import default_docs_dir

    docs = tmp_path / "docs"
    shutil.copytree(default_docs_dir(), docs, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    guide = docs / "scoped-vmem-oom.md"
    guide.write_text(guide.read_text(encoding="utf-8") + "\nUma frase nova no fim.\n", encoding="utf-8")
    before = {i.content_hash for i in load_corpus().items}
    after = load_corpus(docs).items
    changed = [i for i in after if i.content_hash not in before]
    assert changed, "the edit should change at least one chunk"
    stats = build(index_dir=index_copy, docs_dir=docs, embedder=embedder)
    assert stats.embedded == len(changed)
    assert stats.items == len(after)


def test_a_truncated_vector_file_is_a_clear_error(index_copy):
    vectors = _generation(index_copy) / VECTORS
    data = vectors.read_bytes()
    vectors.write_bytes(data[: len(data) // 2])
    with pytest.raises(IndexCorruptError, match="truncated.*oomkb index"):
        load_index(index_copy)


def test_a_garbled_items_file_is_a_clear_error(index_copy):
    items = _generation(index_copy) / ITEMS
    items.write_text("not json\n", encoding="utf-8")
    with pytest.raises(IndexCorruptError, match="oomkb index"):
        load_index(index_copy)


def test_an_index_from_another_model_is_refused(index_copy, embedder):
    manifest_path = _generation(index_copy) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["model"]["name"] = "some-other-model"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="some-other-model"):
        ensure_index(index_dir=index_copy, embedder=embedder)


@pytest.mark.slow
def test_oomkb_index_rebuilds_a_damaged_index(index_copy, embedder, tmp_path):
    from oomkb.indexer.guides import default_docs_dir

    docs = tmp_path / "docs"  # one guide keeps the full re-embedding short
    docs.mkdir()
    shutil.copy(default_docs_dir() / "scoped-vmem-oom.md", docs)
    vectors = _generation(index_copy) / VECTORS
    vectors.write_bytes(b"\0" * 10)
    stats = build(index_dir=index_copy, docs_dir=docs, embedder=embedder)
    assert stats.previous_index_problem and "truncated" in stats.previous_index_problem
    assert load_index(index_copy).manifest.count == stats.items


def test_a_reader_never_sees_a_half_written_generation(index_copy, embedder):
    old = _generation(index_copy)
    build(index_dir=index_copy, embedder=embedder)
    new = _generation(index_copy)
    assert new != old and (new / MANIFEST).exists()
    assert not list(index_copy.glob(".tmp-*"))
    assert old.exists(), "the previous generation stays for readers that opened it"
