"""Tracing and compiling a jitted function deviceless for a TPU target, and the compiler's memory figures."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.program import user_location

__all__ = ["CompileError", "TraceError", "compile_traced", "is_jitted", "memory_totals", "total_of", "trace"]


class TraceError(DiagnosticsError):
    """The function could not be traced by JAX (not a JAX function, wrong arguments, ...)."""


class CompileError(DiagnosticsError):
    """XLA:TPU rejected the program for a reason other than running out of memory."""


class _Compiled(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    traced: Any
    compiled: Any = None
    error_text: str | None = None
    seconds: float


def is_jitted(fn: Any) -> bool:
    return callable(getattr(fn, "trace", None)) and callable(getattr(fn, "lower", None))


def _first_line(text: str, limit: int = 600) -> str:
    text = text.strip()
    line = text.split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def trace(jitted: Any, args: tuple, kwargs: dict, name: str, device: Any) -> Any:
    import jax

    try:
        with jax.default_device(device), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jitted.trace(*args, **kwargs)
    except (DiagnosticsError, MemoryError):
        raise
    except Exception as err:
        where = user_location(err)
        at = f" at {where}" if where else ""
        hint = ""
        static_value = (
            "not a valid JAX type" in str(err) or "as an abstract array" in str(err)
            or type(err).__name__ in ("TracerBoolConversionError", "ConcretizationTypeError",
                                      "TracerIntegerConversionError")
        )
        if static_value:
            hint = ("; every argument is traced, so pass arrays, jax.ShapeDtypeStruct or numbers "
                    "and bind flags, sizes and other static values with functools.partial")
        raise TraceError(
            f"JAX could not trace {name}: {type(err).__name__}: {_first_line(str(err))}{at}{hint}"
        ) from None


def compile_traced(traced: Any, device: Any, dump_dir: Path | None, name: str,
             extra_options: Mapping[str, Any] | None = None) -> _Compiled:
    import jax

    options = dict(extra_options) if extra_options else None
    if dump_dir is not None:
        options = {
            **(options or {}),
            "xla_dump_to": str(dump_dir),
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_as_proto": True,
        }
    started = time.perf_counter()
    try:
        with jax.default_device(device), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lowered = traced.lower()
    except Exception as err:
        where = user_location(err)
        at = f" at {where}" if where else ""
        raise TraceError(
            f"JAX could not lower {name} for TPU: {type(err).__name__}: "
            f"{_first_line(str(err))}{at}"
        ) from None
    try:
        compiled = lowered.compile(compiler_options=options)
    except Exception as err:
        text = str(err)
        if "RESOURCE_EXHAUSTED" in text or "Ran out of memory" in text:
            return _Compiled(traced=traced, error_text=text,
                             seconds=time.perf_counter() - started)
        raise CompileError(f"XLA:TPU could not compile {name}: {_first_line(text)}") from None
    return _Compiled(traced=traced, compiled=compiled, seconds=time.perf_counter() - started)


def memory_totals(compiled: Any) -> dict[str, int]:
    stats = compiled.memory_analysis()
    return {
        "argument_bytes": int(stats.argument_size_in_bytes),
        "output_bytes": int(stats.output_size_in_bytes),
        "temp_bytes": int(stats.temp_size_in_bytes),
        "alias_bytes": int(stats.alias_size_in_bytes),
        "generated_code_bytes": int(stats.generated_code_size_in_bytes),
    }


def total_of(figures: Mapping[str, int]) -> int:
    return (figures["argument_bytes"] + figures["output_bytes"] + figures["temp_bytes"]
            + figures["generated_code_bytes"] - figures["alias_bytes"])
