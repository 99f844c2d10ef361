"""What changed between two estimates of a program: two revisions of the user's code, or the same
code under two jax/libtpu versions (``oomkb estimate … --python venvA/bin/python`` and ``venvB``).

Figures are compared as the compiler gave them (per device); the buffers live at the peak are
matched one to one, most specific key first: the JAX op name, the user's source line and the shape
with its TPU layout; then the same with the layout left out (a layout change shows as a changed
shape); then op name and shape; then source line and shape; then, for arguments, the argument's name
alone (a wider layer's weight is the same argument, grown); last, a buffer with neither op name nor
source line (made by the compiler) by its kind and exact shape. What is left over is new (only in B)
or gone (only in A). The largest growth comes first.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.estimate.report import BufferInfo
from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.units import ByteCount, format_bytes

__all__ = ["BufferDelta", "DiffError", "DiffReport", "FigureDelta", "diff_reports", "load_estimate_report"]

#: The report's per-device figures, in the order a reader expects them.
FIGURES = ("total_bytes", "argument_bytes", "output_bytes", "temp_bytes", "generated_code_bytes",
           "alias_bytes", "peak_heap_bytes")

#: Largest report file read (an estimate report is a few hundred KiB at most).
MAX_REPORT_BYTES = 32 << 20


class DiffError(DiagnosticsError):
    """A report given to ``oomkb diff`` cannot be read as an estimate report."""


class FigureDelta(BaseModel):
    name: str
    before: ByteCount | None
    after: ByteCount | None
    delta_bytes: ByteCount | None = Field(description="after - before; null when either is unknown")


class BufferDelta(BaseModel):
    """One buffer live at the peak, in either report or both."""

    status: Literal["grown", "shrunk", "same", "new", "gone"]
    op_name: str | None
    source: str | None
    kind: str
    role: str | None = Field(None, description="its role at the peak (B's, else A's; diagnostics/roles.yaml)")
    instruction: str | None = Field(None, description="the HLO instruction (B's, else A's), for buffers "
                                    "without a JAX op name")
    shape_before: str | None
    shape_after: str | None
    bytes_before: ByteCount
    bytes_after: ByteCount
    delta_bytes: ByteCount
    matched_by: str | None = Field(None, description="the key that paired the two buffers")


class DiffReport(BaseModel):
    """`oomkb diff A.json B.json`: B compared with A, every byte figure per device."""

    report_kind: Literal["diff"] = "diff"
    function_before: str
    function_after: str
    target_before: str = Field(description="the topology of A, e.g. v5e:2x2")
    target_after: str
    libtpu_before: str
    libtpu_after: str
    jax_before: str | None = Field(None, description="the jax of A (null when A does not record it)")
    jax_after: str | None = None
    same_target: bool
    fits_before: bool
    fits_after: bool
    total_delta_bytes: ByteCount
    figures: list[FigureDelta]
    by_role_delta: dict[str, ByteCount] | None = Field(
        None, description="B - A of the bytes live at the peak per role (peak_by_role); null unless "
        "both reports have roles")
    buffers: list[BufferDelta] = Field(description="changed buffers at the peak, largest growth first")
    unchanged_buffers: int
    changed: bool = Field(description="false when every figure and every buffer is the same")
    notes: list[str] = Field(default_factory=list)


def load_estimate_report(path: str | Path) -> EstimateReport:
    """Read an ``oomkb estimate --json`` file; :class:`DiffError` says what is wrong with it."""
    path = Path(path)
    try:
        if not path.is_file():
            raise DiffError(f"{path}: no such report file" if not path.exists()
                            else f"{path} is not a regular file; give the JSON of `oomkb estimate --json`")
        if path.stat().st_size > MAX_REPORT_BYTES:
            raise DiffError(f"{path} is larger than {format_bytes(MAX_REPORT_BYTES)}; not an estimate report")
        text = path.read_text("utf-8")
    except OSError as exc:
        raise DiffError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DiffError(f"{path} is not UTF-8 text; give the JSON of `oomkb estimate --json`") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DiffError(f"{path} is not JSON ({exc.msg} at line {exc.lineno}); "
                        "give the output of `oomkb estimate --json`") from None
    if not isinstance(data, dict) or "target" not in data or "total_bytes" not in data:
        raise DiffError(f"{path} is not an estimate report (no target and total_bytes); "
                        "`oomkb diff` compares two outputs of `oomkb estimate --json`")
    try:
        return EstimateReport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the report"
        raise DiffError(f"{path} is not a valid estimate report: {where}: {first['msg']}") from None


def _logical(shape: str) -> str:
    """The shape without its TPU layout: ``f32[129,1024]{1,0:T(8,128)}`` → ``f32[129,1024]``."""
    return re.sub(r"\{[^{}]*\}$", "", shape.strip())


#: Matching keys, most specific first, each with its name in the report.
_KEYS: list[tuple[str, Callable[[BufferInfo], tuple]]] = [
    ("op name, source line and shape", lambda b: (b.op_name, b.source, b.shape)),
    ("op name, source line and logical shape", lambda b: (b.op_name, b.source, _logical(b.shape))),
    ("op name and logical shape", lambda b: (b.op_name, _logical(b.shape))),
    ("source line and logical shape", lambda b: (b.source, _logical(b.shape))),
    # an argument that changed shape (a wider layer) is still the same argument
    ("argument name", lambda b: (b.op_name if b.kind == "argument" else None, "argument")),
    # a buffer the compiler made without metadata (a scan's stacked residuals, a copy): its kind
    # and exact shape are all there is to match it by
    ("kind and shape, no op name or source line",
     lambda b: (b.kind if b.op_name is None and b.source is None else None, b.shape)),
]


def _match(before: list[BufferInfo], after: list[BufferInfo]):
    """Pairs (a, b, key name), then the unmatched of each side."""
    left, right = list(before), list(after)
    pairs = []
    for name, key in _KEYS:
        pool: dict[tuple, list[BufferInfo]] = defaultdict(list)
        for b in sorted(right, key=lambda x: -x.bytes):
            if any(part is not None for part in key(b)[:-1]):
                pool[key(b)].append(b)
        still = []
        for a in sorted(left, key=lambda x: -x.bytes):
            candidates = pool.get(key(a)) if any(part is not None for part in key(a)[:-1]) else None
            if candidates:
                b = candidates.pop(0)
                right.remove(b)
                pairs.append((a, b, name))
            else:
                still.append(a)
        left = still
    return pairs, left, right


def _status(delta: int) -> str:
    return "grown" if delta > 0 else "shrunk" if delta < 0 else "same"


def diff_reports(before: EstimateReport, after: EstimateReport) -> DiffReport:
    """B (`after`) compared with A (`before`)."""
    figures = []
    for name in FIGURES:
        a, b = getattr(before, name), getattr(after, name)
        figures.append(FigureDelta(name=name, before=a, after=b,
                                   delta_bytes=None if a is None or b is None else b - a))
    pairs, gone, new = _match(before.top_buffers, after.top_buffers)
    buffers, same = [], 0
    for a, b, key in pairs:
        delta = b.bytes - a.bytes
        if delta == 0 and a.shape == b.shape:
            same += 1
            continue
        buffers.append(BufferDelta(status=_status(delta), op_name=b.op_name or a.op_name,
                                   source=b.source or a.source, kind=b.kind, role=b.role or a.role,
                                   instruction=b.instruction or a.instruction,
                                   shape_before=a.shape,
                                   shape_after=b.shape, bytes_before=a.bytes, bytes_after=b.bytes,
                                   delta_bytes=delta, matched_by=key))
    buffers += [BufferDelta(status="gone", op_name=a.op_name, source=a.source, kind=a.kind, role=a.role,
                            instruction=a.instruction,
                            shape_before=a.shape, shape_after=None, bytes_before=a.bytes, bytes_after=0,
                            delta_bytes=-a.bytes) for a in gone]
    buffers += [BufferDelta(status="new", op_name=b.op_name, source=b.source, kind=b.kind, role=b.role,
                            instruction=b.instruction,
                            shape_before=None, shape_after=b.shape, bytes_before=0, bytes_after=b.bytes,
                            delta_bytes=b.bytes) for b in new]
    buffers.sort(key=lambda d: (-d.delta_bytes, d.op_name or ""))
    ta, tb = before.target, after.target
    same_target = (ta.generation, ta.topology, ta.devices_used) == (tb.generation, tb.topology, tb.devices_used)
    notes = []
    if not same_target:
        notes.append(f"the two estimates are for different targets ({ta.generation} {ta.topology} on "
                     f"{ta.devices_used} devices vs {tb.generation} {tb.topology} on {tb.devices_used}): "
                     "figures are per device of each")
    if ta.libtpu_version != tb.libtpu_version:
        notes.append(f"compiled by libtpu {ta.libtpu_version} (A) and {tb.libtpu_version} (B)")
    if ta.jax_version and tb.jax_version and ta.jax_version != tb.jax_version:
        notes.append(f"traced by jax {ta.jax_version} (A) and {tb.jax_version} (B)")
    if before.function != after.function:
        notes.append(f"different functions: {before.function} (A) and {after.function} (B)")
    if len(before.top_buffers) != len(after.top_buffers) or not before.top_buffers:
        notes.append("only the buffers each report lists at the peak are compared "
                     f"({len(before.top_buffers)} in A, {len(after.top_buffers)} in B); "
                     "estimate with a larger --top to compare more")
    by_role = None
    if before.peak_by_role is not None and after.peak_by_role is not None:
        by_role = {role: after.peak_by_role.get(role, 0) - before.peak_by_role.get(role, 0)
                   for role in dict.fromkeys([*before.peak_by_role, *after.peak_by_role])}
    changed = (bool(buffers) or any(f.delta_bytes for f in figures) or before.fits != after.fits
               or any((by_role or {}).values()))
    return DiffReport(
        function_before=before.function, function_after=after.function,
        target_before=ta.topology, target_after=tb.topology,
        libtpu_before=ta.libtpu_version, libtpu_after=tb.libtpu_version, same_target=same_target,
        jax_before=ta.jax_version, jax_after=tb.jax_version, by_role_delta=by_role,
        fits_before=before.fits, fits_after=after.fits,
        total_delta_bytes=after.total_bytes - before.total_bytes,
        figures=figures, buffers=buffers, unchanged_buffers=same, changed=changed, notes=notes,
    )
