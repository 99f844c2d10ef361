"""Where a plan's independent compiles run: local worker processes or a Ray cluster.

A plan (:mod:`diagnostics.plan`) runs in its sandboxed child as always; with workers, the child
sends each batch of compiles that do not wait on one another (the fixes, other generations and
topologies, a round of ``--vary`` values; another caller's list of choices just the same) as
:class:`~diagnostics.measure.MeasureRequest`\\ s through its exchange folder. On the caller's
side :class:`MeasureBroker` answers them: from the compile cache (:mod:`diagnostics.compile_cache`)
when it can, else by an executor:

* :class:`ProcessExecutor` (``--workers N``): N long-lived sandboxed workers on this machine;
* :class:`RayExecutor` (``--ray ADDRESS``, ``OOMKB_RAY_ADDRESS``): one Ray actor per worker slot
  of the cluster, each running the same sandboxed worker on its node.

Every worker is :func:`diagnostics.sandbox.run_job`'s ``measure_worker`` job, with the plan's
isolation (bubblewrap when asked; fail closed when the worker has none), limits and timeout, so a
compile runs under the same rules wherever it runs. A worker that dies mid-compile is replaced
and the compile retried once on the new one; a second loss is :class:`WorkerLost`. A compile past
the plan's deadline is stopped with its worker (:class:`~diagnostics.sandbox.JobTimeout`).
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from oomkb.diagnostics.compile_cache import CompileCache, program_fingerprint, toolchain_versions
from oomkb.diagnostics.exchange import STOP_FILE, ExchangeClosed, ask, serve_once
from oomkb.diagnostics.measure import MeasureRequest, MeasureResult
from oomkb.diagnostics.sandbox import JobTimeout, Limits, SandboxError
from oomkb.errors import ServiceError

__all__ = [
    "ClusterUnavailable",
    "CompileExecutor",
    "MeasureBroker",
    "ProcessExecutor",
    "RayExecutor",
    "WorkerLost",
    "WorkerSpec",
    "connect_executor",
]

#: Results the cache keeps: what a compile decided (not a worker's trouble).
CACHED_STATES = frozenset({"fits", "does_not_fit", "oom", "factory_error"})
#: Seconds to wait for a cluster address to accept a connection before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0


class WorkerLost(SandboxError):
    """A compile's worker died twice (killed, out of memory, its node gone): the compile is
    abandoned with this message rather than retried forever."""

    http_status = 422


class ClusterUnavailable(ServiceError):
    """The Ray cluster named by ``--ray``/``OOMKB_RAY_ADDRESS`` cannot be reached (or Ray is not
    installed): the environment is at fault; the CLI falls back to this machine, the service
    answers 503."""

    http_status = 503
    retry_after_s = 30


class WorkerSpec(BaseModel):
    """What every worker of one plan runs: the program, and the sandbox's rules for it."""

    program: str = Field(description="FILE.py:FACTORY, as resolved by the caller")
    isolate: bool = False
    limits: Limits = Field(default_factory=Limits)
    timeout_s: float = 900.0
    python: str | None = None
    paths: list[str] = Field(default_factory=list)
    read_only: list[str] = Field(default_factory=list)
    home_files: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# One sandboxed worker (runs wherever its caller runs: here, or in a Ray actor)


class SandboxWorker:
    """A long-lived ``measure_worker`` job in a thread, and requests posted to it."""

    def __init__(self, spec: WorkerSpec) -> None:
        from oomkb.diagnostics.sandbox import run_job

        self.spec = spec
        self.folder = Path(tempfile.mkdtemp(prefix="oomkb-worker-"))
        self.error: BaseException | None = None
        self.deadline = time.monotonic() + spec.timeout_s

        def run() -> None:
            try:
                run_job(
                    "measure_worker", {"program": spec.program, "exchange": str(self.folder)},
                    timeout_s=spec.timeout_s, limits=spec.limits, what=f"a worker of {spec.program}",
                    isolate=spec.isolate, read_only=spec.read_only, writable=[self.folder],
                    home_files=[p for p in spec.home_files if Path(p).exists()],
                    python=spec.python, sys_path=spec.paths,
                )
            except BaseException as exc:  # reported by measure()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True, name="oomkb-worker")
        self.thread.start()

    def measure(self, request: MeasureRequest) -> MeasureResult:
        """The worker's answer to ``request``; :class:`WorkerLost` when it died, the job's own
        error (a timeout, a program that does not load) when it ended with one."""
        try:
            reply = ask(self.folder, request.model_dump(), alive=self.thread.is_alive,
                        timeout_s=max(1.0, self.deadline - time.monotonic() + 5))
        except ExchangeClosed:
            self.thread.join(timeout=15)
            error = self.error
            if isinstance(error, JobTimeout):
                raise error
            if error is not None and not _is_loss(error):
                raise error
            raise WorkerLost(f"the worker compiling {request.what or 'a variant'} of "
                             f"{self.spec.program} died"
                             + (f": {error}" if error is not None else "")) from error
        if "error" in reply:
            return MeasureResult(measured={"status": "error", "error": str(reply["error"]),
                                           "capacity_bytes": 0})
        return MeasureResult.model_validate(reply)

    def close(self) -> None:
        try:
            (self.folder / STOP_FILE).touch()
        except OSError:
            pass
        self.thread.join(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


def _is_loss(error: BaseException) -> bool:
    """A worker's end that says nothing about the program: killed or crashed (retry elsewhere)."""
    from oomkb.diagnostics.sandbox import JobCrashed

    return isinstance(error, JobCrashed)


# ---------------------------------------------------------------------------------------------
# Executors


class CompileExecutor:
    """Runs batches of independent :class:`MeasureRequest`\\ s for one program at a time,
    ``slots`` at once; ``kind`` names it in reports."""

    kind = "serial"
    slots = 1

    def start(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self._free: queue.Queue[Any] = queue.Queue()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="oomkb-measure")
        for _ in range(self.slots):
            self._free.put(None)  # started on first use

    def run(self, requests: Sequence[MeasureRequest]) -> list[MeasureResult]:
        """Every request measured, ``slots`` at a time, in order."""
        return list(self._pool.map(self._one, requests))

    def _one(self, request: MeasureRequest) -> MeasureResult:
        worker = self._free.get()
        try:
            if worker is None:
                worker = self._spawn()
            try:
                return self._measure(worker, request)
            except WorkerLost as first:
                # Once more, on a fresh worker (on a cluster, Ray places it where it can).
                self._retire(worker)
                worker = None
                worker = self._spawn()
                try:
                    return self._measure(worker, request)
                except WorkerLost as second:
                    self._retire(worker)
                    worker = None
                    raise WorkerLost(f"{first}; retried once on a fresh worker, which was lost "
                                     f"too ({second}): the compile is abandoned") from None
        finally:
            self._free.put(worker)

    def _spawn(self) -> Any:
        worker = self._new_worker()
        with self._lock:
            self._all.append(worker)
        return worker

    def _retire(self, worker: Any) -> None:
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        self._close_worker(worker)

    def stop(self) -> None:
        """Stop this plan's workers (their sandboxes end with them)."""
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
            self._pool = None
        for worker in list(getattr(self, "_all", [])):
            self._close_worker(worker)
        self._all = []

    def close(self) -> None:
        """Stop the workers and let go of what the executor holds (a cluster connection)."""
        self.stop()

    def describe(self) -> str:
        return f"{self.slots} {self.kind} worker(s)"

    # the executor's own ---------------------------------------------------------------------
    def _new_worker(self) -> Any:
        raise NotImplementedError

    def _measure(self, worker: Any, request: MeasureRequest) -> MeasureResult:
        raise NotImplementedError

    def _close_worker(self, worker: Any) -> None:
        raise NotImplementedError


class ProcessExecutor(CompileExecutor):
    """``workers`` sandboxed worker processes on this machine (``--workers N``)."""

    kind = "processes"

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"--workers must be at least 1, got {workers}")
        self.slots = workers

    def _new_worker(self) -> SandboxWorker:
        return SandboxWorker(self.spec)

    def _measure(self, worker: SandboxWorker, request: MeasureRequest) -> MeasureResult:
        return worker.measure(request)

    def _close_worker(self, worker: SandboxWorker) -> None:
        worker.close()


class RayWorkerActor:
    """The body of a Ray actor: one :class:`SandboxWorker` on the node Ray placed it."""

    def __init__(self, spec_json: str) -> None:
        self.worker = SandboxWorker(WorkerSpec.model_validate_json(spec_json))

    def pid(self) -> int:
        return os.getpid()

    def measure(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"result": self.worker.measure(MeasureRequest.model_validate(request)).model_dump()}
        except WorkerLost as err:
            return {"lost": str(err)}
        except Exception as err:  # noqa: BLE001 - the caller re-raises it by kind
            return {"error": str(err), "kind": type(err).__name__,
                    "timeout": isinstance(err, JobTimeout)}

    def close(self) -> bool:
        self.worker.close()
        return True


def ray_module() -> Any:
    """Ray, or :class:`ClusterUnavailable` saying how to install it (the ``cluster`` extra)."""
    try:
        import ray
    except ImportError:
        raise ClusterUnavailable("Ray is not installed: pip install 'oomkb[cluster]'") from None
    return ray


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """:class:`ClusterUnavailable` unless ``HOST:PORT`` accepts a TCP connection within
    ``timeout_s`` (Ray itself would wait for minutes)."""
    text = address.removeprefix("ray://")
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterUnavailable(f"the Ray address {address!r} is not HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        raise ClusterUnavailable(f"the Ray cluster at {address} cannot be reached ({err})") from None


def connect_ray(address: str) -> bool:
    """Connect this process to the cluster at ``address`` (kept when already connected);
    True when this call connected (so the caller disconnects afterwards)."""
    ray = ray_module()
    check_reachable(address)
    if ray.is_initialized():
        return False  # this process's connection (made by its owner) is used as it is
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
        raise ClusterUnavailable(f"the Ray cluster at {address} cannot be used: {err}") from None
    return True


class RayExecutor(CompileExecutor):
    """One Ray actor per worker slot (``--ray ADDRESS``): each actor runs a sandboxed worker on
    its node; at most ``workers`` (default: the cluster's CPUs) at once."""

    kind = "ray"

    def __init__(self, address: str | None, workers: int | None = None) -> None:
        ray = ray_module()
        self.address = address
        self._connected = connect_ray(address) if address else False
        if not ray.is_initialized():
            raise ClusterUnavailable("no Ray cluster: give --ray ADDRESS or OOMKB_RAY_ADDRESS")
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        # An actor holds a CPU: asking for more than the cluster has would wait for ever.
        self.slots = max(1, min(workers or cpus, cpus))
        self._actor_class = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=2)(RayWorkerActor)

    def _new_worker(self) -> Any:
        return self._actor_class.remote(self.spec.model_dump_json())

    def _measure(self, worker: Any, request: MeasureRequest) -> MeasureResult:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, WorkerCrashedError

        remaining = max(1.0, self.spec.timeout_s)
        ref = worker.measure.remote(request.model_dump())
        try:
            reply = ray.get(ref, timeout=remaining + 10)
        except GetTimeoutError:
            ray.kill(worker, no_restart=True)  # the compile past its deadline stops on its node
            raise JobTimeout(f"the compile of {request.what or 'a variant'} ran past "
                             f"{self.spec.timeout_s:g} s and was stopped on its worker") from None
        except (RayActorError, WorkerCrashedError) as err:
            raise WorkerLost(f"the Ray worker compiling {request.what or 'a variant'} of "
                             f"{self.spec.program} died ({type(err).__name__})") from None
        if "lost" in reply:
            raise WorkerLost(reply["lost"])
        if "error" in reply:
            if reply.get("timeout"):
                raise JobTimeout(reply["error"])
            raise SandboxError(f"a worker could not run the compile: {reply['error']}")
        return MeasureResult.model_validate(reply["result"])

    def _close_worker(self, worker: Any) -> None:
        import ray

        try:
            ray.get(worker.close.remote(), timeout=60)
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
            pass
        try:
            ray.kill(worker, no_restart=True)
        except Exception:  # noqa: BLE001
            pass

    def close(self) -> None:
        super().close()
        if self._connected:
            import ray

            ray.shutdown()
            self._connected = False

    def describe(self) -> str:
        return f"{self.slots} Ray worker(s) at {self.address or 'the connected cluster'}"


def connect_executor(workers: int | None = None, ray_address: str | None = None
                     ) -> CompileExecutor | None:
    """The executor the options ask for (``ray_address`` first), or None for the serial plan.
    :class:`ClusterUnavailable` when the cluster cannot be used."""
    if ray_address:
        return RayExecutor(ray_address, workers)
    if workers:
        return ProcessExecutor(workers)
    return None


# ---------------------------------------------------------------------------------------------
# The caller's side of the plan child's exchange


class MeasureBroker:
    """Answers the plan child's requests (:class:`diagnostics.plan._Remote`): measurements from
    the compile cache or the executor, the baseline estimate from the cache (and kept when the
    child computed it). Writes to the cache only under the key of the program it runs."""

    def __init__(self, executor: CompileExecutor, program: str, program_path: Path,
                 cache: CompileCache | None = None) -> None:
        self.executor = executor
        self.program = program
        self.factory = program.rpartition(":")[2]
        self.fingerprint = program_fingerprint(program_path)
        self.cache = cache or CompileCache.default()
        self.versions = toolchain_versions()
        self.failure: BaseException | None = None
        self.rounds = 0
        self.compiles = 0
        self.cached = 0

    def _key(self, kind: str, request: dict[str, Any]) -> str:
        return self.cache.key(self.fingerprint, self.factory, kind, request, self.versions)

    def handle(self, message: Any) -> dict[str, Any]:
        try:
            if not isinstance(message, dict):
                raise ValueError("not an object")
            op = message.get("op")
            if op == "measure":
                return {"results": [r.model_dump() for r in self.measure(
                    [MeasureRequest.model_validate(r) for r in message.get("requests") or []])]}
            if op == "baseline_get":
                return {"report": self.cache.get(self._key("baseline", dict(message["request"])))}
            if op == "baseline_put":
                from oomkb.diagnostics.estimate.report import EstimateReport

                report = EstimateReport.model_validate(message["report"])
                self.cache.put(self._key("baseline", dict(message["request"])),
                               report.model_dump(mode="json"))
                return {}
            raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # noqa: BLE001 - answered to the child, re-raised by the caller
            self.failure = exc
            return {"error": str(exc)[:2000]}

    def measure(self, requests: list[MeasureRequest]) -> list[MeasureResult]:
        """Each request's result: cached, or measured by the executor (all misses at once)."""
        if len(requests) > 4096:
            raise ValueError("too many measurements in one round")
        results: list[MeasureResult | None] = []
        misses: list[int] = []
        for i, request in enumerate(requests):
            found = self.cache.get(self._key("measure", request.cache_fields()))
            if found is not None:
                self.cached += 1
                results.append(MeasureResult(measured=found, cached=True))
            else:
                results.append(None)
                misses.append(i)
        if misses:
            self.rounds += 1
            measured = self.executor.run([requests[i] for i in misses])
            for i, result in zip(misses, measured):
                results[i] = result
                self.compiles += result.compiles
                if result.measured.get("status") in CACHED_STATES \
                        and (not result.versions or result.versions == self.versions):
                    self.cache.put(self._key("measure", requests[i].cache_fields()),
                                   result.measured)
        return [r for r in results if r is not None]

    def serve(self, folder: Path, stop: threading.Event) -> None:
        """Answer requests in ``folder`` until ``stop`` is set."""
        while not stop.is_set():
            if not serve_once(folder, self.handle):
                stop.wait(0.02)
