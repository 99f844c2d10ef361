"""One compile measurement as data.

A plan's compiles are all "the factory, called with these keyword arguments, compiled for this
target with these settings": :class:`MeasureRequest` says exactly that, so a measurement can be
sent to another process (a local worker, a Ray worker: :mod:`diagnostics.measure_worker`),
cached (:mod:`diagnostics.compile_cache`) and compared.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["MeasureRequest", "MeasureResult"]

class MeasureRequest(BaseModel):
    """The factory with ``kwargs``, compiled for ``generation``/``topology`` with these settings."""

    generation: str
    topology: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] | None = Field(None, description="compiler options (scoped VMEM limit)")
    donate: dict[str, list[Any]] | None = Field(
        None, description="jax.jit's donate_argnums/donate_argnames")
    cast_bf16: bool = False
    what: str = ""

    def cache_fields(self) -> dict[str, Any]:
        """What decides the result (``what`` is only a label)."""
        return self.model_dump(exclude={"what"})


class MeasureResult(BaseModel):
    """A worker's answer: the measurement (``plan._Measured``'s fields), the compiles it cost
    (0 when it came from the cache) and the toolchain that compiled it."""

    measured: dict[str, Any]
    compiles: int = 0
    cached: bool = False
    versions: dict[str, Any] = Field(default_factory=dict)
