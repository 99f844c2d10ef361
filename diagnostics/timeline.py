"""A memory timeline without a TPU: every HBM buffer's live range over the compiled program's
order, read from XLA's dumps of the deviceless compile.

The compiler writes, beside the optimized HLO, its buffer assignment (each allocation: size, kind,
memory space; each HLO value in it: size and offset) and the live range of every value over the
instruction sequence. The timeline puts them together: a value occupies its bytes from the step
that defines it to its last use; entry parameters and buffers that may be live out occupy theirs for
the whole program (the caller owns them), and so do constants the live ranges do not list; values of another memory space (VMEM and the like,
``color`` ≠ 0) and thread-local scratch are left out. HBM in use at a step is the sum over the
buffers live then, each place (allocation, offset) counted once, so an alias (a donated parameter
and the output written into it) is not counted twice.

Its peak is the heap simulator's view of the program; the estimate's headline total is the
compiler's ``memory_analysis()`` (arguments + outputs + temp + code - aliases), which sizes the
temp allocation as a whole instead of by what is live at each step, so the two can differ.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from oomkb.units import ByteCount

__all__ = ["Timeline", "TimelineBuffer", "label_timeline", "read_timeline"]

#: Buffers kept in a report (the largest); the usage curve always counts every buffer.
MAX_BUFFERS = 2000
#: Points of the usage curve kept in a report (the largest value of each bucket of steps).
MAX_POINTS = 2000

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*):\s*$")
_VALUE = re.compile(r"^\s*value: <\d+ (\S+) @\d+> \(size=(\d+),offset=(\d+)\): (\S+)")
_RANGE = re.compile(r"^\s+(\S+?)(\{[\d,]*\}):(\d+)-(\d+)\s*$")
_STEPS = re.compile(r"HloLiveRange \(max (\d+)\)")


class TimelineBuffer(BaseModel):
    name: str = Field(description="the HLO value (instruction{shape index})")
    bytes: ByteCount
    start: int = Field(description="first step (position in the instruction sequence) it is live")
    end: int = Field(description="last step it is live")
    shape: str
    kind: str = Field(description="argument, output, temp")
    allocation: int
    op_name: str | None = None
    role: str | None = None


class Timeline(BaseModel):
    steps: int = Field(description="instructions in the entry computation's sequence")
    peak_bytes: ByteCount = Field(description="the most HBM live at one step")
    peak_step: int
    usage: list[ByteCount] = Field(description="HBM live per point (each the largest of its steps)")
    steps_per_point: int
    buffers: list[TimelineBuffer] = Field(description="the largest buffers, with their live ranges")
    buffers_left_out: int = 0


def _dump(dump_dir: Path, suffix: str) -> Path | None:
    found = sorted(dump_dir.glob(f"*{suffix}"))
    return found[0] if found else None


def read_timeline(dump_dir: Path) -> Timeline | None:
    """The timeline of the dumped compile, or None when XLA wrote no live ranges."""
    assignment_path = _dump(dump_dir, "after_optimizations-buffer-assignment.txt")
    ranges_path = _dump(dump_dir, "after_optimizations-live-range.txt")
    if assignment_path is None or ranges_path is None:
        return None
    ranges_text = ranges_path.read_text("utf-8", "replace")
    steps_match = _STEPS.search(ranges_text)
    if not steps_match:
        return None
    steps = int(steps_match.group(1))
    ranges: dict[str, tuple[int, int]] = {}
    in_ranges = False
    for line in ranges_text.splitlines():
        if line.strip() == "BufferLiveRange:":
            in_ranges = True
            continue
        if in_ranges:
            m = _RANGE.match(line)
            if not m:
                if line.strip() and not line.startswith("    "):
                    in_ranges = False
                continue
            name = m.group(1) if m.group(2) == "{}" else m.group(1) + m.group(2)
            ranges[name] = (int(m.group(3)), int(m.group(4)))

    buffers: list[TimelineBuffer] = []
    allocation = None
    keep = False
    whole = constant = False
    kind = "temp"
    for line in assignment_path.read_text("utf-8", "replace").splitlines():
        m = _ALLOCATION.match(line)
        if m:
            allocation, attrs = int(m.group(1)), m.group(3)
            color = re.search(r"\bcolor (\d+)", attrs)
            keep = not (color and color.group(1) != "0") and "thread-local" not in attrs
            whole = "parameter" in attrs or "maybe-live-out" in attrs
            constant = "constant" in attrs
            kind = "argument" if "parameter" in attrs else "output" if "maybe-live-out" in attrs else "temp"
            continue
        m = _VALUE.match(line)
        if not (m and keep and allocation is not None):
            continue
        name, size, offset, shape = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        name = name[:-2] if name.endswith("{}") else name  # the live ranges write the top index bare
        if name not in ranges and not (whole or constant):
            continue
        start, end = (0, steps) if whole or name not in ranges else ranges[name]
        buffers.append(TimelineBuffer(name=name, bytes=size, start=start, end=end, shape=shape,
                                      kind=kind, allocation=allocation))
        buffers[-1].__dict__["_place"] = (allocation, offset)

    # HBM in use per step: each (allocation, offset, size) place counted once while any value in it lives
    places: dict[tuple[int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for b in buffers:
        place = b.__dict__.pop("_place")
        places[(place[0], place[1], b.bytes)].append((b.start, b.end))
    delta = [0] * (steps + 2)
    for (_, _, size), spans in places.items():
        merged: list[list[int]] = []
        for s, e in sorted(spans):
            if merged and s <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        for s, e in merged:
            delta[s] += size
            delta[e + 1] -= size
    usage, live = [], 0
    for step in range(steps + 1):
        live += delta[step]
        usage.append(live)
    peak = max(usage) if usage else 0
    peak_step = usage.index(peak) if usage else 0
    per_point = max(1, -(-len(usage) // MAX_POINTS))
    points = [max(usage[i:i + per_point]) for i in range(0, len(usage), per_point)]
    buffers.sort(key=lambda b: (-b.bytes, b.start))
    return Timeline(steps=steps, peak_bytes=peak, peak_step=peak_step, usage=points,
                    steps_per_point=per_point, buffers=buffers[:MAX_BUFFERS],
                    buffers_left_out=max(len(buffers) - MAX_BUFFERS, 0))


def label_timeline(timeline: Timeline, at_peak, origins: dict[str, str]) -> None:
    """Give the timeline's buffers their op name (the argument's path for parameters, as the Memory
    Viewer names them) and role, with the same rules as the buffers at the peak."""
    from oomkb.diagnostics.roles import assign_roles

    names = {re.sub(r"\{.*\}$", "", b.instruction or ""): b.op_name for b in at_peak if b.op_name}
    for b in timeline.buffers:
        base = re.sub(r"\{.*\}$", "", b.name)
        b.op_name = names.get(base) or origins.get(base)

    class _View:
        def __init__(self, b: TimelineBuffer) -> None:
            self.kind, self.op_name, self.shape, self.instruction = b.kind, b.op_name, b.shape, b.name

    for b, role in zip(timeline.buffers, assign_roles([_View(b) for b in timeline.buffers], origins=origins)):
        b.role = role
