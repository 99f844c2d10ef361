"""Programs for the planner's tests: an MLP training step whose batch size decides whether it fits.

Per device the step holds the parameters (w1 1024x4096 and w2 4096x1024 f32, 16 MiB each), their
updated copies, the batch and the activations: about 40 KiB more for every row of the batch, so
on v5e (15.75 GiB of HBM) a batch of ~2^18 rows does not fit and a few tens of thousands do.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

WIDTH, HIDDEN = 1024, 4096


def loss(params, x):
    h = jax.nn.relu(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - x) ** 2)


def train_step(params, x):
    grads = jax.grad(loss)(params, x)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)


def _params(sharding=None):
    return {
        "w1": jax.ShapeDtypeStruct((WIDTH, HIDDEN), jnp.float32, sharding=sharding),
        "w2": jax.ShapeDtypeStruct((HIDDEN, WIDTH), jnp.float32, sharding=sharding),
    }


def step(batch=4096):
    # The parameters are not donated: the updated ones could take their buffers.
    return train_step, (_params(), jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32))


def sharded_step(mesh, batch=4096):
    # Parameters replicated, the batch split over the mesh's "data" axis.
    rows = NamedSharding(mesh, PartitionSpec("data"))
    params = _params(NamedSharding(mesh, PartitionSpec()))
    return jax.jit(train_step, donate_argnums=0), (
        params, jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32, sharding=rows))


def even_batches_only(batch=64):
    if batch % 2:
        raise ValueError(f"batch {batch} is odd")
    return step(batch)


def numpy_only():
    import numpy as np

    def total(x):
        return np.asarray(x).sum()  # not JAX: cannot be traced for TPU

    return total, (jax.ShapeDtypeStruct((8, 8), jnp.float32),)


def activation(x):
    return jnp.tanh(x) * 2 + x


def wide(batch=1024):
    # 32 KiB per row for the argument and again for the output: compiles in about a second for
    # any batch, and runs out of v5e's HBM between 2^17 and 2^18 rows.
    return activation, (jax.ShapeDtypeStruct((batch, 8192), jnp.float32),)


def wide_even(batch=1024):
    if batch % 2:
        raise ValueError(f"batch {batch} is odd")
    return wide(batch)


def wide_sharded(mesh, batch=3 << 19):
    # The batch split over the mesh: 1.5 Mi rows need 24 GiB per device on a v5e 2x2 (4 devices),
    # 12 GiB on a 2x4; as bfloat16 12 GiB on the 2x2; on a v6e (31.25 GiB) it fits.
    rows = NamedSharding(mesh, PartitionSpec("data"))
    return activation, (jax.ShapeDtypeStruct((batch, 8192), jnp.float32, sharding=rows),)
