"""Reading XLA's dumps of a compile: buffer-assignment totals and the buffers live at the peak
(through XProf's Memory Viewer converter).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oomkb.diagnostics.estimate.report import BufferInfo
from oomkb.units import MIB

__all__ = ["buffers_at_peak", "dump_file", "memory_viewer", "mib_to_bytes", "totals_from_buffer_assignment"]


_ALLOCATION = re.compile(r"^allocation \d+: size (\d+)(.*):\s*$", re.MULTILINE)


def dump_file(dump_dir: Path, suffix: str) -> Path | None:
    files = sorted(dump_dir.glob(f"*{suffix}"))
    return files[-1] if files else None


def totals_from_buffer_assignment(dump_dir: Path) -> dict[str, int] | None:
    """Argument/output/temp/alias bytes in HBM from ``*buffer-assignment.txt`` (no code size)."""
    path = dump_file(dump_dir, "after_optimizations-buffer-assignment.txt")
    if path is None:
        return None
    figures = dict.fromkeys(
        ("argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "generated_code_bytes"), 0
    )
    for match in _ALLOCATION.finditer(path.read_text("utf-8", "replace")):
        size, flags = int(match.group(1)), match.group(2)
        flags = re.sub(r"\|.*\|", "", flags)  # shapes may contain anything
        if re.search(r"\bcolor [1-9]", flags):
            continue  # VMEM, SMEM, ... not HBM
        if "parameter" in flags:
            figures["argument_bytes"] += size
            if "maybe-live-out" in flags:
                figures["output_bytes"] += size
                figures["alias_bytes"] += size
        elif "maybe-live-out" in flags:
            figures["output_bytes"] += size
        else:
            figures["temp_bytes"] += size
    return figures


def memory_viewer(dump_dir: Path) -> dict[str, Any] | None:
    """XProf's Memory Viewer data for the dumped module (its own JSON), or ``None``."""
    import json

    proto = dump_file(dump_dir, "after_optimizations.hlo.pb")
    if proto is None:
        return None
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        return None
    module = "module"
    run_dir = dump_dir / "xprof" / "plugins" / "profile" / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(proto, run_dir / f"{module}.hlo_proto.pb")
    xplane = run_dir / "host.xplane.pb"
    xplane.write_bytes(b"")
    try:
        data, _ = raw_to_tool_data.xspace_to_tool_data(
            [str(xplane)], "memory_viewer", {"module_name": module}
        )
        return json.loads(data) if data else None
    except Exception:  # the converter is an optional view; its failure is reported as a warning
        return None


def mib_to_bytes(value: Any) -> int:
    return int(round(float(value or 0) * MIB))


_KINDS = {"Parameter": "argument", "Output": "output", "Temporary": "temp"}


def buffers_at_peak(viewer: Mapping[str, Any]) -> list[BufferInfo]:
    buffers = []
    for item in viewer.get("maxHeap") or []:
        if int(item.get("logicalBufferId", -1)) < 0:
            continue  # the viewer's lump of small buffers
        size = mib_to_bytes(item.get("logicalBufferSizeMib"))
        unpadded = mib_to_bytes(item.get("unpaddedShapeMib", item.get("logicalBufferSizeMib")))
        source_info = item.get("sourceInfo") or {}
        source = None
        if source_info.get("fileName"):
            source = f"{source_info['fileName']}:{source_info.get('lineNumber', '?')}"
        group = str(item.get("groupName") or "")
        buffers.append(BufferInfo(
            bytes=size,
            unpadded_bytes=unpadded,
            padding_bytes=max(size - unpadded, 0),
            shape=str(item.get("shapeString") or item.get("label") or "?"),
            kind=_KINDS.get(group, group.lower() or "other"),
            op=item.get("opCode"),
            op_name=item.get("tfOpName"),
            instruction=item.get("instructionName"),
            source=source,
        ))
    buffers.sort(key=lambda b: b.bytes, reverse=True)
    return buffers
