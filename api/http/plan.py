"""POST /v1/plan: the planner behind the same switch, sandbox, limits and gate as /v1/estimate."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from oomkb.api.http.jobs import job_limits, submitted_program
from oomkb.api.schemas import JsonRequest, ProgramRequest
from oomkb.settings import Settings
from oomkb.diagnostics.plan import PlanReport

PLAN_DISABLED = (
    "POST /v1/plan runs the submitted program and is disabled on this server; the operator can "
    "enable it with OOMKB_ENABLE_ESTIMATE=1 (or run `oomkb plan FILE.py:FACTORY` locally)"
)


class VaryRequest(JsonRequest):
    """An integer keyword argument of the factory and the range to search."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    low: int | None = Field(None, ge=-(1 << 40), le=1 << 40)
    high: int | None = Field(None, ge=-(1 << 40), le=1 << 40)
    step: int = Field(1, ge=1, le=1 << 40, description="search every STEP-th value of LO..HI")
    values: list[int] | None = Field(None, min_length=1, max_length=4096,
                                     description="the values to search instead of LO..HI")
    def spec(self):
        """The search as the planner takes it; :class:`PlanError` (400) when neither a range
        (`low` and `high`) nor `values` is given (a rule the JSON schema cannot say)."""
        from oomkb.diagnostics.plan import PlanError, VarySpec

        if self.values is None and (self.low is None or self.high is None):
            raise PlanError("vary: give low and high, or values")
        listed = self.values
        return VarySpec(name=self.name, step=self.step, values=listed,
                        low=min(listed) if listed else self.low, high=max(listed) if listed else self.high)


class ChooseRequest(JsonRequest):
    """A categorical keyword argument of the factory and the values to compile (`--choose`)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200,
                      description="the factory's keyword argument, e.g. remat")
    values: list[str] = Field(min_length=1, max_length=16,
                              description="the values to compile, as text (given to the factory "
                                          "as the type of the keyword's default), e.g. "
                                          "[\"none\", \"full\"]")

    def spec(self):
        """The choices as the planner takes them (:class:`PlanError`, 400, for a bad value)."""
        from oomkb.diagnostics.choose import check_choose

        return check_choose((self.name, self.values))


class PlanRequest(ProgramRequest):
    """A Python program whose factory is planned on a TPU generation (the `plan --json` shape)."""

    vary: VaryRequest | None = None
    choose: ChooseRequest | None = Field(
        None, description="compile each value of a categorical keyword; with `vary`, the largest "
                          "fitting value under each (the report's `choices`)")


def run_plan(req: PlanRequest, settings: Settings, gate: threading.Semaphore,
             busy: type[Exception]) -> PlanReport:
    """Write the program to a private temporary folder and plan it in the sandbox."""
    from oomkb.diagnostics.plan import plan_program

    vary = req.vary.spec() if req.vary is not None else None
    choose = req.choose.spec() if req.choose is not None else None
    refusal = busy("an estimate or a plan is already running on this server; retry in a moment")
    with submitted_program(req.source, gate, refusal) as path:
        return plan_program(f"{path}:{req.factory}", target=req.tpu, topology=req.topology,
                            vary=vary, choose=choose, timeout_s=settings.estimate_timeout_s,
                            limits=job_limits(settings), isolate=settings.estimate_isolated)


def mount_plan(app: FastAPI, settings: Settings, *, gate: threading.Semaphore,
               busy: type[Exception], responses: dict[int, Any],
               refusal: Callable[[Settings], str | None],
               owner_of: Callable[[Request], str] = lambda request: "-") -> None:
    """Add POST /v1/plan to ``app`` (``gate``, ``busy`` and ``refusal`` are /v1/estimate's;
    ``owner_of`` names the client a queued job belongs to)."""

    @app.post("/v1/plan", response_model=PlanReport, tags=["diagnostics"], responses=responses)
    def plan(body: PlanRequest, request: Request) -> Any:
        """Find what makes a program fit by compiling each remedy (off unless the operator
        enables it; the same sandbox and limits as /v1/estimate). On a server with a Ray
        cluster (OOMKB_RAY_ADDRESS) it is queued: 202 with a `job_id` for GET /v1/jobs/{job_id}."""
        if not settings.enable_estimate:
            return JSONResponse({"detail": PLAN_DISABLED}, status_code=403)
        if request.app.state.job_queue is not None:
            from oomkb.api.http.queue import queued

            if body.vary is not None:
                body.vary.spec()  # a bad range is a 400 now, not a failed job later
            if body.choose is not None:
                body.choose.spec()
            return queued(request.app.state.job_queue, "plan", body, owner_of(request))
        if refused := refusal(settings):
            return JSONResponse({"detail": refused}, status_code=503)
        return run_plan(body, settings, gate, busy)
