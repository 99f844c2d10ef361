"""Donation and replication: which arguments could be donated (matching outputs), the measured
saving of donating them, and arguments replicated on every device.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from oomkb.diagnostics.estimate.arguments import leaf_path, logical_bytes, shape_text
from oomkb.diagnostics.estimate.compiling import compile_traced, memory_totals, total_of, trace
from oomkb.diagnostics.estimate.report import DonationCandidate, DonationReport, ReplicatedArgument
from oomkb.diagnostics.exceptions import DiagnosticsError

__all__ = ["donation_plan", "find_replicated", "measure_donation"]


def _shard_bytes(aval: Any, sharding: Any) -> int:
    """Logical bytes of one device's shard of ``aval`` under ``sharding`` (all of it when None)."""
    if sharding is None or not hasattr(sharding, "shard_shape") or not aval.shape:
        return logical_bytes(aval)
    try:
        shape = tuple(sharding.shard_shape(tuple(aval.shape)))
    except (ValueError, TypeError):
        return logical_bytes(aval)
    return logical_bytes(type("Shard", (), {"shape": shape, "dtype": aval.dtype})())


def donation_plan(traced: Any, arg_names: list[str], compiled: Any = None):
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
        cand.leaves.append(leaf_path(path, arg_names))
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


def measure_donation(
    fn: Any, args: tuple, kwargs: dict, traced: Any, baseline_total: int,
    arg_names: list[str], device: Any, name: str, compiled: Any = None,
) -> tuple[DonationReport, list[str]]:
    import jax

    donated, candidates, already = donation_plan(traced, arg_names, compiled)
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
        outcome = compile_traced(trace(variant, args, kwargs, name, device), device, None, name)
    except DiagnosticsError as err:
        return report, [f"the donation check could not compile the variant: {err}"]
    if outcome.compiled is None:
        return report, ["the donation check's compile ran out of memory"]
    with_total = total_of(memory_totals(outcome.compiled))
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


def find_replicated(compiled: Any, specs: tuple, arg_names: list[str]) -> list[ReplicatedArgument]:
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
                path=leaf_path(path, arg_names), bytes=logical_bytes(spec),
                shape=shape_text(spec), devices=n,
            ))
    found.sort(key=lambda r: r.bytes, reverse=True)
    return found
