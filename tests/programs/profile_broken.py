"""Targets that must fail with a clear message."""

NOT_A_FUNCTION = 3


def raises():
    raise ValueError("the step exploded")


def factory_raising_later():
    def fn():
        raise RuntimeError("boom inside the profiled function")

    return fn, ()


def donating_factory():
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda x: x + 1, donate_argnums=0), (jnp.ones((8, 128)),)
