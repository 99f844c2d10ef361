"""Two revisions of one forward pass, for `oomkb diff` and `oomkb ask --report diff.json`.

`narrow` and `wide` differ only in the hidden width (512 and 4096): what grows is the weights,
`params['w_in']` and `params['w_out']` (the hidden values between the two products are fused
away, so no temporary grows with them).
"""

import jax
import jax.numpy as jnp

ROWS, D = 8192, 256


def mlp(hidden: int = 512):
    def forward(params, x):
        return jnp.tanh(x @ params["w_in"]) @ params["w_out"]

    params = {"w_in": jax.ShapeDtypeStruct((D, hidden), jnp.float32),
              "w_out": jax.ShapeDtypeStruct((hidden, D), jnp.float32)}
    return jax.jit(forward), (params, jax.ShapeDtypeStruct((ROWS, D), jnp.float32))


def narrow():
    return mlp(512)


def wide():
    return mlp(4096)
