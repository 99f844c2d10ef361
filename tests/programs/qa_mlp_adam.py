"""A flax-style MLP train step with a hand-written Adam update (no optax), as a user writes it."""

import jax
import jax.numpy as jnp


def init_params(key, sizes):
    params = []
    for din, dout in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (din, dout)) * 0.02, "b": jnp.zeros((dout,))})
    return params


def forward(params, x):
    for layer in params[:-1]:
        x = jax.nn.gelu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


def loss_fn(params, x, y):
    logits = forward(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


def adam_update(grads, params, mu, nu, step, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
    t = step + 1
    mhat = jax.tree_util.tree_map(lambda m: m / (1 - b1**t), mu)
    vhat = jax.tree_util.tree_map(lambda v: v / (1 - b2**t), nu)
    params = jax.tree_util.tree_map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), params, mhat, vhat)
    return params, mu, nu


def train_step(params, mu, nu, step, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params, mu, nu = adam_update(grads, params, mu, nu, step)
    return params, mu, nu, step + 1, loss


def make_step(batch=1024, hidden=8192, layers=4, classes=1000, din=1024):
    sizes = [din] + [hidden] * layers + [classes]
    params = jax.eval_shape(lambda: init_params(jax.random.PRNGKey(0), sizes))
    mu = nu = params
    step = jax.ShapeDtypeStruct((), jnp.int32)
    x = jax.ShapeDtypeStruct((batch, din), jnp.float32)
    y = jax.ShapeDtypeStruct((batch, classes), jnp.float32)
    return train_step, (params, mu, nu, step, x, y)
