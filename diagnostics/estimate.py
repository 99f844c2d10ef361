"""How much TPU HBM a JAX program needs, measured by the real XLA:TPU compiler without a TPU.

The program is compiled deviceless for the target (``v5e``, ``v6e``, ...) and the compiler's own
figures are reported per device: argument, output, temp, alias and generated-code bytes,
``total_bytes`` (argument + output + temp + generated code - alias, as ``memory_analysis()`` gives
them), the HBM capacity and the headroom. XLA's dumps of the same compile, read through XProf's
Memory Viewer converter, name the biggest buffers live at the peak (padded and unpadded size,
layout, op, JAX op name, the user's source line). On top of that come the padding waste, the
measured saving of donating the arguments that match outputs (a second compile), host callbacks
(``jax.debug.print``) and arguments replicated on every device of a multi-device target. When the
compile fails with an HBM OOM, the report still comes back with ``fits: false``, the parsed error
and the buffers from the dump.

Two ways in:

* :func:`estimate` / :func:`estimate_factory` compile **in this process** (a notebook's closures
  cannot always be sent to another process). Deviceless compiles do not touch any device, and
  libtpu is loaded with ``ALLOW_MULTIPLE_LIBTPU_LOAD`` so they coexist with other processes.
* :func:`estimate_program` takes ``FILE.py:FACTORY`` and runs everything in a sandboxed child
  process with a timeout: the route for the CLI and the HTTP service, where a user's program must
  not be able to hang or crash the caller.
"""

from __future__ import annotations

import inspect
import math
import re
import shutil
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from oomkb.diagnostics import tpu
from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.parse import ParsedError, parse_error
from oomkb.diagnostics import program as _program
from oomkb.diagnostics.program import FactoryError, resolve_program, user_location
from oomkb.diagnostics.program import callable_name as _callable_name
from oomkb.diagnostics.program import factory_label as _factory_label
from oomkb.diagnostics.roles import assign_roles, origin_op_names, roles_at_peak
from oomkb.diagnostics.sandbox import Limits, job_value, run_job
from oomkb.diagnostics.timeline import Timeline, label_timeline, read_timeline
from oomkb.units import MIB, ByteCount, format_bytes

__all__ = [
    "BufferInfo",
    "CompileError",
    "DonationCandidate",
    "DonationReport",
    "EstimateReport",
    "HostCallback",
    "PaddingItem",
    "PaddingReport",
    "ReplicatedArgument",
    "TargetInfo",
    "TraceError",
    "estimate",
    "estimate_factory",
    "estimate_program",
]


# ---------------------------------------------------------------------------------------------
# Errors


class TraceError(DiagnosticsError):
    """The function could not be traced by JAX (not a JAX function, wrong arguments, ...)."""


class CompileError(DiagnosticsError):
    """XLA:TPU rejected the program for a reason other than running out of memory."""


# ---------------------------------------------------------------------------------------------
# The report


class TargetInfo(BaseModel):
    """The TPU the estimate is for; every byte figure in the report is per device."""

    generation: str
    topology: str
    hbm_bytes: ByteCount = Field(description="HBM per device, as the compiler counts it")
    devices: int = Field(description="devices in the topology")
    devices_used: int = Field(description="devices the program was compiled for")
    device_kind: str
    libtpu_version: str


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


# ---------------------------------------------------------------------------------------------
# Public entry points


def estimate(
    fn: Callable[..., Any],
    *args: Any,
    target: str = "v5e",
    topology: str | None = None,
    donation_check: bool = True,
    top_n: int = 10,
    timeline: bool = False,
    **kwargs: Any,
) -> EstimateReport:
    """Estimate ``fn(*args, **kwargs)`` on a TPU ``target``, compiling in this process.

    ``args`` may be arrays or ``jax.ShapeDtypeStruct`` (arrays are only read for shape and
    dtype). Arguments without a TPU sharding go on one device; to shard, build
    ``ShapeDtypeStruct(..., sharding=NamedSharding(mesh, ...))`` from :func:`estimate_factory`'s
    ``mesh``. Keyword arguments other than the ones named here are passed to ``fn``.
    """
    tpu.prepare_in_process()
    spec = tpu.resolve_target(target, topology)
    devices = tpu.topology_devices(spec)
    return _estimate_call(fn, tuple(args), dict(kwargs), spec, devices, None,
                          donation_check=donation_check, top_n=top_n, timeline=timeline)


def estimate_factory(
    factory: Callable[..., Any],
    *,
    target: str = "v5e",
    topology: str | None = None,
    donation_check: bool = True,
    top_n: int = 10,
    timeline: bool = False,
) -> EstimateReport:
    """Call ``factory`` (the program contract: returns ``(fn, args[, kwargs])``) and estimate the result.

    A factory with a ``mesh`` parameter gets a 1-D ``jax.sharding.Mesh`` over the target
    topology's devices (axis name ``"data"``); one with ``devices`` gets the list of devices.
    Arguments it leaves without a sharding are then replicated over the mesh; a factory without
    either parameter has everything placed on one device. Compiles in this process.
    """
    tpu.prepare_in_process()
    spec = tpu.resolve_target(target, topology)
    devices = tpu.topology_devices(spec)
    fn, args, kwargs, mesh = _call_factory(factory, devices)
    return _estimate_call(fn, args, kwargs, spec, devices, mesh,
                          donation_check=donation_check, top_n=top_n, timeline=timeline)


def estimate_program(
    program: str,
    *,
    target: str = "v5e",
    topology: str | None = None,
    timeout_s: float = 300.0,
    donation_check: bool = False,
    top_n: int = 10,
    timeline: bool = False,
    limits: Limits | None = None,
    isolate: bool = False,
    python: str | None = None,
    paths: Sequence[str] = (),
) -> EstimateReport:
    """Estimate ``FILE.py:FACTORY`` in a sandboxed child process (the CLI/HTTP route).

    ``python`` runs it in the user's own interpreter (their environment's packages), ``paths``
    go first on its import path.

    The target and the file are checked here first, so the common mistakes fail fast; everything
    that runs the user's code happens in the child, within ``timeout_s``. ``isolate=True`` runs
    the child in the bubblewrap sandbox (see :func:`diagnostics.sandbox.run_job`): it sees the
    program's folder read-only and nothing else of the machine's files.
    """
    spec = tpu.resolve_target(target, topology)
    program_spec = resolve_program(program)
    what = f"the estimate of {program_spec.path.name}:{program_spec.name}"
    result = run_job(
        "estimate",
        {
            "program": str(program_spec),
            "generation": spec.generation,
            "topology": spec.topology,
            "donation_check": donation_check,
            "top_n": top_n,
            "timeline": timeline,
        },
        timeout_s=timeout_s,
        limits=limits,
        what=what,
        isolate=isolate,
        read_only=[program_spec.path.parent, *filter(None, [_program.project_root(program_spec.path)])],
        home_files=[tpu.hbm_cache_path()],
        python=python,
        sys_path=paths,
    )
    return job_value(result, EstimateReport, what)


def estimate_job(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Sandbox job: set libtpu's environment, load the factory and estimate it (child side)."""
    import os

    os.environ.update(tpu.child_environment(Path(payload["workdir"]) / "tpu_logs"))
    import jax  # noqa: F401 - only now, with libtpu's variables in place

    factory = _program.load_factory(str(payload["program"]))
    report = estimate_factory(
        factory,
        target=str(payload["generation"]),
        topology=str(payload["topology"]),
        donation_check=bool(payload.get("donation_check", True)),
        top_n=int(payload.get("top_n", 10)),
        timeline=bool(payload.get("timeline", False)),
    )
    return report.model_dump(mode="json")


# ---------------------------------------------------------------------------------------------
# Factories and arguments


def _call_factory(factory: Callable[..., Any], devices: list[Any],
                  kwargs: Mapping[str, Any] | None = None) -> _program.Program:
    label = _factory_label(factory)
    produced, mesh = _program.call_factory(factory, devices=devices, kwargs=kwargs, label=label)
    return _program.unpack_program(produced, label, mesh)


def _is_tpu_sharding(sharding: Any) -> bool:
    try:
        return all(d.platform == "tpu" for d in sharding.device_set)
    except AttributeError:
        return False


def _as_spec(leaf: Any, default_sharding: Any) -> Any:
    """An abstract stand-in for an argument leaf; non-array leaves are returned unchanged."""
    import jax
    import numpy as np

    if isinstance(leaf, (bool, int, float, complex)) and not isinstance(leaf, np.generic):
        dtype = jax.numpy.result_type(leaf)
        return jax.ShapeDtypeStruct((), dtype, weak_type=True, sharding=default_sharding)
    shape = getattr(leaf, "shape", None)
    dtype = getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        return leaf
    sharding = getattr(leaf, "sharding", None)
    if sharding is None or not _is_tpu_sharding(sharding):
        sharding = default_sharding
    return jax.ShapeDtypeStruct(
        tuple(shape), dtype, weak_type=bool(getattr(leaf, "weak_type", False)), sharding=sharding
    )


def _logical_bytes(spec: Any) -> int:
    import numpy as np

    dtype = np.dtype(spec.dtype)
    bits = getattr(dtype, "itemsize", 1) * 8
    if dtype.name in ("int4", "uint4", "float4_e2m1fn"):
        bits = 4
    return (math.prod(spec.shape) * bits + 7) // 8


_XLA_DTYPES = {
    "bool": "pred", "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
    "int4": "s4", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
    "uint4": "u4", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "complex64": "c64", "complex128": "c128",
}


def _shape_text(spec: Any) -> str:
    """``f32[512,2048]``: the shape as XLA spells it (without a layout)."""
    import numpy as np

    dtype = np.dtype(spec.dtype).name
    return f"{_XLA_DTYPES.get(dtype, dtype)}[{','.join(str(d) for d in spec.shape)}]"


def _argument_names(fn: Any, count: int) -> list[str]:
    target = getattr(fn, "__wrapped__", fn)
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(count):
        if i < len(params) and params[i].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
        ):
            names.append(params[i].name)
        else:
            names.append(f"args[{i}]")
    return names


def _leaf_path(path: Sequence[Any], arg_names: list[str]) -> str:
    """``p['w1']`` for the leaf at ``path`` inside ``((args...), {kwargs})``."""
    import jax

    if not path:
        return "?"
    head, rest = path[0], path[1:]
    if getattr(head, "idx", None) == 0 and rest:
        index = rest[0].idx
        base = arg_names[index] if index < len(arg_names) else f"args[{index}]"
        return base + jax.tree_util.keystr(tuple(rest[1:]))
    if rest:
        return str(getattr(rest[0], "key", rest[0])) + jax.tree_util.keystr(tuple(rest[1:]))
    return jax.tree_util.keystr(tuple(path))


# ---------------------------------------------------------------------------------------------
# Compiling


class _Compiled(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    traced: Any
    compiled: Any = None
    error_text: str | None = None
    seconds: float


def _is_jitted(fn: Any) -> bool:
    return callable(getattr(fn, "trace", None)) and callable(getattr(fn, "lower", None))


def _first_line(text: str, limit: int = 600) -> str:
    text = text.strip()
    line = text.split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _trace(jitted: Any, args: tuple, kwargs: dict, name: str, device: Any) -> Any:
    import jax

    try:
        with jax.default_device(device), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jitted.trace(*args, **kwargs)
    except (DiagnosticsError, MemoryError):
        raise
    except Exception as err:
        where = user_location(err)
        at = f" at {where}" if where else ""
        hint = ""
        static_value = (
            "not a valid JAX type" in str(err) or "as an abstract array" in str(err)
            or type(err).__name__ in ("TracerBoolConversionError", "ConcretizationTypeError",
                                      "TracerIntegerConversionError")
        )
        if static_value:
            hint = ("; every argument is traced, so pass arrays, jax.ShapeDtypeStruct or numbers "
                    "and bind flags, sizes and other static values with functools.partial")
        raise TraceError(
            f"JAX could not trace {name}: {type(err).__name__}: {_first_line(str(err))}{at}{hint}"
        ) from None


def _compile(traced: Any, device: Any, dump_dir: Path | None, name: str,
             extra_options: Mapping[str, Any] | None = None) -> _Compiled:
    import jax

    options = dict(extra_options) if extra_options else None
    if dump_dir is not None:
        options = {
            **(options or {}),
            "xla_dump_to": str(dump_dir),
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_as_proto": True,
        }
    started = time.perf_counter()
    try:
        with jax.default_device(device), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lowered = traced.lower()
    except Exception as err:
        where = user_location(err)
        at = f" at {where}" if where else ""
        raise TraceError(
            f"JAX could not lower {name} for TPU: {type(err).__name__}: "
            f"{_first_line(str(err))}{at}"
        ) from None
    try:
        compiled = lowered.compile(compiler_options=options)
    except Exception as err:
        text = str(err)
        if "RESOURCE_EXHAUSTED" in text or "Ran out of memory" in text:
            return _Compiled(traced=traced, error_text=text,
                             seconds=time.perf_counter() - started)
        raise CompileError(f"XLA:TPU could not compile {name}: {_first_line(text)}") from None
    return _Compiled(traced=traced, compiled=compiled, seconds=time.perf_counter() - started)


def _memory_totals(compiled: Any) -> dict[str, int]:
    stats = compiled.memory_analysis()
    return {
        "argument_bytes": int(stats.argument_size_in_bytes),
        "output_bytes": int(stats.output_size_in_bytes),
        "temp_bytes": int(stats.temp_size_in_bytes),
        "alias_bytes": int(stats.alias_size_in_bytes),
        "generated_code_bytes": int(stats.generated_code_size_in_bytes),
    }


def _total(figures: Mapping[str, int]) -> int:
    return (figures["argument_bytes"] + figures["output_bytes"] + figures["temp_bytes"]
            + figures["generated_code_bytes"] - figures["alias_bytes"])


# ---------------------------------------------------------------------------------------------
# Reading XLA's dumps


_ALLOCATION = re.compile(r"^allocation \d+: size (\d+)(.*):\s*$", re.MULTILINE)


def _dump_file(dump_dir: Path, suffix: str) -> Path | None:
    files = sorted(dump_dir.glob(f"*{suffix}"))
    return files[-1] if files else None


def _totals_from_buffer_assignment(dump_dir: Path) -> dict[str, int] | None:
    """Argument/output/temp/alias bytes in HBM from ``*buffer-assignment.txt`` (no code size)."""
    path = _dump_file(dump_dir, "after_optimizations-buffer-assignment.txt")
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


def _memory_viewer(dump_dir: Path) -> dict[str, Any] | None:
    """XProf's Memory Viewer data for the dumped module (its own JSON), or ``None``."""
    import json

    proto = _dump_file(dump_dir, "after_optimizations.hlo.pb")
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




def _mib_to_bytes(value: Any) -> int:
    return int(round(float(value or 0) * MIB))


_KINDS = {"Parameter": "argument", "Output": "output", "Temporary": "temp"}


def _buffers_at_peak(viewer: Mapping[str, Any]) -> list[BufferInfo]:
    buffers = []
    for item in viewer.get("maxHeap") or []:
        if int(item.get("logicalBufferId", -1)) < 0:
            continue  # the viewer's lump of small buffers
        size = _mib_to_bytes(item.get("logicalBufferSizeMib"))
        unpadded = _mib_to_bytes(item.get("unpaddedShapeMib", item.get("logicalBufferSizeMib")))
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


# ---------------------------------------------------------------------------------------------
# Host callbacks, from the scheduled HLO text

_FILE_NAME = re.compile(r'^(\d+) "(.*)"$')
_FILE_LOCATION = re.compile(r"^(\d+) \{file_name_id=(\d+) .*?\bline=(\d+)")
_STACK_FRAME = re.compile(r"^(\d+) \{file_location_id=(\d+)")
_HOST_SEND = re.compile(r"=\s*\S.*?\bsend\(.*is_host_transfer=true")
_METADATA = re.compile(r"metadata=\{([^}]*)\}")


def _stack_frames(hlo_text: str) -> dict[int, str]:
    """``stack_frame_id -> file:line`` from the tables at the top of an HLO module's text."""
    files: dict[int, str] = {}
    locations: dict[int, str] = {}
    frames: dict[int, str] = {}
    section = None
    for line in hlo_text.splitlines():
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = stripped
            continue
        if not stripped:
            continue
        if section == "FileNames" and (m := _FILE_NAME.match(stripped)):
            files[int(m.group(1))] = m.group(2)
        elif section == "FileLocations" and (m := _FILE_LOCATION.match(stripped)):
            locations[int(m.group(1))] = f"{files.get(int(m.group(2)), '?')}:{m.group(3)}"
        elif section == "StackFrames" and (m := _STACK_FRAME.match(stripped)):
            frames[int(m.group(1))] = locations.get(int(m.group(2)), "?")
        elif section and not stripped[0].isdigit():
            section = None
            if stripped.startswith(("%", "ENTRY")):
                break
    return frames


def _metadata_field(metadata: str, key: str) -> str | None:
    m = re.search(rf'\b{key}=("([^"]*)"|(\S+))', metadata)
    if not m:
        return None
    return m.group(2) if m.group(2) is not None else m.group(3)


def _host_callbacks(hlo_text: str) -> list[HostCallback]:
    frames = _stack_frames(hlo_text)
    seen: set[tuple[str, str | None, str | None]] = set()
    found = []
    for line in hlo_text.splitlines():
        if not _HOST_SEND.search(line):
            continue
        meta_match = _METADATA.search(line)
        meta = meta_match.group(1) if meta_match else ""
        kind = _metadata_field(meta, "op_type") or "host_transfer"
        op_name = _metadata_field(meta, "op_name")
        source = None
        if (frame := _metadata_field(meta, "stack_frame_id")) and frame.isdigit():
            source = frames.get(int(frame))
        elif (file := _metadata_field(meta, "source_file")):
            source = f"{file}:{_metadata_field(meta, 'source_line') or '?'}"
        key = (kind, source, op_name)
        if key not in seen:
            seen.add(key)
            found.append(HostCallback(kind=kind, source=source, op_name=op_name))
    return found


# ---------------------------------------------------------------------------------------------
# Donation and replication


def _shard_bytes(aval: Any, sharding: Any) -> int:
    """Logical bytes of one device's shard of ``aval`` under ``sharding`` (all of it when None)."""
    if sharding is None or not hasattr(sharding, "shard_shape") or not aval.shape:
        return _logical_bytes(aval)
    try:
        shape = tuple(sharding.shard_shape(tuple(aval.shape)))
    except (ValueError, TypeError):
        return _logical_bytes(aval)
    return _logical_bytes(type("Shard", (), {"shape": shape, "dtype": aval.dtype})())


def _donation_plan(traced: Any, arg_names: list[str], compiled: Any = None):
    """Already-donated arguments, and candidates: undonated arguments matching an output.

    Each output can take the buffer of one input of the same shape and dtype; donated inputs
    claim theirs first, then the remaining inputs are matched in order. A candidate's bytes are
    per device (its leaves' shards under the compiled input shardings), like every figure.
    """
    import jax
    import numpy as np

    info_leaves = jax.tree_util.tree_flatten_with_path(
        traced.args_info, is_leaf=lambda x: hasattr(x, "donated") and hasattr(x, "_aval")
    )[0]
    shardings = jax.tree_util.tree_leaves(compiled.input_shardings) if compiled is not None else []
    if len(shardings) != len(info_leaves):
        shardings = [None] * len(info_leaves)
    outputs = Counter(
        (tuple(o.shape), np.dtype(o.dtype).name)
        for o in jax.tree_util.tree_leaves(traced.out_info)
        if hasattr(o, "shape")
    )
    leaves = []
    for (path, info), sharding in zip(info_leaves, shardings):
        key = (tuple(info._aval.shape), np.dtype(info._aval.dtype).name)
        leaves.append((path, info, key, _arg_key(path), sharding))
    donated = {where for _, info, _, where, _ in leaves if info.donated}
    for _, info, key, _, _ in leaves:
        if info.donated and outputs[key] > 0:
            outputs[key] -= 1
    candidates: dict[tuple[str, Any], DonationCandidate] = {}
    for path, info, key, where, sharding in leaves:
        if where in donated or outputs[key] <= 0:
            continue
        outputs[key] -= 1
        kind, index = where
        cand = candidates.setdefault(where, DonationCandidate(
            argument=_arg_label(where, arg_names),
            argnum=index if kind == "pos" else None,
            argname=index if kind == "kw" else None,
            matching_bytes=0,
        ))
        cand.matching_bytes += _shard_bytes(info._aval, sharding)
        cand.leaves.append(_leaf_path(path, arg_names))
    already = [_arg_label(where, arg_names) for where in sorted(donated, key=str)]
    return donated, list(candidates.values()), already


def _arg_label(where: tuple[str, Any], arg_names: list[str]) -> str:
    kind, index = where
    if kind == "kw":
        return str(index)
    return arg_names[index] if index < len(arg_names) else f"args[{index}]"


def _arg_key(path: Sequence[Any]) -> tuple[str, Any]:
    """("pos", i) or ("kw", name) for a leaf path inside ``((args...), {kwargs})``."""
    if getattr(path[0], "idx", None) == 0:
        return ("pos", path[1].idx)
    return ("kw", getattr(path[1], "key", str(path[1])))


def _measure_donation(
    fn: Any, args: tuple, kwargs: dict, traced: Any, baseline_total: int,
    arg_names: list[str], device: Any, name: str, compiled: Any = None,
) -> tuple[DonationReport, list[str]]:
    import jax

    donated, candidates, already = _donation_plan(traced, arg_names, compiled)
    report = DonationReport(candidates=candidates, already_donated=already,
                            total_without_donation_bytes=baseline_total)
    if not candidates:
        report.checked = True
        report.total_with_donation_bytes = baseline_total
        return report, []
    positions = sorted({k[1] for k in donated if k[0] == "pos"}
                       | {c.argnum for c in candidates if c.argnum is not None})
    names = sorted({k[1] for k in donated if k[0] == "kw"}
                   | {c.argname for c in candidates if c.argname is not None})
    try:
        variant = jax.jit(fn, donate_argnums=tuple(positions), donate_argnames=tuple(names))
        outcome = _compile(_trace(variant, args, kwargs, name, device), device, None, name)
    except DiagnosticsError as err:
        return report, [f"the donation check could not compile the variant: {err}"]
    if outcome.compiled is None:
        return report, ["the donation check's compile ran out of memory"]
    with_total = _total(_memory_totals(outcome.compiled))
    report.checked = True
    report.total_with_donation_bytes = with_total
    report.savings_bytes = baseline_total - with_total
    if report.savings_bytes > 0:
        parts = []
        if positions:
            parts.append(f"donate_argnums={tuple(positions)!r}")
        if names:
            parts.append(f"donate_argnames={tuple(names)!r}")
        report.suggestion = f"jax.jit({name}, {', '.join(parts)})"
    return report, []


def _replicated(compiled: Any, specs: tuple, arg_names: list[str]) -> list[ReplicatedArgument]:
    import jax

    shardings = compiled.input_shardings if compiled is not None else None
    spec_leaves = jax.tree_util.tree_flatten_with_path(specs)[0]
    sharding_leaves = jax.tree_util.tree_leaves(shardings) if shardings is not None else []
    array_leaves = [(p, s) for p, s in spec_leaves if isinstance(s, jax.ShapeDtypeStruct)]
    found = []
    for i, (path, spec) in enumerate(array_leaves):
        sharding = sharding_leaves[i] if i < len(sharding_leaves) else spec.sharding
        if sharding is None or len(spec.shape) == 0:
            continue
        n = len(sharding.device_set)
        if n > 1 and sharding.is_fully_replicated:
            found.append(ReplicatedArgument(
                path=_leaf_path(path, arg_names), bytes=_logical_bytes(spec),
                shape=_shape_text(spec), devices=n,
            ))
    found.sort(key=lambda r: r.bytes, reverse=True)
    return found


# ---------------------------------------------------------------------------------------------
# The estimate itself


def _estimate_call(
    fn: Any, args: tuple, kwargs: dict, spec: tpu.TargetSpec, devices: list[Any], mesh: Any,
    *, donation_check: bool, top_n: int, timeline: bool = False,
) -> EstimateReport:
    import jax
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    name = _callable_name(fn)
    if not callable(fn):
        raise FactoryError(f"{name} is not a function")
    device = devices[0]
    if mesh is not None:
        default_sharding = NamedSharding(mesh, PartitionSpec())
    else:
        default_sharding = SingleDeviceSharding(device)
    specs = jax.tree_util.tree_map(lambda leaf: _as_spec(leaf, default_sharding), (args, kwargs))
    spec_args, spec_kwargs = specs
    arg_names = _argument_names(fn, len(args))

    hbm_bytes = tpu.hbm_capacity_bytes(spec, device)
    jitted = fn if _is_jitted(fn) else jax.jit(fn)
    log = tpu.LibtpuLog()
    log.mark()
    dump_dir = Path(tempfile.mkdtemp(prefix="oomkb-xla-dump-"))
    try:
        traced = _trace(jitted, spec_args, spec_kwargs, name, device)
        outcome = _compile(traced, device, dump_dir, name)
        viewer = _memory_viewer(dump_dir)
        report_warnings: list[str] = []
        if outcome.compiled is not None:
            figures = _memory_totals(outcome.compiled)
            hlo_text = outcome.compiled.as_text()
            devices_used = len(_device_set(outcome.compiled) or {device})
        else:
            figures = _totals_from_buffer_assignment(dump_dir) or dict.fromkeys(
                ("argument_bytes", "output_bytes", "temp_bytes", "alias_bytes",
                 "generated_code_bytes"), 0)
            space = _oom_space(outcome.error_text)
            report_warnings.append(
                f"the compile ran out of {space.upper()}: HBM argument/output/temp bytes come "
                "from the compiler's buffer assignment at the failure (0 where it wrote none), "
                "code size is unknown (0)"
            )
            hlo_path = _dump_file(dump_dir, "after_optimizations.txt") or _dump_file(
                dump_dir, "oom_intermediate_module.txt")
            hlo_text = hlo_path.read_text("utf-8", "replace") if hlo_path else ""
            devices_used = len(_spec_device_set(specs) or {device})
        buffers = _buffers_at_peak(viewer) if viewer else []
        origins = origin_op_names(hlo_text)
        for buffer, role in zip(buffers, assign_roles(buffers, origins=origins)):
            buffer.role = role
        lifetimes = None
        if timeline:
            lifetimes = read_timeline(dump_dir)
            if lifetimes is None:
                report_warnings.append("XLA wrote no live ranges for this compile: no timeline")
            else:
                label_timeline(lifetimes, buffers, origins)
        if viewer is None:
            report_warnings.append("XProf's Memory Viewer could not read the dump: no buffer list")
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)

    peak_heap = _mib_to_bytes(viewer.get("peakHeapMib")) if viewer else None
    peak_by_role = roles_at_peak(((b.bytes, b.role) for b in buffers), peak_heap) if viewer else None
    total = _total(figures)
    padding_items = [
        PaddingItem(bytes=b.bytes, unpadded_bytes=b.unpadded_bytes, padding_bytes=b.padding_bytes,
                    shape=b.shape, kind=b.kind, op_name=b.op_name, source=b.source)
        for b in buffers if b.padding_bytes > 0
    ]
    padding = PaddingReport(waste_bytes=sum(p.padding_bytes for p in padding_items),
                            items=padding_items)
    donation = DonationReport()
    if outcome.compiled is not None and donation_check:
        donation, more = _measure_donation(jitted, spec_args, spec_kwargs, traced, total,
                                           arg_names, device, name, outcome.compiled)
        report_warnings.extend(more)
    elif outcome.compiled is not None:
        _, candidates, already = _donation_plan(traced, arg_names, outcome.compiled)
        donation = DonationReport(candidates=candidates, already_donated=already,
                                  total_without_donation_bytes=total)
    replicated = _replicated(outcome.compiled, specs, arg_names) if devices_used > 1 else []
    callbacks = _host_callbacks(hlo_text)

    compile_error = compile_error_text = compile_error_log = None
    oom_space = vmem = None
    if outcome.error_text is not None:
        compile_error_text = outcome.error_text.strip()[:20000]
        compile_error = parse_error(compile_error_text)
        compile_error_log = log.oom_report()
        oom_space = _oom_space(outcome.error_text, compile_error)
        if oom_space == "vmem":
            vmem = _vmem_report(outcome.error_text + "\n" + (compile_error_log or ""),
                                compile_error, tpu.generations()[spec.generation], traced)

    decided = verdict(outcome.compiled is not None, total, hbm_bytes, peak_heap, oom_space,
                      compile_error)
    findings = _findings(decided, total, padding, donation, callbacks, replicated, oom_space, vmem)
    gen = tpu.generations()[spec.generation]
    return EstimateReport(
        function=name,
        target=TargetInfo(
            generation=spec.generation, topology=spec.topology, hbm_bytes=hbm_bytes,
            devices=len(devices), devices_used=devices_used, device_kind=gen.device_kind,
            libtpu_version=tpu.libtpu_version(),
        ),
        fits=decided.fits,
        total_bytes=total,
        headroom_bytes=decided.headroom_bytes,
        peak_heap_bytes=peak_heap,
        verdict_basis=decided.basis,
        verdict_bytes=decided.need_bytes,
        verdict_capacity_bytes=decided.capacity_bytes,
        verdict_space=decided.memory_space,
        peak_by_role=peak_by_role,
        timeline=lifetimes,
        top_buffers=buffers[:top_n],
        padding=padding,
        donation=donation,
        host_callbacks=callbacks,
        replicated_arguments=replicated,
        compile_error=compile_error,
        compile_error_text=compile_error_text,
        compile_error_log=compile_error_log,
        oom_space=oom_space,
        vmem=vmem,
        findings=findings,
        warnings=report_warnings,
        compile_seconds=round(outcome.seconds, 3),
        **figures,
    )


def _device_set(compiled: Any) -> set[Any]:
    import jax

    devices: set[Any] = set()
    for sharding in jax.tree_util.tree_leaves(compiled.input_shardings):
        devices |= set(sharding.device_set)
    for sharding in jax.tree_util.tree_leaves(compiled.output_shardings):
        devices |= set(sharding.device_set)
    return devices


def _spec_device_set(specs: Any) -> set[Any]:
    import jax

    devices: set[Any] = set()
    for leaf in jax.tree_util.tree_leaves(specs):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            devices |= set(sharding.device_set)
    return devices


def _findings(
    decided: Verdict, total: int, padding: PaddingReport, donation: DonationReport,
    callbacks: list[HostCallback], replicated: list[ReplicatedArgument],
    oom_space: str | None = None, vmem: VmemReport | None = None,
) -> list[str]:
    """Short factual notes on what the figures show (the assistant adds the remedies)."""
    notes = []
    if vmem is not None:
        notes.append(vmem_summary(vmem))
    elif oom_space not in (None, "hbm"):
        notes.append(f"the compile ran out of {oom_space.upper()}")
    need, capacity = decided.need_bytes, decided.capacity_bytes
    if decided.basis == "peak_heap_bytes":
        notes.append(f"fits: the compiler accepted it and its peak heap ({format_bytes(need)}) is within "
                     f"{format_bytes(capacity)} of HBM per device (the total counts buffers never live "
                     "together)")
    elif not decided.fits and decided.memory_space == "hbm" and need is not None and capacity \
            and need > capacity:
        notes.append(f"needs {format_bytes(need)} per device but the target has "
                     f"{format_bytes(capacity)}: over by {format_bytes(need - capacity)} "
                     f"({'the compiler' if decided.basis == 'compile_error' else decided.basis})")
    if padding.waste_bytes and padding.waste_bytes >= 0.05 * max(total, 1):
        notes.append(f"layout padding adds {format_bytes(padding.waste_bytes)} at the peak "
                     f"({100 * padding.waste_bytes / max(total, 1):.0f}% of the total)")
    if donation.savings_bytes > 0 and donation.suggestion:
        notes.append(f"donating {', '.join(c.argument for c in donation.candidates)} saves "
                     f"{format_bytes(donation.savings_bytes)}: {donation.suggestion}")
    if callbacks:
        where = ", ".join(f"{c.kind} at {c.source or '?'}" for c in callbacks[:5])
        notes.append(f"{len(callbacks)} host callback(s) in the compiled program: {where}")
    if replicated:
        size = sum(r.bytes for r in replicated)
        notes.append(f"{len(replicated)} argument(s) replicated on every device "
                     f"({format_bytes(size)} per device)")
    return notes


# ---------------------------------------------------------------------------------------------
# VMEM


def _oom_space(error_text: str, parsed: ParsedError | None = None) -> str:
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
                window_shape=_shape_text(type("W", (), {"shape": shape, "dtype": dtype})()),
                full_shape=_shape_text(block.array_aval), buffers=buffers,
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


def _vmem_report(text: str, parsed: ParsedError, gen: tpu.Generation, traced: Any) -> VmemReport:
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
