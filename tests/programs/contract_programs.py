"""Factories for the program contract's tests (diagnostics/program.py): every accepted form."""

import types

import jax
import jax.numpy as jnp


def double(x, scale=1.0):
    return x * 2 * scale


SPEC = jax.ShapeDtypeStruct((8, 128), jnp.float32)


def as_tuple():
    return double, (SPEC,)


def as_list():
    return [double, [SPEC]]


def with_mapping_kwargs():
    return double, (SPEC,), types.MappingProxyType({"scale": 3.0})


def sized(rows=8, *, devices):
    return double, (jax.ShapeDtypeStruct((rows, 128), jnp.float32),), {"scale": float(len(devices))}


def raises_for_odd(rows=8):
    if rows % 2:
        raise ValueError(f"odd rows: {rows}")
    return double, (jax.ShapeDtypeStruct((rows, 128), jnp.float32),)
