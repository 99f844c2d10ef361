"""Load benchmark: many `POST /v1/ask` requests at fixed concurrency against a live uvicorn.

Starts `oomkb serve` on a free 127.0.0.1 port, waits for `/readyz`, then sends `--requests` asks
(default 5,000) from `--concurrency` client threads (default 32). The bodies are generated from a
fixed seed: questions in eleven languages, a third with a pasted error log whose sizes vary, so no
two consecutive requests are alike. The run is bounded in count and in time (`--max-seconds`):
past the deadline no new request starts and the report says so.

Reported (one JSON object on stdout): errors (any answer other than 200, or a transport error),
status codes, latency p50/p90/p99/mean/max, requests/s, and the server's resident memory (VmRSS
of the process, which covers all its threads, plus any child processes) before the load, after
the warm-up point (1,000 requests, or a third of a shorter run) and at the end, with whether the
end stays within 10 % of the warm value. The exit status is 1 when any request failed.

    .venv/bin/python benchmarks/load.py [--requests 5000] [--concurrency 32] [--quick]

Client and server share the machine's cores, so requests/s is a floor for the server alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_server import HOST, QUESTIONS, LiveServer, percentile, rss_bytes, thread_count  # noqa: E402

MIB = 1 << 20
QUICK_REQUESTS = 300
FLAT_TOLERANCE = 0.10

EXTRA_QUESTIONS = [
    "TPU で HBM のメモリ不足が起きたとき、バッチサイズ以外に何を試せますか？",
    "TPU에서 컴파일 시 HBM 메모리 부족 오류를 어떻게 줄이나요?",
    "Como reduzir o uso de VMEM de um kernel Pallas personalizado?",
    "Comment trouver quelles opérations occupent la mémoire au pic avec XProf ?",
    "Wie finde ich ein Speicherleck, wenn der Speicher bei jedem Schritt wächst?",
    "What does donate_argnums do and how much HBM does it save?",
    "Does rematerialization (jax.checkpoint) help with an E1000 error?",
    "Как уменьшить фрагментацию памяти на TPU?",
    "如何用 XProf 查看峰值内存处的缓冲区？",
    "هل يساعد تقليل حجم الدفعة في حل خطأ نفاد ذاكرة HBM؟",
    "मेमोरी लीक का पता कैसे लगाएं?",
    "¿Qué significa 'Exceeded hbm capacity' y cómo lo arreglo?",
]


def _gib(rng: random.Random) -> float:
    return round(rng.uniform(1, 200), 2)


def _error_log(rng: random.Random) -> str:
    """An OOM error (sometimes inside a longer log) with sizes that change from call to call."""
    kind = rng.randrange(5)
    if kind == 0:
        used, cap = _gib(rng), rng.choice([16.0, 32.0, 95.74])
        text = (f"RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
                f"space hbm. Used {used + cap:.2f}G of {cap:.2f}G hbm. Exceeded hbm capacity by "
                f"{used:.2f}G.")
    elif kind == 1:
        want = rng.randint(2, 900)
        text = (f"ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                f"allocate {want}.00M. That was not possible. There are {want // 2}.43M free.; "
                f"(0x0x1_HBM0)")
    elif kind == 2:
        text = (f"Ran out of memory in memory space vmem while allocating on stack for "
                f"%kernel_{rng.randint(1, 99)} = bf16[{rng.choice([512, 1024, 2048])},4096]{{1,0}} "
                f"custom-call(...)")
    elif kind == 3:
        text = f"Out of memory while trying to allocate {rng.randint(1, 400) << 30} bytes."
    else:
        text = (f"TPU TensorCore Hbm usage: {_gib(rng)}G, SparseCore Hbm usage {_gib(rng)}G, "
                f"exceeding available bytes: 95.74G")
    if rng.random() < 0.5:
        step = rng.randint(1, 10000)
        text = (f"I0101 12:00:00.000 train.py:88] step {step}\n"
                f"Traceback (most recent call last):\n  File \"train.py\", line 120, in <module>\n"
                f"    state = train_step(state, batch)\n"
                f"jaxlib.xla_extension.XlaRuntimeError: {text}\n")
    return text


def request_bodies(count: int, seed: int = 0) -> list[dict]:
    """`count` /v1/ask bodies: the shared questions, more languages, error logs of varied sizes."""
    rng = random.Random(seed)
    questions = [q["question"] for q in QUESTIONS if "error_log" not in q] + EXTRA_QUESTIONS
    bodies = []
    for i in range(count):
        if i % 3 == 2:
            body = {"question": rng.choice(["Why did this fail?", "Что это значит?", "这是什么错误？",
                                            "Was bedeutet das?", "", "How do I fix this?"]),
                    "error_log": _error_log(rng)}
        elif rng.random() < 0.15:
            body = dict(rng.choice(QUESTIONS))
        else:
            body = {"question": rng.choice(questions)}
        if rng.random() < 0.1:
            body["language"] = rng.choice(["en", "ru", "zh", "es", "ja"])
        bodies.append(body)
    return bodies


class _Progress:
    """Counts finished requests and samples the server's RSS at chosen counts."""

    def __init__(self, pid: int, warm_at: int, every: int) -> None:
        self.pid = pid
        self.warm_at = warm_at
        self.every = every
        self.done = 0
        self.lock = threading.Lock()
        self.warm_rss: int | None = None
        self.series: list[tuple[int, int]] = []

    def finished_one(self) -> None:
        with self.lock:
            self.done += 1
            done = self.done
        if done == self.warm_at:
            self.warm_rss = rss_bytes(self.pid)
        if done % self.every == 0:
            self.series.append((done, rss_bytes(self.pid)))


def run_load(server: LiveServer, bodies: list[dict], concurrency: int, max_seconds: float,
             warm_at: int) -> dict:
    """Send `bodies` to POST /v1/ask from `concurrency` threads, starting none after `max_seconds`."""
    progress = _Progress(server.pid, warm_at, every=max(len(bodies) // 20, 1))
    statuses: Counter[str] = Counter()
    failures: list[str] = []
    latencies: list[float] = []
    record = threading.Lock()
    next_index = iter(range(len(bodies)))
    started = time.perf_counter()
    deadline = started + max_seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    with httpx.Client(base_url=server.base_url, timeout=120, limits=limits) as client:
        def worker() -> None:
            while time.perf_counter() < deadline:
                with record:
                    i = next(next_index, None)
                if i is None:
                    return
                t = time.perf_counter()
                try:
                    r = client.post("/v1/ask", json=bodies[i])
                    status, ok = str(r.status_code), r.status_code == 200
                    if ok:
                        answer = r.json()
                        ok = isinstance(answer.get("answer"), str) and bool(answer["answer"])
                        if not ok:
                            status = "200 without an answer"
                    elif len(failures) < 10:
                        failures.append(f"{r.status_code}: {r.text[:300]}")
                except httpx.HTTPError as exc:
                    status, ok = type(exc).__name__, False
                    if len(failures) < 10:
                        failures.append(f"{type(exc).__name__}: {exc}")
                seconds = time.perf_counter() - t
                with record:
                    statuses[status] += 1
                    latencies.append(seconds)
                progress.finished_one()

        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="load") as pool:
            for future in [pool.submit(worker) for _ in range(concurrency)]:
                future.result()
    wall = time.perf_counter() - started
    sent = len(latencies)
    errors = sent - statuses.get("200", 0)
    return {
        "requests_planned": len(bodies),
        "requests_sent": sent,
        "stopped_by_time_limit": sent < len(bodies),
        "max_seconds": max_seconds,
        "concurrency": concurrency,
        "errors": errors,
        "status_codes": dict(sorted(statuses.items())),
        "first_failures": failures,
        "latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 1),
            "p90": round(percentile(latencies, 90) * 1000, 1),
            "p99": round(percentile(latencies, 99) * 1000, 1),
            "mean": round(statistics.fmean(latencies) * 1000, 1),
            "max": round(max(latencies) * 1000, 1),
        } if latencies else None,
        "requests_per_s": round(sent / wall, 2) if wall else None,
        "wall_s": round(wall, 2),
        "_warm_rss": progress.warm_rss,
        "_series": progress.series,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=None, help="asks to send (default 5000)")
    ap.add_argument("--concurrency", type=int, default=32, help="client threads (default 32)")
    ap.add_argument("--quick", action="store_true",
                    help=f"a short run for CI: {QUICK_REQUESTS} requests, 2 minutes at most")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no request after this many seconds (default 900; 120 with --quick)")
    ap.add_argument("--start-timeout", type=float, default=600.0,
                    help="seconds to wait for /readyz")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated request bodies")
    args = ap.parse_args(argv)
    requests = args.requests or (QUICK_REQUESTS if args.quick else 5000)
    max_seconds = args.max_seconds or (120.0 if args.quick else 900.0)
    if requests < 1 or args.concurrency < 1 or max_seconds <= 0:
        ap.error("--requests, --concurrency and --max-seconds must be positive")
    warm_at = min(1000, max(requests // 3, 1))
    bodies = request_bodies(requests, args.seed)

    server = LiveServer(log_level="warning")
    try:
        server.start()
        ready_s = server.wait_ready(args.start_timeout)
        rss_before = rss_bytes(server.pid)
        threads_before = thread_count(server.pid)
        result = run_load(server, bodies, args.concurrency, max_seconds, warm_at)
        rss_after = rss_bytes(server.pid)
        threads_after = thread_count(server.pid)
        alive = server.proc.poll() is None
    except BaseException:
        sys.stderr.write(server.log_tail())
        raise
    finally:
        server.stop()
    server.log_path.unlink(missing_ok=True)

    warm = result.pop("_warm_rss") or rss_after
    series = result.pop("_series")
    growth = (rss_after - warm) / warm if warm else None
    report = {
        "endpoint": "POST /v1/ask",
        "server": f"oomkb serve (uvicorn) on {HOST}, pid {server.pid}",
        "cpus": os.cpu_count(),
        "torch_threads": os.environ.get("OOMKB_TORCH_THREADS") or "1 (default)",
        "server_ready_s": round(ready_s, 2),
        **result,
        "server_alive_after": alive,
        "rss": {
            "before_bytes": rss_before,
            "warm_bytes": warm,
            "warm_after_requests": warm_at,
            "after_bytes": rss_after,
            "before_mib": round(rss_before / MIB, 1),
            "warm_mib": round(warm / MIB, 1),
            "after_mib": round(rss_after / MIB, 1),
            "growth_after_warm_pct": round(100 * growth, 2) if growth is not None else None,
            "flat_within_10pct": growth is not None and abs(growth) <= FLAT_TOLERANCE,
            "series_mib": {str(done): round(rss / MIB, 1) for done, rss in series},
        },
        "threads": {"before": threads_before, "after": threads_after},
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    # one line for the RSS series
    text = text.replace(json.dumps(report["rss"]["series_mib"], indent=2).replace("\n", "\n    "),
                        json.dumps(report["rss"]["series_mib"]))
    print(text)
    return 1 if report["errors"] or not alive else 0


if __name__ == "__main__":
    sys.exit(main())
