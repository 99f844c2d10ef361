"""Catch an out-of-memory error where it happens and report the arrays alive at that moment.

    from oomkb.diagnostics.capture import capture

    with capture("oom.json"):          # or @capture("oom.json") on the training function
        train()

Nothing happens while the block runs: entering and leaving it without an error costs two method
calls. When the block raises an out-of-memory error (XLA's RESOURCE_EXHAUSTED on TPU, GPU or CPU,
an allocator wording `diagnostics.parse` knows, or Python's MemoryError), the report is built
before anything is freed (the traceback still holds every frame): the parsed error, the live
arrays grouped by shape, dtype and the user's line that created them, per device and in total,
what keeps the biggest groups alive, and a pprof of device memory. The report is written as JSON,
a short table goes to stderr, and the error propagates unchanged: capture never swallows it.
"""

from __future__ import annotations

import contextlib
import math
import sys
import tempfile
import time
import traceback
import types
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from oomkb.diagnostics.holders import Holder, held_by
from oomkb.diagnostics.parse import ParsedError, parse_error

PPROF_SUFFIX = ".prof"
MAX_GROUPS = 50
HELD_BY_GROUPS = 10  # the largest groups whose holders are looked for
HELD_BY_SECONDS = 5.0  # time allowed for all of them (each heap scan is O(heap))
_MAX_CHAIN = 8


class DeviceBytes(BaseModel):
    id: str = Field(description="device, e.g. 'cpu:0', 'cuda:1', 'tpu:3'")
    live_bytes: int = Field(description="bytes of the live arrays' shards on this device")
    in_use_bytes: int | None = Field(default=None, description="the allocator's bytes_in_use (GPU/TPU; null on CPU)")
    limit_bytes: int | None = Field(default=None, description="the allocator's bytes_limit (GPU/TPU; null on CPU)")


class LiveBufferGroup(BaseModel):
    """Arrays alive at the error with one shape, dtype and creating line."""

    bytes: int
    count: int
    shape: str
    dtype: str
    source: str | None = Field(default=None, description="'file:line' of the user's code that created them")
    function: str | None = Field(default=None, description="the function of that line")
    held_by: list[Holder] = Field(default_factory=list, description="what keeps them alive, when Python does")


class CaptureReport(BaseModel):
    """The OOM report of `oomkb run` and `capture` (CONTRACT: run JSON)."""

    error: ParsedError
    backend: str
    devices: list[DeviceBytes]
    live_bytes_total: int
    live_buffers: list[LiveBufferGroup] = Field(description="largest total first")
    live_array_count: int = 0
    pprof: str | None = Field(default=None, description="gzipped pprof of device memory at the error")
    exception_type: str | None = None
    raised_at: str | None = Field(default=None, description="'file:line' of the user's code where it was raised")
    report_path: str | None = None
    seconds: float = Field(default=0.0, description="time taken to build the report")


def is_oom(exc: BaseException | None) -> bool:
    """True for an out-of-memory error: MemoryError, RESOURCE_EXHAUSTED, or a known allocator wording
    anywhere in the exception or the ones it was raised from."""
    for error in _chain(exc):
        if isinstance(error, MemoryError):
            return True
        text = _text(error)
        if "RESOURCE_EXHAUSTED" in text or "Resource exhausted" in text:
            return True
        if text and parse_error(text).category != "unknown":
            return True
    return False


def _chain(exc: BaseException | None):
    seen = set()
    while exc is not None and id(exc) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:1_000_000]
    except Exception:
        return ""


class capture(contextlib.ContextDecorator):
    """Context manager and decorator: on an out-of-memory error, write the report and re-raise.

    `report`: JSON file to write (None: none is written; the report is still at `.report`).
    `pprof`: where the device memory profile goes (default: beside the report as `<stem>.prof`,
    else a new temporary folder). `console`: print the short table to stderr. `on_report`: called
    with the report (the CLI prints the assistant's answer with it).
    """

    def __init__(
        self,
        report: str | Path | None = None,
        *,
        pprof: str | Path | None = None,
        console: bool = True,
        on_report: Callable[[CaptureReport], Any] | None = None,
    ) -> None:
        self.path = Path(report).absolute() if report is not None else None
        self.pprof_path = Path(pprof).absolute() if pprof is not None else None
        self.console = console
        self.on_report = on_report
        self.report: CaptureReport | None = None

    def __enter__(self) -> "capture":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False  # no error, or Ctrl-C / SystemExit: nothing to report
        try:
            if not is_oom(exc):
                return False
            self.report = build_report(exc, pprof_path=self._pprof_target(), frames=_frames(tb))
            if self.path is not None:
                self._write(self.report)
            if self.console:
                print(format_report(self.report), file=sys.stderr)
            if self.on_report is not None:
                self.on_report(self.report)
        except Exception as problem:  # the user's error matters more than ours: never mask it
            print(f"oomkb: could not build the out-of-memory report: {type(problem).__name__}: {problem}",
                  file=sys.stderr)
        return False

    def _write(self, report: CaptureReport) -> None:
        """Write the JSON report; ``report_path`` names it only once it is written."""
        assert self.path is not None
        report.report_path = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(report.model_dump_json(indent=2), encoding="utf-8")
        except OSError as problem:
            report.report_path = None
            print(f"oomkb: could not write the report to {self.path}: {problem.strerror or problem}",
                  file=sys.stderr)

    def _pprof_target(self) -> Path:
        if self.pprof_path is not None:
            return self.pprof_path
        if self.path is not None:
            return self.path.with_suffix(PPROF_SUFFIX)
        return Path(tempfile.mkdtemp(prefix="oomkb-oom-")) / f"memory{PPROF_SUFFIX}"


def _frames(tb: types.TracebackType | None) -> list[types.FrameType]:
    frames = []
    while tb is not None and len(frames) < 500:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def build_report(
    exc: BaseException, pprof_path: Path | None = None, frames: list[types.FrameType] = ()
) -> CaptureReport:
    """The OOM report for `exc`, taken now: call it while the arrays of the failing code are alive."""
    import jax

    from oomkb.diagnostics.program import array_creation_site
    from oomkb.diagnostics.program import user_location

    started = time.perf_counter()
    error = next((e for e in _chain(exc) if parse_error(_text(e)).category != "unknown"), exc)
    parsed = parse_error(_text(error))
    if parsed.category == "unknown" and isinstance(error, MemoryError):
        parsed = ParsedError(category="host_oom", memory_space="host", message=_text(error) or "MemoryError")
    if parsed.backend is None:
        parsed.backend = jax.default_backend()  # type: ignore[assignment]

    arrays = [a for a in jax.live_arrays() if not _deleted(a)]
    groups: dict[tuple, list] = defaultdict(list)
    devices: dict[str, int] = defaultdict(int)
    for array in arrays:
        site = array_creation_site(array)
        source, function = _split_site(site)
        groups[(str(tuple(array.shape)), str(array.dtype), source, function)].append(array)
        for device, size in _per_device(array):
            devices[device] += size
    ordered = sorted(groups.items(), key=lambda item: -sum(_bytes(a) for a in item[1]))[:MAX_GROUPS]
    buffers = []
    for rank, ((shape, dtype, source, function), members) in enumerate(ordered):
        holders: list[Holder] = []
        if rank < HELD_BY_GROUPS:
            try:
                holders = held_by(members[0], ignore=[arrays, members, groups, ordered], frames=frames,
                                  deadline=started + HELD_BY_SECONDS)
            except Exception as problem:  # a strange object on the way: the rest of the report still counts
                print(f"oomkb: could not tell what holds {dtype}{shape}: {problem}", file=sys.stderr)
        buffers.append(LiveBufferGroup(bytes=sum(_bytes(a) for a in members), count=len(members), shape=shape,
                                       dtype=dtype, source=source, function=function, held_by=holders))
    del groups, ordered, arrays

    stats = _memory_stats()
    pprof = None
    if pprof_path is not None:
        try:
            pprof_path.parent.mkdir(parents=True, exist_ok=True)
            pprof_path.write_bytes(jax.profiler.device_memory_profile())
            pprof = str(pprof_path)
        except Exception as problem:
            print(f"oomkb: could not write the device memory profile: {problem}", file=sys.stderr)
    return CaptureReport(
        error=parsed,
        backend=jax.default_backend(),
        devices=[DeviceBytes(id=d, live_bytes=devices.get(d, 0), **stats.get(d, {}))
                 for d in sorted(set(devices) | {f"{x.platform}:{x.id}" for x in jax.local_devices()})],
        live_bytes_total=sum(devices.values()),
        live_buffers=buffers,
        live_array_count=sum(b.count for b in buffers),
        pprof=pprof,
        exception_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
        raised_at=user_location(exc),
        seconds=round(time.perf_counter() - started, 3),
    )


def _memory_stats() -> dict[str, dict[str, int]]:
    """bytes_in_use and bytes_limit per local device, where the allocator reports them."""
    import jax

    found: dict[str, dict[str, int]] = {}
    for device in jax.local_devices():
        try:
            stats = device.memory_stats() or {}
        except Exception:
            continue
        values = {k: int(stats[s]) for k, s in (("in_use_bytes", "bytes_in_use"), ("limit_bytes", "bytes_limit"))
                  if isinstance(stats.get(s), int)}
        if values:
            found[f"{device.platform}:{device.id}"] = values
    return found


def _deleted(array: Any) -> bool:
    try:
        return bool(array.is_deleted())
    except Exception:
        return True


def _split_site(site: str | None) -> tuple[str | None, str | None]:
    """'file:line (function)' -> ('file:line', 'function')."""
    if not site:
        return None, None
    if site.endswith(")") and " (" in site:
        where, _, function = site[:-1].rpartition(" (")
        return where, function
    return site, None


def _bytes(array: Any) -> int:
    return sum(size for _, size in _per_device(array))


def _per_device(array: Any) -> list[tuple[str, int]]:
    """(device id, bytes) for every addressable shard of `array`."""
    try:
        sharding = array.sharding
        size = math.prod(sharding.shard_shape(array.shape)) * array.dtype.itemsize
        return [(f"{d.platform}:{d.id}", size) for d in sharding.addressable_devices]
    except Exception:
        return [("unknown", int(getattr(array, "nbytes", 0)))]


def format_report(report: CaptureReport, rows: int = 8) -> str:
    """A short plain-text table of the report, for stderr."""
    from oomkb.units import format_bytes

    error = report.error
    lines = [f"oomkb: out of memory ({error.category}, backend {report.backend})"
             + (f" at {report.raised_at}" if report.raised_at else "")]
    if error.requested_bytes is not None:
        lines.append(f"  requested {format_bytes(error.requested_bytes)}"
                     + (f", available {format_bytes(error.available_bytes)}" if error.available_bytes is not None else ""))
    per_device = ", ".join(f"{d.id} {format_bytes(d.live_bytes)}" for d in report.devices)
    lines.append(f"  live arrays: {report.live_array_count} holding {format_bytes(report.live_bytes_total)}"
                 + (f" ({per_device})" if per_device else ""))
    if report.live_buffers:
        lines.append(f"  {'bytes':>10}  {'count':>5}  {'dtype':<9} {'shape':<18} created at / held by")
        for group in report.live_buffers[:rows]:
            lines.append(f"  {format_bytes(group.bytes):>10}  {group.count:>5}  {group.dtype:<9} {group.shape:<18} "
                         f"{group.source or 'unknown'}")
            for holder in group.held_by[:2]:
                lines.append(f"  {'':>10}  {'':>5}  {'':<9} {'':<18} held by {holder.describe()}")
        if len(report.live_buffers) > rows:
            lines.append(f"  ... {len(report.live_buffers) - rows} more groups in the JSON report")
    if report.pprof:
        lines.append(f"  device memory pprof: {report.pprof}")
    if report.report_path:
        lines.append(f"  report: {report.report_path}")
    return "\n".join(lines)


def user_traceback(exc: BaseException, skip_files: tuple[str, ...] = ()) -> str:
    """The exception's traceback without its leading frames from `skip_files` (runpy, oomkb)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(skip_files):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


__all__ = ["CaptureReport", "DeviceBytes", "LiveBufferGroup", "build_report", "capture", "format_report", "is_oom"]
