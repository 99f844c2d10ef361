"""A step function that leaks: every call keeps its (64, 32) float32 output in a module list."""

import jax
import jax.numpy as jnp

LEAKED_SHAPE = (64, 32)
LEAKED_BYTES_PER_CALL = 64 * 32 * 4

_history = []
_double = jax.jit(lambda x: x * 2.0)


def step():
    """Profile target of the 'step' kind: no arguments; leaks 8 KiB per call."""
    out = _double(jnp.ones(LEAKED_SHAPE, jnp.float32))
    _history.append(out)


def _append_update(x):
    _history.append(_double(x))
    return x.sum()


def factory():
    """Profile target of the 'factory' kind: returns (fn, args); fn leaks 8 KiB per call."""
    return _append_update, (jnp.ones(LEAKED_SHAPE, jnp.float32),)
