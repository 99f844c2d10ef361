import jax.numpy as jnp
x = jnp.ones((3,))
raise KeyError("missing config key 'lr'")
