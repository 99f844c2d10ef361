"""Building the index: embed what changed, reuse the rest, write a new generation atomically."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
from filelock import FileLock, Timeout
from pydantic import BaseModel

from oomkb.indexer.chunking import chunk_guide
from oomkb.indexer.errors import IndexBusyError, IndexerError, IndexMissingError
from oomkb.indexer.guides import Guide
from oomkb.indexer.store import IndexItem, ModelInfo, load_index, write_index

LOCK_WAIT_S = 600.0


class BuildStats(BaseModel):
    """What one build did, for the CLI and the benchmark."""

    index_dir: str
    generation: str
    items: int
    embedded: int
    reused: int
    seconds: float
    rebuilt_from_scratch: bool
    previous_index_problem: str | None = None


def chunk_items(guides: list[Guide], max_chars: int | None = None) -> list[IndexItem]:
    """Every chunk of every guide as an index item."""
    items = []
    for guide in guides:
        chunks = chunk_guide(guide) if max_chars is None else chunk_guide(guide, max_chars)
        for c in chunks:
            items.append(
                IndexItem(
                    id=c.id,
                    kind="chunk",
                    doc_id=c.doc_id,
                    section=c.section,
                    section_title=c.section_title,
                    language=c.language,
                    text=c.text,
                    embed_text=c.embed_text,
                    start_char=c.start_char,
                    end_char=c.end_char,
                )
            )
    return items


def docs_hash(guides: list[Guide], extra: str = "") -> str:
    """One hash over all guide texts (and any other source text, e.g. the cards)."""
    h = hashlib.sha256()
    for g in sorted(guides, key=lambda g: g.doc_id):
        h.update(g.doc_id.encode() + b"\0" + g.content_hash.encode() + b"\0")
    h.update(extra.encode("utf-8"))
    return h.hexdigest()


def build_index(
    items: list[IndexItem],
    index_dir: Path,
    embedder,
    model: ModelInfo,
    source_hash: str,
    progress: bool = False,
    precision: str | None = None,
) -> BuildStats:
    """Write an index of `items`; texts whose hash the current index already holds are not
    re-embedded. A damaged or foreign current index is ignored (and reported) and rebuilt.

    `embedder` is a loaded sentence-transformers model, or a function that loads one: it is
    then called only when some text must be embedded or the query model must be exported, so
    a build with nothing new to embed never imports torch. The generation also gets the query
    model (`indexer.query_model`) exported from the same model, in `precision`."""
    from oomkb.indexer.model import embed_passages
    from oomkb.indexer.query_model import ensure_query_model

    loaded = []

    def get_embedder():
        if not loaded:
            loaded.append(embedder if hasattr(embedder, "encode") else embedder())
        return loaded[0]

    index_dir = Path(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    lock = FileLock(str(index_dir / ".lock"))
    try:
        lock.acquire(timeout=LOCK_WAIT_S)
    except Timeout as exc:
        raise IndexBusyError(
            f"another process has been building the index in {index_dir} for over "
            f"{LOCK_WAIT_S:.0f} s; try again later"
        ) from exc
    try:
        known: dict[str, np.ndarray] = {}
        problem = None
        old = None
        try:
            old = load_index(index_dir, expect_model=model, vectors_only=True)
            for row, h in enumerate(old.manifest.item_hashes):
                known[h] = old.vector(row)
        except IndexMissingError:
            pass
        except IndexerError as exc:
            problem = str(exc)
            old = None

        vectors = np.zeros((len(items), model.dims), dtype=np.float32)
        todo = []
        for row, item in enumerate(items):
            v = known.get(item.content_hash)
            if v is None:
                todo.append(row)
            else:
                vectors[row] = v
        if todo:
            texts = [items[r].embed_text for r in todo]
            vectors[todo] = embed_passages(get_embedder(), texts, progress=progress)
        query_model = ensure_query_model(model, get_embedder, precision, previous=old)
        gen = write_index(index_dir, items, vectors, model, source_hash, query_model)
        return BuildStats(
            index_dir=str(index_dir),
            generation=gen.name,
            items=len(items),
            embedded=len(todo),
            reused=len(items) - len(todo),
            seconds=round(time.perf_counter() - t0, 3),
            rebuilt_from_scratch=not known,
            previous_index_problem=problem,
        )
    finally:
        lock.release()
