"""Run a user's program in a child process, so that it cannot take the caller down.

Process isolation only; what a user's ``FILE.py:NAME`` is (loading it, calling its factory, its
source lines) is :mod:`diagnostics.program`'s, whose names are re-exported here.

* :func:`run_job` runs a job function (``"package.module:function"``, taking and returning a
  JSON-able dict) in a fresh ``python`` process with a wall-clock timeout, optional CPU and memory
  limits, a private temporary working directory, an environment without secrets, and bounded
  capture of stdout/stderr. The job's result or its error comes back as JSON through a file; a
  crash, a ``sys.exit`` or a kill becomes a clear error naming the exit status or signal.
  The caller makes itself non-dumpable and the child drops its capabilities (Linux), so the child
  cannot read the caller's secrets through ``/proc/<pid>/environ`` or ptrace either; whatever the
  child leaves running in its process group is killed when it ends.

The child imports nothing of the caller's: every job starts from a clean interpreter (and, for
TPU compiles, sets libtpu's variables before jax is imported).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from diagnostics.exceptions import DiagnosticsError
from diagnostics.program import (  # the program contract lives there; re-exported for callers
    ProgramExited,
    ProgramLoadError,
    ProgramNameError,
    ProgramSpec,
    ProgramSpecError,
    load_program_object,
    resolve_program,
    user_location,
)
from diagnostics.units import format_bytes

__all__ = [
    "JobCrashed",
    "JobFailed",
    "JobResult",
    "JobTimeout",
    "Limits",
    "call_program_job",
    "ProgramExited",
    "ProgramLoadError",
    "ProgramNameError",
    "ProgramOutOfMemory",
    "ProgramSpec",
    "ProgramSpecError",
    "SandboxError",
    "clean_environment",
    "job_value",
    "load_program_object",
    "resolve_program",
    "run_job",
    "user_location",
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
    memory_bytes: int | None = Field(default=None, gt=0, description="RLIMIT_AS")
    output_bytes: int = Field(default=64 * 1024, gt=0, description="kept per stream")


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


# Environment names that look like credentials: never handed to a user's program.
_SECRET_NAME = re.compile(
    r"^(SLACK_|AWS_|AZURE_|GH_|GITHUB_|OPENAI_|ANTHROPIC_|HF_TOKEN|HUGGING_FACE_HUB_TOKEN"
    r"|GOOGLE_APPLICATION_CREDENTIALS|GOOGLE_API|NPM_TOKEN|PYPI_|TWINE_|DOCKER_AUTH|SSH_AUTH_SOCK)"
    r"|(^|_)(TOKENS?|SECRETS?|KEYS?|PASSWORD|PASSWD|CREDENTIALS?|APIKEY|AUTH|DSN)($|_)",
    re.IGNORECASE,
)
# ... except a few that are harmless and which libraries need.
_KEEP = {"PYTHONHASHSEED", "KEYTIMEOUT"}


def clean_environment(
    base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default ``os.environ``) without credential-like variables, plus ``extra``."""
    env = {
        k: v for k, v in (os.environ if base is None else base).items()
        if k in _KEEP or not _SECRET_NAME.search(k)
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


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


#: The limits this process runs under when it is a job's child (for the messages it writes).
_CHILD_LIMITS: Limits | None = None


def _apply_limits(limits: Limits) -> None:
    """Set the child's own resource limits (done in the child: no fork-time hook is needed)."""
    global _CHILD_LIMITS
    _CHILD_LIMITS = limits
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
) -> JobResult:
    """Run ``job(payload) -> dict`` in a fresh Python process and return its result.

    ``job`` is ``"package.module:function"``. ``env`` adds variables to a copy of this process's
    environment stripped of secrets. The child works in a private temporary directory (its path is
    ``payload["workdir"]`` inside the job), removed afterwards. Raises :class:`JobTimeout`,
    :class:`JobCrashed`, :class:`JobFailed`, or the job's own ``DiagnosticsError`` subclass.
    ``what`` names the work in messages ("the estimate of train.py:make").
    """
    limits = limits or Limits()
    workdir = Path(tempfile.mkdtemp(prefix="oomkb-job-"))
    try:
        payload_path = workdir / "payload.json"
        result_path = workdir / "result.json"
        payload_path.write_text(json.dumps({**payload, "workdir": str(workdir)}), "utf-8")
        child_env = clean_environment(extra=env)
        root = _package_root()
        python_path = child_env.get("PYTHONPATH")
        child_env["PYTHONPATH"] = root + (os.pathsep + python_path if python_path else "")
        child_env["PYTHONUNBUFFERED"] = "1"
        command = [
            sys.executable, "-c",
            "from diagnostics.sandbox import _child_main; _child_main()",
            job, str(payload_path), str(result_path), limits.model_dump_json(),
        ]
        _hide_this_process()
        started = time.monotonic()
        proc = subprocess.Popen(
            command, cwd=workdir, env=child_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out = _BoundedCapture(proc.stdout, limits.output_bytes)
        err = _BoundedCapture(proc.stderr, limits.output_bytes)
        timed_out = False
        try:
            timed_out = not _wait_unreaped(proc, timeout_s)
        finally:
            # The child is dead or still running but not yet reaped, so its process group id
            # cannot have been reused: kill whatever it left behind (or itself, on a timeout).
            _kill_group(proc)
            for capture in (out, err):
                capture.thread.join(timeout=5)
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
        wall = time.monotonic() - started
        stdout, stdout_dropped = out.text()
        stderr, stderr_dropped = err.text()
        if timed_out:
            raise JobTimeout(
                f"{what} ran longer than {timeout_s:g} s and was stopped; "
                "raise the timeout if it is just slow"
            )
        record = _read_result(result_path)
        if record is None:
            raise _crash_error(proc.returncode, stderr, what, limits)
        if not record.get("ok"):
            raise _error_from_record(record.get("error") or {}, what)
        return JobResult(
            value=record.get("value") or {},
            stdout=stdout, stderr=stderr,
            stdout_truncated_bytes=stdout_dropped, stderr_truncated_bytes=stderr_dropped,
            wall_seconds=wall,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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


_hidden = False


def _hide_this_process() -> None:
    """Make this process non-dumpable (Linux), once, before it starts a user's program.

    Other processes of the same user, the child included, then can neither read this process's
    ``/proc/<pid>/environ`` (where the service's own secrets live) nor attach to it with ptrace
    to read its memory. The child itself is dumpable again after its ``exec``.
    """
    global _hidden
    if _hidden or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_dumpable = 4
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_dumpable, 0, 0, 0, 0) == 0:
            _hidden = True
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child and anything it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait
        pass


_RESULT_LIMIT = 64 << 20


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > _RESULT_LIMIT:
            return {"ok": False, "error": {"message": "the job's result is larger than 64 MiB"}}
        record = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


# A fatal glog line ("F1129 21:49:57.858700 11091 file.cc:309] message") and native messages that
# mean an allocation failed.
_GLOG_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ \S+\] (?P<message>.+)$")
_OUT_OF_MEMORY = re.compile(r"Cannot allocate memory|std::bad_alloc|\bout of memory\b", re.IGNORECASE)


def _last_words(stderr: str) -> str:
    """The most telling line of a crashed child's stderr: a fatal log line, else the last line."""
    lines = [ln.strip() for ln in stderr.strip()[-20000:].splitlines() if ln.strip()]
    for line in reversed(lines):
        if match := _GLOG_FATAL.match(line):
            return match["message"]
    for line in reversed(lines):
        if line.startswith("Fatal Python error"):
            return line
    return lines[-1] if lines else ""


def _crash_error(returncode: int | None, stderr: str, what: str,
                 limits: Limits | None = None) -> JobCrashed:
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
        if name == "SIGXCPU" and limits is not None and limits.cpu_seconds is not None:
            message = (f"{what} was stopped: it used more than its limit of {limits.cpu_seconds} s "
                       f"of CPU time ({name})")
        return JobCrashed(message, exit_status=returncode, signal_name=name, stderr_tail=tail)
    return JobCrashed(
        f"{what} exited with status {returncode} before finishing{said}",
        exit_status=returncode, stderr_tail=tail,
    )


_TRUSTED_PACKAGES = ("diagnostics.", "kb.", "indexer.", "api.")


def _error_from_record(error: Mapping[str, Any], what: str) -> SandboxError | DiagnosticsError:
    """Rebuild the job's own error class when it is one of ours; else a :class:`JobFailed`."""
    message = str(error.get("message") or "unknown error")
    qualname = str(error.get("class") or "")
    if error.get("diagnostics") and ":" in qualname:
        module_name, cls_name = qualname.split(":", 1)
        if module_name.startswith(_TRUSTED_PACKAGES):
            try:
                cls = getattr(importlib.import_module(module_name), cls_name)
            except (ImportError, AttributeError):
                cls = None
            if isinstance(cls, type) and issubclass(cls, DiagnosticsError):
                exc = cls.__new__(cls)
                Exception.__init__(exc, message)
                for key, value in (error.get("attributes") or {}).items():
                    setattr(exc, key, value)
                return exc
        return JobFailed(message, detail=str(error.get("traceback") or ""))
    return JobFailed(f"{what} failed: {message}", detail=str(error.get("traceback") or ""))


def _describe_exception(exc: BaseException) -> dict[str, Any]:
    cls = type(exc)
    record: dict[str, Any] = {
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "diagnostics": isinstance(exc, DiagnosticsError),
        "traceback": "".join(traceback.format_exception(exc))[-20000:],
    }
    if isinstance(exc, DiagnosticsError):
        record["message"] = str(exc)
        attributes = {
            k: v for k, v in vars(exc).items()
            if isinstance(v, (str, int, float, bool, type(None), list, dict))
        }
        try:
            json.dumps(attributes)
            record["attributes"] = attributes
        except (TypeError, ValueError):
            pass
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
            record["message"] = f"{cls.__name__}: {exc}{at}"
    return record


def _out_of_memory_message(exc: BaseException, at: str) -> str:
    said = f": {exc}" if str(exc) else ""
    message = f"the program ran out of host memory (MemoryError{said}){at}"
    limit = _CHILD_LIMITS.memory_bytes if _CHILD_LIMITS else None
    if limit:
        message += f"; the sandbox limits it to {format_bytes(limit)} of address space"
    return message


def _write_json_atomic(path: Path, record: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record), "utf-8")
    os.replace(tmp, path)


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
    """Entry point of the child: ``job payload.json result.json limits-json`` on the command line."""
    job, payload_path, result_path, limits_json = sys.argv[1:5]
    _apply_limits(Limits.model_validate_json(limits_json))
    _drop_privileges()
    try:
        payload = json.loads(Path(payload_path).read_text("utf-8"))
        module_name, func_name = job.split(":", 1)
        func = getattr(importlib.import_module(module_name), func_name)
        value = func(payload)
        if not isinstance(value, dict):
            raise TypeError(f"job {job} returned {type(value).__name__}, not a dict")
        record: dict[str, Any] = {"ok": True, "value": value}
        json.dumps(record)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        record = {"ok": False, "error": _describe_exception(exc)}
    sys.stdout.flush()
    sys.stderr.flush()
    _write_json_atomic(Path(result_path), record)
    # Skip interpreter teardown: native libraries (libtpu) can be slow or noisy to unload.
    os._exit(0)
