"""Scoped VMEM failures of a compile: the memory space, the windows (blocks and buffering) and the
kernel's source line.
"""

from __future__ import annotations

import math
import re
from typing import Any

from oomkb.diagnostics import tpu
from oomkb.diagnostics.estimate.arguments import shape_text
from oomkb.diagnostics.estimate.report import VmemReport, VmemWindow
from oomkb.diagnostics.parse import parse_error, ParsedError
from oomkb.units import format_bytes

__all__ = ["oom_memory_space", "vmem_report", "vmem_summary"]


def oom_memory_space(error_text: str, parsed: ParsedError | None = None) -> str:
    """The memory space a failed compile ran out of: hbm, vmem or smem."""
    parsed = parsed or parse_error(error_text)
    space = (parsed.memory_space or "").lower()
    if space in ("vmem", "smem", "hbm"):
        return space
    match = re.search(r"memory space (\w+)|space=(\w+)", error_text)
    found = (match.group(1) or match.group(2)).lower() if match else ""
    return found if found in ("vmem", "smem") else "hbm"


_WINDOW = re.compile(
    r"Size: (?P<size>[\d.]+[KMGT]?)\s*\n(?:(?!\n\s*\n).)*?Tag: (?P<operand>input|output) window "
    r"allocation for operator (?:input|output) (?P<index>\d+)\. The window shape is "
    r"(?P<window>\S+?), while the full shape is (?P<full>\S+?)\..*?This allocation has "
    r"(?P<buffers>\d+) buffering levels?",
    re.DOTALL,
)


_OP_NAME = re.compile(r'op_name="([^"]+)"')


def _vmem_windows(text: str) -> list[VmemWindow]:
    from oomkb.units import parse_size

    windows = []
    seen = set()
    for block in re.split(r"\n\s*={5,}", text):
        match = _WINDOW.search(block)
        if not match:
            continue
        key = (match["operand"], match["index"], match["window"], match["size"])
        if key in seen:
            continue
        seen.add(key)
        windows.append(VmemWindow(
            bytes=parse_size(match["size"]), operand=f"{match['operand']} {match['index']}",
            window_shape=match["window"], full_shape=match["full"],
            buffers=int(match["buffers"]),
        ))
    return windows


def _pallas_calls(jaxpr: Any, depth: int = 0):
    """The pallas_call equations of a jaxpr, nested ones included."""
    if depth > 20:
        return
    for eqn in getattr(jaxpr, "eqns", []):
        if eqn.primitive.name == "pallas_call":
            yield eqn
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                yield from _pallas_calls(inner, depth + 1)


def _kernel_windows(traced: Any) -> list[VmemWindow]:
    """The first Pallas kernel's VMEM windows from its BlockSpecs: each operand's block shape x
    dtype x buffering levels (2, double-buffered, unless a pipeline mode says otherwise)."""
    import numpy as np

    try:
        eqn = next(_pallas_calls(traced.jaxpr.jaxpr), None)
        if eqn is None:
            return []
        mapping = eqn.params["grid_mapping"]
        windows = []
        for i, block in enumerate(mapping.block_mappings):
            shape = tuple(int(d) for d in block.transformed_block_aval.shape)
            dtype = np.dtype(block.array_aval.dtype)
            mode = getattr(block, "pipeline_mode", None)
            buffers = int(getattr(mode, "buffer_count", None) or 2)
            operand = (f"input {i}" if i < mapping.num_inputs
                       else f"output {i - mapping.num_inputs}")
            windows.append(VmemWindow(
                bytes=math.prod(shape) * dtype.itemsize * buffers, operand=operand,
                window_shape=shape_text(type("W", (), {"shape": shape, "dtype": dtype})()),
                full_shape=shape_text(block.array_aval), buffers=buffers,
            ))
        return windows
    except Exception:  # the jaxpr is internal API: windows are a bonus, never a failure
        return []


def _kernel_source(traced: Any) -> str | None:
    """The user's line that calls the first Pallas/Mosaic kernel of the traced program."""
    from oomkb.diagnostics.program import user_frame

    def walk(jaxpr: Any, depth: int = 0):
        if depth > 20:
            return None
        for eqn in getattr(jaxpr, "eqns", []):
            if eqn.primitive.name in ("pallas_call", "tpu_custom_call", "mosaic"):
                try:
                    frames = eqn.source_info.traceback.frames
                except AttributeError:
                    return None
                return user_frame((f.file_name, f.line_num, f.function_name) for f in frames)
            for value in eqn.params.values():
                inner = getattr(value, "jaxpr", value)
                if hasattr(inner, "eqns"):
                    found = walk(inner, depth + 1)
                    if found:
                        return found
        return None

    try:
        return walk(traced.jaxpr.jaxpr)
    except Exception:  # the jaxpr is internal API: a source line is a bonus, never a failure
        return None


def vmem_report(text: str, parsed: ParsedError, gen: tpu.Generation, traced: Any) -> VmemReport:
    scoped = re.search(r"Scoped allocation with size", text) is not None
    capacity = gen.vmem_bytes or 0
    if scoped:
        used = parsed.requested_bytes or parsed.used_bytes or 0
        limit = parsed.available_bytes
        over = parsed.exceeded_by_bytes or (used - (limit or 0))
        kind = "scoped_limit"
    else:
        used = parsed.used_bytes or parsed.requested_bytes or 0
        limit = None
        capacity = parsed.available_bytes or capacity
        over = parsed.exceeded_by_bytes or (used - capacity)
        kind = "capacity"
    op_name = _OP_NAME.search(text)
    kernel = op_name.group(1) if op_name else None
    if kernel is None and parsed.instruction:
        kernel = parsed.instruction.lstrip("%")
    windows, source = _vmem_windows(text), "compiler"
    if not windows:
        windows, source = _kernel_windows(traced), "block_specs"
    return VmemReport(
        kind=kind, used_bytes=used, limit_bytes=limit, capacity_bytes=capacity,
        default_limit_bytes=gen.scoped_vmem_default_bytes, over_by_bytes=max(over, 0),
        kernel=kernel, source=_kernel_source(traced), windows=windows,
        windows_source=source if windows else None,
    )


def vmem_summary(vmem: VmemReport) -> str:
    """One line: which VMEM bound the kernel ran into, and by how much."""
    kernel = f"kernel {vmem.kernel}" if vmem.kernel else "a kernel"
    where = f" (called at {vmem.source})" if vmem.source else ""
    if vmem.kind == "scoped_limit":
        return (f"VMEM: {kernel}{where} needs {format_bytes(vmem.used_bytes)} of scoped VMEM, over "
                f"the {format_bytes(vmem.limit_bytes or 0)} scoped limit by "
                f"{format_bytes(vmem.over_by_bytes)}; the core has "
                f"{format_bytes(vmem.capacity_bytes)} of VMEM, so a raised limit can help")
    return (f"VMEM: {kernel}{where} needs {format_bytes(vmem.used_bytes)}, more than the core's "
            f"{format_bytes(vmem.capacity_bytes)} of physical VMEM (over by "
            f"{format_bytes(vmem.over_by_bytes)}); no limit can help, smaller blocks can")
