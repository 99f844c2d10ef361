"""A live `oomkb serve` on a free loopback port, for the HTTP benchmarks and the tests that need a
real server process (not an in-process test client).

:class:`LiveServer` starts the server in its own process group with the environment it is given,
waits for `/healthz` or `/readyz`, reports the server's resident memory from `/proc`, and stops
it (SIGINT, then SIGKILL). It listens on 127.0.0.1 only. The shared question set and the
percentile helper live here too, so every benchmark measures the same way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

#: A fixed set of /v1/ask bodies in several languages; a third carry a pasted error log.
QUESTIONS: list[dict] = [
    {"question": "How do I fix a compile-time HBM out-of-memory error on TPU?"},
    {"question": "Как найти утечку памяти и отследить время жизни тензоров на TPU?"},
    {"question": "编译时 HBM 内存不足 E1000 应该怎么解决？"},
    {"question": "كيف أستخدم عارض الذاكرة في XProf لتصحيح أخطاء نفاد الذاكرة؟"},
    {"question": "TPU पर रनटाइम बफ़र आवंटन त्रुटि को कैसे ठीक करें?"},
    {"question": "¿Cómo soluciono un error de memoria VMEM con alcance en mi kernel de Pallas?"},
    {"question": "Why did this fail?",
     "error_log": "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
                  "space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G."},
    {"question": "Was bedeutet dieser Fehler?",
     "error_log": "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                  "allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)"},
    {"question": "Que faire ?",
     "error_log": "Ran out of memory in memory space vmem while allocating on stack for "
                  "%my-custom-kernel = bf16[2048,4096]{1,0} custom-call(...)"},
]


class ServerError(RuntimeError):
    """The server exited or did not become healthy/ready in time; the message quotes its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """The `q`-th percentile (nearest rank on the sorted values)."""
    values = sorted(values)
    idx = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[idx]


def _status_kib(pid: int, field: str) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def _descendants(pid: int) -> list[int]:
    """Child processes of `pid`, recursively (threads are not processes: they share its memory)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                kids = [int(k) for k in children.read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def rss_bytes(pid: int) -> int:
    """Resident memory of `pid` and of its child processes, in bytes (VmRSS from /proc).

    A process's VmRSS already covers all its threads, which share one address space."""
    total = 0
    for p in [pid, *_descendants(pid)]:
        kib = _status_kib(p, "VmRSS")
        total += (kib or 0) * 1024
    return total


def thread_count(pid: int) -> int:
    """Threads of the process `pid` (0 when it is gone)."""
    return _status_kib(pid, "Threads") or 0


class LiveServer:
    """`oomkb serve` in a child process on 127.0.0.1:`port` (a free one by default).

    Use as a context manager; `env` adds variables to this process's environment; `root` is the
    source tree the server runs from (default: this checkout; another one is imported from its
    own folder, e.g. a worktree of an earlier commit for an A/B comparison)."""

    def __init__(self, *, port: int | None = None, env: Mapping[str, str] | None = None,
                 log_level: str = "warning", args: list[str] | None = None,
                 root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else ROOT
        self.args = list(args or [])
        self.port = port or free_port()
        self.base_url = f"http://{HOST}:{self.port}"
        self.env = dict(env or {})
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        fd, name = tempfile.mkstemp(prefix="oomkb-live-server-", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the server is not started"
        return self.proc.pid

    def start(self) -> LiveServer:
        """Start the server process (returns at once; see :meth:`wait_healthy`, :meth:`wait_ready`)."""
        with open(self.log_path, "wb") as log:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "oomkb.api.cli", "serve", "--host", HOST, "--port", str(self.port),
                 "--log-level", self.log_level, *self.args],
                cwd=self.root, env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        return self

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _wait(self, path: str, timeout_s: float) -> float:
        """Poll GET `path` until it answers 200; seconds since the process started."""
        assert self.proc is not None, "the server is not started"
        deadline = time.monotonic() + timeout_s
        with httpx.Client(base_url=self.base_url, timeout=10) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise ServerError(f"the server exited with status {self.proc.returncode} during "
                                      f"start-up; its log ends:\n{self.log_tail()}")
                try:
                    r = client.get(path)
                    if r.status_code == 200:
                        return time.monotonic() - self.started
                    if path == "/readyz" and r.json().get("status") == "failed":
                        raise ServerError(f"the server failed to load: {r.json().get('detail')}")
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        raise ServerError(f"{path} did not answer 200 within {timeout_s:g} s; the server log ends:\n"
                          f"{self.log_tail()}")

    def wait_healthy(self, timeout_s: float = 120.0) -> float:
        """Wait for /healthz 200 (the process answers); seconds since start."""
        return self._wait("/healthz", timeout_s)

    def wait_ready(self, timeout_s: float = 600.0) -> float:
        """Wait for /readyz 200 (model and index loaded); seconds since start."""
        return self._wait("/readyz", timeout_s)

    def stop(self) -> None:
        """Stop the server and anything it started: SIGINT, then SIGKILL after 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.log_path.unlink(missing_ok=True)
