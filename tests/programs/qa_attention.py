"""A plain attention block (no flash), batch and seq can be varied."""

import jax
import jax.numpy as jnp


def attention(q, k, v):
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1])
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", weights, v)


def block(q, k, v):
    return jax.grad(lambda q: attention(q, k, v).sum())(q)


def make(batch=8, seq=4096, heads=16, dim=128):
    s = jax.ShapeDtypeStruct((batch, heads, seq, dim), jnp.bfloat16)
    return block, (s, s, s)
