"""A real Ray cluster for tests, on 127.0.0.1, and the means to stop exactly its processes.

Other clusters may run on the same machine (other test sessions): nothing here runs a
machine-wide ``ray stop``; a cluster's processes are found by its own temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: Test clusters bind 127.0.0.1 only and run without Ray's token authentication: its token file
#: (~/.ray/auth_token) is shared by every cluster this user starts, and another one may replace it.
NO_TOKEN = {"RAY_AUTH_MODE": "disabled"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def processes_under(folder: str) -> list[int]:
    """This user's processes whose command line names ``folder`` (a Ray cluster's temp dir) or
    whose environment holds ``OOMKB_TEST_RAY_CLUSTER=folder`` (every process ``ray start``
    started, the client server included), and their descendants."""
    marker = f"OOMKB_TEST_RAY_CLUSTER={folder}".encode()
    parents: dict[int, int] = {}
    named: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rpartition(")")[2].split()[1])
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            environ = []
        if (folder in cmdline or marker in environ) and pid != os.getpid():
            named.add(pid)
    found = set(named)
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return sorted(found)


def stop_processes(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(1.0)



@contextlib.contextmanager
def local_cluster(cpus: int = 2) -> Iterator[str]:
    """A Ray cluster of ``cpus`` CPUs started in this process (``ray.init``), in a temporary
    folder of its own; shut down, and every process it started stopped, afterwards."""
    import ray

    temp = tempfile.mkdtemp(prefix="oomkb-ray-", dir="/tmp")
    # The workers' temporary folders go inside the cluster's: a worker a test kills cannot
    # clean up after itself, and what it leaves is removed with the cluster.
    scratch = Path(temp) / "tmp"
    scratch.mkdir()
    environment = {**NO_TOKEN, "TMPDIR": str(scratch)}
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    ray.init(address="local", include_dashboard=False, num_cpus=cpus, _node_ip_address="127.0.0.1",
             _temp_dir=temp, logging_level="ERROR", log_to_driver=False)
    try:
        yield temp
    finally:
        ray.shutdown()
        stop_processes(processes_under(temp))
        shutil.rmtree(temp, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
