"""Evidence → facts: the flat, language-neutral dict the remedy catalogue's conditions read.

The names are the vocabulary declared in kb/catalogue/facts.yaml; this module is the one place
that computes them from a parsed error, an estimate report and a profile report.
"""

from __future__ import annotations

import math
from typing import Union

from oomkb.diagnostics.capture import CaptureReport
from oomkb.diagnostics.diff import DiffReport
from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.parse import ParsedError
from oomkb.diagnostics.plan import PlanReport
from oomkb.diagnostics.profile import ProfileReport
from oomkb.units import format_bytes

Fact = Union[int, float, str, bool, None]

_ERROR_FIELDS = (
    "category", "backend", "memory_space", "requested_bytes", "available_bytes", "used_bytes",
    "exceeded_by_bytes", "free_bytes", "tensorcore_bytes", "sparsecore_bytes", "shape",
    "instruction", "custom_call_target", "opcode", "largest_free_block_bytes", "error_code",
    "pool_limit_bytes", "pool_in_use_bytes", "total_allocation_bytes", "parameter_allocation_bytes",
    "maybe_live_out_allocation_bytes", "preallocated_temp_allocation_bytes", "remat_limit_bytes",
    "schedule_arguments_bytes", "schedule_limit_bytes",
    "remat_reduced_to_bytes",
)


def facts_from(
    error: ParsedError | None = None,
    report: EstimateReport | ProfileReport | CaptureReport | PlanReport | DiffReport | None = None,
) -> dict[str, Fact]:
    """All facts the evidence supports; a fact that is unknown is absent (never guessed)."""
    facts: dict[str, Fact] = {}
    if isinstance(report, DiffReport):  # what changed between two estimates; no estimate's own facts
        _diff_facts(report, facts)
        report = None
    if isinstance(report, PlanReport):
        vary = report.vary
        if vary is not None and vary.largest_fitting is not None:  # measured: the value that fits
            facts.update(vary_name=vary.name, vary_largest_fitting=vary.largest_fitting,
                         vary_compiles=vary.compiles)
        _choice_facts(report, facts)
        for fix in report.fixes:  # a scoped VMEM limit verified to compile beats one computed
            limit = (fix.setting or {}).get("vmem_limit_bytes")
            if fix.id == "raise_scoped_vmem_limit" and fix.verified and fix.fits and isinstance(limit, int):
                facts["vmem_limit_verified_bytes"] = limit
        report = report.baseline  # the plan's evidence is its baseline estimate; fixes are shown apart
    if isinstance(report, EstimateReport) and report.compile_error is not None and error is None:
        error = report.compile_error
    if isinstance(report, CaptureReport) and error is None:
        error = report.error
    if error is not None:
        _error_facts(error, facts)
    if isinstance(report, EstimateReport):
        _estimate_facts(report, facts)
    elif isinstance(report, ProfileReport):
        _profile_facts(report, facts)
    elif isinstance(report, CaptureReport):
        _capture_facts(report, facts)
    return {k: v for k, v in facts.items() if v is not None}


def _choice_facts(report: PlanReport, facts: dict[str, Fact]) -> None:
    """The best of the plan's --choose rows, measured: with --vary the choice whose largest
    fitting value is largest (the smaller total at it breaks a tie), else the fitting choice with
    the smallest total; and the others' figures, for the verdict to compare."""
    rows = report.choices
    searched = [r for r in rows if r.vary is not None]
    if searched:
        fitting = [r for r in searched if r.at_value is not None]
        if not fitting:
            return
        best = max(fitting, key=lambda r: (r.at_value, -(r.total_bytes or 0)))
        facts.update(choice_vary_name=best.vary.name, choice_best_largest=best.at_value,
                     choice_compiles=sum(r.vary.compiles for r in searched))
        others = [f"{r.name}={r.value}: {r.at_value if r.at_value is not None else '-'}"
                  for r in searched if r is not best]
    else:
        fitting = [r for r in rows if r.fits and r.total_bytes is not None]
        if not fitting:
            return
        best = min(fitting, key=lambda r: r.total_bytes)
        others = [f"{r.name}={r.value}: "
                  + (format_bytes(r.total_bytes) if r.total_bytes is not None else r.status)
                  for r in rows if r is not best]
    facts.update(choice_name=best.name, choice_best=best.value, choice_count=len(rows),
                 choice_setting=f"{best.name}={best.value}",
                 choice_best_total_bytes=best.total_bytes,
                 choice_others="; ".join(others) or None)


def _dims(shape: str | None) -> str | None:
    """An HLO shape's dimensions, dtype and layout aside: `bf16[4,32,4096,4096]{...}` -> `[4,32,4096,4096]`."""
    bare = _without_layout(shape)
    return bare[bare.index("["):] if bare and "[" in bare else None


def _error_facts(error: ParsedError, facts: dict[str, Fact]) -> None:
    for name in _ERROR_FIELDS:
        facts[name] = getattr(error, name)
    if error.allocations:
        biggest = max(error.allocations, key=lambda a: a.size_bytes or 0)
        if biggest.size_bytes:
            facts["largest_allocation_bytes"] = biggest.size_bytes
            facts["largest_allocation_shape"] = _without_layout(biggest.shape)
            facts["largest_allocation_source"] = biggest.source
            facts["largest_allocation_op"] = biggest.op_name
            facts["largest_allocation_label"] = biggest.xla_label
            same = [x for x in error.allocations
                    if x.size_bytes and _without_layout(x.shape) == _without_layout(biggest.shape)]
            if len(same) >= 2:  # one op's output listed again and again
                facts["largest_shape_repeats"] = len(same)
                facts["repeated_allocations_bytes"] = sum(x.size_bytes for x in same)
            dims = _dims(biggest.shape)
            alike = [x for x in error.allocations if x.size_bytes and dims and _dims(x.shape) == dims]
            if len(alike) >= 2:  # the same dimensions in any dtype (f32 scores and their bf16 copy)
                facts["largest_dims_copies"] = len(alike)
                facts["largest_dims_total_bytes"] = sum(x.size_bytes for x in alike)
    elif error.category == "compile_hbm_oom" and error.requested_bytes:
        facts["largest_allocation_bytes"] = error.requested_bytes
        facts["largest_allocation_shape"] = error.shape
    if error.category == "runtime_allocation" and error.reserved_bytes and error.pool_limit_bytes:
        # the TPU runtime's allocator stats: what the loaded programs reserve beside the live arrays
        facts["program_reserved_bytes"] = error.reserved_bytes
    if error.category == "other_framework_oom":  # what the other framework's own allocator held
        facts["framework_reserved_bytes"] = error.reserved_bytes
        facts["framework_allocated_bytes"] = error.allocated_bytes
        facts["framework_unallocated_bytes"] = error.reserved_unallocated_bytes
        facts["process_used_bytes"] = error.process_used_bytes
    # The compile-time HBM report's parts: arguments, the program itself, outputs, temporaries.
    facts["argument_bytes"] = error.argument_bytes
    facts["program_bytes"] = error.program_bytes
    facts["output_bytes"] = error.output_bytes
    facts["output_aliased_bytes"] = error.output_aliased_bytes
    if error.output_bytes is not None and error.output_aliased_bytes is not None:
        facts["output_unaliased_bytes"] = max(error.output_bytes - error.output_aliased_bytes, 0)
    facts["temp_bytes"] = error.hlo_temp_bytes
    padded, unpadded = error.hlo_temp_padded_bytes, error.hlo_temp_unpadded_bytes
    if padded and unpadded is not None and padded > unpadded:  # "Unpadded (1.58G) Padded (17.20G)"
        facts["temp_unpadded_bytes"] = unpadded
        facts["temp_padding_bytes"] = padded - unpadded
        facts["temp_utilization_fraction"] = round(unpadded / padded, 3)
    _padding_facts(error, facts)
    capacity = error.available_bytes
    if capacity and facts.get("largest_allocation_bytes"):
        facts["largest_allocation_fraction"] = _fraction(facts["largest_allocation_bytes"], capacity)
    if error.free_bytes is not None and error.requested_bytes:
        facts["free_fraction"] = _fraction(error.free_bytes, error.requested_bytes)
    if error.signature == "tpu_runtime_reserve_program" or error.program_name:
        facts["program_load"] = True  # a compiled program's reservation at load time, not one array
    if error.exceeded_by_bytes and capacity:
        facts["exceeded_fraction"] = _fraction(error.exceeded_by_bytes, capacity)


def _without_layout(shape: str | None) -> str | None:
    """`f32[2,16,8192,8192]{3,2,1,0:T(8,128)}` as the user wrote it in JAX: `f32[2,16,8192,8192]`."""
    return shape.split("{", 1)[0] if shape else shape


def _padding_facts(error: ParsedError, facts: dict[str, Fact]) -> None:
    """The allocation of the report that wastes most to padding, and how much."""
    padded = [a for a in error.allocations if a.padding_bytes]
    if not padded:
        return
    worst = max(padded, key=lambda a: a.padding_bytes or 0)
    facts["padding_worst_shape"] = worst.shape
    facts["padding_expansion"] = worst.expansion_factor
    facts["padding_allocation_bytes"] = worst.size_bytes
    facts["padding_unpadded_bytes"] = worst.unpadded_size_bytes
    facts["padding_extra_bytes"] = worst.padding_bytes
    # of the memory in use, else (a log cut to its program's part) of the program's requirement
    whole = error.used_bytes or error.available_bytes or error.program_bytes or error.hlo_temp_bytes
    if whole:
        facts["padding_extra_fraction"] = _fraction(worst.padding_bytes, whole)


def _role_facts(report: EstimateReport, facts: dict[str, Fact]) -> None:
    """What the bytes at the peak are for (estimate's peak_by_role), when the report has it."""
    roles = report.peak_by_role or {}
    if not roles or not report.peak_heap_bytes:
        return
    largest = max(roles, key=lambda r: roles[r])
    facts.update(peak_heap_bytes=report.peak_heap_bytes, peak_largest_role=largest,
                 peak_parameter_bytes=roles.get("parameter", 0),
                 peak_optimizer_state_bytes=roles.get("optimizer_state", 0),
                 peak_activation_bytes=roles.get("activation", 0))


def _estimate_facts(report: EstimateReport, facts: dict[str, Fact]) -> None:
    _role_facts(report, facts)
    hbm = report.target.hbm_bytes
    facts.update(
        fits=report.fits,
        headroom_bytes=report.headroom_bytes,
        total_bytes=report.total_bytes,
        hbm_bytes=hbm,
        target_generation=report.target.generation,
        target_topology=report.target.topology,
        temp_bytes=report.temp_bytes,
        argument_bytes=report.argument_bytes,
        padding_waste_bytes=report.padding.waste_bytes,
        donation_savings_bytes=report.donation.savings_bytes if report.donation.checked else None,
        host_callback_count=len(report.host_callbacks),
        replicated_argument_count=len(report.replicated_arguments),
        replicated_argument_bytes=sum(a.bytes for a in report.replicated_arguments),
    )
    vmem = getattr(report, "vmem", None)
    if vmem is not None:
        # The kernel's VMEM figures, not the HBM totals: the HBM was not what ran out (and the
        # report's headroom is the VMEM one, already stated as exceeded_by).
        facts.pop("headroom_bytes", None)
        facts["category"] = "scoped_vmem_oom"
        facts["memory_space"] = "vmem"
        facts["vmem_exceeded"] = vmem.kind
        facts["requested_bytes"] = vmem.used_bytes
        facts["available_bytes"] = vmem.limit_bytes or vmem.capacity_bytes
        facts["exceeded_by_bytes"] = vmem.over_by_bytes
        if vmem.kernel and not facts.get("instruction"):
            facts["instruction"] = vmem.kernel
        if facts["available_bytes"]:
            facts["exceeded_fraction"] = _fraction(vmem.over_by_bytes, facts["available_bytes"])
    elif getattr(report, "oom_space", None) in (None, "hbm"):
        # (another space ran out: the HBM headroom says nothing about the failure)
        facts.setdefault("category", "compile_hbm_oom" if not report.fits else None)
        facts.setdefault("available_bytes", hbm)
        facts.setdefault("used_bytes", report.total_bytes)
        if not report.fits and report.headroom_bytes < 0:
            facts.setdefault("exceeded_by_bytes", -report.headroom_bytes)
            if hbm:
                facts.setdefault("exceeded_fraction", _fraction(-report.headroom_bytes, hbm))
    if report.padding.items:
        worst = max(report.padding.items, key=lambda p: p.padding_bytes)
        facts["padding_worst_shape"] = worst.shape
    if report.donation.checked and report.donation.candidates:
        facts["donation_arguments"] = ", ".join(c.argument for c in report.donation.candidates)
    if report.host_callbacks:
        facts["host_callback_kind"] = report.host_callbacks[0].kind
    if report.replicated_arguments:
        facts["replicated_argument_path"] = max(report.replicated_arguments, key=lambda a: a.bytes).path
    if report.total_bytes > 0:
        facts["padding_waste_fraction"] = _fraction(report.padding.waste_bytes, report.total_bytes)
    if report.top_buffers:
        biggest = max(report.top_buffers, key=lambda b: b.bytes)
        facts["largest_allocation_bytes"] = max(biggest.bytes, int(facts.get("largest_allocation_bytes") or 0))
        facts.setdefault("largest_allocation_shape", biggest.shape)
        facts.setdefault("largest_allocation_source", biggest.source)
        facts.setdefault("largest_allocation_op", getattr(biggest, "op_name", None))
        if hbm:
            facts["largest_allocation_fraction"] = _fraction(facts["largest_allocation_bytes"], hbm)
    sourced = [c for c in report.host_callbacks if c.source]
    if sourced:
        facts["host_callback_source"] = sourced[0].source


def _versions(jax: str | None, libtpu: str) -> str:
    return f"jax {jax}, libtpu {libtpu}" if jax else f"libtpu {libtpu}"


def _diff_facts(report: DiffReport, facts: dict[str, Fact]) -> None:
    """B against A: the total's change, the role and the buffer that grew most, the versions."""
    total = next((f for f in report.figures if f.name == "total_bytes"), None)  # none: a forged report
    delta = report.total_delta_bytes
    facts.update(diff_changed=report.changed, diff_total_before_bytes=total.before if total else None,
                 diff_total_after_bytes=total.after if total else None, diff_total_delta_bytes=delta,
                 diff_total_growth_bytes=delta if delta > 0 else None,
                 diff_total_shrink_bytes=-delta if delta < 0 else None,
                 diff_unchanged_buffers=report.unchanged_buffers, diff_target=report.target_after)
    before = _versions(report.jax_before, report.libtpu_before)
    after = _versions(report.jax_after, report.libtpu_after)
    facts.update(diff_versions_before=before, diff_versions_after=after,
                 diff_versions_changed=report.libtpu_before != report.libtpu_after or (
                     bool(report.jax_before and report.jax_after) and report.jax_before != report.jax_after))
    by_role = report.by_role_delta
    if by_role is None:  # reports without roles: the listed buffers' changes, by their role
        by_role = {}
        for b in report.buffers:
            if b.role:
                by_role[b.role] = by_role.get(b.role, 0) + b.delta_bytes
    grown = {role: size for role, size in by_role.items() if size > 0}
    if grown:
        role = max(grown, key=lambda r: grown[r])
        facts.update(diff_grown_role=role, diff_role_growth_bytes=grown[role])
    top = max(report.buffers, key=lambda b: b.delta_bytes, default=None)
    if top is not None and top.delta_bytes > 0:
        facts.update(diff_top_op=top.op_name, diff_top_growth_bytes=top.delta_bytes,
                     diff_top_shape=top.shape_after, diff_top_source=top.source)


def _profile_facts(report: ProfileReport, facts: dict[str, Fact]) -> None:
    facts.setdefault("backend", report.backend)
    facts.update(
        profile_calls=report.calls,
        growth_bytes_per_call=report.growth_bytes_per_call,
        leak_suspect_count=len(report.leak_suspects),
        peak_bytes=report.peak_bytes,
    )
    if report.leak_suspects:
        top = max(report.leak_suspects, key=lambda s: s.bytes)
        facts["leak_suspect_shape"] = f"{top.dtype}{top.shape}"
        facts["leak_suspect_bytes"] = top.bytes
        if top.source:
            facts["leak_suspect_source"] = top.source
        if getattr(top, "held_by", None):
            facts["leak_suspect_held_by"] = top.held_by[0].label()


def _capture_facts(report: CaptureReport, facts: dict[str, Fact]) -> None:
    facts.setdefault("backend", report.backend)
    facts.update(live_bytes_total=report.live_bytes_total, live_array_count=report.live_array_count)
    held = [g for g in report.live_buffers if g.held_by]
    top = held[0] if held else (report.live_buffers[0] if report.live_buffers else None)
    if top is not None:
        facts.update(live_group_bytes=top.bytes, live_group_shape=f"{top.dtype}{top.shape}",
                     live_group_source=top.source)
        if top.held_by:
            facts["live_group_held_by"] = top.held_by[0].label()


def _fraction(part: int, whole: int) -> float | None:
    """`part / whole` to four places; None (the fact is unknown) when no float can hold it."""
    try:
        value = part / whole
    except (ZeroDivisionError, OverflowError):
        return None
    return round(value, 4) if math.isfinite(value) else None
