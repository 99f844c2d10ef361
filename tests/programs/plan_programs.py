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


# --- sparse factories: values a kernel accepts are multiples of its block or divisors of a size ---
# Shaped like jax's Pallas TPU ops (jax/experimental/pallas/ops/tpu/matmul.py, flash_attention.py),
# written small so that one deviceless compile takes seconds.

MATMUL_SIZE = 2048
SEQ_BLOCK = 128


def _matmul_kernel(x_ref, y_ref, o_ref):
    from jax.experimental import pallas as pl

    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def blocked_matmul(block=128):
    """A (2048, 2048) f32 matmul in square blocks: three double-buffered windows of block^2 f32
    (24 * block^2 bytes of VMEM) against v5e's 16 MiB scoped limit: 128, 256 and 512 fit, 1024
    and 2048 run out of VMEM. Like jax's matmul op it takes only blocks that divide the size."""
    from jax.experimental import pallas as pl

    if block <= 0 or MATMUL_SIZE % block or block % 128:
        raise ValueError(f"block {block} must be a multiple of 128 dividing {MATMUL_SIZE}")

    def matmul(x, y):
        n = MATMUL_SIZE // block
        return pl.pallas_call(
            _matmul_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32), grid=(n, n, n),
            in_specs=[pl.BlockSpec((block, block), lambda i, j, k: (i, k)),
                      pl.BlockSpec((block, block), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((block, block), lambda i, j, k: (i, j)),
        )(x, y)

    spec = jax.ShapeDtypeStruct((MATMUL_SIZE, MATMUL_SIZE), jnp.float32)
    return matmul, (spec, spec)


def _block_attention_kernel(q_ref, k_ref, v_ref, o_ref):
    q, k, v = q_ref[0], k_ref[0], v_ref[0]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o_ref[0] = jnp.dot(p, v, preferred_element_type=jnp.float32).astype(o_ref.dtype)


def block_attention(seq=4096, heads=16, dim=128):
    """Attention within blocks of 128 positions (a flash-attention-shaped Pallas kernel): q, k, v
    and the output are (heads, seq, dim) f32 in HBM, 32 KiB per position with 16 heads, so the
    largest seq that fits v5e is a multiple of 128 near half a million. Like jax's flash attention
    it refuses a seq that its block does not divide."""
    from jax.experimental import pallas as pl

    if seq <= 0 or seq % SEQ_BLOCK:
        raise ValueError(f"seq {seq} is not a multiple of the block size {SEQ_BLOCK}")

    def attention(q, k, v):
        block = pl.BlockSpec((1, SEQ_BLOCK, dim), lambda h, i: (h, i, 0))
        return pl.pallas_call(
            _block_attention_kernel, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
            grid=(heads, seq // SEQ_BLOCK), in_specs=[block, block, block], out_specs=block,
        )(q, k, v)

    spec = jax.ShapeDtypeStruct((heads, seq, dim), jnp.float32)
    return attention, (spec, spec, spec)
