"""Reading a file the user names on the command line (a log, a report), with bounds.

Only a regular file or '-' (standard input) is read: a FIFO would block `open()` forever and a
device such as /dev/zero never ends (it grew `oomkb diagnose` to 2.7 GB). The file is opened
non-blocking and checked with `fstat` before a byte is read. A log longer than the tail limit is
read from its end, where the error usually is (a 178 MB log took 13.5 s and 2.2 GB whole); standard
input that is not a file is read up to a stream limit, keeping its tail. Every refusal is a clear
`error:` line and exit status 2.
"""

from __future__ import annotations

import os
import stat
import sys
from collections import deque

from oomkb.api.cli.boundary import EXIT_USAGE, fail

#: What of a log is read: its last 8 MiB (the error and what led to it; a whole training log is
#: mostly progress lines).
LOG_TAIL_BYTES = 8 * 1024 * 1024
#: Standard input that is not a file (a pipe, a device) is refused past this many bytes.
MAX_STREAM_BYTES = 256 * 1024 * 1024
#: A JSON report is read whole; one bigger than this is not a report oomkb wrote.
MAX_REPORT_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024


def read_log_bytes(name: str, what: str = "log") -> bytes:
    """The last LOG_TAIL_BYTES of the file `name` ('-': standard input); a note on stderr when
    the start was left out; exit 2 for anything that is not a regular file or is empty."""
    data, total = _read(name, what, LOG_TAIL_BYTES, tail=True)
    if total > len(data):
        print(f"note: the {what} is {total / 2**20:.0f} MiB; reading its last "
              f"{LOG_TAIL_BYTES // 2**20} MiB, where the error usually is", file=sys.stderr)
        cut = data.find(b"\n")  # start at a whole line
        data = data[cut + 1:] if 0 <= cut < 4096 else data
    if not data.strip():
        fail(f"the {what} {_shown(name)} is empty: give the output of the failing run", EXIT_USAGE)
    return data


def read_whole(name: str, what: str, limit: int = MAX_REPORT_BYTES) -> bytes:
    """All of the file `name` ('-': standard input), refused (exit 2) past `limit` bytes."""
    data, total = _read(name, what, limit, tail=False)
    if total > limit:
        fail(f"the {what} {_shown(name)} is over {limit // 2**20} MiB; that is not a file oomkb wrote",
             EXIT_USAGE)
    return data


def _shown(name: str) -> str:
    return "on standard input" if name == "-" else name


def _read(name: str, what: str, keep: int, *, tail: bool) -> tuple[bytes, int]:
    """(the bytes kept, the total size) of `name`: its first or last `keep` bytes."""
    if name == "-":
        if sys.stdin is None:
            fail(f"no standard input to read the {what} from", EXIT_USAGE)
        if sys.stdin.isatty():
            print(f"reading the {what} from standard input (end with Ctrl-D)...", file=sys.stderr)
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream (tests, embedding): already in memory
            data = sys.stdin.read().encode("utf-8", "replace")
            return (data[-keep:] if tail else data[:keep + 1]), len(data)
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            fd = None
        if fd is not None and stat.S_ISREG(os.fstat(fd).st_mode):
            return _from_fd(fd, keep, tail)
        return _from_stream(stream, what, keep, tail)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        fail(f"{what} file not found: {name}", EXIT_USAGE)
    except IsADirectoryError:
        fail(f"{what} path is a folder, not a file: {name}", EXIT_USAGE)
    except OSError as exc:
        fail(f"cannot read {what} file {name}: {exc.strerror or exc}", EXIT_USAGE)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            fail(f"{what} path is a folder, not a file: {name}", EXIT_USAGE)
        if not stat.S_ISREG(mode):
            fail(f"{what} path {name} is not a regular file (a device, FIFO or socket); save the "
                 f"{what} to a file, or pipe it in with '-'", EXIT_USAGE)
        os.set_blocking(fd, True)
        return _from_fd(fd, keep, tail)
    except OSError as exc:
        fail(f"cannot read {what} file {name}: {exc.strerror or exc}", EXIT_USAGE)
    finally:
        os.close(fd)


def _from_fd(fd: int, keep: int, tail: bool) -> tuple[bytes, int]:
    size = os.fstat(fd).st_size
    start = max(0, size - keep) if tail else 0
    chunks = []
    want = min(size, keep + (0 if tail else 1)) if size else keep + 1
    offset = start
    while want > 0:
        chunk = os.pread(fd, min(_CHUNK, want), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        want -= len(chunk)
    data = b"".join(chunks)
    return data, max(size, len(data) + start)


def _from_stream(stream, what: str, keep: int, tail: bool) -> tuple[bytes, int]:
    chunks: deque[bytes] = deque()
    kept = total = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > MAX_STREAM_BYTES:
            fail(f"standard input gave more than {MAX_STREAM_BYTES // 2**20} MiB; save the {what} to a "
                 "file and name it (oomkb reads the end of a long file)", EXIT_USAGE)
        chunks.append(chunk)
        kept += len(chunk)
        if not tail and kept > keep:
            break
        while tail and kept - len(chunks[0]) >= keep:
            kept -= len(chunks.popleft())
    data = b"".join(chunks)
    return (data[-keep:] if tail else data), total


__all__ = ["LOG_TAIL_BYTES", "MAX_REPORT_BYTES", "MAX_STREAM_BYTES", "read_log_bytes", "read_whole"]
