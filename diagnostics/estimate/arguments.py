"""A factory's arguments as the compiler sees them: shape/dtype specs with shardings, their
names (the factory's parameter names and pytree paths) and their logical sizes.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from oomkb.diagnostics import program as _program
from oomkb.diagnostics.program import factory_label as _factory_label

__all__ = ["argument_names", "as_spec", "call_factory", "leaf_path", "logical_bytes", "shape_text"]


def call_factory(factory: Callable[..., Any], devices: list[Any],
                  kwargs: Mapping[str, Any] | None = None) -> _program.Program:
    label = _factory_label(factory)
    produced, mesh = _program.call_factory(factory, devices=devices, kwargs=kwargs, label=label)
    return _program.unpack_program(produced, label, mesh)


def _is_tpu_sharding(sharding: Any) -> bool:
    try:
        return all(d.platform == "tpu" for d in sharding.device_set)
    except AttributeError:
        return False


def as_spec(leaf: Any, default_sharding: Any) -> Any:
    """An abstract stand-in for an argument leaf; non-array leaves are returned unchanged."""
    import jax
    import numpy as np

    if isinstance(leaf, (bool, int, float, complex)) and not isinstance(leaf, np.generic):
        dtype = jax.numpy.result_type(leaf)
        return jax.ShapeDtypeStruct((), dtype, weak_type=True, sharding=default_sharding)
    shape = getattr(leaf, "shape", None)
    dtype = getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        return leaf
    sharding = getattr(leaf, "sharding", None)
    if sharding is None or not _is_tpu_sharding(sharding):
        sharding = default_sharding
    return jax.ShapeDtypeStruct(
        tuple(shape), dtype, weak_type=bool(getattr(leaf, "weak_type", False)), sharding=sharding
    )


def logical_bytes(spec: Any) -> int:
    import numpy as np

    dtype = np.dtype(spec.dtype)
    bits = getattr(dtype, "itemsize", 1) * 8
    if dtype.name in ("int4", "uint4", "float4_e2m1fn"):
        bits = 4
    return (math.prod(spec.shape) * bits + 7) // 8


_XLA_DTYPES = {
    "bool": "pred", "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
    "int4": "s4", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
    "uint4": "u4", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "complex64": "c64", "complex128": "c128",
}


def shape_text(spec: Any) -> str:
    """``f32[512,2048]``: the shape as XLA spells it (without a layout)."""
    import numpy as np

    dtype = np.dtype(spec.dtype).name
    return f"{_XLA_DTYPES.get(dtype, dtype)}[{','.join(str(d) for d in spec.shape)}]"


def argument_names(fn: Any, count: int) -> list[str]:
    target = getattr(fn, "__wrapped__", fn)
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(count):
        if i < len(params) and params[i].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
        ):
            names.append(params[i].name)
        else:
            names.append(f"args[{i}]")
    return names


def leaf_path(path: Sequence[Any], arg_names: list[str]) -> str:
    """``p['w1']`` for the leaf at ``path`` inside ``((args...), {kwargs})``."""
    import jax

    if not path:
        return "?"
    head, rest = path[0], path[1:]
    if getattr(head, "idx", None) == 0 and rest:
        index = rest[0].idx
        base = arg_names[index] if index < len(arg_names) else f"args[{index}]"
        return base + jax.tree_util.keystr(tuple(rest[1:]))
    if rest:
        return str(getattr(rest[0], "key", rest[0])) + jax.tree_util.keystr(tuple(rest[1:]))
    return jax.tree_util.keystr(tuple(path))
