"""Pallas kernels that run out of VMEM, for the estimator's and the planner's tests.

``scale`` doubles an f32 (rows, 4096) array block by block. Each grid step holds one input and one
output window of (block_rows, 4096) f32, double-buffered: 4 x block_rows x 16 KiB of VMEM.
block_rows=512 needs 32 MiB (over v5e's 16 MiB default scoped limit, under its 128 MiB of VMEM);
on v4 (16 MiB of VMEM) block_rows=264 needs 16.5 MiB, more than the whole VMEM.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def scale(x, block_rows):
    rows, cols = x.shape
    return pl.pallas_call(  # the kernel's line
        double_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, cols), lambda i: (i, 0)),
    )(x)


def make(block_rows=512, rows=1024):
    if rows % block_rows:
        raise ValueError(f"block_rows={block_rows} does not divide rows={rows}")
    spec = jax.ShapeDtypeStruct((rows, 4096), jnp.float32)
    return functools.partial(scale, block_rows=block_rows), (spec,)


def over_capacity():
    # Run on v4: 2 x (264, 4096) f32 windows, double-buffered, are 16.5 MiB of its 16 MiB of VMEM.
    return make(block_rows=264, rows=528)
