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
from oomkb.diagnostics.plan import plan_factory  # noqa: E402

PROGRAMS = [
    # name, factory, generation, vary
    ("pallas kernel over the scoped VMEM limit", vmem_programs.make, "v5e", None),
    ("pallas kernel over the physical VMEM", vmem_programs.over_capacity, "v4", None),
    ("MLP training step (batch 4096)", plan_programs.step, "v5e", None),
    ("sharded program over HBM (v5e 2x2)", plan_programs.wide_sharded, "v5e", None),
    ("batch search 1..2^18", plan_programs.wide, "v5e", ("batch", 1, 1 << 18)),
]


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
    options = parser.parse_args()
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
        "median_estimate_ratio": statistics.median(r["estimate_ratio"] for r in rows),
        "median_plan_compiles": statistics.median(r["plan_compiles"] for r in rows),
    }, indent=2))


if __name__ == "__main__":
    main()
