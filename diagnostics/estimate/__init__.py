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

The package, one module per concept: :mod:`.report` (the report's models), :mod:`.arguments`
(the factory's arguments as specs, their names and sizes), :mod:`.compiling` (trace and compile
deviceless), :mod:`.dumps` (XLA's dumps through XProf's Memory Viewer converter), :mod:`.callbacks`
(host callbacks in the scheduled HLO), :mod:`.donation` (donation and replication), :mod:`.vmem`
(scoped VMEM failures); this module holds the entry points and the estimate itself.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from oomkb.diagnostics import program as _program, tpu
from oomkb.diagnostics.estimate.arguments import argument_names, as_spec, call_factory
from oomkb.diagnostics.estimate.callbacks import find_host_callbacks
from oomkb.diagnostics.estimate.compiling import compile_traced, is_jitted, memory_totals, total_of, trace
from oomkb.diagnostics.estimate.donation import donation_plan, find_replicated, measure_donation
from oomkb.diagnostics.estimate.dumps import (
    buffers_at_peak,
    dump_file,
    memory_viewer,
    mib_to_bytes,
    totals_from_buffer_assignment,
)
from oomkb.diagnostics.estimate.report import (
    DonationReport,
    EstimateReport,
    HostCallback,
    PaddingItem,
    PaddingReport,
    ReplicatedArgument,
    TargetInfo,
    Verdict,
    verdict,
    VmemReport,
)
from oomkb.diagnostics.estimate.vmem import oom_memory_space, vmem_report, vmem_summary
from oomkb.diagnostics.parse import parse_error
from oomkb.diagnostics.program import callable_name as _callable_name, FactoryError, resolve_program
from oomkb.diagnostics.roles import assign_roles, origin_op_names, roles_at_peak
from oomkb.diagnostics.sandbox import job_value, Limits, run_job
from oomkb.diagnostics.timeline import label_timeline, read_timeline
from oomkb.units import format_bytes

__all__ = ["estimate", "estimate_factory", "estimate_program", "report_findings"]


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
    fn, args, kwargs, mesh = call_factory(factory, devices)
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
    specs = jax.tree_util.tree_map(lambda leaf: as_spec(leaf, default_sharding), (args, kwargs))
    spec_args, spec_kwargs = specs
    arg_names = argument_names(fn, len(args))

    hbm_bytes = tpu.hbm_capacity_bytes(spec, device)
    jitted = fn if is_jitted(fn) else jax.jit(fn)
    log = tpu.LibtpuLog()
    log.mark()
    dump_dir = Path(tempfile.mkdtemp(prefix="oomkb-xla-dump-"))
    try:
        traced = trace(jitted, spec_args, spec_kwargs, name, device)
        outcome = compile_traced(traced, device, dump_dir, name)
        viewer = memory_viewer(dump_dir)
        report_warnings: list[str] = []
        if outcome.compiled is not None:
            figures = memory_totals(outcome.compiled)
            hlo_text = outcome.compiled.as_text()
            devices_used = len(_device_set(outcome.compiled) or {device})
        else:
            figures = totals_from_buffer_assignment(dump_dir) or dict.fromkeys(
                ("argument_bytes", "output_bytes", "temp_bytes", "alias_bytes",
                 "generated_code_bytes"), 0)
            space = oom_memory_space(outcome.error_text)
            report_warnings.append(
                f"the compile ran out of {space.upper()}: HBM argument/output/temp bytes come "
                "from the compiler's buffer assignment at the failure (0 where it wrote none), "
                "code size is unknown (0)"
            )
            hlo_path = dump_file(dump_dir, "after_optimizations.txt") or dump_file(
                dump_dir, "oom_intermediate_module.txt")
            hlo_text = hlo_path.read_text("utf-8", "replace") if hlo_path else ""
            devices_used = len(_spec_device_set(specs) or {device})
        buffers = buffers_at_peak(viewer) if viewer else []
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

    peak_heap = mib_to_bytes(viewer.get("peakHeapMib")) if viewer else None
    peak_by_role = roles_at_peak(((b.bytes, b.role) for b in buffers), peak_heap) if viewer else None
    total = total_of(figures)
    padding_items = [
        PaddingItem(bytes=b.bytes, unpadded_bytes=b.unpadded_bytes, padding_bytes=b.padding_bytes,
                    shape=b.shape, kind=b.kind, op_name=b.op_name, source=b.source)
        for b in buffers if b.padding_bytes > 0
    ]
    padding = PaddingReport(waste_bytes=sum(p.padding_bytes for p in padding_items),
                            items=padding_items)
    donation = DonationReport()
    if outcome.compiled is not None and donation_check:
        donation, more = measure_donation(jitted, spec_args, spec_kwargs, traced, total,
                                           arg_names, device, name, outcome.compiled)
        report_warnings.extend(more)
    elif outcome.compiled is not None:
        _, candidates, already = donation_plan(traced, arg_names, outcome.compiled)
        donation = DonationReport(candidates=candidates, already_donated=already,
                                  total_without_donation_bytes=total)
    replicated = find_replicated(outcome.compiled, specs, arg_names) if devices_used > 1 else []
    callbacks = find_host_callbacks(hlo_text)

    compile_error = compile_error_text = compile_error_log = None
    oom_space = vmem = None
    if outcome.error_text is not None:
        compile_error_text = outcome.error_text.strip()[:20000]
        compile_error = parse_error(compile_error_text)
        compile_error_log = log.oom_report()
        oom_space = oom_memory_space(outcome.error_text, compile_error)
        if oom_space == "vmem":
            vmem = vmem_report(outcome.error_text + "\n" + (compile_error_log or ""),
                                compile_error, tpu.generations()[spec.generation], traced)

    decided = verdict(outcome.compiled is not None, total, hbm_bytes, peak_heap, oom_space,
                      compile_error)
    findings = report_findings(decided, total, padding, donation, callbacks, replicated, oom_space, vmem)
    gen = tpu.generations()[spec.generation]
    return EstimateReport(
        function=name,
        target=TargetInfo(
            generation=spec.generation, topology=spec.topology, hbm_bytes=hbm_bytes,
            devices=len(devices), devices_used=devices_used, device_kind=gen.device_kind,
            libtpu_version=tpu.libtpu_version(), jax_version=jax.__version__,
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


def report_findings(
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
