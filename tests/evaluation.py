"""Retrieval quality on a labelled query set: recall@k and MRR at the guide level (used by the
retrieval tests and benchmarks/retrieval.py; not part of the installed package)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel


class LabelledQuery(BaseModel):
    q: str
    doc: str
    lang: str


class Miss(BaseModel):
    query: str
    lang: str
    expected: str
    got: list[str]


class RetrievalMetrics(BaseModel):
    queries: int
    recall_at_1: float
    recall_at_3: float
    mrr: float
    misses_at_1: list[Miss]


def load_queries(path: Path) -> list[LabelledQuery]:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return [LabelledQuery.model_validate(q) for q in data["queries"]]


def evaluate(searcher, queries: list[LabelledQuery], mode: str = "hybrid", k: int = 10) -> RetrievalMetrics:
    """Rank of the first result from the expected guide, over the top `k` sections."""
    hits1 = hits3 = 0
    rr = 0.0
    misses = []
    for lq in queries:
        docs = [r.doc_id for r in searcher.search(lq.q, k=k, mode=mode).results]
        rank = docs.index(lq.doc) + 1 if lq.doc in docs else None
        hits1 += rank == 1
        hits3 += rank is not None and rank <= 3
        rr += 1.0 / rank if rank else 0.0
        if rank != 1:
            misses.append(Miss(query=lq.q, lang=lq.lang, expected=lq.doc, got=docs[:3]))
    n = len(queries)
    return RetrievalMetrics(
        queries=n,
        recall_at_1=round(hits1 / n, 4),
        recall_at_3=round(hits3 / n, 4),
        mrr=round(rr / n, 4),
        misses_at_1=misses,
    )
