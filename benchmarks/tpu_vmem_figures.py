"""Measure, deviceless, the VMEM figures that kb/catalogue/figures.yaml states as "measured":
per TPU generation, the default scoped VMEM limit of a Pallas kernel (the compiler's
"Scoped allocation with size X and limit Y") and the physical VMEM ("Used X of Y vmem", with
the scoped limit lifted). Prints JSON; takes about a minute on two cores.

    python benchmarks/tpu_vmem_figures.py
"""

from __future__ import annotations

import json
import re

from oomkb.diagnostics.tpu import libtpu_version, prepare_in_process, resolve_target, topology_devices

prepare_in_process()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

SCOPED = re.compile(r"Scoped allocation with size (\S+) and limit (\S+)")
CAPACITY = re.compile(r"Used (\S+) of (\S+) vmem")


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _compile_error(generation: str, rows: int, limit: int | None) -> str | None:
    devices = topology_devices(resolve_target(generation))
    s = NamedSharding(Mesh(devices[:1], ("x",)), P())
    spec = jax.ShapeDtypeStruct((8192, 4096), jnp.float32)

    def add(x, y):
        block = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
        extra = {"compiler_params": pltpu.CompilerParams(vmem_limit_bytes=limit)} if limit else {}
        return pl.pallas_call(_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(x.shape[0] // rows,), in_specs=[block, block],
                              out_specs=block, **extra)(x, y)

    try:
        jax.jit(add, in_shardings=(s, s), out_shardings=s).trace(spec, spec).lower().compile()
    except Exception as exc:  # the compiler's RESOURCE_EXHAUSTED text is the measurement
        return str(exc)
    return None


def measure(generation: str) -> dict[str, str | None]:
    scoped = capacity = None
    for rows in (256, 512, 1024):  # 24, 48, 96 MiB of double-buffered windows
        text = _compile_error(generation, rows, None) or ""
        if m := SCOPED.search(text):
            scoped = m.group(2)
            break
        if m := CAPACITY.search(text):
            capacity = m.group(2)
            break
    if capacity is None:
        m = CAPACITY.search(_compile_error(generation, 2048, 1 << 30) or "")
        capacity = m.group(2) if m else None
    return {"scoped_vmem_default": scoped, "vmem": capacity}


MIB = 1 << 20
ALL_GENERATIONS = ("v2", "v3", "v4", "v5e", "v5p", "v6e", "TPU7x")
#: (rows, limit): 2 inputs + 1 output of (rows, 4096) f32, double-buffered = rows * 96 KiB of windows.
RAISED_LIMITS = ((512, 64 * MIB), (512, 100 * MIB), (1024, 100 * MIB), (1024, 128 * MIB),
                 (1024, 1 << 30), (2048, 1 << 30))


def raised_limits(generation: str) -> dict[str, str]:
    """Windows of 48 to 192 MiB under raised scoped limits (64 MiB to 1 GiB): which compile, and
    the compiler's first line where one does not. Checks public reports that a generation's
    kernels run above the physical VMEM the deviceless target states (TPU7x: jax#38988)."""
    table = {}
    for rows, limit in RAISED_LIMITS:
        error = _compile_error(generation, rows, limit)
        table[f"windows {rows * 96 // 1024} MiB, limit {limit // MIB} MiB"] = (
            "compiles" if error is None else error.split("\n", 1)[0][:200])
    return table


if __name__ == "__main__":
    import sys

    if "--raised-limits" in sys.argv:  # python benchmarks/tpu_vmem_figures.py --raised-limits
        print(json.dumps({"libtpu": libtpu_version(),
                          "generations": {g: raised_limits(g) for g in ("v5p", "v6e", "TPU7x")}},
                         indent=2))
    else:
        print(json.dumps({"libtpu": libtpu_version(),
                          "generations": {g: measure(g) for g in ALL_GENERATIONS}},
                         indent=2))
