"""`/v1/ask` throughput at 16 concurrent: this checkout against another source tree (e.g. a
worktree of the commit before a change), measured in one run, interleaved A B A B ... so that the
machine's load falls on both alike. Each server answers from its own copy of the same built
index. Prints one JSON object: answers/s and p50/p99 per run, the medians and the ratio.

    git worktree add /tmp/base <commit>
    .venv/bin/python benchmarks/ask_ab.py --base /tmp/base --home .oomkb/test-home [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import load  # noqa: E402
from live_server import QUESTIONS, ROOT, LiveServer  # noqa: E402


def one_run(root: Path, home: Path, requests: int, concurrency: int) -> dict:
    env = {"OOMKB_HOME": str(home), "PYTHONPATH": str(root), "OOMKB_QUERY_BATCH": "0"}
    server = LiveServer(env=env, root=root).start()
    try:
        server.wait_ready()
        load(server.base_url, len(QUESTIONS), 1)  # warm-up: every question once
        run = load(server.base_url, requests, concurrency)
    except BaseException:
        sys.stderr.write(server.log_tail())
        raise
    finally:
        server.stop()
        server.log_path.unlink(missing_ok=True)
    return {"answers_per_s": run["requests_per_s"], "p50_ms": run["p50_ms"], "p99_ms": run["p99_ms"],
            "errors": run["errors"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="the other source tree (A)")
    ap.add_argument("--home", type=Path, required=True, help="an OOMKB_HOME with a built index")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=160)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "this": ROOT}
    report: dict = {"cpus": os.cpu_count(), "load_average_1min_start": round(os.getloadavg()[0], 2),
                    "base": str(trees["base"]), "runs": {"base": [], "this": []}}
    with tempfile.TemporaryDirectory(prefix="oomkb-ab-") as tmp:
        homes = {}
        for name in trees:  # each server may rebuild what it finds stale: its own copy
            homes[name] = Path(tmp) / name
            shutil.copytree(args.home, homes[name])
        for _ in range(args.rounds):
            for name, root in trees.items():
                report["runs"][name].append(one_run(root, homes[name], args.requests, args.concurrency))
    med = {name: statistics.median(r["answers_per_s"] for r in runs) for name, runs in report["runs"].items()}
    report["median_answers_per_s"] = med
    report["ratio_this_over_base"] = round(med["this"] / med["base"], 3)
    report["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
