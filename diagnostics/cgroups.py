"""Hold a job's memory and process count with a control group, where this machine allows one.

``RLIMIT_AS`` bounds one process's address space only: it does not see a tmpfs (``/dev/shm``) or a
``memfd`` the job fills, nor the sum over its processes, and ``RLIMIT_NPROC`` does not bind root.
A cgroup counts all of that, for root too. :func:`job_cgroup` makes one cgroup per job:

* cgroup v2 (``/sys/fs/cgroup`` is a ``cgroup2`` mount with ``memory`` and ``pids`` delegated to
  this process's own cgroup): a child cgroup with ``memory.max``, ``memory.swap.max = 0`` and
  ``pids.max``;
* cgroup v1 (the ``memory`` and ``pids`` hierarchies mounted and writable, as for root in many
  containers): a child of this process's cgroup in each, with ``memory.limit_in_bytes`` (and the
  swap-inclusive ``memory.memsw.limit_in_bytes`` where the kernel accounts swap) and ``pids.max``;
* neither: nothing, and :func:`cgroup_support` says so (``/readyz`` shows it); the job then has
  ``RLIMIT_AS`` and ``RLIMIT_NPROC`` only.

The job's first process enters the cgroups before it runs anything (:meth:`JobCgroup.wrap` puts a
tiny shell in front that writes its own pid, then ``exec``s the command), so every process it
starts is counted. :meth:`JobCgroup.close` kills what is left in it and removes it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from pathlib import Path

from pydantic import BaseModel

__all__ = ["CgroupSupport", "JobCgroup", "cgroup_support", "job_cgroup"]

ROOT = Path("/sys/fs/cgroup")

# Enters the cgroups named before "--", then becomes the command after it.
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class CgroupSupport(BaseModel):
    """What holds a job's memory and processes here (measured once, then remembered)."""

    kind: str  # "cgroup2", "cgroup1" or "none"
    memory: bool = False
    pids: bool = False
    detail: str


def _own_path(controller: str | None) -> str | None:
    """This process's cgroup path in the v1 hierarchy of ``controller`` (None: the v2 one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller is None and controllers == "") or controller in controllers.split(","):
            return path
    return None


def _trial(parent: Path) -> bool:
    """Whether a child cgroup can be made (and removed) under ``parent``."""
    trial = parent / f"oomkb-probe-{secrets.token_hex(4)}"
    try:
        trial.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        trial.rmdir()
    return True


def _v2_parent() -> Path | None:
    own = _own_path(None)
    if own is None or not (ROOT / "cgroup.controllers").exists():
        return None
    parent = ROOT / own.lstrip("/")
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    if not {"memory", "pids"} <= set(enabled):
        with contextlib.suppress(OSError):  # allowed only where this cgroup has no processes itself
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
            enabled = (parent / "cgroup.subtree_control").read_text().split()
    return parent if {"memory", "pids"} <= set(enabled) and _trial(parent) else None


def _v1_parent(controller: str) -> Path | None:
    own = _own_path(controller)
    base = ROOT / controller
    if own is None or not base.is_dir():
        return None
    parent = base / own.lstrip("/")
    return parent if _trial(parent) else None


_support: tuple[CgroupSupport, dict[str, Path]] | None = None
_lock = threading.Lock()


def _probe() -> tuple[CgroupSupport, dict[str, Path]]:
    if (parent := _v2_parent()) is not None:
        return (CgroupSupport(kind="cgroup2", memory=True, pids=True,
                              detail="a cgroup v2 per job holds its memory (memory.max, all its "
                              "processes, tmpfs and memfd included) and its processes (pids.max)"),
                {"v2": parent})
    parents = {c: p for c in ("memory", "pids") if (p := _v1_parent(c)) is not None}
    if parents:
        held = " and ".join(
            {"memory": "its memory (memory.limit_in_bytes: all its processes, tmpfs and memfd "
                       "included)", "pids": "its processes (pids.max)"}[c] for c in parents)
        return (CgroupSupport(kind="cgroup1", memory="memory" in parents, pids="pids" in parents,
                              detail=f"a cgroup v1 per job holds {held}"), parents)
    return (CgroupSupport(kind="none", detail="no writable cgroup here: a job's memory is held by "
                          "RLIMIT_AS per process and its processes by RLIMIT_NPROC (not for root)"),
            {})


def cgroup_support() -> CgroupSupport:
    """Which control group holds jobs on this machine (probed once)."""
    global _support
    with _lock:
        if _support is None:
            _support = _probe()
        return _support[0]


class JobCgroup:
    """The cgroup(s) of one job."""

    def __init__(self, dirs: list[Path], kind: str) -> None:
        self.dirs = dirs
        self.kind = kind

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` started inside this job's cgroups."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", _ENTER, "oomkb-enter", *procs, "--", *command]

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the job at its memory limit."""
        for d in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError):
                    for line in (d / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and value.strip() not in ("", "0"):
                            return True
            with contextlib.suppress(OSError, ValueError):
                if int((d / "memory.failcnt").read_text()) > 0 and self.kind == "cgroup1":
                    return True
        return False

    def close(self) -> None:
        """Kill every process still in the cgroups, then remove them."""
        deadline = time.monotonic() + 5
        for d in self.dirs:
            while True:
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except OSError:
                    pids = []
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)


def _write(path: Path, value: str, *, required: bool = True) -> None:
    try:
        path.write_text(value)
    except OSError:
        if required:
            raise


def job_cgroup(memory_bytes: int | None, processes: int | None) -> JobCgroup | None:
    """A fresh cgroup holding ``memory_bytes`` and ``processes`` (None: no limit of that kind), or
    None when this machine has none to give (see :func:`cgroup_support`)."""
    cgroup_support()
    assert _support is not None
    support, parents = _support
    if support.kind == "none" or (memory_bytes is None and processes is None):
        return None
    name = f"oomkb-job-{secrets.token_hex(8)}"
    made: list[Path] = []
    try:
        if "v2" in parents:
            d = parents["v2"] / name
            d.mkdir()
            made.append(d)
            if memory_bytes is not None:
                _write(d / "memory.max", str(memory_bytes))
                _write(d / "memory.swap.max", "0", required=False)
            if processes is not None:
                _write(d / "pids.max", str(processes))
        else:
            if "memory" in parents:
                d = parents["memory"] / name
                d.mkdir()
                made.append(d)
                if memory_bytes is not None:
                    _write(d / "memory.limit_in_bytes", str(memory_bytes))
                    _write(d / "memory.memsw.limit_in_bytes", str(memory_bytes), required=False)
            if "pids" in parents:
                d = parents["pids"] / name
                d.mkdir()
                made.append(d)
                if processes is not None:
                    _write(d / "pids.max", str(processes))
    except OSError:
        JobCgroup(made, support.kind).close()
        return None
    return JobCgroup(made, support.kind)
