"""The long-lived worker that makes a plan's compiles (the ``measure_worker`` sandbox job).

It loads the program once (jax, libtpu's topologies, the factory's module), then answers
:class:`~diagnostics.measure.MeasureRequest`\\ s posted in its exchange folder
(:mod:`diagnostics.exchange`) with :func:`diagnostics.plan.measure_request`, until it is told to
stop, sits idle too long or loses the process that started it; so only the first request pays
for the start-up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oomkb.diagnostics.measure import MeasureRequest, MeasureResult

__all__ = ["measure_worker_job"]

#: A worker with nothing to do for this long stops by itself.
WORKER_IDLE_S = 600.0


def measure_worker_job(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Sandbox job: serve :class:`MeasureRequest`s posted in ``payload["exchange"]`` for the
    program ``payload["program"]`` (child side)."""
    from oomkb.diagnostics import tpu

    os.environ.update(tpu.child_environment(Path(payload["workdir"]) / "tpu_logs"))
    import jax  # noqa: F401 - only now, with libtpu's variables in place

    from oomkb.diagnostics.compile_cache import toolchain_versions
    from oomkb.diagnostics.exceptions import DiagnosticsError
    from oomkb.diagnostics.exchange import STOP_FILE, serve_once
    from oomkb.diagnostics.plan import _Session, measure_request
    from oomkb.diagnostics.program import factory_label, load_factory

    tpu.prepare_in_process()
    program = str(payload["program"])
    factory = load_factory(program)
    label = factory_label(factory)
    session = _Session(None, program)
    versions = toolchain_versions()
    folder = Path(payload["exchange"])
    idle_s = float(payload.get("idle_s") or WORKER_IDLE_S)
    served = 0

    def handle(message: Any) -> dict[str, Any]:
        try:
            request = MeasureRequest.model_validate(message)
            before = session.compiles
            measured = measure_request(session, factory, label, request)
        except (DiagnosticsError, ValueError) as err:
            return {"error": str(err)[:2000]}
        return MeasureResult(measured=measured.model_dump(), compiles=session.compiles - before,
                             versions=versions).model_dump()

    last = time.monotonic()
    parent = os.getppid()
    # Stop when told, when idle, or when the process that started this one is gone (a killed
    # worker must not leave its compiler running).
    while not (folder / STOP_FILE).exists() and time.monotonic() - last < idle_s \
            and os.getppid() == parent:
        count = serve_once(folder, handle)
        if count:
            served += count
            last = time.monotonic()
        else:
            time.sleep(0.02)
    return {"served": served}
