"""oomkb's Python API: what a training script may import.

    import oomkb

    with oomkb.capture("oom.json"):      # or @oomkb.capture("oom.json")
        train()

`capture` writes the out-of-memory report (the arrays alive at the error, the lines that created
them and what keeps them alive) and lets the error propagate; `held_by(obj)` names what keeps any
object alive; `parse_error(text)` reads an OOM message into its category and figures.
The implementation lives in `diagnostics`; these names stay put when it moves.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CaptureReport", "Holder", "capture", "held_by", "parse_error"]

_WHERE = {
    "capture": "diagnostics.capture",
    "CaptureReport": "diagnostics.capture",
    "held_by": "diagnostics.holders",
    "Holder": "diagnostics.holders",
    "parse_error": "diagnostics.parse",
}


def __getattr__(name: str) -> Any:
    """Import on first use, so that `import oomkb` stays cheap for scripts that never fail."""
    if name not in _WHERE:
        raise AttributeError(f"module 'oomkb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
