"""User programs that try to get out of the sandbox (used by tests/diagnostics/test_isolation.py).

Each returns what it managed to do, so that a test can tell a refusal from a success.
"""

import json
import os
import socket
import sys
import time


def double_fork_setsid(marker="oomkb-escapee", seconds=600):
    """Fork; the child calls setsid and forks a grandchild that runs for ``seconds``; the child
    exits at once, so the grandchild is an orphan outside the job's process group and session."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(read_end)
            os.write(write_end, b"started")
            os.close(write_end)
            # exec, so that its command line carries the marker the test looks for
            os.execv(sys.executable, [sys.executable, "-c",
                                      f"import time; time.sleep({seconds})", marker])
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    started = os.read(read_end, 16)
    return {"grandchild_started": started == b"started"}


def process_limit():
    """The RLIMIT_NPROC the job runs under (from /proc/self/limits)."""
    with open("/proc/self/limits") as f:
        for line in f:
            if line.startswith("Max processes"):
                return {"soft": line.split()[2], "hard": line.split()[3]}
    return {"soft": None}


def write_result_file(size_bytes=0, nesting=0, record=None):
    """Write the job's result itself (to the descriptor named on the child's command line, which
    the program can read like any other), then leave before the job can write the real one."""
    with os.fdopen(int(sys.argv[3]), "w", closefd=False) as f:
        if record is not None:
            json.dump(record, f)
        elif nesting:
            f.write("[" * nesting + "]" * nesting)
        else:
            f.write('{"ok": true, "value": {"pad": "' + "x" * size_bytes + '"}}')
    os._exit(0)


def plant_result_path(kind="fifo"):
    """The attack on a result *file*: a FIFO (the parent's open() would block) or a link to a
    server file (an oracle on its existence) named result.json in the working folder; then leave."""
    if kind == "fifo":
        os.mkfifo("result.json")
    else:
        os.symlink("/etc/passwd" if kind == "link-existing" else "/nonexistent", "result.json")
    os._exit(0)


def open_descriptors():
    """Where every descriptor this process holds points."""
    links = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            links[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return links


def sleep_then_return(seconds=0.2):
    time.sleep(seconds)
    return {"slept": seconds}


def connect(port):
    """Try to reach a TCP listener on the host's loopback."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return {"connected": True}
    except OSError as exc:
        return {"connected": False, "error": type(exc).__name__}
