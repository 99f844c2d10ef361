"""Run a user's program in a child process, so that it cannot take the caller down.

Process isolation only; what a user's ``FILE.py:NAME`` is (loading it, calling its factory, its
source lines) is :mod:`oomkb.diagnostics.program`'s.

* :func:`run_job` runs a job of :mod:`oomkb.diagnostics.jobs` (by name; taking and returning a
  JSON-able dict) in a fresh ``python`` process with a wall-clock timeout, optional CPU and memory
  limits (held by a per-job cgroup where the machine gives one, :mod:`diagnostics.cgroups`), a
  private temporary working directory, an allowlist environment (:data:`CHILD_ENV_NAMES`), and
  bounded capture of stdout/stderr. The job's result or its error comes back as JSON through an
  inherited memory file (no path the job could swap for a FIFO or a link); a crash, a
  ``sys.exit`` or a kill becomes a clear error naming the exit status or signal.
  The caller makes itself non-dumpable and the child drops its capabilities (Linux), so the child
  cannot read the caller's secrets through ``/proc/<pid>/environ`` or ptrace either.
* With ``isolate=True`` the child runs inside a bubblewrap sandbox (:mod:`diagnostics.isolation`):
  no network, its own PID namespace, a read-only view of only the Python runtime, the installed
  packages, this project's code and the folders the caller names, and its working folder
  read-write. Without bubblewrap, ``isolate=True`` raises
  :class:`~diagnostics.isolation.IsolationUnavailable` (fail closed).
* Every process a job starts dies with the job: in a sandbox, with its PID namespace; without one,
  the caller is a child subreaper (Linux), so even a process that double-forked and called
  ``setsid`` comes back to it and is killed; ``RLIMIT_NPROC`` caps how many the job may start.

The public entry point for other features (``estimate``, ``profile``, ``plan``) is :func:`run_job`
with :class:`Limits`; its keyword arguments ``isolate``, ``read_only``, ``writable`` and
``home_files`` are stable.

The child imports nothing of the caller's: every job starts from a clean interpreter (and, for
TPU compiles, sets libtpu's variables before jax is imported).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.program import ProgramExited, ProgramNameError, load_program_object, user_location
from oomkb.diagnostics.interpreter import check_interpreter, child_bootstrap
from oomkb.diagnostics.jobs import JOBS, job_function
from oomkb.diagnostics.cgroups import JobCgroup, job_cgroup
from oomkb.diagnostics.isolation import bwrap_command, isolation_status
from oomkb.units import format_bytes
from oomkb.layout import code_dirs

__all__ = [
    "JobCrashed",
    "JobFailed",
    "JobResult",
    "JobTimeout",
    "Limits",
    "call_program_job",
    "ProgramOutOfMemory",
    "SandboxError",
    "clean_environment",
    "job_value",
    "run_job",
]


# ---------------------------------------------------------------------------------------------
# Errors


class SandboxError(DiagnosticsError):
    """A user's program could not be loaded or run to completion."""


class JobTimeout(SandboxError, TimeoutError):
    """The child ran longer than its wall-clock limit and was stopped."""

    http_status = 422


class JobCrashed(SandboxError):
    """The child died without a result: a signal (abort, segfault, out-of-memory kill) or exit."""

    http_status = 422

    def __init__(self, message: str, *, exit_status: int | None = None,
                 signal_name: str | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.exit_status = exit_status
        self.signal_name = signal_name
        self.stderr_tail = stderr_tail


class JobFailed(SandboxError):
    """The job raised an unexpected exception in the child; ``detail`` holds its traceback."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class ProgramOutOfMemory(JobFailed):
    """The program's allocation failed (MemoryError), usually at the child's address-space limit."""

    http_status = 422


# ---------------------------------------------------------------------------------------------
# The child process


class Limits(BaseModel):
    """Resource limits for a job's child process (``None`` means no limit)."""

    cpu_seconds: int | None = Field(default=None, gt=0)
    memory_bytes: int | None = Field(
        default=None, gt=0,
        description="RLIMIT_AS of each process, and the memory limit of the job's cgroup where "
        "there is one (all its processes, tmpfs and memfd pages included)")
    output_bytes: int = Field(default=64 * 1024, gt=0, description="kept per stream")
    processes: int | None = Field(
        default=1024, gt=0,
        description="pids.max of the job's cgroup where there is one (binds root too); and "
        "RLIMIT_NPROC: processes and threads the job may start beyond those its user already runs "
        "(the kernel does not apply it to root)",
    )
    result_bytes: int = Field(default=4 << 20, gt=0,
                              description="largest result file the caller reads back")


class JobResult(BaseModel):
    """What a job returned, with the child's (truncated) output and how long it took."""

    value: dict[str, Any]
    stdout: str = ""
    stderr: str = ""
    stdout_truncated_bytes: int = 0
    stderr_truncated_bytes: int = 0
    wall_seconds: float


_Model = TypeVar("_Model", bound=BaseModel)


def job_value(result: JobResult, model: type[_Model], what: str = "the program") -> _Model:
    """The job's value validated as ``model``; a malformed one (a user's program can write the
    result file itself) is a :class:`JobFailed`, not a crash of the caller."""
    try:
        return model.model_validate(result.value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "value"
        raise JobFailed(
            f"{what} returned a malformed {model.__name__} ({exc.error_count()} problem(s); "
            f"{where}: {first.get('msg', 'invalid')})"
        ) from None


#: The environment a job's child inherits: an allowlist, in this one place. Exact names, then
#: families by prefix: what Python, jax, XLA, libtpu and the GPU runtimes read. Anything else of the
#: server's environment (database URLs, cloud keys, proxies with credentials, OOMKB_ADMINPASS ...)
#: never reaches a submitted program.
CHILD_ENV_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "HOME", "USER", "LOGNAME", "TMPDIR",
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE",
    "PYTHONWARNINGS", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "ALLOW_MULTIPLE_LIBTPU_LOAD", "OOMKB_HOME", "OOMKB_TEST_HOME",
})
CHILD_ENV_PREFIXES = ("LC_", "JAX_", "XLA_", "TPU_", "LIBTPU_", "TF_CPP_", "CUDA_", "NVIDIA_", "ROCM_")

# A second net: a name that looks like a credential is dropped even inside an allowed family.
_SECRET_NAME = re.compile(
    r"(^|_)(TOKENS?|SECRETS?|KEYS?|PASSWORD|PASSWD|PASS|CREDENTIALS?|APIKEY|AUTH|DSN)($|_)",
    re.IGNORECASE,
)


def clean_environment(
    base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowed variables of ``base`` (default ``os.environ``, see :data:`CHILD_ENV_NAMES`),
    plus ``extra`` (what the caller sets for the job itself)."""
    env = {
        k: v for k, v in (os.environ if base is None else base).items()
        if (k in CHILD_ENV_NAMES or k.startswith(CHILD_ENV_PREFIXES)) and not _SECRET_NAME.search(k)
    }
    if extra:
        env.update(extra)
    return env


class _BoundedCapture:
    """Reads a pipe to its end, keeping only the first and last ``limit/2`` bytes."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream = stream
        self._half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        read = getattr(self._stream, "read1", self._stream.read)
        try:
            while chunk := read(65536):
                self.total += len(chunk)
                room = self._half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > 2 * self._half:
                        del self.tail[: len(self.tail) - self._half]
        except (OSError, ValueError):
            pass

    def text(self) -> tuple[str, int]:
        """The kept text and how many bytes were dropped from its middle."""
        tail = bytes(self.tail[-self._half:])
        dropped = self.total - len(self.head) - len(tail)
        body = bytes(self.head)
        if dropped > 0:
            body += f"\n[... {dropped} bytes of output omitted ...]\n".encode()
        return (body + tail).decode("utf-8", "replace"), max(dropped, 0)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_SIGNAL_HINTS = {
    "SIGKILL": "killed, most often by the out-of-memory killer or a memory limit",
    "SIGABRT": "aborted (os.abort, a failed C++ check, or an uncaught native error)",
    "SIGSEGV": "segmentation fault in native code",
    "SIGBUS": "bus error in native code",
    "SIGXCPU": "CPU time limit exceeded",
    "SIGFPE": "arithmetic fault in native code",
}


#: The limits this process runs under when it is a job's child (for the messages it writes).
_CHILD_LIMITS: Limits | None = None


def _apply_limits(limits: Limits, max_processes: int | None = None) -> None:
    """Set the child's own resource limits (done in the child: no fork-time hook is needed)."""
    global _CHILD_LIMITS
    _CHILD_LIMITS = limits
    if max_processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
    if limits.cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash writes no core file


def run_job(
    job: str,
    payload: Mapping[str, Any],
    *,
    timeout_s: float,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    what: str = "the program",
    isolate: bool = False,
    read_only: Sequence[str | os.PathLike[str]] = (),
    writable: Sequence[str | os.PathLike[str]] = (),
    home_files: Sequence[str | os.PathLike[str]] = (),
    python: str | os.PathLike[str] | None = None,
    need_tpu: bool = True,
    sys_path: Sequence[str | os.PathLike[str]] = (),
) -> JobResult:
    """Run ``job(payload) -> dict`` in a fresh Python process and return its result.

    ``job`` names a job of :data:`oomkb.diagnostics.jobs.JOBS`. ``env`` adds variables to a copy of this process's
    environment stripped of secrets. The child works in a private temporary directory (its path is
    ``payload["workdir"]`` inside the job), removed afterwards. Raises :class:`JobTimeout`,
    :class:`JobCrashed`, :class:`JobFailed`, or the job's own ``DiagnosticsError`` subclass.
    ``what`` names the work in messages ("the estimate of train.py:make").

    ``isolate=True`` runs the child in a bubblewrap sandbox (no network, own PID namespace, only
    the runtime, packages and code read-only; raises :class:`IsolationUnavailable` when bubblewrap
    cannot be used). Then the child sees, besides its working folder, only the folders in
    ``read_only`` (read-only) and ``writable`` (read-write), has ``HOME`` and ``TMPDIR`` on a
    private ``/tmp``, and an ``OOMKB_HOME`` of its own holding copies of ``home_files`` (caches it
    may read; nothing it writes there comes back). Without ``isolate`` those three are ignored.

    ``python`` runs the child in another interpreter (the user's environment, see
    :mod:`diagnostics.interpreter`; it must have jax, and libtpu when ``need_tpu``), and
    ``sys_path`` puts folders first on the child's import path (``--path``).
    """
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; the jobs are {', '.join(JOBS)}")
    limits = limits or Limits()
    interp = check_interpreter(python, need_tpu=need_tpu) if python is not None else None
    if interp is not None:
        read_only = [*read_only, *interp.folders, *interp.support_path]
    extra_path = [str(Path(p).resolve()) for p in sys_path]
    if extra_path:
        read_only = [*read_only, *extra_path]
    tool = isolation_status().require() if isolate else None
    workdir = Path(tempfile.mkdtemp(prefix="oomkb-job-")).resolve()
    # The result comes back through an anonymous memory file that the child inherits: there is no
    # path the job could replace with a FIFO or a link, and its pages count against the job's
    # memory cgroup, not the server's disk.
    result_fd = os.memfd_create("oomkb-job-result", os.MFD_CLOEXEC)
    pass_fds = [result_fd]
    job_group: JobCgroup | None = None
    try:
        payload_path = workdir / "payload.json"
        payload_path.write_text(json.dumps({**payload, "workdir": str(workdir), "sys_path": extra_path}),
                                "utf-8")
        child_env = clean_environment(extra=env)
        child_env["PYTHONUNBUFFERED"] = "1"
        token = secrets.token_hex(16)
        child_env[_JOB_TOKEN] = token
        max_processes = (_user_task_count() + limits.processes) if limits.processes else None
        command = [
            interp.executable if interp is not None else sys.executable, "-c", child_bootstrap(interp),
            job, str(payload_path), str(result_fd), limits.model_dump_json(),
            str(max_processes or ""),
        ]
        if tool is not None:
            home = workdir / "home"
            files = []
            for file in home_files:
                # a copy in memory, never a descriptor of the server's own file (through
                # /proc/self/fd a job could reopen that for writing)
                with contextlib.suppress(OSError):
                    data = Path(file).read_bytes()[: 1 << 20]  # small caches
                    fd = os.memfd_create("oomkb-home-file", os.MFD_CLOEXEC)
                    pass_fds.append(fd)
                    os.pwrite(fd, data, 0)
                    files.append((fd, home / Path(file).name))
            child_env.update({"HOME": "/tmp", "TMPDIR": "/tmp", "OOMKB_HOME": str(home)})
            command = bwrap_command(tool, command, workdir=workdir, code_dirs=code_dirs(),
                                    read_only=[Path(p) for p in read_only],
                                    writable=[Path(p) for p in writable],
                                    read_only_files=[payload_path], dirs=[home], files=files)
        job_group = job_cgroup(limits.memory_bytes, limits.processes)
        if job_group is not None:
            command = job_group.wrap(command)
        _prepare_parent()
        started = time.monotonic()
        proc = subprocess.Popen(
            command, cwd=workdir, env=child_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, pass_fds=pass_fds,
        )
        out = _BoundedCapture(proc.stdout, limits.output_bytes)
        err = _BoundedCapture(proc.stderr, limits.output_bytes)
        timed_out = False
        try:
            timed_out = not _wait_unreaped(proc, timeout_s)
        finally:
            # The child is dead or still running but not yet reaped, so its pid, process group
            # id and session id cannot have been reused: kill it (on a timeout) and every
            # process of the job, reap those that came back to this subreaper, and only then
            # the child itself.
            _kill_job(proc, token)
            for capture, stream in ((out, proc.stdout), (err, proc.stderr)):
                capture.thread.join(timeout=5)
                # closing a pipe that a thread still reads would wait for that read to end
                if stream and not capture.thread.is_alive():
                    stream.close()
        wall = time.monotonic() - started
        stdout, stdout_dropped = out.text()
        stderr, stderr_dropped = err.text()
        if timed_out:
            raise JobTimeout(
                f"{what} ran longer than {timeout_s:g} s and was stopped; "
                "raise the timeout if it is just slow"
            )
        record = _read_result(result_fd, limits.result_bytes, what)
        if record is None:
            raise _crash_error(_exit_status(proc.returncode, isolated=tool is not None),
                               stderr, what, limits,
                               cgroup_oom=job_group is not None and job_group.out_of_memory())
        if not record.ok:
            raise _error_from_record(record.error or _ErrorRecord(), what)
        return JobResult(
            value=record.value or {},
            stdout=stdout, stderr=stderr,
            stdout_truncated_bytes=stdout_dropped, stderr_truncated_bytes=stderr_dropped,
            wall_seconds=wall,
        )
    finally:
        if job_group is not None:
            job_group.close()
        for fd in pass_fds:
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)


def _exit_status(returncode: int | None, *, isolated: bool) -> int | None:
    """The child's status as ``subprocess`` reports it (negative for a signal).

    bubblewrap exits with 128 + N when the program inside died of signal N (a program that
    calls ``os._exit(128 + N)`` itself is reported as killed by signal N)."""
    if isolated and returncode is not None and 128 < returncode <= 128 + 31:
        return -(returncode - 128)
    return returncode


def _wait_unreaped(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Wait until the child exits, leaving it unreaped (a zombie); False when time runs out."""
    if not hasattr(os, "waitid"):  # pragma: no cover - not Linux
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)


_prepared = False


def _prepare_parent() -> None:
    """Once, before this process starts a user's program (Linux): make it non-dumpable and a child
    subreaper.

    Non-dumpable: other processes of the same user, the child included, can neither read this
    process's ``/proc/<pid>/environ`` (where the service's own secrets live) nor attach to it with
    ptrace to read its memory. The child itself is dumpable again after its ``exec``.
    Subreaper: a process of the job whose parent dies (a double fork, with or without ``setsid``)
    becomes a child of this process instead of init's, where :func:`_kill_job` reaps it.
    """
    global _prepared
    if _prepared or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_dumpable, pr_set_child_subreaper = 4, 36
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        hidden = libc.prctl(pr_set_dumpable, 0, 0, 0, 0) == 0
        reaper = libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0
        _prepared = hidden and reaper
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        pass


#: Environment variable that marks every process of one job (inherited through fork and exec).
_JOB_TOKEN = "OOMKB_JOB_TOKEN"


def _proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """``(state, ppid, pgrp, session)`` of a process from ``/proc/<pid>/stat``; None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _job_processes(job_pid: int, token: str) -> tuple[list[int], list[int]]:
    """The job's processes other than its first child: ``(alive, dead children of this process)``.

    A process belongs to the job when it is in the job's process group or session, or carries the
    job's token in its environment (one that called ``setsid``; it keeps the token through fork
    and exec unless it replaces its whole environment)."""
    me = os.getpid()
    mark = f"{_JOB_TOKEN}={token}".encode()
    alive, dead = [], []
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - no /proc
        return [], []
    for name in entries:
        if not name.isdigit() or int(name) in (job_pid, me):
            continue
        pid = int(name)
        stat = _proc_stat(pid)
        if stat is None:
            continue
        state, ppid, pgrp, session = stat
        belongs = job_pid in (pgrp, session)
        if not belongs and state != "Z":
            try:
                belongs = mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
        if belongs:
            (dead if state == "Z" else alive).append(pid)
            if state != "Z" and ppid == me:
                dead.append(pid)  # reap it too, once killed
    return alive, dead


def _kill_job(proc: subprocess.Popen, token: str, deadline_s: float = 10.0) -> None:
    """Kill the job's first child and every process of the job (see :func:`_job_processes`),
    wherever it is in the process tree; reap the ones that came back to this subreaper; then reap
    the first child. Repeats until no process of the job is left (a process forking while it is
    killed leaves a child that the next round finds)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, signal.SIGKILL)
    if sys.platform.startswith("linux"):
        me = os.getpid()
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            alive, dead = _job_processes(proc.pid, token)
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            for pid in dead:
                stat = _proc_stat(pid)
                if stat is not None and stat[1] == me:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, os.WNOHANG)
            if not alive and not any((_proc_stat(p) or ("", 0))[1] == me for p in dead):
                break
            time.sleep(0.002)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait
        pass


def _user_task_count() -> int:
    """Processes and threads of this process's real user (what ``RLIMIT_NPROC`` counts)."""
    uid = str(os.getuid())
    count = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for name in entries:
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [uid]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


class _ErrorRecord(BaseModel):
    """How the child describes a failure (``_describe_exception``); nothing else is read."""

    model_config = ConfigDict(populate_by_name=True)

    class_: str = Field(default="", alias="class", max_length=500)
    diagnostics: bool = False
    message: str = "unknown error"
    traceback: str = ""
    attributes: dict[str, str | int | float | bool | None] = Field(default_factory=dict,
                                                                   max_length=20)


class _ResultRecord(BaseModel):
    """The child's result file: a value, or an error."""

    ok: bool
    value: dict[str, Any] | None = None
    error: _ErrorRecord | None = None


def _read_result(fd: int, limit: int, what: str) -> _ResultRecord | None:
    """The child's result (from the memory file ``fd``), or None when it wrote none (it crashed).

    Read only after every process of the job is gone, so nothing changes it meanwhile; more than
    ``limit`` bytes, not JSON, nested too deeply or of the wrong shape (the program can write it
    itself) is an error record, never an exception of the caller."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    if size > limit:
        message = f"{what} left a result larger than {format_bytes(limit)}; it is not read"
        return _ResultRecord(ok=False, error=_ErrorRecord(message=message, diagnostics=True,
                                                          class_=_qualname(JobFailed)))
    try:
        return _ResultRecord.model_validate(json.loads(os.pread(fd, size, 0)))
    except (ValueError, RecursionError, ValidationError):
        message = f"{what} left a result that is not a result (malformed or forged)"
        return _ResultRecord(ok=False, error=_ErrorRecord(message=message, diagnostics=True,
                                                          class_=_qualname(JobFailed)))


def _qualname(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


# A fatal glog line ("F1129 21:49:57.858700 11091 file.cc:309] message") and native messages that
# mean an allocation failed.
_GLOG_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ \S+\] (?P<message>.+)$")
_OUT_OF_MEMORY = re.compile(r"Cannot allocate memory|std::bad_alloc|\bout of memory\b", re.IGNORECASE)


def _last_words(stderr: str) -> str:
    """The most telling line of a crashed child's stderr: a fatal log line of the compiler or
    runtime, or Python's own fatal error; empty otherwise. Any other line is the program's own
    output (it may hold whatever the program read), so it never becomes part of a message."""
    lines = [ln.strip() for ln in stderr.strip()[-20000:].splitlines() if ln.strip()]
    for line in reversed(lines):
        if match := _GLOG_FATAL.match(line):
            return match["message"]
    for line in reversed(lines):
        if line.startswith(("Fatal Python error", "terminate called after throwing")):
            return line
    return ""


def _crash_error(returncode: int | None, stderr: str, what: str,
                 limits: Limits | None = None, cgroup_oom: bool = False) -> JobCrashed:
    tail = stderr.strip()[-2000:]
    last = _last_words(stderr)
    said = f"; its last words: {last[:300]}" if last else ""
    if returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        hint = _SIGNAL_HINTS.get(name, "stopped by a signal")
        message = f"{what} crashed: {name} ({hint}){said}"
        if limits is not None and limits.memory_bytes is not None and _OUT_OF_MEMORY.search(stderr):
            message += (f"; it seems to have run out of memory under the sandbox's limit of "
                        f"{format_bytes(limits.memory_bytes)} of address space")
        if cgroup_oom and limits is not None and limits.memory_bytes is not None:
            message = (f"{what} was stopped: it used more than its limit of "
                       f"{format_bytes(limits.memory_bytes)} of memory ({name}; the limit counts "
                       "all its processes and the shared memory it writes)")
        if name == "SIGXCPU" and limits is not None and limits.cpu_seconds is not None:
            message = (f"{what} was stopped: it used more than its limit of {limits.cpu_seconds} s "
                       f"of CPU time ({name})")
        return JobCrashed(message, exit_status=returncode, signal_name=name, stderr_tail=tail)
    return JobCrashed(
        f"{what} exited with status {returncode} before finishing{said}",
        exit_status=returncode, stderr_tail=tail,
    )


def _known_error_classes() -> dict[str, type[DiagnosticsError]]:
    """The error classes a job's record may name: ``module:qualname`` → class, for every
    :class:`DiagnosticsError` subclass of ``oomkb.diagnostics`` that this process has defined.

    Built by walking the class tree, never by importing: a record naming a module (``api.cli...``)
    cannot make the caller import anything, and a name not in the table is a generic failure. A
    job's own errors are here because the caller imported the job's module to run it."""
    table: dict[str, type[DiagnosticsError]] = {}
    pending: list[type] = [DiagnosticsError]
    while pending:
        cls = pending.pop()
        if cls.__module__.startswith("oomkb.diagnostics."):
            table[_qualname(cls)] = cls
        pending.extend(cls.__subclasses__())
    return table


#: Longest message of a job's error that reaches the caller (the program's own exception message
#: or one of ours; a compiler's message is in the job's value instead).
MESSAGE_CHARS = 4000


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def _error_from_record(error: _ErrorRecord, what: str) -> SandboxError | DiagnosticsError:
    """Rebuild the job's own error class when it is one of ours; else a :class:`JobFailed`.

    The class is only ever one of this project's ``DiagnosticsError`` subclasses, looked up in
    :func:`_known_error_classes` (nothing is imported for a record), built through
    its constructor: an attribute is set only when the constructor takes it as a keyword (so a
    forged record can set nothing else), and the message is bounded."""
    message = _bounded(error.message or "unknown error", MESSAGE_CHARS)
    detail = _bounded(error.traceback, 20000)
    cls = _known_error_classes().get(error.class_) if error.diagnostics else None
    if cls is not None:
        return _construct(cls, message, error.attributes)
    if error.diagnostics:
        return JobFailed(message, detail=detail)
    return JobFailed(f"{what} failed: {message}", detail=detail)


def _construct(cls: type[DiagnosticsError], message: str,
               attributes: Mapping[str, Any]) -> DiagnosticsError:
    """``cls(message, **known)`` with only the keyword parameters its constructor declares."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtin signature
        parameters = {}
    known = {
        name: value for name, value in attributes.items()
        if not name.startswith("_") and name in parameters
        and parameters[name].kind in (inspect.Parameter.KEYWORD_ONLY,
                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    known = {k: _bounded(v, 20000) if isinstance(v, str) else v for k, v in known.items()}
    try:
        return cls(message, **known)
    except Exception:  # noqa: BLE001 - a constructor that wants more than a message
        exc = cls.__new__(cls)
        Exception.__init__(exc, message)
        return exc


def _describe_exception(exc: BaseException) -> dict[str, Any]:
    cls = type(exc)
    record: dict[str, Any] = {
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "diagnostics": isinstance(exc, DiagnosticsError),
        "traceback": "".join(traceback.format_exception(exc))[-20000:],
    }
    if isinstance(exc, DiagnosticsError):
        record["message"] = str(exc)[:MESSAGE_CHARS * 2]
        record["attributes"] = {
            k: (v[:20000] if isinstance(v, str) else v) for k, v in list(vars(exc).items())[:20]
            if isinstance(v, (str, int, float, bool, type(None))) and not k.startswith("_")
        }
    else:
        where = user_location(exc)
        at = f" at {where}" if where else ""
        if isinstance(exc, SystemExit):
            record["class"] = f"{ProgramExited.__module__}:{ProgramExited.__qualname__}"
            record["diagnostics"] = True
            record["message"] = (
                f"the program called sys.exit({exc.code!r}){at} instead of returning"
            )
        elif isinstance(exc, MemoryError):
            record["class"] = f"{ProgramOutOfMemory.__module__}:{ProgramOutOfMemory.__qualname__}"
            record["diagnostics"] = True
            record["message"] = _out_of_memory_message(exc, at)
            record["attributes"] = {"detail": record["traceback"]}
        else:
            record["message"] = f"{cls.__name__}: {str(exc)[:MESSAGE_CHARS]}{at}"
    return record


def _out_of_memory_message(exc: BaseException, at: str) -> str:
    said = f": {exc}" if str(exc) else ""
    message = f"the program ran out of host memory (MemoryError{said}){at}"
    limit = _CHILD_LIMITS.memory_bytes if _CHILD_LIMITS else None
    if limit:
        message += f"; the sandbox limits it to {format_bytes(limit)} of address space"
    return message


def _write_result(fd: int, record: Mapping[str, Any]) -> None:
    """Replace the content of the result memory file ``fd`` with ``record`` as JSON."""
    data = json.dumps(record).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def call_program_job(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A ready-made job: call ``payload["program"]`` (``FILE.py:NAME``) with ``payload["kwargs"]``.

    Returns ``{"result": ...}``: the function's return value when it is JSON-able, else its repr.
    """
    func = load_program_object(str(payload["program"]))
    if not callable(func):
        raise ProgramNameError(f"{payload['program']} is not a function")
    result = func(**dict(payload.get("kwargs") or {}))
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = repr(result)[:10000]
    return {"result": result}


def _drop_privileges() -> None:
    """In the child, before any user code (Linux, best effort): no new privileges through exec, and
    no capabilities, so even a child running as root cannot read the non-dumpable parent's
    ``/proc/<pid>/environ`` or trace it, nor regain capabilities by running a program."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_no_new_privs, pr_capbset_drop = 38, 24
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0)
        if not any(int(v, 16) for v in _capability_sets().values()):
            return  # an ordinary user: nothing to drop
        for capability in range(64):
            libc.prctl(pr_capbset_drop, capability, 0, 0, 0)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        linux_capability_version_3 = 0x20080522
        libc.capset(ctypes.byref(Header(linux_capability_version_3, 0)), (Data * 2)())
    except (OSError, AttributeError):  # pragma: no cover - no prctl/capset
        pass


def _capability_sets() -> dict[str, str]:
    """This process's capability sets from /proc (hex masks by name), empty when unknown."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in lines)
            if k in {"CapInh", "CapPrm", "CapEff", "CapAmb"}}


def _child_main() -> None:
    """Entry point of the child: ``job payload.json RESULT-FD limits-json max-processes`` on its
    command line (``RESULT-FD``: the inherited memory file its result goes to)."""
    job, payload_path, result_fd_text, limits_json, max_processes = sys.argv[1:6]
    result_fd = int(result_fd_text)
    os.set_inheritable(result_fd, False)  # the job's own subprocesses do not get it
    _apply_limits(Limits.model_validate_json(limits_json),
                  int(max_processes) if max_processes else None)
    _drop_privileges()
    try:
        payload = json.loads(Path(payload_path).read_text("utf-8"))
        sys.path[:0] = [p for p in payload.get("sys_path") or () if p not in sys.path]
        value = job_function(job)(payload)
        if not isinstance(value, dict):
            raise TypeError(f"job {job} returned {type(value).__name__}, not a dict")
        record: dict[str, Any] = {"ok": True, "value": value}
        json.dumps(record)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        record = {"ok": False, "error": _describe_exception(exc)}
    sys.stdout.flush()
    sys.stderr.flush()
    _write_result(result_fd, record)
    # Skip interpreter teardown: native libraries (libtpu) can be slow or noisy to unload.
    os._exit(0)
