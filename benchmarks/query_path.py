"""Query-path benchmark: the goals of the torch-free query path, as ratios measured in one run.

Needs a built index (`oomkb index`). Measures, on this machine, in this order:
- `python -c "import sentence_transformers"` (the cost the query path no longer pays) and a cold
  `oomkb search` from a shell (median of --repeat runs each, interleaved so load hits both);
  goal: search <= 0.20 x import;
- the sentence-transformers query-embedding time on one torch thread, and the exported model's
  (ONNX Runtime, one thread) on the same queries;
- `oomkb serve`: process start to first `/v1/ask` answer (goal <= 3 s), then `/v1/ask` at 16
  concurrent: answers/s (goal >= 2 x 1 / ST embedding time) and p50/p99, for each --workers
  count and with and without batching concurrent queries into one embedding call
  (OOMKB_QUERY_BATCH); resident and proportional memory of each server process;
- a profile of one answer in-process (cProfile): where the time goes, by stage.
Prints one JSON object.

    .venv/bin/python benchmarks/query_path.py [--repeat 3] [--requests 160] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This folder holds an `api.py` of its own: the project's `api` package must win.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]


def _bench_module(name: str):
    """A sibling benchmark module, loaded by path (it shares names with the project)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


import oomkb.api  # noqa: E402,F401  (the project's package, before benchmarks/api.py is loaded)

_live = _bench_module("live_server")
QUESTIONS, LiveServer, _descendants, _status_kib = (
    _live.QUESTIONS, _live.LiveServer, _live._descendants, _live._status_kib)

QUERY = "How do I raise the scoped VMEM limit for my Pallas kernel?"
EMBED_QUERIES = [q["question"] for q in QUESTIONS] * 3


def _timed(cmd: list[str], env: dict | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed: {proc.stderr[-1500:]}")
    return time.perf_counter() - started


def cold_search_vs_import(repeat: int) -> dict:
    imports, searches = [], []
    for _ in range(repeat):
        imports.append(_timed([sys.executable, "-c", "import sentence_transformers"]))
        searches.append(_timed([sys.executable, "-m", "oomkb.api.cli", "search", QUERY, "--json"]))
    imp, search = statistics.median(imports), statistics.median(searches)
    return {
        "import_sentence_transformers_s": round(imp, 2),
        "cold_oomkb_search_s": round(search, 2),
        "runs": {"import_s": [round(x, 2) for x in imports],
                 "search_s": [round(x, 2) for x in searches]},
        "ratio": round(search / imp, 3),
        "goal_ratio_at_most": 0.20,
        "met": search / imp <= 0.20,
    }


def embedding_times() -> dict:
    """Per-query embedding time, one thread: sentence-transformers vs the index's ONNX model."""
    import torch

    from oomkb.indexer.model import embed_queries, load_embedder
    from oomkb.indexer.query_model import load_query_encoder
    from oomkb.settings import default_index_dir
    from oomkb.indexer.store import load_index

    torch.set_num_threads(1)
    st = load_embedder()
    encoder = load_query_encoder(load_index(default_index_dir()), threads=1)
    out = {}
    for name, embed in (("sentence_transformers", lambda q: embed_queries(st, [q])),
                        ("onnx", lambda q: encoder.embed_queries([q]))):
        for q in EMBED_QUERIES[:3]:
            embed(q)  # warm-up
        times = []
        for q in EMBED_QUERIES:
            t = time.perf_counter()
            embed(q)
            times.append(time.perf_counter() - t)
        out[f"{name}_ms"] = round(statistics.median(times) * 1000, 2)
    out["onnx_precision"] = encoder.info.precision
    return out


def _memory(pid: int) -> list[dict]:
    rows = []
    for p in [pid, *_descendants(pid)]:
        pss = None
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
        except OSError:
            pass
        rss = (_status_kib(p, "VmRSS") or 0) * 1024
        if rss:
            rows.append({"pid": p, "rss_mib": round(rss / 2**20), "pss_mib":
                         round(pss / 2**20) if pss is not None else None})
    return rows


def serve_run(workers: int, batch: bool, requests: int, concurrency: int) -> dict:
    bench_api = _bench_module("api")
    cold_start, load = bench_api.cold_start, bench_api.load

    env = {"OOMKB_QUERY_BATCH": "1" if batch else "0"}
    args = ["--workers", str(workers)] if workers > 1 else []
    server = LiveServer(log_level="warning", env=env, args=args).start()
    try:
        cold = cold_start(server.base_url, server.proc, server.started, 600)
        if workers > 1:  # every worker loads on its own: warm them all before measuring
            server.wait_ready()
            load(server.base_url, 4 * workers * len(QUESTIONS), concurrency)
        else:
            load(server.base_url, len(QUESTIONS), 1)
        run = load(server.base_url, requests, concurrency)
        memory = _memory(server.pid)
    except BaseException:
        sys.stderr.write(server.log_tail())
        raise
    finally:
        server.stop()
        server.log_path.unlink(missing_ok=True)
    return {"workers": workers, "batch_concurrent_queries": batch, "cold_start": cold,
            "load": run, "memory": memory}


def profile_answers(rounds: int = 3) -> dict:
    """cProfile of answering the question set in-process; seconds per answer, by stage."""
    from oomkb.api.core.assistant import load_assistant
    from oomkb.api.schemas import AskRequest

    assistant = load_assistant()
    bodies = [AskRequest(**body) for body in QUESTIONS]
    for body in bodies:
        assistant.ask(body)
    profiler = cProfile.Profile()
    n = 0
    profiler.enable()
    for _ in range(rounds):
        for body in bodies:
            assistant.ask(body)
            n += 1
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = sum(v[2] for v in stats.values())  # tottime over all functions

    def cum(fragment: str, name: str) -> float:
        return sum(v[3] for (f, _, fn), v in stats.items() if fragment in f and fn == name)

    stages = {
        "answer_total": cum("api/core/assistant.py", "ask"),
        "search_total": cum("kb/search.py", "search"),
        "query_embedding": cum("indexer/query_model.py", "embed_queries"),
        "dense_faiss": cum("kb/search.py", "_dense_scores") - cum("indexer/query_model.py",
                                                                  "embed_queries"),
        "lexical_bm25": cum("indexer/lexical.py", "scores"),
        "language_detection": cum("kb/language.py", "detect_language"),
        "error_parsing": cum("diagnostics/parse.py", "parse_error"),
    }
    ms = {k: round(v / n * 1000, 2) for k, v in stages.items()}
    ms["rest_of_answer"] = round(ms["answer_total"] - ms["search_total"]
                                 - ms["language_detection"] - ms["error_parsing"], 2)
    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    return {
        "answers": n,
        "ms_per_answer_by_stage": ms,
        "note": "stages overlap where one calls the other (search_total includes the embedding "
                "and lexical); cProfile adds overhead to Python code, not to ONNX Runtime",
        "top_functions_by_own_time": [
            {"function": f"{Path(f).name}:{fn}", "ms_per_answer": round(v[2] / n * 1000, 2),
             "share": round(v[2] / total, 3)} for (f, _, fn), v in top
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="cold runs of import and search each")
    ap.add_argument("--requests", type=int, default=160, help="/v1/ask requests per load run")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--skip-serve", action="store_true")
    args = ap.parse_args()

    report: dict = {"cpus": os.cpu_count(), "load_average_1min_start": round(os.getloadavg()[0], 2)}
    report["cold_search"] = cold_search_vs_import(args.repeat)
    report["embedding_one_thread"] = embedding_times()
    st_ms = report["embedding_one_thread"]["sentence_transformers_ms"]
    goal = 2 * 1000 / st_ms
    if not args.skip_serve:
        runs = []
        for workers in args.workers:
            for batch in (False, True):
                runs.append(serve_run(workers, batch, args.requests, args.concurrency))
        report["serve"] = runs
        best = max(runs, key=lambda r: r["load"]["requests_per_s"])
        report["goals"] = {
            "answers_per_s_at_16": best["load"]["requests_per_s"],
            "answers_per_s_goal_at_least": round(goal, 1),
            "answers_per_s_met": best["load"]["requests_per_s"] >= goal,
            "best_configuration": {"workers": best["workers"],
                                   "batch": best["batch_concurrent_queries"]},
            "p99_ms_at_16": best["load"]["p99_ms"],
            "cold_start_to_first_answer_s": runs[0]["cold_start"]["process_to_first_answer_s"],
            "cold_start_goal_at_most_s": 3.0,
            "cold_start_met": runs[0]["cold_start"]["process_to_first_answer_s"] <= 3.0,
            "cold_search_ratio": report["cold_search"]["ratio"],
            "cold_search_met": report["cold_search"]["met"],
        }
    report["profile"] = profile_answers()
    report["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
