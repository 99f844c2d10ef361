"""Programs shaped like real training steps, for the peak-by-role analysis.

`adamw_step`: a residual MLP with an AdamW update written in plain jax (optax's rule: first and
second moments per parameter, decoupled weight decay), params and optimizer state donated.
`scan_grad` / `scan_grad_remat`: a scan over layers differentiated as it is and under
`jax.checkpoint` (the rematerialised body keeps no activations for the backward pass).
"""

import jax
import jax.numpy as jnp

D, H, LAYERS, TOKENS = 256, 512, 2, 512


def _params():
    return {f"layer{i}": {"w_in": jax.ShapeDtypeStruct((D, H), jnp.float32),
                          "w_out": jax.ShapeDtypeStruct((H, D), jnp.float32)} for i in range(LAYERS)}


def _loss(params, x):
    h = x
    for i in range(LAYERS):
        p = params[f"layer{i}"]
        h = h + jnp.tanh(h @ p["w_in"]) @ p["w_out"]
    return jnp.mean(h ** 2)


def _adamw(params, grads, opt_state, lr=1e-3, b1=0.9, b2=0.999, wd=0.01):
    mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt_state["mu"], grads)
    nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt_state["nu"], grads)
    new = jax.tree_util.tree_map(lambda p, m, v: p - lr * (m / (jnp.sqrt(v) + 1e-8) + wd * p), params, mu, nu)
    return new, {"count": opt_state["count"] + 1, "mu": mu, "nu": nu}


def adamw_step():
    def train_step(params, opt_state, x):
        loss, grads = jax.value_and_grad(_loss)(params, x)
        params, opt_state = _adamw(params, grads, opt_state)
        return params, opt_state, loss

    params = _params()
    opt_state = {"count": jax.ShapeDtypeStruct((), jnp.int32), "mu": params, "nu": params}
    return jax.jit(train_step, donate_argnums=(0, 1)), (params, opt_state,
                                                        jax.ShapeDtypeStruct((TOKENS, D), jnp.float32))


SCAN_LAYERS, SCAN_D, SCAN_B = 8, 512, 4096


def scan_grad(remat: bool = False):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    body = jax.checkpoint(layer) if remat else layer

    def loss(params, x):
        h, _ = jax.lax.scan(body, x, params["w"])
        return jnp.sum(h * h)

    return jax.jit(jax.grad(loss)), ({"w": jax.ShapeDtypeStruct((SCAN_LAYERS, SCAN_D, SCAN_D), jnp.float32)},
                                     jax.ShapeDtypeStruct((SCAN_B, SCAN_D), jnp.float32))


def scan_grad_remat():
    return scan_grad(remat=True)
