"""Running a submitted program (POST /v1/estimate and /v1/plan): one at a time, in a private folder,
under the operator's limits."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from oomkb.api.schemas import ProgramRequest
from oomkb.errors import ServiceError
from oomkb.settings import Settings
from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.sandbox import Limits

log = logging.getLogger("oomkb.api")


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


class EstimateRequest(ProgramRequest):
    """A Python program whose factory is estimated on a TPU generation (the `estimate --json` shape)."""

    donation_check: bool = True
    top_n: int = Field(default=10, ge=1, le=100)
    timeline: bool = Field(False, description="also read every HBM buffer's live range over the "
                                              "compiled program's order (the report's `timeline`, "
                                              "which the web page draws)")


class EstimateBusy(ServiceError):
    """An estimate is already running; the service runs one at a time."""

    http_status = 429
    retry_after_s = 10
    expected = True


def sandbox_refusal(settings: Settings) -> str | None:
    """Why submitted programs cannot run now (isolation asked for, bubblewrap unusable), or None.

    Every endpoint that runs submitted code answers 503 with this text; the log says what to
    install. ``OOMKB_ESTIMATE_SANDBOX=none`` opts out of isolation (then this is always None)."""
    from oomkb.diagnostics.isolation import INSTALL_HINT, isolation_status

    if not settings.estimate_isolated:
        return None
    status = isolation_status()
    if status.available:
        return None
    log.error("submitted programs are refused: %s; %s, or set OOMKB_ESTIMATE_SANDBOX=none to run "
              "them without isolation", status.problem, INSTALL_HINT)
    return (f"this server runs submitted programs only in an isolation sandbox, and it has none "
            f"({status.problem}); the operator must install bubblewrap (the server log says how)")


def run_estimate(req: EstimateRequest, settings: Settings, gate: threading.Semaphore) -> EstimateReport:
    """Write the program to a private temporary folder and estimate it in the sandbox."""
    from oomkb.diagnostics.estimate import estimate_program

    busy = EstimateBusy("an estimate is already running on this server; retry in a moment")
    with submitted_program(req.source, gate, busy) as path:
        return estimate_program(
            f"{path}:{req.factory}", target=req.tpu, topology=req.topology,
            timeout_s=settings.estimate_timeout_s, donation_check=req.donation_check,
            top_n=req.top_n, limits=job_limits(settings), isolate=settings.estimate_isolated,
            timeline=req.timeline,
        )
