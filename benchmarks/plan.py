"""Planner benchmark: compiles and seconds per plan, and their ratio to one bare compile.

Prints one JSON object. For each program (deviceless compiles, libtpu in this process):

* ``bare_compile_s``: ``jax.jit(fn).trace(*specs).lower().compile()`` of the baseline program alone
  (best of ``--rounds``, JAX's caches cleared first, so each run really compiles; a program that
  does not fit fails as fast as the compiler says so);
* ``estimate_s``: :func:`diagnostics.estimate.estimate_factory` as ``oomkb estimate`` runs it by
  default (no donation compile), and ``estimate_ratio`` to the bare compile;
* ``plan_s`` / ``plan_compiles``: :func:`diagnostics.plan.plan_factory` (baseline, fixes, --vary),
  ``plan_ratio`` = plan_s / bare_compile_s, the fixes that fit and the --vary answer.

The programs: a Pallas kernel over v5e's scoped VMEM limit, one over v4's physical VMEM, an MLP
training step, a sharded program over the HBM of a v5e 2x2, and a batch search over 1..2^18.

``searches``: each --vary search run twice in this one process, as the plan runs it
(``strategy="model"``) and as plain bisection (``strategy="bisect"``), with JAX's caches cleared
before each: compiles, wall seconds, the answer (the same for both), and bisection's worst-case
count on the same values. The searches: a batch over 1..2^18 (memory linear in the batch), a
flash-attention-shaped kernel's sequence over 128..2^20 (it takes multiples of 128 only), and a
Pallas matmul's block over 128..2048 (it takes divisors of 2048 only; VMEM decides).

    .venv/bin/python benchmarks/plan.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "programs"))

from oomkb.diagnostics import tpu  # noqa: E402

tpu.prepare_in_process()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding  # noqa: E402

import plan_programs  # noqa: E402
import vmem_programs  # noqa: E402
from oomkb.diagnostics.estimate import estimate_factory  # noqa: E402
from oomkb.diagnostics.plan import _Session, _vary, parse_vary, plan_factory  # noqa: E402

PROGRAMS = [
    # name, factory, generation, vary
    ("pallas kernel over the scoped VMEM limit", vmem_programs.make, "v5e", None),
    ("pallas kernel over the physical VMEM", vmem_programs.over_capacity, "v4", None),
    ("MLP training step (batch 4096)", plan_programs.step, "v5e", None),
    ("sharded program over HBM (v5e 2x2)", plan_programs.wide_sharded, "v5e", None),
    ("batch search 1..2^18", plan_programs.wide, "v5e", ("batch", 1, 1 << 18)),
]


SEARCHES = [
    # name, factory, generation, --vary
    ("batch of an elementwise program", plan_programs.wide, "v5e", "batch=1..262144"),
    ("seq of a block-attention kernel", plan_programs.block_attention, "v5e", "seq=128..1048576"),
    ("block of a Pallas matmul", plan_programs.blocked_matmul, "v5e", "block=128..2048"),
]


def compare_search(factory, generation: str, text: str) -> dict:
    """One --vary search as the plan runs it and as plain bisection, measured back to back."""
    spec = tpu.resolve_target(generation)
    vary = parse_vary(text)
    row = {}
    for strategy in ("model", "bisect"):
        jax.clear_caches()
        session = _Session(None)
        started = time.perf_counter()
        report = _vary(session, factory, vary, spec, f"factory {factory.__name__}", {}, strategy)
        row[strategy] = {"compiles": report.compiles, "seconds": round(time.perf_counter() - started, 2),
                         "largest_fitting": report.largest_fitting, "next_value": report.next_value,
                         "refused": report.refused}
        row["bisection_worst_case_compiles"] = report.bisection_compiles
    row["same_answer"] = (row["model"]["largest_fitting"], row["model"]["next_value"]) == (
        row["bisect"]["largest_fitting"], row["bisect"]["next_value"])
    return row


def bare_compile(factory, generation: str, rounds: int) -> float:
    devices = tpu.topology_devices(tpu.resolve_target(generation))
    if "mesh" in factory.__code__.co_varnames[: factory.__code__.co_argcount]:
        mesh = Mesh(np.array(devices), ("data",))
        fn, args = factory(mesh=mesh)
        default = NamedSharding(mesh, PartitionSpec())
    else:
        fn, args = factory()
        default = SingleDeviceSharding(devices[0])
    specs = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=s.sharding or default), args)
    best = float("inf")
    for _ in range(rounds):
        jax.clear_caches()
        started = time.perf_counter()
        try:
            jax.jit(fn).trace(*specs).lower().compile()
        except Exception:  # noqa: BLE001 - an OOM compile is still one compile
            pass
        best = min(best, time.perf_counter() - started)
    return best


def timed(rounds: int, run):
    best, value = float("inf"), None
    for _ in range(rounds):
        jax.clear_caches()
        started = time.perf_counter()
        value = run()
        best = min(best, time.perf_counter() - started)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="skip the batch search")
    parser.add_argument("--searches-only", action="store_true",
                        help="only the --vary searches beside plain bisection")
    options = parser.parse_args()
    searches = []
    for name, factory, generation, text in SEARCHES:
        searches.append({"search": name, "vary": text, **compare_search(factory, generation, text)})
        print(json.dumps(searches[-1]), file=sys.stderr, flush=True)
    if options.searches_only:
        print(json.dumps({"libtpu": tpu.libtpu_version(), "searches": searches}, indent=2))
        return
    rows = []
    for name, factory, generation, vary in PROGRAMS:
        if options.quick and vary is not None:
            continue
        bare = bare_compile(factory, generation, options.rounds)
        estimate_s, _ = timed(options.rounds, lambda: estimate_factory(
            factory, target=generation, donation_check=False))
        plan_s, report = timed(1, lambda: plan_factory(factory, target=generation, vary=vary))
        rows.append({
            "program": name, "target": report.target.topology,
            "bare_compile_s": round(bare, 3),
            "estimate_s": round(estimate_s, 3), "estimate_ratio": round(estimate_s / bare, 2),
            "plan_s": round(plan_s, 3), "plan_compiles": report.compiles,
            "plan_ratio": round(plan_s / bare, 1),
            "baseline_fits": report.baseline.fits,
            "fixes_that_fit": [f.id for f in report.fixes if f.fits],
            "vary": None if report.vary is None else {
                "largest_fitting": report.vary.largest_fitting,
                "compiles": report.vary.compiles, "range": [report.vary.low, report.vary.high],
            },
        })
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps({
        "libtpu": tpu.libtpu_version(), "rounds": options.rounds, "programs": rows,
        "searches": searches,
        "median_estimate_ratio": statistics.median(r["estimate_ratio"] for r in rows),
        "median_plan_compiles": statistics.median(r["plan_compiles"] for r in rows),
    }, indent=2))


if __name__ == "__main__":
    main()
