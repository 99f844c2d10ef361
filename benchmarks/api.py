"""HTTP service benchmark: cold start and `/v1/ask` latency over a live uvicorn on 127.0.0.1.

Starts `oomkb serve` in a child process on a free loopback port and measures
- cold start: process start → first successful `/v1/ask` answer (with the times to the first
  `/healthz` 200 and to `/readyz` 200 on the way);
- `/v1/ask` latency (p50, p99, mean) and requests/s at each concurrency level, over a fixed set
  of questions in several languages (a third of them with a pasted error log), after a warm-up;
- meanwhile, the latency of `GET /healthz` (does the event loop stay responsive under load?).
Prints one JSON object, then stops the server. Only loopback addresses are used.

    .venv/bin/python benchmarks/api.py [--requests 100] [--concurrency 1 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_server import HOST, QUESTIONS, LiveServer, percentile  # noqa: E402


def cold_start(base: str, proc: subprocess.Popen, started: float, timeout_s: float) -> dict:
    """Poll until /v1/ask answers; the times from process start to healthz, readyz and answer."""
    marks: dict[str, float] = {}
    load_seconds = None
    with httpx.Client(base_url=base, timeout=30) as client:
        while time.monotonic() - started < timeout_s:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with status {proc.returncode} during start-up")
            try:
                if "healthz_s" not in marks and client.get("/healthz").status_code == 200:
                    marks["healthz_s"] = time.monotonic() - started
                if "healthz_s" in marks and "readyz_s" not in marks:
                    ready = client.get("/readyz")
                    if ready.status_code == 200:
                        marks["readyz_s"] = time.monotonic() - started
                        load_seconds = ready.json().get("load_seconds")
                if "readyz_s" in marks:
                    r = client.post("/v1/ask", json=QUESTIONS[0])
                    if r.status_code == 200:
                        marks["first_answer_s"] = time.monotonic() - started
                        break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        else:
            raise SystemExit(f"no answer from the server within {timeout_s:g} s")
    return {
        "process_to_healthz_s": round(marks["healthz_s"], 2),
        "process_to_readyz_s": round(marks["readyz_s"], 2),
        "process_to_first_answer_s": round(marks["first_answer_s"], 2),
        "model_and_index_load_s": load_seconds,
    }


def probe_healthz(base: str, stop: threading.Event, out: list[float]) -> None:
    """Time GET /healthz every 50 ms until `stop`: the event loop's responsiveness under load."""
    with httpx.Client(base_url=base, timeout=30) as client:
        while not stop.is_set():
            t = time.perf_counter()
            client.get("/healthz")
            out.append(time.perf_counter() - t)
            stop.wait(0.05)


def load(base: str, requests: int, concurrency: int) -> dict:
    """`requests` POST /v1/ask calls from `concurrency` threads; latency and throughput, and the
    latency of /healthz probed meanwhile."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    errors = 0
    health: list[float] = []
    stop = threading.Event()
    prober = threading.Thread(target=probe_healthz, args=(base, stop, health), daemon=True)
    prober.start()
    with httpx.Client(base_url=base, timeout=120, limits=limits) as client:
        def one(i: int) -> tuple[float, int]:
            t = time.perf_counter()
            r = client.post("/v1/ask", json=QUESTIONS[i % len(QUESTIONS)])
            return time.perf_counter() - t, r.status_code

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for seconds, status in pool.map(one, range(requests)):
                latencies.append(seconds)
                errors += status != 200
        wall = time.perf_counter() - started
    stop.set()
    prober.join(timeout=30)
    return {
        "concurrency": concurrency,
        "requests": requests,
        "errors": errors,
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "requests_per_s": round(requests / wall, 2),
        "wall_s": round(wall, 2),
        "healthz_during_load_p50_ms": round(percentile(health, 50) * 1000, 1) if health else None,
        "healthz_during_load_p99_ms": round(percentile(health, 99) * 1000, 1) if health else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=100, help="requests per concurrency level")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--warmup", type=int, default=len(QUESTIONS))
    ap.add_argument("--start-timeout", type=float, default=600.0, help="seconds to wait for the first answer")
    args = ap.parse_args()
    if args.requests < 1 or min(args.concurrency) < 1:
        ap.error("--requests and --concurrency must be positive")

    server = LiveServer(log_level="warning").start()
    base = server.base_url
    try:
        cold = cold_start(base, server.proc, server.started, args.start_timeout)
        warm = load(base, args.warmup, 1)
        runs = [load(base, args.requests, c) for c in args.concurrency]
    except BaseException:
        sys.stderr.write(server.log_tail())
        raise
    finally:
        server.stop()
    print(json.dumps({
        "endpoint": "POST /v1/ask",
        "server": f"oomkb serve (uvicorn) on {HOST}",
        "cpus": os.cpu_count(),
        "torch_threads": os.environ.get("OOMKB_TORCH_THREADS") or "1 (default)",
        "questions": len(QUESTIONS),
        "cold_start": cold,
        "warmup_requests": warm["requests"],
        "load": runs,
    }, indent=2))
    server.log_path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
