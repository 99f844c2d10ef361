"""Evaluating a remedy's `when` on the facts, and checking the facts against their specs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from oomkb.kb.remedies.schema import (
    Catalogue,
    Condition,
    EQUALITY_OPS,
    FactError,
    FactRef,
    FactSpec,
    NUMERIC_OPS,
)

__all__ = ["check_facts", "evaluate", "fact_value", "is_number", "type_ok"]


def type_ok(spec: FactSpec, value: Any) -> bool:
    if spec.type == "bool":
        return isinstance(value, bool)
    if spec.type == "str":
        return isinstance(value, str)
    if spec.type == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fact_value(facts: Mapping[str, Any], name: str) -> Any:
    value = facts.get(name)
    return None if value is None or value == "" else value


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
        isinstance(value, float) and math.isnan(value)
    )


def evaluate(cond: Condition, facts: Mapping[str, Any]) -> bool:
    """Whether `cond` holds for `facts`; a comparison with a missing fact is false."""
    if cond.always:
        return True
    if cond.all_ is not None:
        return all(evaluate(c, facts) for c in cond.all_)
    if cond.any_ is not None:
        return any(evaluate(c, facts) for c in cond.any_)
    if cond.not_ is not None:
        return not evaluate(cond.not_, facts)
    assert cond.fact is not None
    left = fact_value(facts, cond.fact)
    if cond.present is not None:
        return (left is not None) == cond.present
    if left is None:
        return False
    if cond.in_ is not None:
        return left in cond.in_
    if cond.contains is not None:
        return isinstance(left, str) and cond.contains in left
    for op in (*NUMERIC_OPS, *EQUALITY_OPS):
        rhs = getattr(cond, op)
        if rhs is None:
            continue
        right = fact_value(facts, rhs.fact) if isinstance(rhs, FactRef) else rhs
        if right is None:
            return False
        if op in EQUALITY_OPS:
            same = left == right
            return same if op == "eq" else not same
        if not (is_number(left) and is_number(right)):
            return False
        return {
            "gt": left > right, "ge": left >= right, "lt": left < right, "le": left <= right
        }[op]
    return False  # pragma: no cover - the model guarantees one operator


def check_facts(catalogue: Catalogue, facts: Mapping[str, Any]) -> None:
    """Raise FactError when a known fact has a value of the wrong type; unknown names and
    None values are allowed (they are simply not evidence)."""
    for name, value in facts.items():
        spec = catalogue.facts.get(name)
        if spec is None or value is None:
            continue
        if not type_ok(spec, value):
            raise FactError(f"fact {name!r} must be {spec.type} ({spec.unit}), got {value!r}")
