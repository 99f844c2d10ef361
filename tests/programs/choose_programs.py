"""Programs for `oomkb plan --choose`: a categorical keyword that changes the memory a program needs.

`scaled` is one elementwise op on a (batch, 8192) array in the dtype its ``dtype`` keyword names:
the argument and the output are the whole need (64 KiB per row as float32, 32 KiB as bfloat16),
so bfloat16 fits about twice the rows of float32. Each deviceless compile takes about a second,
which keeps a --vary search under each choice cheap.
"""

import jax
import jax.numpy as jnp

COLUMNS = 8192


def _scale(x):
    return jnp.tanh(x) * 2 + x


def scaled(batch=1024, dtype="float32"):
    # jnp.dtype refuses a name it does not know: the factory's own error, per choice
    return _scale, (jax.ShapeDtypeStruct((batch, COLUMNS), jnp.dtype(dtype)),)


def flagged(batch=1024, half=False, scale=1.0):
    """A bool and a float keyword: --choose gives them as the type of their defaults."""
    if not isinstance(half, bool) or not isinstance(scale, float):
        raise TypeError(f"half must be a bool and scale a float, got {half!r} and {scale!r}")
    return scaled(batch, "bfloat16" if half else "float32")


def fixed(batch=1024):
    """No categorical keyword at all: --choose has nothing to choose here."""
    return scaled(batch)
