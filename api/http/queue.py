"""The service's job queue on a Ray cluster: POST /v1/estimate and /v1/plan answered 202 with a
job id, GET /v1/jobs/{id} for its state, queue position and result, DELETE to cancel.

Only with ``OOMKB_RAY_ADDRESS`` set; without it the service runs one submitted program at a time
(:mod:`oomkb.api.http.jobs`) exactly as before.

* Each job is one Ray task (:func:`oomkb.diagnostics.submitted.run_submitted`) on a worker of the
  cluster, which runs the estimate or the plan in the sandbox under the operator's limits and
  isolation (a worker without bubblewrap refuses, as the service does). At most one job per CPU
  of the cluster runs at once; the rest wait here in order (``position`` 1 is next).
* A job is its submitter's: the id is 32 random bytes, and another client asking for it gets 404,
  as for an id that does not exist. A client may have at most ``OOMKB_JOBS_PER_CLIENT`` jobs
  waiting or running (429 with Retry-After beyond).
* A worker that dies mid-job (killed, out of memory, its node lost) has the job retried once on
  another worker by Ray, then the job fails saying so; a job past its deadline (the estimate
  timeout and a margin) is cancelled on its worker and fails saying so.
* A finished job's answer is written to ``OOMKB_HOME/jobs/`` (atomically) so that a restart loses
  nothing; it is kept until a few minutes after it was fetched, or until ``OOMKB_JOB_TTL_S``.
* The cluster that cannot be reached when a job is submitted is a :class:`ClusterUnavailable`
  (503 with Retry-After).
"""

from __future__ import annotations

import collections
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from fastapi import Path as PathParam
from fastapi import Request
from pydantic import BaseModel, Field

from oomkb.errors import ServiceError, UserInputError
from oomkb.settings import Settings

log = logging.getLogger("oomkb.api")

__all__ = ["JobAccepted", "JobNotFound", "JobQueue", "JobStatus", "TooManyJobs"]

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED = ("done", "failed", "cancelled")
#: Seconds a finished job stays after its answer was fetched (a client may ask again).
FETCHED_GRACE_S = 300.0
#: Seconds past the estimate timeout before a running job is cancelled on its worker.
DEADLINE_MARGIN_S = 30.0
JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{43}$"


class JobNotFound(UserInputError):
    """No such job for this client: never submitted, another client's, or expired."""

    http_status = 404


class TooManyJobs(ServiceError):
    """The client already has as many jobs waiting or running as the server allows."""

    http_status = 429
    retry_after_s = 10
    expected = True


class JobAccepted(BaseModel):
    """The answer to a job submitted to the cluster (HTTP 202)."""

    job_id: str = Field(description="unguessable; GET /v1/jobs/{job_id} for the state and result")
    state: JobState = "queued"
    position: int | None = Field(None, description="1 = the next to start; 0 = running")


class JobStatus(BaseModel):
    """A job's state, its place in the queue and, once done, its result."""

    job_id: str
    kind: Literal["estimate", "plan"]
    state: JobState
    position: int | None = Field(None, description="while queued: 1 = the next to start; "
                                                   "0 while running; null once finished")
    result: dict[str, Any] | None = Field(
        None, description="when done: the estimate (the `estimate --json` object) or the plan "
                          "(the `plan --json` object)")
    error: str | None = Field(None, description="when failed or cancelled: why")
    http_status: int | None = Field(None, description="when failed: the status the same request "
                                                      "would have had without the queue")
    submitted_at: float
    finished_at: float | None = None


class _Job:
    def __init__(self, kind: str, owner: str, source: str, factory: str,
                 fields: dict[str, Any]) -> None:
        self.id = secrets.token_urlsafe(32)
        self.kind = kind
        self.owner = owner
        self.source = source
        self.factory = factory
        self.fields = fields
        self.state: str = "queued"
        self.ref: Any = None
        self.deadline = 0.0
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.http_status: int | None = None
        self.submitted_at = time.time()
        self.finished_at: float | None = None
        self.fetched_at: float | None = None


class JobQueue:
    """Jobs of one server on the cluster at ``settings.ray_address`` (see the module docstring).

    ``on_finish(status, owner)`` callbacks run when a job ends (the Slack adapter posts the
    result in its thread)."""

    def __init__(self, settings: Settings, folder: Path | None = None) -> None:
        self.settings = settings
        self.folder = folder or settings.home_dir / "jobs"
        self.lock = threading.RLock()
        self.jobs: dict[str, _Job] = {}
        self.waiting: collections.deque[_Job] = collections.deque()
        self.running: dict[str, _Job] = {}
        self.slots = 0
        self.on_finish: list[Callable[[JobStatus, str], None]] = []
        self._task: Any = None
        self._connected = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the cluster ---------------------------------------------------------------------------
    def _connect(self) -> None:
        """Connect on first use; :class:`ClusterUnavailable` (503) when the cluster cannot be
        reached (tried again on the next submission)."""
        with self.lock:
            if self._task is not None:
                return
            from oomkb.diagnostics.executors import connect_ray, ray_module
            from oomkb.diagnostics.submitted import run_submitted

            ray = ray_module()
            self._connected = connect_ray(str(self.settings.ray_address))
            self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
            # max_retries: a worker that dies mid-job has it run once more on another worker.
            self._task = ray.remote(num_cpus=1, max_retries=1)(run_submitted)
            self._thread = threading.Thread(target=self._dispatch, daemon=True,
                                            name="oomkb-job-queue")
            self._thread.start()
            self._sweep_folder()

    def close(self) -> None:
        """Stop dispatching and cancel the jobs still running (they are lost with the server)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._task is not None:
            import ray

            for job in list(self.running.values()):
                try:
                    ray.cancel(job.ref, force=True)
                except Exception:  # noqa: BLE001 - the cluster may be gone already
                    pass
            if self._connected:
                ray.shutdown()
                self._connected = False

    # -- the clients' side ---------------------------------------------------------------------
    def submit(self, kind: str, body: Any, owner: str) -> JobAccepted:
        """Queue ``body`` (an estimate or plan request) for ``owner``."""
        self._connect()
        fields = body.model_dump(mode="json", exclude={"source", "factory"})
        if kind == "plan" and body.vary is not None:
            fields["vary"] = body.vary.spec().model_dump(mode="json")
        if kind == "plan" and getattr(body, "choose", None) is not None:
            fields["choose"] = body.choose.spec().model_dump(mode="json")
        with self.lock:
            active = sum(1 for j in self.jobs.values() if j.owner == owner and j.state not in FINISHED)
            if active >= self.settings.jobs_per_client:
                raise TooManyJobs(f"you have {active} jobs waiting or running on this server, its "
                                  f"limit; retry when one has finished")
            job = _Job(kind, owner, body.source, body.factory, fields)
            self.jobs[job.id] = job
            self.waiting.append(job)
            position = len(self.waiting)
        self._wake.set()
        return JobAccepted(job_id=job.id, state="queued", position=position)

    def status(self, job_id: str, owner: str) -> JobStatus:
        """The job's state for its submitter (:class:`JobNotFound` for anyone else)."""
        with self.lock:
            self._expire()
            job = self.jobs.get(job_id)
            if job is None:
                job = self._load(job_id)
            if job is None or not secrets.compare_digest(job.owner, owner):
                raise JobNotFound("no such job (it never existed, expired, or is another client's)")
            if job.state in FINISHED and job.fetched_at is None:
                job.fetched_at = time.time()
            return self._status(job)

    def cancel(self, job_id: str, owner: str) -> JobStatus:
        """Cancel the job (waiting: removed; running: stopped on its worker); a finished job
        stays as it is."""
        with self.lock:
            status = self.status(job_id, owner)
            job = self.jobs[job_id]
            if job.state == "queued":
                self.waiting.remove(job)
                self._finish(job, "cancelled", error="cancelled by its submitter before it started")
            elif job.state == "running":
                self._stop_running(job)
                self._finish(job, "cancelled", error="cancelled by its submitter; stopped on its worker")
            else:
                return status
            return self._status(job)

    # -- the dispatcher ------------------------------------------------------------------------
    def _dispatch(self) -> None:
        import ray

        while not self._stop.is_set():
            with self.lock:
                while self.waiting and len(self.running) < self.slots:
                    job = self.waiting.popleft()
                    job.ref = self._task.remote(
                        job.kind, job.source, job.factory, job.fields,
                        {"memory_bytes": self.settings.estimate_memory_bytes,
                         "cpu_seconds": self.settings.estimate_cpu_seconds},
                        self.settings.estimate_timeout_s, self.settings.estimate_isolated)
                    job.state = "running"
                    job.deadline = time.monotonic() + self.settings.estimate_timeout_s + DEADLINE_MARGIN_S
                    self.running[job.id] = job
                refs = {job.ref: job for job in self.running.values()}
            ready: list[Any] = []
            if refs:
                ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0.2)
            else:
                self._wake.wait(0.2)
                self._wake.clear()
            with self.lock:
                for ref in ready:
                    job = refs[ref]
                    if job.state == "running":
                        self._collect(job)
                now = time.monotonic()
                for job in list(self.running.values()):
                    if now > job.deadline:
                        self._stop_running(job)
                        self._finish(job, "failed", http_status=422, error=(
                            f"the job ran past its deadline ({self.settings.estimate_timeout_s:g} s "
                            "and a margin) and was cancelled on its worker"))
                self._expire()

    def _collect(self, job: _Job) -> None:
        import ray
        from ray.exceptions import RayError, TaskCancelledError, WorkerCrashedError

        try:
            answer = ray.get(job.ref, timeout=10)
        except TaskCancelledError:
            self._finish(job, "cancelled", error="cancelled on its worker")
            return
        except WorkerCrashedError:
            self._finish(job, "failed", http_status=503, error=(
                "the worker running this job died, and so did the one it was retried on; "
                "the job was not finished"))
            return
        except RayError as err:
            self._finish(job, "failed", http_status=500, error=f"the cluster could not run it: "
                                                            f"{type(err).__name__}")
            return
        if "result" in answer:
            self._finish(job, "done", result=answer["result"])
        else:
            self._finish(job, "failed", error=str(answer.get("error")),
                         http_status=int(answer.get("http_status") or 500))

    def _stop_running(self, job: _Job) -> None:
        import ray

        try:
            ray.cancel(job.ref, force=True)
        except Exception:  # noqa: BLE001 - finished meanwhile, or the cluster is gone
            pass

    def _finish(self, job: _Job, state: str, *, result: dict[str, Any] | None = None,
                error: str | None = None, http_status: int | None = None) -> None:
        job.state, job.result, job.error, job.http_status = state, result, error, http_status
        job.finished_at = time.time()
        job.source = ""  # the program is not kept once its job ended
        self.running.pop(job.id, None)
        self._save(job)
        status = self._status(job)
        for callback in self.on_finish:
            try:
                callback(status, job.owner)
            except Exception:  # noqa: BLE001 - a notifier's trouble never loses the job
                log.exception("job %s: the notifier failed", job.kind)

    def _status(self, job: _Job) -> JobStatus:
        position = None
        if job.state == "queued":
            position = next(i for i, j in enumerate(self.waiting, 1) if j is job)
        elif job.state == "running":
            position = 0
        return JobStatus(job_id=job.id, kind=job.kind, state=job.state, position=position,  # type: ignore[arg-type]
                         result=job.result, error=job.error, http_status=job.http_status,
                         submitted_at=job.submitted_at, finished_at=job.finished_at)

    # -- kept on disk ----------------------------------------------------------------------------
    def _path(self, job_id: str) -> Path:
        return self.folder / f"{job_id}.json"

    def _save(self, job: _Job) -> None:
        from oomkb.diagnostics.exchange import write_atomic

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(self._path(job.id), {"owner": job.owner, "status": self._status(job).model_dump(mode="json")})
        except OSError:
            log.exception("job %s: its answer could not be written to %s", job.id, self.folder)

    def _load(self, job_id: str) -> _Job | None:
        import re

        if not re.fullmatch(JOB_ID_PATTERN, job_id):
            return None
        try:
            data = json.loads(self._path(job_id).read_text("utf-8"))
            status = JobStatus.model_validate(data["status"])
        except (OSError, ValueError, KeyError):
            return None
        job = _Job(status.kind, str(data.get("owner")), "", "", {})
        job.id = status.job_id
        job.state, job.result, job.error = status.state, status.result, status.error
        job.http_status, job.submitted_at, job.finished_at = (status.http_status,
                                                             status.submitted_at, status.finished_at)
        self.jobs[job.id] = job
        return job

    def _sweep_folder(self) -> None:
        """Answers an earlier run of the server kept past their time are deleted."""
        now = time.time()
        for path in self.folder.glob("*.json") if self.folder.is_dir() else []:
            try:
                if now - path.stat().st_mtime > self.settings.job_ttl_s:
                    path.unlink()
            except OSError:
                continue

    def _expire(self) -> None:
        now = time.time()
        for job in list(self.jobs.values()):
            if job.state not in FINISHED:
                continue
            fetched = job.fetched_at is not None and now - job.fetched_at > FETCHED_GRACE_S
            old = job.finished_at is not None and now - job.finished_at > self.settings.job_ttl_s
            if fetched or old:
                del self.jobs[job.id]
                self._path(job.id).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# The routes


#: What POST /v1/estimate and /v1/plan answer when the server queues jobs on a cluster.
QUEUED_RESPONSE = {202: {"model": JobAccepted, "description": "queued on the cluster (servers "
                         "with OOMKB_RAY_ADDRESS): GET /v1/jobs/{job_id} for the state and result"}}
NO_QUEUE = "this server runs no job queue (its operator has not set OOMKB_RAY_ADDRESS)"


def queued(queue: JobQueue, kind: str, body: Any, owner: str) -> Any:
    """The 202 answer to a request queued as a job."""
    from fastapi.responses import JSONResponse

    accepted = queue.submit(kind, body, owner)
    return JSONResponse(accepted.model_dump(), status_code=202,
                        headers={"Location": f"/v1/jobs/{accepted.job_id}"})


def mount_jobs(app: Any, owner_of: Callable[[Any], str], responses: dict[int, Any]) -> None:
    """Add GET and DELETE /v1/jobs/{job_id} to ``app`` (``app.state.job_queue``; 404 without)."""
    job_id_param = PathParam(max_length=64, description="the id POST returned")
    errors = {**responses, 404: {"model": responses[400]["model"], "description":
                                 "no such job for this client (never submitted, another client's, "
                                 "or expired), or no job queue on this server"}}

    def the_queue(request: Request) -> JobQueue:
        queue = request.app.state.job_queue
        if queue is None:
            raise JobNotFound(NO_QUEUE)
        return queue

    @app.get("/v1/jobs/{job_id}", response_model=JobStatus, tags=["diagnostics"], responses=errors)
    def job_status(request: Request, job_id: str = job_id_param) -> JobStatus:
        """A queued estimate's or plan's state (`queued`, `running`, `done`, `failed`,
        `cancelled`), its place in the queue and, once done, its result; only for the client
        that submitted it. A finished job's answer is kept until a few minutes after it is first
        fetched, or for OOMKB_JOB_TTL_S."""
        return the_queue(request).status(job_id, owner_of(request))

    @app.delete("/v1/jobs/{job_id}", response_model=JobStatus, tags=["diagnostics"],
                responses=errors)
    def job_cancel(request: Request, job_id: str = job_id_param) -> JobStatus:
        """Cancel a queued or running job (a running one is stopped on its worker)."""
        return the_queue(request).cancel(job_id, owner_of(request))
