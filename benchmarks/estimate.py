"""TPU HBM estimator benchmark: what the estimate costs over a bare compile, and what it buys.

Prints one JSON object. For each program (deviceless compiles for v5e, one device):

* ``bare_compile_s``: ``jax.jit(fn).trace(*specs).lower().compile()`` alone (best of ``--rounds``,
  JAX's caches cleared before every run so each one really compiles);
* ``estimate_s`` / ``estimate_no_donation_s``: :func:`diagnostics.estimate.estimate` in this
  process, with and without the donation check (best of ``--rounds``), and their ratios to the
  bare compile;
* ``naive_bytes``: the "sum of argument sizes" guess many users make, and its relative error
  against the estimator's ``total_bytes`` (negative: the guess is too small);
* the estimator's own figures (total, temp, padding, donation saving).

``roles_and_timeline``: what the peak-by-role analysis and the memory timeline add to one
estimate, measured inside that one run (``estimate(..., timeline=True)``, donation check included)
by timing the functions that do them: the roles (``origin_op_names``, ``assign_roles``,
``roles_at_peak``), the timeline (``read_timeline``, ``label_timeline``) and, apart, rendering its
HTML page (``timeline_html``), each as seconds and as a share of that run's compile
(``compile_seconds``; the goal is <= 10 %), for the programs above and the AdamW and scan programs
of ``tests/programs/roles_programs.py``. One run per program: on a shared machine the figures are
noisy, the shares less than the seconds.

One sandboxed run (``estimate_program`` on a FILE.py:FACTORY, child process included) gives the
end-to-end cost of the CLI route. ``isolation``: what the bubblewrap sandbox adds per job (the
HTTP route's default), as medians over ``--isolation-rounds`` alternating runs of the same job
with and without it: a job that only returns (the floor: process start-up) and a whole estimate
of the small program (``null`` figures when bubblewrap is not usable here).

    .venv/bin/python benchmarks/estimate.py [--rounds N] [--target v5e] [--isolation-only]
    .venv/bin/python benchmarks/estimate.py --roles-timeline-only
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oomkb.diagnostics import tpu  # noqa: E402

tpu.prepare_in_process()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

import oomkb.diagnostics.estimate as estimate_module  # noqa: E402
from oomkb.diagnostics.estimate import estimate, estimate_program  # noqa: E402
from oomkb.diagnostics.timeline_html import timeline_html  # noqa: E402


def spec(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def padded_columns(x):
    return (x * 2).sum(axis=0)


def mlp_train_step(params, x, y):
    def loss(p):
        h = x
        for w in p[:-1]:
            h = jax.nn.relu(h @ w)
        return jnp.mean((h @ p[-1] - y) ** 2)

    grads = jax.grad(loss)(params)
    return [w - 0.01 * g for w, g in zip(params, grads)]


def remat_mlp_train_step(params, x, y):
    def loss(p):
        h = x
        for w in p[:-1]:
            h = jax.checkpoint(lambda a, b: jax.nn.relu(a @ b))(h, w)
        return jnp.mean((h @ p[-1] - y) ** 2)

    grads = jax.grad(loss)(params)
    return [w - 0.01 * g for w, g in zip(params, grads)]


def attention(q, k, v):
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def bf16_matmul_chain(a, b):
    return jnp.tanh(a @ b) @ b.T


def _mlp_args(layers, batch, width):
    params = [spec((width, width)) for _ in range(layers)]
    return params, spec((batch, width)), spec((batch, width))


PROGRAMS = {
    "padded_f32_129x1024": (padded_columns, (spec((129, 1024)),)),
    "mlp_train_step_4x2048_b1024": (mlp_train_step, _mlp_args(4, 1024, 2048)),
    "remat_mlp_train_step_4x2048_b1024": (remat_mlp_train_step, _mlp_args(4, 1024, 2048)),
    "attention_b8_h16_s2048_d128_bf16": (
        attention, tuple(spec((8, 16, 2048, 128), jnp.bfloat16) for _ in range(3))),
    "bf16_matmul_chain_8192": (
        bf16_matmul_chain, (spec((8192, 8192), jnp.bfloat16), spec((8192, 8192), jnp.bfloat16))),
}


def _role_programs() -> dict:
    """The issue's two shapes of training step: an AdamW step and a scan over layers (with and
    without `jax.checkpoint`), from the test suite's programs."""
    path = ROOT / "tests" / "programs" / "roles_programs.py"
    loaded = importlib.util.spec_from_file_location("oomkb_bench_roles_programs", path)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return {name: getattr(module, name)() for name in ("adamw_step", "scan_grad", "scan_grad_remat")}


#: What the role analysis and the timeline run, by the names the estimator calls them by.
STAGES = {"roles": ("origin_op_names", "assign_roles", "roles_at_peak"),
          "timeline": ("read_timeline", "label_timeline")}


@contextlib.contextmanager
def stopwatch():
    """Seconds spent in each stage's functions while the block runs (the estimator's own names
    wrapped with a timer, restored afterwards)."""
    seconds = dict.fromkeys(STAGES, 0.0)
    originals = {}

    def timed(stage, original):
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - started
        return run

    for stage, names in STAGES.items():
        for name in names:
            originals[name] = getattr(estimate_module, name)
            setattr(estimate_module, name, timed(stage, originals[name]))
    try:
        yield seconds
    finally:
        for name, original in originals.items():
            setattr(estimate_module, name, original)


def roles_timeline_figures(target: str) -> dict:
    """One estimate per program with the timeline on; the roles' and the timeline's seconds
    within it, and their share of that run's compile."""
    programs = {name: (fn, args, {}) for name, (fn, args) in PROGRAMS.items()}
    programs.update({name: (fn, args, {}) for name, (fn, args) in _role_programs().items()})
    rows = {}
    for name, (fn, args, kwargs) in programs.items():
        jax.clear_caches()
        with stopwatch() as seconds:
            started = time.perf_counter()
            report = estimate(fn, *args, target=target, timeline=True, **kwargs)
            wall = time.perf_counter() - started
        started = time.perf_counter()
        page = timeline_html(report.timeline, name) if report.timeline is not None else ""
        html = time.perf_counter() - started
        compile_s = report.compile_seconds
        added = seconds["roles"] + seconds["timeline"]
        rows[name] = {
            "compile_s": compile_s,
            "estimate_wall_s": round(wall, 3),
            "roles_s": round(seconds["roles"], 4),
            "timeline_s": round(seconds["timeline"], 4),
            "timeline_html_s": round(html, 4),
            "timeline_buffers": len(report.timeline.buffers) if report.timeline else 0,
            "timeline_html_bytes": len(page.encode()),
            "roles_share_of_compile": round(seconds["roles"] / compile_s, 4),
            "timeline_share_of_compile": round(seconds["timeline"] / compile_s, 4),
            "added_share_of_compile": round(added / compile_s, 4),
            "added_with_html_share_of_compile": round((added + html) / compile_s, 4),
            "added_share_of_estimate_wall": round(added / wall, 4),
        }
    shares = [r["added_share_of_compile"] for r in rows.values()]
    return {"programs": rows, "median_added_share_of_compile": float(np.median(shares)),
            "max_added_share_of_compile": max(shares), "goal_share_of_compile": 0.10}


def bare_compile_seconds(fn, args, device) -> float:
    sharding = SingleDeviceSharding(device)
    placed = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), args)
    started = time.perf_counter()
    jax.jit(fn).trace(*placed).lower().compile()
    return time.perf_counter() - started


def naive_bytes(args) -> int:
    return sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in jax.tree.leaves(args))


def best_of(rounds, run):
    """Fastest of ``rounds`` runs, each after clearing JAX's caches (so every run compiles)."""
    times, value = [], None
    for _ in range(rounds):
        jax.clear_caches()
        started = time.perf_counter()
        value = run()
        times.append(time.perf_counter() - started)
    return min(times), value


SANDBOX_PROGRAM = textwrap.dedent('''
    import jax
    import jax.numpy as jnp

    def step(x):
        return (x * 2).sum(axis=0)

    def make():
        return step, (jax.ShapeDtypeStruct((129, 1024), jnp.float32),)
''')


def isolation_figures(rounds: int, target: str) -> dict:
    """Median seconds per job with and without the bubblewrap sandbox, run alternately."""
    from oomkb.diagnostics.isolation import isolation_status
    from oomkb.diagnostics.sandbox import run_job

    status = isolation_status()
    figures: dict = {"bwrap": status.version, "rounds": rounds}
    if not status.available:
        return {**figures, "problem": status.problem}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench_program.py"
        path.write_text(SANDBOX_PROGRAM)
        empty = Path(folder) / "empty_program.py"
        empty.write_text("def nothing():\n    return {}\n")
        jobs = {
            "empty_job": lambda isolate: run_job(
                "call_program", {"program": f"{empty}:nothing"},
                timeout_s=120, isolate=isolate, read_only=[path.parent]),
            "estimate_small_program": lambda isolate: estimate_program(
                f"{path}:make", target=target, isolate=isolate),
        }
        for name, job in jobs.items():
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(rounds):
                for isolate in (False, True):
                    started = time.perf_counter()
                    job(isolate)
                    times[isolate].append(time.perf_counter() - started)
            plain, isolated = float(np.median(times[False])), float(np.median(times[True]))
            figures[name] = {"unisolated_s": round(plain, 3), "isolated_s": round(isolated, 3),
                             "overhead_s": round(isolated - plain, 3)}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--target", default="v5e")
    parser.add_argument("--isolation-rounds", type=int, default=7)
    parser.add_argument("--isolation-only", action="store_true",
                        help="only measure what the sandbox adds per job")
    parser.add_argument("--roles-timeline-only", action="store_true",
                        help="only measure what the role analysis and the timeline add to an estimate")
    options = parser.parse_args()
    if options.roles_timeline_only:
        estimate(padded_columns, spec((8, 128)), target=options.target)  # warm-up, not timed
        print(json.dumps({"target": options.target, "libtpu": tpu.libtpu_version(), "jax": jax.__version__,
                          "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
                          "roles_and_timeline": roles_timeline_figures(options.target)}, indent=2))
        return
    if options.isolation_only:
        print(json.dumps({"cpu_count": os.cpu_count(),
                          "isolation": isolation_figures(options.isolation_rounds, options.target)},
                         indent=2))
        return

    target = tpu.resolve_target(options.target)
    device = tpu.topology_devices(target)[0]
    # Warm up libtpu, the HBM cache and XProf's converter once, outside the timings.
    estimate(padded_columns, spec((8, 128)), target=options.target)

    rows = {}
    for name, (fn, args) in PROGRAMS.items():
        bare, _ = best_of(options.rounds, lambda: bare_compile_seconds(fn, args, device))
        with_donation, report = best_of(
            options.rounds, lambda: estimate(fn, *args, target=options.target))
        without_donation, _ = best_of(
            options.rounds,
            lambda: estimate(fn, *args, target=options.target, donation_check=False))
        naive = naive_bytes(args)
        rows[name] = {
            "bare_compile_s": round(bare, 3),
            "estimate_s": round(with_donation, 3),
            "estimate_no_donation_s": round(without_donation, 3),
            "ratio_estimate_to_compile": round(with_donation / bare, 2),
            "ratio_no_donation_to_compile": round(without_donation / bare, 2),
            "total_bytes": report.total_bytes,
            "temp_bytes": report.temp_bytes,
            "padding_waste_bytes": report.padding.waste_bytes,
            "donation_savings_bytes": report.donation.savings_bytes,
            "naive_bytes": naive,
            "naive_relative_error": round((naive - report.total_bytes) / report.total_bytes, 3),
            "fits": report.fits,
        }

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench_program.py"
        path.write_text(SANDBOX_PROGRAM)
        started = time.perf_counter()
        estimate_program(f"{path}:make", target=options.target)
        sandboxed = time.perf_counter() - started

    errors = [abs(r["naive_relative_error"]) for r in rows.values()]
    print(json.dumps({
        "target": target.topology,
        "libtpu": tpu.libtpu_version(),
        "jax": jax.__version__,
        "cpu_count": os.cpu_count(),
        "rounds": options.rounds,
        "programs": rows,
        "sandboxed_estimate_s_small_program": round(sandboxed, 3),
        "isolation": isolation_figures(options.isolation_rounds, options.target),
        "roles_and_timeline": roles_timeline_figures(options.target),
        "median_ratio_estimate_to_compile": float(np.median(
            [r["ratio_estimate_to_compile"] for r in rows.values()])),
        "median_abs_naive_relative_error": float(np.median(errors)),
    }, indent=2))


if __name__ == "__main__":
    main()
