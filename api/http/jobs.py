"""Running a submitted program (POST /v1/estimate and /v1/plan): one at a time, in a private folder,
under the operator's limits."""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from oomkb.settings import Settings
from oomkb.diagnostics.sandbox import Limits


@contextlib.contextmanager
def submitted_program(source: str, gate: threading.Semaphore, busy: Exception) -> Iterator[Path]:
    """The submitted source written to `program.py` in a private temporary folder, while this
    server runs no other submitted program (`busy` is raised otherwise)."""
    if not gate.acquire(blocking=False):
        raise busy
    try:
        with tempfile.TemporaryDirectory(prefix="oomkb-job-") as tmp:
            path = Path(tmp) / "program.py"
            path.write_text(source, encoding="utf-8")
            yield path
    finally:
        gate.release()


def job_limits(settings: Settings) -> Limits:
    """The resource limits the operator set for submitted programs."""
    return Limits(memory_bytes=settings.estimate_memory_bytes, cpu_seconds=settings.estimate_cpu_seconds)
