"""The HBM bytes the sizing states for a TPU array written without its layout, against a real
deviceless XLA:TPU compile of that array (libtpu lays it out: the two dimensions that pad least go last)."""

from __future__ import annotations

import math

import pytest

from oomkb.diagnostics import tpu
from oomkb.kb.sizing import _least_padded

pytestmark = pytest.mark.slow  # real compiles


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("shape", [(1024, 1024, 957, 2), (2000000, 4), (64, 2048, 8, 64), (100000, 3, 5),
                                   (300000, 100), (4096, 4096, 3), (50000, 1, 7), (128, 3), (4096, 12)])
def test_least_padded_bytes_equal_the_compiled_output_of_that_shape(shape, dtype):
    tpu.prepare_in_process()
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    device = tpu.topology_devices(tpu.resolve_target("v5e", "2x2"))[0]
    compiled = jax.jit(lambda: jnp.zeros(shape, dtype),
                       out_shardings=SingleDeviceSharding(device)).trace().lower().compile()
    itemsize = jnp.dtype(dtype).itemsize
    size = math.prod(shape) * itemsize
    padded = _least_padded(list(shape), itemsize, size)[0]
    assert padded == compiled.memory_analysis().output_size_in_bytes
