"""Small JAX programs for the TPU HBM estimator's tests: factories in the CLI's FILE.py:FACTORY form."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import random
from jax.sharding import NamedSharding, PartitionSpec


@jax.jit
def oom():
    # The example from the XProf guide: a 200 GiB matrix times itself.
    a = random.normal(random.PRNGKey(1), (327680, 327680), dtype=jnp.bfloat16)
    return a @ a


def seed_oom():
    return oom, ()


def column_sums(x):
    return (x * 2).sum(axis=0)


def padded_argument():
    # 129 rows round up to 136 under the (8, 128) tile: 7 * 1024 * 4 = 28,672 bytes of padding.
    return column_sums, (jax.ShapeDtypeStruct((129, 1024), jnp.float32),)


def mlp_loss(params, x, y):
    h = jax.nn.relu(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def train_step(params, x, y):
    grads = jax.grad(mlp_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)


def mlp_shapes(batch=128, width=256, hidden=1024):
    params = {
        "w1": jax.ShapeDtypeStruct((width, hidden), jnp.float32),
        "w2": jax.ShapeDtypeStruct((hidden, width), jnp.float32),
    }
    x = jax.ShapeDtypeStruct((batch, width), jnp.float32)
    return params, x, x


def mlp_train_step():
    # Not donated: the updated parameters could reuse the old ones' buffers.
    return train_step, mlp_shapes()


def noisy_step(x):
    y = jnp.tanh(x)
    jax.debug.print("mean {m}", m=y.mean())  # the line the estimator must point at
    return y * 2


def debug_print():
    return noisy_step, (jax.ShapeDtypeStruct((256, 256), jnp.float32),)


def sharded_train_step(mesh):
    # Parameters replicated on every device, the batch split across the "data" axis.
    replicated = NamedSharding(mesh, PartitionSpec())
    batch = NamedSharding(mesh, PartitionSpec("data"))
    params, x, y = mlp_shapes(batch=512, width=256, hidden=1024)
    params = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=replicated) for k, v in params.items()}
    x = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=batch)
    y = jax.ShapeDtypeStruct(y.shape, y.dtype, sharding=batch)
    return jax.jit(train_step), (params, x, y)


def fsdp_train_step(mesh):
    # FSDP: each parameter split four ways by rows, the batch too (oomkb issue 23, defect 4).
    rows = NamedSharding(mesh, PartitionSpec("data"))
    params, x, y = mlp_shapes(batch=512, width=256, hidden=1024)
    params = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=rows) for k, v in params.items()}
    x = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=rows)
    y = jax.ShapeDtypeStruct(y.shape, y.dtype, sharding=rows)
    return jax.jit(train_step, out_shardings=rows), (params, x, y)


def concrete_arrays():
    # Real (small) arrays are accepted too; only their shapes and dtypes are used.
    return column_sums, (np.ones((129, 1024), np.float32),)


# --- factories that are wrong in the ways users get them wrong ---------------------------


def factory_raises():
    raise RuntimeError("could not open the checkpoint")


def returns_one_thing():
    return column_sums


def returns_non_callable():
    return 42, ()


def factory():
    # Named as the README's examples name factories; its errors must not read "factory factory".
    return 42, ()


def needs_an_argument(config):
    return column_sums, ()


def not_jax():
    def to_numpy(x):
        return np.asarray(x).sum()  # numpy cannot take a tracer

    return to_numpy, (jax.ShapeDtypeStruct((8, 8), jnp.float32),)


def sleepy():
    import time

    time.sleep(60)
    return column_sums, ()


def already_donated():
    # The user's own jit donates the parameters: nothing left to suggest.
    return jax.jit(train_step, donate_argnums=0), mlp_shapes()


def with_callbacks(x):
    jax.debug.callback(lambda v: None, x.sum())  # debug_callback line
    total = jax.experimental.io_callback(
        lambda v: v, jax.ShapeDtypeStruct((), jnp.float32), x.max()
    )  # io_callback line is the call above
    return x * total


def callbacks():
    import jax.experimental  # noqa: F401 - io_callback lives there

    return with_callbacks, (jax.ShapeDtypeStruct((128, 128), jnp.float32),)
