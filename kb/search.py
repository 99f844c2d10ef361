"""Hybrid search over the guides: dense (FAISS, e5) and lexical (BM25) over chunks and cards,
fused per section with reciprocal-rank fusion.

Every retriever ranks *sections*, not items: a section's score in a retriever is the best score of
any of its chunks or cards there, so a card hit in the asker's language lifts the section it cites
and the result shows that section's own passage. Separate rankings for chunks and for cards keep
the two kinds of text from crowding each other out.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from oomkb.indexer.guides import Guide
from oomkb.indexer.store import IndexItem, StoredIndex
from oomkb.kb.cards import CardText, SectionCard
from oomkb.kb.errors import KnowledgeBaseError, QueryError
from oomkb.kb.language import base_language, detect_language
from oomkb.indexer.lexical import LexicalIndex

MAX_QUERY_CHARS = 4000
MAX_K = 50
RRF_K = 60

# Which rankings take part in each mode; weights of the fused reciprocal ranks. The hybrid
# weights were chosen on tests/data/queries.yaml from a small grid (card 1, chunk 0–1, lexical
# 0.5–1.5, RRF k 10/60); tests/data/queries_heldout.yaml checks them on questions not used to
# choose (figures in README). Cards carry most of the cross-lingual signal, so raw chunks get a
# small weight: they rank sections in the guide's language first for every question.
MODES: dict[str, dict[str, float]] = {
    "hybrid": {"dense_card": 1.0, "dense_chunk": 0.25, "lexical": 0.5},
    "dense": {"dense_chunk": 1.0},
    "dense+cards": {"dense_card": 1.0, "dense_chunk": 0.5},
    "lexical": {"lexical": 1.0},
    "lexical+cards": {"lexical": 1.0},
}


class SearchResult(BaseModel):
    """One section that answers the query (the `search --json` fields first)."""

    rank: int
    doc_id: str
    section: str
    language: str = Field(description="language of the guide passage in `text`")
    score: float = Field(description="fused reciprocal-rank score; higher is better")
    text: str = Field(description="the best-matching passage of the section, as written")
    section_title: str
    guide_title: str
    start_char: int | None = None
    end_char: int | None = None
    citation: str = Field(description="doc_id#section")
    dense_score: float = Field(description="best cosine of the query with the section's texts")
    lexical_score: float
    matched: list[str] = Field(description="which retrievers found this section")
    card: CardText | None = Field(
        default=None, description="the section's knowledge card in the query language"
    )


class SearchResponse(BaseModel):
    query: str
    query_language: str
    results: list[SearchResult]
    language_filter: str | None = None
    mode: str = "hybrid"
    took_ms: float = 0.0


@dataclass
class _Ranked:
    scores: dict[tuple[str, str], float]  # section key -> best score
    best_item: dict[tuple[str, str], int]  # section key -> row of its best item


class Searcher:
    """Searches one loaded index. Cheap to query, built once per process.

    `embedder` embeds queries: the index generation's `QueryEncoder` (what `open_searcher` gives)
    or a loaded sentence-transformers model of the same model.
    """

    def __init__(self, index: StoredIndex, guides: list[Guide], cards: list[SectionCard], embedder):
        self.index = index
        self.items: list[IndexItem] = index.items
        self.embedder = embedder
        self.guides = {g.doc_id: g for g in guides}
        self.cards = {(c.doc_id, c.section): c for c in cards}
        self._lexical = index.lexical or LexicalIndex.build([i.embed_text for i in self.items])
        self._is_card = np.array([i.kind == "card" for i in self.items])
        self.languages = sorted({i.language for i in self.items if i.kind == "chunk"})

    @property
    def lexical_terms(self):
        """Every BM25 token of the index's texts (a mapping; `in` is what it is for)."""
        return self._lexical.terms

    def search(
        self,
        query: str,
        k: int = 5,
        language: str | None = None,
        mode: str = "hybrid",
        query_language: str | None = None,
        query_vector: np.ndarray | None = None,
    ) -> SearchResponse:
        """Top `k` sections for `query`; `language` keeps only guides written in that language.
        `query_vector` is `query` as `embed_queries` embeds it, when the caller has it already."""
        t0 = time.perf_counter()
        query = self._check_query(query)
        if not 1 <= k <= MAX_K:
            raise QueryError(f"k must be between 1 and {MAX_K}, got {k}")
        if mode not in MODES:
            raise QueryError(f"unknown search mode {mode!r}; choose one of {', '.join(MODES)}")
        if language is not None:
            asked, language = language, base_language(language)
            if language not in self.languages:
                raise QueryError(
                    f"no guide is written in language {asked!r}; guides exist in "
                    f"{', '.join(self.languages)}"
                )
        qlang = query_language or detect_language(query).language
        weights = MODES[mode]
        use_cards = mode != "dense" and mode != "lexical"
        rankings: dict[str, _Ranked] = {}
        dense = lexical = None
        if "dense_card" in weights or "dense_chunk" in weights:
            dense = self._dense_scores(query, query_vector)
            rankings["dense_chunk"] = self._per_section(dense, ~self._is_card)
            if "dense_card" in weights:
                rankings["dense_card"] = self._per_section(dense, self._is_card)
        if "lexical" in weights:
            lexical = self._lexical.scores(query)
            mask = np.ones(len(self.items), bool) if use_cards else ~self._is_card
            rankings["lexical"] = self._per_section(lexical, mask, positive_only=True)

        fused: dict[tuple[str, str], float] = defaultdict(float)
        matched: dict[tuple[str, str], list[str]] = defaultdict(list)
        for name, ranked in rankings.items():
            order = sorted(ranked.scores, key=lambda s: -ranked.scores[s])
            for rank, key in enumerate(order, start=1):
                fused[key] += weights.get(name, 0.0) / (RRF_K + rank)
                matched[key].append(name)
        if language is not None:
            fused = {key: v for key, v in fused.items() if self.guides[key[0]].language == language}
        order = sorted(fused, key=lambda s: -fused[s])[:k]
        results = [
            self._result(rank, key, fused[key], rankings, dense, lexical, matched[key], qlang)
            for rank, key in enumerate(order, start=1)
        ]
        return SearchResponse(
            query=query,
            query_language=qlang,
            results=results,
            language_filter=language,
            mode=mode,
            took_ms=round((time.perf_counter() - t0) * 1000, 2),
        )

    @staticmethod
    def _check_query(query: str) -> str:
        if not isinstance(query, str):
            raise QueryError("the query must be text")
        query = query.replace("\x00", " ").strip()
        if not query:
            raise QueryError("the query is empty; type a question or an error message")
        if len(query) > MAX_QUERY_CHARS:
            raise QueryError(
                f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}. "
                "Paste only the error message, not the whole log."
            )
        if not any(ch.isalnum() for ch in query):
            raise QueryError("the query has no letters or digits to search for")
        return query

    def _dense_scores(self, query: str, vector: np.ndarray | None = None) -> np.ndarray:
        vec = self._embed(query) if vector is None else np.asarray(vector, np.float32).reshape(1, -1)
        scores, rows = self.index.vectors.search(vec, len(self.items))
        out = np.full(len(self.items), -1.0, dtype=np.float32)
        valid = rows[0] >= 0
        out[rows[0][valid]] = scores[0][valid]
        return out

    def _embed(self, query: str) -> np.ndarray:
        return self.embed_queries([query])

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """L2-normalised query vectors: by the generation's exported model (a `QueryEncoder`, no
        torch), or by a loaded sentence-transformers model when one was given (the benchmark compares)."""
        encode = getattr(self.embedder, "embed_queries", None)
        if encode is not None:
            return encode(list(texts))
        from oomkb.indexer.model import embed_queries

        return embed_queries(self.embedder, list(texts))

    def _per_section(self, scores: np.ndarray, mask: np.ndarray, positive_only=False) -> _Ranked:
        best: dict[tuple[str, str], float] = {}
        row_of: dict[tuple[str, str], int] = {}
        for row in np.flatnonzero(mask):
            s = float(scores[row])
            if positive_only and s <= 0:
                continue
            item = self.items[row]
            key = (item.doc_id, item.section)
            if key not in best or s > best[key]:
                best[key] = s
                row_of[key] = int(row)
        return _Ranked(best, row_of)

    def _result(self, rank, key, score, rankings, dense, lexical, matched, qlang) -> SearchResult:
        doc_id, section_id = key
        guide = self.guides.get(doc_id)
        passage = self._passage(key, rankings)
        card = self.cards.get(key)
        return SearchResult(
            rank=rank,
            doc_id=doc_id,
            section=section_id,
            language=guide.language if guide else passage.language,
            score=round(score, 6),
            text=passage.text,
            section_title=passage.section_title,
            guide_title=guide.title if guide else doc_id,
            start_char=passage.start_char,
            end_char=passage.end_char,
            citation=f"{doc_id}#{section_id}",
            dense_score=round(max((r.scores.get(key, -1.0) for n, r in rankings.items()
                                   if n.startswith("dense")), default=0.0), 4),
            lexical_score=round(rankings["lexical"].scores.get(key, 0.0), 4)
            if "lexical" in rankings else 0.0,
            matched=matched,
            card=card.text(qlang) if card else None,
        )

    def _passage(self, key, rankings) -> IndexItem:
        """The section's chunk that scored best in any ranking that ranks chunks; else its first."""
        for name in ("dense_chunk", "lexical"):
            r = rankings.get(name)
            if r and key in r.best_item and self.items[r.best_item[key]].kind == "chunk":
                return self.items[r.best_item[key]]
        for item in self.items:
            if item.kind == "chunk" and (item.doc_id, item.section) == key:
                return item
        raise KnowledgeBaseError(f"the index is inconsistent: section {key[0]}#{key[1]} has no passage; "
                                 "rebuild it with `oomkb index`")


def open_searcher(
    index_dir: Path | None = None, docs_dir: Path | None = None, progress: bool = False
) -> Searcher:
    """Load the index (building or refreshing it when missing or stale) and return a Searcher."""
    from oomkb.kb.corpus import ensure_index

    loaded = ensure_index(index_dir=index_dir, docs_dir=docs_dir, progress=progress)
    searcher = Searcher(loaded.index, loaded.guides, loaded.cards, loaded.embedder)
    loaded.embedder.wait()  # it loaded while the lexical index was built; ready means ready
    return searcher
