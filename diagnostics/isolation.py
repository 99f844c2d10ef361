"""Isolation of a job's child process with bubblewrap (``bwrap``).

:func:`bwrap_command` wraps a command so that it runs in its own namespaces: no network at all
(a network namespace of its own: not even the host's loopback), its own PID namespace (it sees
only its own processes, and all of them die when the job ends), its own IPC and UTS namespaces,
no capabilities and no new privileges. Its file system is built from nothing: read-only binds of
the Python runtime, the installed packages and this project's code, a few system files the
dynamic loader needs, the folders the caller names (read-only or read-write), a fresh ``/proc``,
a minimal ``/dev`` and an empty, size-limited ``/tmp``. ``$HOME``, ``OOMKB_HOME``, the server's
working directory and every other file of the host are simply not there.

:func:`isolation_status` says whether bubblewrap is installed and can create the namespaces here
(it runs it once, then remembers), and what to install when it cannot.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from oomkb.errors import ServiceError

__all__ = [
    "INSTALL_HINT",
    "IsolationStatus",
    "IsolationUnavailable",
    "bwrap_command",
    "isolation_status",
]

#: What to tell an operator whose machine lacks the isolation tool.
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora/RHEL: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap)"
)

#: Size of the sandbox's private /tmp (a tmpfs, so it is memory).
TMP_BYTES = 256 << 20
#: Size of its private /dev/shm (the host's is never seen: a job filling it would hold host memory
#: outside every limit).
SHM_BYTES = 64 << 20
#: Size of its working folder: a tmpfs of the sandbox's own, so a job cannot fill the server's disk.
WORK_BYTES = 256 << 20


class IsolationUnavailable(ServiceError):
    """Isolation was asked for, and bubblewrap is missing or cannot create namespaces here.

    The environment is at fault, not the input: the CLI exits 1, the HTTP service answers 503."""


class IsolationStatus(BaseModel):
    """Whether jobs can be isolated on this machine."""

    available: bool
    tool: str | None = None
    version: str | None = None
    problem: str | None = None

    def require(self) -> str:
        """The path of ``bwrap``; raises :class:`IsolationUnavailable` when there is none."""
        if not self.available or not self.tool:
            raise IsolationUnavailable(
                f"running submitted programs needs an isolation sandbox: {self.problem}; "
                f"{INSTALL_HINT}"
            )
        return self.tool


_status: IsolationStatus | None = None
_status_lock = threading.Lock()


def isolation_status(refresh: bool = False) -> IsolationStatus:
    """Find ``bwrap`` and check that it can build a sandbox here (namespaces allowed).

    A success is remembered; a failure is checked again on the next call, so installing
    bubblewrap takes effect without a restart."""
    global _status
    with _status_lock:
        if _status is None or not _status.available or refresh:
            _status = _probe()
        return _status


def _probe() -> IsolationStatus:
    if not sys.platform.startswith("linux"):
        return IsolationStatus(available=False, problem="bubblewrap needs Linux")
    tool = shutil.which("bwrap")
    if tool is None:
        return IsolationStatus(available=False, problem="bubblewrap (bwrap) is not installed")
    try:
        version = subprocess.run([tool, "--version"], capture_output=True, text=True,
                                 timeout=10).stdout.strip() or None
        trial = subprocess.run(
            [*_namespace_options(), *_system_binds(), "--proc", "/proc", "--dev", "/dev",
             "--", "/bin/true" if Path("/bin/true").exists() else "true"],
            capture_output=True, text=True, timeout=20, executable=tool,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return IsolationStatus(available=False, tool=tool,
                               problem=f"bubblewrap could not be run ({exc})")
    if trial.returncode != 0:
        said = (trial.stderr.strip().splitlines() or ["no message"])[-1][:300]
        return IsolationStatus(
            available=False, tool=tool, version=version,
            problem=f"bubblewrap cannot create namespaces on this machine ({said}); "
            "unprivileged user namespaces may be disabled (kernel.unprivileged_userns_clone)",
        )
    return IsolationStatus(available=True, tool=tool, version=version)


def _namespace_options() -> list[str]:
    options = [
        "bwrap", "--die-with-parent", "--new-session",
        # its own user namespace (capabilities there mean nothing on the host) in which no
        # further user namespace can be made
        "--unshare-user", "--disable-userns",
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--hostname", "oomkb-job",
    ]
    if os.geteuid() == 0:
        options += ["--cap-drop", "ALL"]  # a root caller's sandbox keeps no capability
    return options


def _system_binds() -> list[str]:
    """``/usr`` and the top-level links into it, and the dynamic loader's cache."""
    binds = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            binds += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            binds += ["--ro-bind", str(path), str(path)]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                 # libtpu's allocator counts the CPUs there, and aborts without them
                 "/sys/devices/system/cpu"):
        binds += ["--ro-bind-try", name, name]
    return binds


def _runtime_dirs(code_dirs: Iterable[Path]) -> list[Path]:
    """The Python runtime, its installed packages and this project's code packages."""
    dirs = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.exec_prefix),
            Path(sys.base_exec_prefix), Path(os.path.realpath(sys.executable)).parent,
            Path(sys.executable).parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if path := sysconfig.get_paths().get(key):
            dirs.add(Path(path))
    dirs.update(Path(p) for p in site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.add(Path(site.getusersitepackages()))
    dirs.update(code_dirs)
    return [d.resolve() for d in dirs if d.is_dir()]


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without those inside another one of them (a bind covers its subfolders)."""
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return kept


def bwrap_command(
    tool: str,
    command: list[str],
    *,
    workdir: Path,
    code_dirs: Iterable[Path],
    read_only: Iterable[Path] = (),
    writable: Iterable[Path] = (),
    files: Iterable[tuple[int, Path]] = (),
    read_only_files: Iterable[Path] = (),
    dirs: Iterable[Path] = (),
) -> list[str]:
    """``command`` wrapped in a bubblewrap sandbox, to be started with the environment it needs.

    ``workdir`` becomes its working directory: a fresh tmpfs of :data:`WORK_BYTES` at that path
    (nothing the job writes there reaches the host's disk), holding ``read_only_files`` (host files
    bound read-only at their own paths inside it), empty folders ``dirs`` and ``files`` (``(fd, path)``: a writable copy of
    what the inherited descriptor ``fd`` holds). ``read_only`` and ``writable`` are further folders
    it sees at their own paths. ``/tmp`` and ``/dev/shm`` are private size-limited tmpfs. Everything
    else is absent (see the module doc).
    """
    workdir = Path(workdir).resolve()
    args = [tool, *_namespace_options()[1:], *_system_binds()]
    runtime = _outermost(_runtime_dirs(code_dirs))
    for path in runtime:
        if not str(path).startswith(("/usr/", "/tmp/")) and path != Path("/usr"):
            args += ["--ro-bind", str(path), str(path)]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
             "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    # Binds under /tmp come after the tmpfs, or it would hide them.
    for path in runtime:
        if str(path).startswith("/tmp/"):
            args += ["--ro-bind", str(path), str(path)]
    for path in _outermost(Path(p).resolve() for p in read_only):
        args += ["--ro-bind", str(path), str(path)]
    args += ["--size", str(WORK_BYTES), "--tmpfs", str(workdir)]
    for path in dirs:
        args += ["--dir", str(path)]
    for path in read_only_files:
        args += ["--ro-bind", str(path), str(path)]
    for fd, path in files:
        args += ["--dir", str(Path(path).parent), "--file", str(fd), str(path)]
    for path in _outermost(Path(p).resolve() for p in writable):
        args += ["--bind", str(path), str(path)]
    args += ["--chdir", str(workdir), "--", *command]
    return args
