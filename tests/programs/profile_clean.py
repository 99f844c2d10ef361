"""Programs that hold a constant amount of memory from call to call."""

import jax
import jax.numpy as jnp

_state = {"w": jnp.zeros((64, 32), jnp.float32)}
_update = jax.jit(lambda w: w * 0.5 + 1.0)


def step():
    """Replaces the state with its update each call: the old state is freed, nothing grows."""
    _state["w"] = _update(_state["w"])


def factory():
    """Returns (fn, args, kwargs): a pure jitted function, nothing survives a call but its output."""
    return jax.jit(lambda x, scale: x * scale), (jnp.ones((64, 32)),), {"scale": 3.0}


def sharded_factory(mesh):
    """A factory that asks for the local devices as a mesh and shards its argument over it."""
    from jax.sharding import NamedSharding, PartitionSpec

    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, PartitionSpec(mesh.axis_names[0])))
    return jax.jit(lambda a: a * 2), (x,)
