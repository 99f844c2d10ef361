"""A data+model sharded train step; the factory takes a `mesh` as plan/estimate promise."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def loss(w1, w2, x):
    h = jax.nn.relu(x @ w1)
    return jnp.mean((h @ w2) ** 2)


def sgd_step(w1, w2, x):
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x)
    return w1 - 1e-3 * g1, w2 - 1e-3 * g2


def make_step(mesh, batch=4096, d=8192, f=32768):
    axis = mesh.axis_names[0]
    w1 = jax.ShapeDtypeStruct((d, f), jnp.float32, sharding=NamedSharding(mesh, P(None, axis)))
    w2 = jax.ShapeDtypeStruct((f, d), jnp.float32, sharding=NamedSharding(mesh, P(axis, None)))
    x = jax.ShapeDtypeStruct((batch, d), jnp.float32, sharding=NamedSharding(mesh, P(axis, None)))
    return sgd_step, (w1, w2, x)


def make_step_devices(devices, batch=4096, d=8192, f=32768):
    mesh = jax.sharding.Mesh(devices, ("data",))
    return make_step(mesh, batch, d, f)


def make_small(mesh):
    return make_step(mesh, batch=512, d=1024, f=4096)
