import sys
import jax.numpy as jnp
print("sum", float(jnp.ones((4,)).sum()), "argv", sys.argv[1:])
