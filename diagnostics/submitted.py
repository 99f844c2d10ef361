"""A submitted program's estimate or plan, run wherever the caller sends it (a Ray worker).

The service's job queue (:mod:`oomkb.api.http.queue`) ships the program's source, the request's
fields and the operator's rules (limits, timeout, isolation) to a worker of the cluster, which
calls :func:`run_submitted`: it writes the source to a private folder and runs the estimate or
the plan there in the sandbox, exactly as the service runs it on its own machine (bubblewrap
when the rules ask for it: a worker without it refuses, as the service does). The answer is a
plain dict, so that nothing but JSON crosses the cluster: ``{"result": report}`` or
``{"error": message, "http_status": status}``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["run_submitted"]


def run_submitted(kind: str, source: str, factory: str, fields: Mapping[str, Any],
                  limits: Mapping[str, Any], timeout_s: float, isolate: bool) -> dict[str, Any]:
    """Estimate (``kind="estimate"``) or plan (``"plan"``) ``source``'s ``factory`` with the
    request's ``fields`` under the sandbox's ``limits``, ``timeout_s`` and ``isolate``."""
    from oomkb.diagnostics.sandbox import Limits
    from oomkb.errors import OomkbError

    rules = Limits.model_validate(dict(limits))
    try:
        with tempfile.TemporaryDirectory(prefix="oomkb-submitted-") as tmp:
            path = Path(tmp) / "program.py"
            path.write_text(source, encoding="utf-8")
            program = f"{path}:{factory}"
            if kind == "estimate":
                from oomkb.diagnostics.estimate import estimate_program

                report = estimate_program(
                    program, target=fields.get("tpu", "v5e"), topology=fields.get("topology"),
                    timeout_s=timeout_s, donation_check=bool(fields.get("donation_check", True)),
                    top_n=int(fields.get("top_n", 10)), limits=rules, isolate=isolate)
            elif kind == "plan":
                from oomkb.diagnostics.choose import ChooseSpec
                from oomkb.diagnostics.plan import VarySpec, plan_program

                vary, choose = fields.get("vary"), fields.get("choose")
                report = plan_program(
                    program, target=fields.get("tpu", "v5e"), topology=fields.get("topology"),
                    vary=VarySpec.model_validate(vary) if vary else None,
                    choose=ChooseSpec.model_validate(choose) if choose else None,
                    timeout_s=timeout_s, limits=rules, isolate=isolate)
            else:
                raise ValueError(f"unknown job kind {kind!r}")
            return {"result": report.model_dump(mode="json")}
    except OomkbError as err:
        return {"error": str(err), "http_status": err.http_status}
