"""A searcher for a long-running process: follows the index on disk, never serves half of one.

`oomkb index` in another process writes a new generation and swaps CURRENT; the next query here
loads it (verified) and switches over. If the new generation is damaged, this process keeps
serving the last good one and reports the problem. Changed guides are noticed (the index is then
stale, and reported so) but not re-embedded inside a serving process: that is `oomkb index`'s job.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pydantic import BaseModel

from oomkb.indexer.errors import IndexerError
from oomkb.settings import default_index_dir
from oomkb.indexer.store import CURRENT, load_index
from oomkb.kb.corpus import load_corpus
from oomkb.kb.search import Searcher


class IndexStatus(BaseModel):
    """What a serving process knows about its index, for /readyz and logs."""

    index_dir: str
    generation: str
    items: int
    loaded_at: float
    docs_changed: bool = False
    problem: str | None = None


class LiveIndex:
    """Holds the current Searcher and swaps in a new index generation when one appears."""

    def __init__(self, searcher: Searcher, index_dir: Path | None = None,
                 docs_dir: Path | None = None, check_every_s: float = 2.0,
                 check_docs_every_s: float = 30.0):
        self._searcher = searcher
        self.index_dir = Path(index_dir) if index_dir else default_index_dir()
        self.docs_dir = docs_dir
        self.check_every_s = check_every_s
        self.check_docs_every_s = check_docs_every_s
        self._lock = threading.Lock()
        self._checked_at = self._docs_checked_at = time.monotonic()
        self._pointer = self._read_pointer()
        self._status = IndexStatus(
            index_dir=str(self.index_dir), generation=searcher.index.path.name,
            items=len(searcher.items), loaded_at=time.time(),
        )

    def searcher(self) -> Searcher:
        """The searcher to use now (checks the disk at most every `check_every_s` seconds)."""
        if time.monotonic() - self._checked_at >= self.check_every_s:
            self.refresh()
        return self._searcher

    def status(self) -> IndexStatus:
        return self._status.model_copy()

    def refresh(self, check_docs: bool = False) -> IndexStatus:
        """Load a newly written generation if there is one; keep the old one if it is bad."""
        if check_docs:
            self._docs_checked_at = float("-inf")
        with self._lock:
            self._checked_at = time.monotonic()
            pointer = self._read_pointer()
            if pointer and pointer != self._pointer:
                self._swap(pointer)
            if time.monotonic() - self._docs_checked_at >= self.check_docs_every_s:
                self._docs_checked_at = time.monotonic()
                self._status.docs_changed = self._docs_changed()
            return self._status.model_copy()

    def _swap(self, pointer: str) -> None:
        old = self._searcher
        try:
            index = load_index(self.index_dir)
            corpus = load_corpus(self.docs_dir)
            fresh = Searcher(index, corpus.guides, corpus.cards, self._encoder_for(index, old))
        except (IndexerError, OSError) as exc:
            self._pointer = pointer  # do not retry the same damaged generation on every query
            self._status.problem = (
                f"a new index ({pointer}) could not be loaded, still serving "
                f"{old.index.path.name}: {exc}"
            )
            return
        self._searcher = fresh
        self._pointer = pointer
        self._status = IndexStatus(
            index_dir=str(self.index_dir), generation=index.path.name, items=len(fresh.items),
            loaded_at=time.time(),
        )

    @staticmethod
    def _encoder_for(index, old: Searcher):
        """The query encoder for a new generation: the one in use when the generation carries
        the same query model (same checksum), else the new generation's own (another model or
        precision was indexed: its vectors need its encoder)."""
        from oomkb.indexer.query_model import load_query_encoder

        before, after = old.index.manifest.query_model, index.manifest.query_model
        if before is not None and after is not None and before.sha256 == after.sha256:
            return old.embedder
        return load_query_encoder(index, batch=getattr(old.embedder, "batching", None))

    def _docs_changed(self) -> bool:
        try:
            return load_corpus(self.docs_dir).source_hash != self._searcher.index.manifest.docs_hash
        except (IndexerError, OSError):
            return True

    def _read_pointer(self) -> str | None:
        try:
            return (self.index_dir / CURRENT).read_text(encoding="utf-8").strip()
        except OSError:
            return None
