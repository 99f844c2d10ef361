"""The estimate's report: pydantic models shared by the CLI's --json, REST and the assistant."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from oomkb.diagnostics.parse import ParsedError
from oomkb.diagnostics.timeline import Timeline
from oomkb.units import ByteCount

__all__ = ["BufferInfo", "DonationCandidate", "DonationReport", "EstimateReport", "HostCallback", "PaddingItem", "PaddingReport", "ReplicatedArgument", "TargetInfo", "Verdict", "VmemReport", "VmemWindow", "verdict"]


class TargetInfo(BaseModel):
    """The TPU the estimate is for; every byte figure in the report is per device."""

    generation: str
    topology: str
    hbm_bytes: ByteCount = Field(description="HBM per device, as the compiler counts it")
    devices: int = Field(description="devices in the topology")
    devices_used: int = Field(description="devices the program was compiled for")
    device_kind: str
    libtpu_version: str
    jax_version: str | None = Field(None, description="the jax that traced and lowered the program "
                                    "(null in reports written before it was recorded)")


class BufferInfo(BaseModel):
    """One buffer live at the peak of HBM use."""

    bytes: ByteCount = Field(description="size in HBM, padding included")
    unpadded_bytes: ByteCount
    padding_bytes: ByteCount
    shape: str = Field(description="shape with the TPU layout, e.g. f32[129,1024]{1,0:T(8,128)}")
    kind: str = Field(description="argument, output, temp, ...")
    op: str | None = Field(None, description="HLO opcode (fusion, parameter, ...)")
    op_name: str | None = Field(None, description="JAX op name, or the argument's path")
    instruction: str | None = None
    source: str | None = Field(None, description="the user's file:line")
    role: str | None = Field(None, description="parameter, optimizer_state, gradient, activation, "
                             "temporary, output or unknown (see diagnostics/roles.yaml)")


class PaddingItem(BaseModel):
    """A buffer at the peak whose TPU layout pads it."""

    bytes: ByteCount
    unpadded_bytes: ByteCount
    padding_bytes: ByteCount
    shape: str
    kind: str
    op_name: str | None = None
    source: str | None = None


class PaddingReport(BaseModel):
    """Padding at the peak: the bytes layouts add beyond the logical shapes."""

    waste_bytes: ByteCount = Field(description="sum of padding over the buffers live at the peak")
    items: list[PaddingItem] = Field(default_factory=list)


class DonationCandidate(BaseModel):
    """An argument that is not donated although an output of the same shape and dtype exists."""

    argument: str
    argnum: int | None = None
    argname: str | None = None
    matching_bytes: ByteCount = Field(
        description="logical bytes per device of its leaves that match outputs (a leaf's shard on "
        "one device, like every other figure of the report)"
    )
    leaves: list[str] = Field(default_factory=list)


class DonationReport(BaseModel):
    """Donation measured by compiling again with the candidates donated."""

    checked: bool = False
    savings_bytes: ByteCount = 0
    candidates: list[DonationCandidate] = Field(default_factory=list)
    already_donated: list[str] = Field(default_factory=list)
    total_without_donation_bytes: ByteCount | None = None
    total_with_donation_bytes: ByteCount | None = None
    suggestion: str | None = None


class HostCallback(BaseModel):
    """A transfer to the host inside the compiled program (``jax.debug.print`` and friends)."""

    kind: str = Field(description="debug_print, debug_callback, io_callback, pure_callback, ...")
    source: str | None = None
    op_name: str | None = None


class ReplicatedArgument(BaseModel):
    """An argument stored whole on every device of a multi-device target."""

    path: str
    bytes: ByteCount = Field(description="its global (= per-device) logical size")
    shape: str
    devices: int


class VmemWindow(BaseModel):
    """One of a kernel's VMEM windows, as the compiler lists it when VMEM runs out."""

    bytes: int = Field(description="VMEM the window takes, all its buffers included")
    operand: str = Field(description="'input 0', 'output 0', ...")
    window_shape: str
    full_shape: str | None = None
    buffers: int = Field(description="buffering levels (2: double-buffered)")


class VmemReport(BaseModel):
    """A compile that ran out of VMEM (a Pallas/Mosaic kernel's windows and scratch).

    ``scoped_limit``: an instruction's scoped allocation exceeded the scoped VMEM limit, which can
    be raised up to the physical VMEM. ``capacity``: the physical VMEM of the core is exceeded; no
    limit helps, smaller blocks do.
    """

    kind: Literal["scoped_limit", "capacity"]
    used_bytes: int = Field(description="VMEM the kernel asked for")
    limit_bytes: int | None = Field(None, description="the scoped limit it ran into")
    capacity_bytes: int = Field(description="physical VMEM per core")
    default_limit_bytes: int | None = Field(None, description="the generation's default scoped limit")
    over_by_bytes: int = Field(description="used_bytes - (limit_bytes or capacity_bytes), > 0")
    kernel: str | None = Field(None, description="the kernel's JAX op name or HLO instruction")
    source: str | None = Field(None, description="the user's file:line that calls the kernel")
    windows: list[VmemWindow] = Field(default_factory=list)
    windows_source: Literal["compiler", "block_specs"] | None = Field(
        None, description="compiler: listed by the compiler (physical-capacity failures); "
        "block_specs: computed from the kernel's BlockSpecs (block shape x dtype x buffers), as "
        "the compiler lists no windows for a scoped-limit failure")


#: The one rule that decides ``fits`` (shown in every report as ``verdict_rule``).
VERDICT_RULE = (
    "A compile that runs out of memory never fits; the figure shown is the need the compiler "
    "stated in the memory space that ran out. A program the compiler accepts fits when its "
    "per-device total (arguments + outputs + temporaries + code - aliases) is within HBM; when "
    "that total is over HBM but the Memory Viewer's peak heap is within it, the peak heap decides "
    "(the total counts buffers that are never live together)."
)


class Verdict(BaseModel):
    """``fits`` and the figure that decided it, derived by :func:`verdict` from VERDICT_RULE."""

    fits: bool
    basis: Literal["total_bytes", "peak_heap_bytes", "compile_error"]
    need_bytes: int | None = Field(None, description="the deciding figure (per device)")
    capacity_bytes: int | None = Field(None, description="what it was compared with")
    headroom_bytes: int = Field(description="capacity - need; never positive when fits is false")
    memory_space: Literal["hbm", "vmem", "smem"] = "hbm"


def verdict(compiled: bool, total: int, hbm: int, peak_heap: int | None = None,
            oom_space: str | None = None, error: ParsedError | None = None) -> Verdict:
    """Apply VERDICT_RULE: the single place where an estimate's fits/headroom are decided."""
    if not compiled:
        space = oom_space if oom_space in ("hbm", "vmem", "smem") else "hbm"
        need = capacity = None
        if error is not None:
            need = error.used_bytes or error.requested_bytes
            capacity = error.available_bytes
        if space == "hbm" and need is None:
            need, capacity = total, hbm
        headroom = capacity - need if need is not None and capacity is not None else 0
        return Verdict(fits=False, basis="compile_error", need_bytes=need, capacity_bytes=capacity,
                       headroom_bytes=min(headroom, 0), memory_space=space)
    if total <= hbm or peak_heap is None or peak_heap > hbm:
        return Verdict(fits=total <= hbm, basis="total_bytes", need_bytes=total,
                       capacity_bytes=hbm, headroom_bytes=hbm - total)
    return Verdict(fits=True, basis="peak_heap_bytes", need_bytes=peak_heap, capacity_bytes=hbm,
                   headroom_bytes=hbm - peak_heap)


class EstimateReport(BaseModel):
    """Per-device HBM needs of one program on one TPU target (see the module docstring)."""

    function: str
    target: TargetInfo
    fits: bool
    argument_bytes: ByteCount
    output_bytes: ByteCount
    temp_bytes: ByteCount
    alias_bytes: ByteCount
    generated_code_bytes: ByteCount
    total_bytes: ByteCount = Field(description="argument + output + temp + generated code - alias")
    headroom_bytes: ByteCount = Field(
        description="capacity - the deciding figure (verdict_bytes): hbm_bytes - total_bytes in the "
        "usual case; never positive when fits is false")
    peak_heap_bytes: ByteCount | None = Field(None, description="the Memory Viewer's peak heap")
    timeline: Timeline | None = Field(
        None, description="every HBM buffer's live range over program order (estimate --timeline)")
    peak_by_role: dict[str, ByteCount] | None = Field(
        None, description="bytes live at the peak per role (parameter, optimizer_state, gradient, "
        "activation, temporary, output, unknown); they add up to peak_heap_bytes")
    verdict_basis: Literal["total_bytes", "peak_heap_bytes", "compile_error"] = Field(
        "total_bytes", description="which figure decided fits (verdict_rule)")
    verdict_bytes: ByteCount | None = Field(None, description="the deciding figure, per device")
    verdict_capacity_bytes: ByteCount | None = Field(None, description="what it was compared with")
    verdict_space: Literal["hbm", "vmem", "smem"] = Field("hbm", description="its memory space")
    verdict_rule: str = Field(VERDICT_RULE, description="the rule that derives fits")
    top_buffers: list[BufferInfo] = Field(default_factory=list)
    padding: PaddingReport
    donation: DonationReport
    host_callbacks: list[HostCallback] = Field(default_factory=list)
    replicated_arguments: list[ReplicatedArgument] = Field(default_factory=list)
    compile_error: ParsedError | None = None
    compile_error_text: str | None = None
    compile_error_log: str | None = Field(None, description="libtpu's long OOM report, if found")
    oom_space: Literal["hbm", "vmem", "smem"] | None = Field(
        None, description="the memory space a failing compile ran out of; null when it compiled")
    vmem: VmemReport | None = Field(None, description="set when oom_space is vmem")
    findings: list[str] = Field(
        default_factory=list, description="one-line facts worth acting on (over by, donation, ...)"
    )
    warnings: list[str] = Field(
        default_factory=list, description="caveats about the estimate itself"
    )
    compile_seconds: float
