"""Retrieval benchmark: quality of each part of the search, index build time, search latency.

Prints one JSON object. Quality is recall@1, recall@3 and MRR at the guide level on the labelled
query set in tests/data/queries.yaml, for: BM25 alone, dense alone (raw chunks), naive fusion of
the two, + knowledge cards (dense), + lexical (the shipped hybrid). Build times are measured on a
fresh index folder (cold: every text embedded; incremental: nothing changed). Latency is the warm
per-query time of the shipped hybrid search, 2 rounds over all queries after one warm-up round.
Queries are embedded as shipped: by the index generation's exported query model (ONNX Runtime,
one thread); `query_encoder_check` repeats the shipped row with sentence-transformers embedding
the queries instead, which must give the same quality (within 0.01).

    .venv/bin/python benchmarks/retrieval.py [--queries FILE] [--no-build]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import oomkb.api  # noqa: E402,F401  (libtpu process defaults, before bm25s imports jax)
from oomkb.indexer.model import load_embedder  # noqa: E402
from oomkb.indexer.query_model import load_query_encoder  # noqa: E402
from oomkb.indexer.store import load_index  # noqa: E402
from oomkb.kb.corpus import build, load_corpus  # noqa: E402
from tests.evaluation import evaluate, load_queries  # noqa: E402
from oomkb.kb.search import Searcher  # noqa: E402

# (row name, corpus with cards?, search mode)
CONFIGS = [
    ("bm25_chunks", False, "lexical"),
    ("dense_chunks", False, "dense"),
    ("naive_fusion_chunks", False, "hybrid"),
    ("bm25_chunks_cards", True, "lexical+cards"),
    ("dense_chunks_cards", True, "dense+cards"),
    ("hybrid_chunks_cards_lexical", True, "hybrid"),
]


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    idx = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[idx]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=Path, default=ROOT / "tests" / "data" / "queries.yaml")
    ap.add_argument("--heldout", type=Path,
                    default=ROOT / "tests" / "data" / "queries_heldout.yaml")
    args = ap.parse_args()

    queries = load_queries(args.queries)
    heldout = load_queries(args.heldout)
    t0 = time.perf_counter()
    embedder = load_embedder()
    model_load_s = time.perf_counter() - t0
    report: dict = {"queries": len(queries), "model_load_s": round(model_load_s, 2)}

    threads = int(os.environ.get("OOMKB_TORCH_THREADS") or 1)
    with tempfile.TemporaryDirectory() as tmp:
        searchers = {}
        for with_cards in (False, True):
            corpus = load_corpus(with_cards=with_cards)
            index_dir = Path(tmp) / ("cards" if with_cards else "chunks")
            cold = build(index_dir=index_dir, embedder=embedder, corpus=corpus)
            warm = build(index_dir=index_dir, embedder=embedder, corpus=corpus)
            report[f"build_{'chunks_cards' if with_cards else 'chunks'}"] = {
                "items": cold.items,
                "cold_s": cold.seconds,
                "cold_items_per_s": round(cold.embedded / cold.seconds, 2),
                "incremental_s": warm.seconds,
                "incremental_embedded": warm.embedded,
            }
            index = load_index(index_dir)
            searchers[with_cards] = Searcher(index, corpus.guides, corpus.cards,
                                             load_query_encoder(index, threads=threads))
            if with_cards:
                st_searcher = Searcher(index, corpus.guides, corpus.cards, embedder)

        quality = {}
        for name, with_cards, mode in CONFIGS:
            m = evaluate(searchers[with_cards], queries, mode=mode)
            quality[name] = {"recall_at_1": m.recall_at_1, "recall_at_3": m.recall_at_3,
                             "mrr": m.mrr}
            if name == CONFIGS[-1][0]:
                quality[name]["misses_at_1"] = [x.model_dump() for x in m.misses_at_1]
        report["quality"] = quality
        report["quality_heldout"] = {}
        for name, with_cards, mode in CONFIGS:
            m = evaluate(searchers[with_cards], heldout, mode=mode)
            report["quality_heldout"][name] = {"queries": m.queries, "recall_at_1": m.recall_at_1,
                                               "recall_at_3": m.recall_at_3, "mrr": m.mrr}

        check = {}
        for name, qs in (("tuning", queries), ("heldout", heldout)):
            shipped_m = evaluate(searchers[True], qs, mode="hybrid")
            st_m = evaluate(st_searcher, qs, mode="hybrid")
            check[name] = {
                "exported_recall_at_1": shipped_m.recall_at_1, "exported_mrr": shipped_m.mrr,
                "sentence_transformers_recall_at_1": st_m.recall_at_1,
                "sentence_transformers_mrr": st_m.mrr,
                "within_0_01": abs(shipped_m.recall_at_1 - st_m.recall_at_1) <= 0.01
                and abs(shipped_m.mrr - st_m.mrr) <= 0.01,
            }
        report["query_encoder_check"] = {
            "precision": searchers[True].embedder.info.precision, **check}

        # Latency as the server runs it: one thread per request (OOMKB_TORCH_THREADS) for the
        # query model, which also keeps it steady when the machine is busy.
        shipped = searchers[True]
        for lq in queries:  # warm-up
            shipped.search(lq.q)
        times = []
        for _ in range(2):
            for lq in queries:
                t = time.perf_counter()
                shipped.search(lq.q)
                times.append((time.perf_counter() - t) * 1000)
        report["search_latency_ms"] = {
            "query_model_threads": threads,
            "load_average_1min": round(os.getloadavg()[0], 2),
            "n": len(times),
            "p50": round(statistics.median(times), 2),
            "p99": round(_percentile(times, 99), 2),
            "mean": round(statistics.fmean(times), 2),
        }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
