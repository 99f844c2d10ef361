"""The jobs a child process may run: one table, name → function, that a reader can follow.

A job takes the payload (a JSON object) and returns a JSON object; :func:`oomkb.diagnostics.sandbox.run_job`
starts it by name in a fresh interpreter. The child imports only the module of a job named here, so
the name on its command line never selects other code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

#: name → (module, function)
JOBS: dict[str, tuple[str, str]] = {
    # the estimate of one factory on a TPU target (deviceless compile)
    "estimate": ("oomkb.diagnostics.estimate", "estimate_job"),
    # a plan: fixes, other generations and --vary compiles
    "plan": ("oomkb.diagnostics.plan", "plan_job"),
    # a long-lived worker answering single compiles of one program (parallel plans)
    "measure_worker": ("oomkb.diagnostics.measure_worker", "measure_worker_job"),
    # repeated calls on the local backend with live-array tracking
    "profile": ("oomkb.diagnostics.profile", "profile_job"),
    # a function of the user's file called with the payload's arguments (tests and benchmarks of the sandbox)
    "call_program": ("oomkb.diagnostics.sandbox", "call_program_job"),
}


def job_function(name: str) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The function of job `name` (ValueError for a name not in :data:`JOBS`)."""
    try:
        module, function = JOBS[name]
    except KeyError:
        raise ValueError(f"unknown job {name!r}; the jobs are {', '.join(JOBS)}") from None
    return getattr(importlib.import_module(module), function)


__all__ = ["JOBS", "job_function"]
