"""The peak by role: what each buffer live at the peak of HBM use is for.

Every buffer of the Memory Viewer's peak gets one role from ``roles.yaml`` (first matching rule):
``parameter``, ``optimizer_state``, ``gradient``, ``activation`` (a forward value kept for the
backward pass), ``temporary``, ``output`` or ``unknown``. The rules read only the program's own
structure: the argument pytree paths the factory passed (``params[...]``, ``opt_state['mu'][...]``),
the buffer's kind (argument, output, temp), and the transformations in the JAX op name
(``jvp``, ``transpose``, ``checkpoint``). The small buffers the viewer lumps together are
``unknown``, so the roles add up to the peak heap exactly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oomkb.diagnostics.exceptions import SignatureCatalogueError

__all__ = ["ROLES", "Role", "RoleRules", "assign_roles", "origin_op_names", "role_rules", "role_sentence", "roles_at_peak"]

Role = Literal["parameter", "optimizer_state", "gradient", "activation", "temporary", "output", "unknown"]
ROLES: tuple[str, ...] = ("parameter", "optimizer_state", "gradient", "activation", "temporary", "output",
                          "unknown")
_KIND = Literal["argument", "output", "temp"]


class RoleRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role
    kinds: list[_KIND] = Field(min_length=1)
    path: str | None = None
    op: str | None = None
    like_role: Role | None = None

    @field_validator("path", "op")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value


class RoleRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[RoleRule] = Field(min_length=1)


@functools.cache
def role_rules() -> RoleRules:
    """The shipped rules (a broken file is shipped data at fault: a service error)."""
    text = resources.files("oomkb.diagnostics").joinpath("roles.yaml").read_text("utf-8")
    try:
        return RoleRules.model_validate(yaml.safe_load(text))
    except (ValidationError, re.error, yaml.YAMLError) as exc:
        raise SignatureCatalogueError(f"roles.yaml is malformed: {exc}") from None


def _logical(shape: str) -> str:
    return re.sub(r"\{[^{}]*\}$", "", shape.strip())


class _Buffer:
    """What a rule reads of a buffer (duck-typed: BufferInfo or anything with these fields)."""

    kind: str
    op_name: str | None
    shape: str


#: An HLO instruction line: its name, then the rest (shape, opcode, operands, attributes).
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = (.*)$")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_OPERAND = re.compile(r"%([\w.\-]+)")


def origin_op_names(hlo_text: str) -> dict[str, str]:
    """Instruction name → the JAX op name it belongs to: its own metadata, else that of the first
    user with metadata along tuples, copies and bitcasts (a scan's stacked buffer is allocated
    without metadata and handed to the forward loop, ``jvp(...)/while``, that fills it)."""
    own: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    order: list[str] = []
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        name = m.group(1)
        order.append(name)
        meta = _OP_NAME.search(line)
        if meta and meta.group(1):
            own[name] = meta.group(1)
        for operand in _OPERAND.findall(m.group(2).split(", metadata=")[0]):
            users.setdefault(operand, []).append(name)
    found = dict(own)
    for name in order:
        if name in found:
            continue
        seen, frontier = {name}, list(users.get(name, ()))
        while frontier and len(seen) < 64:
            nxt = frontier.pop(0)
            if nxt in seen:
                continue
            seen.add(nxt)
            if nxt in own:
                found[name] = own[nxt]
                break
            frontier += users.get(nxt, ())
    return found


def assign_roles(buffers: Sequence[_Buffer], rules: RoleRules | None = None,
                 origins: dict[str, str] | None = None) -> list[str]:
    """The role of each buffer, in order (rules of ``like_role`` see the roles given before them).

    ``origins`` (from :func:`origin_op_names`) names the op of a buffer the viewer gives none."""
    rules = rules or role_rules()
    origins = origins or {}
    roles: list[str | None] = [None] * len(buffers)
    for rule in rules.rules:
        path = re.compile(rule.path, re.IGNORECASE) if rule.path else None
        op = re.compile(rule.op, re.IGNORECASE) if rule.op else None
        like = {_logical(b.shape) for b, r in zip(buffers, roles) if r == rule.like_role} \
            if rule.like_role else None
        for i, b in enumerate(buffers):
            if roles[i] is not None or b.kind not in rule.kinds:
                continue
            instruction = re.sub(r"\{.*\}$", "", getattr(b, "instruction", None) or "")
            name = b.op_name or (origins.get(instruction, "") if b.kind != "argument" else "")
            if path is not None and not (b.kind == "argument" and path.search(name)):
                continue
            if op is not None and not op.search(name):
                continue
            if like is not None and _logical(b.shape) not in like:
                continue
            roles[i] = rule.role
    return [r or "unknown" for r in roles]


def roles_at_peak(sizes_and_roles: Iterable[tuple[int, str]], peak_bytes: int | None) -> dict[str, int]:
    """Bytes per role at the peak, every role present (0 when none); what the listed buffers do not
    cover of `peak_bytes` (the viewer's lump of small buffers) is ``unknown``."""
    totals = dict.fromkeys(ROLES, 0)
    for size, role in sizes_and_roles:
        totals[role] += size
    if peak_bytes is not None:
        totals["unknown"] += max(peak_bytes - sum(totals.values()), 0)
    return totals


#: How the sentence names each role.
_NAMES = {"parameter": "weights", "optimizer_state": "optimizer state", "gradient": "gradients",
          "activation": "activations kept for the backward pass", "temporary": "temporaries",
          "output": "outputs", "unknown": "other buffers"}


def role_sentence(peak_by_role: dict[str, int], format_bytes) -> str | None:
    """"at the peak: 6.1 GiB optimizer state, 4.0 GiB weights, …", largest first."""
    parts = [(size, role) for role, size in peak_by_role.items() if size > 0]
    if not parts:
        return None
    parts.sort(key=lambda p: (-p[0], ROLES.index(p[1])))
    return "at the peak: " + ", ".join(f"{format_bytes(size)} {_NAMES[role]}" for size, role in parts)
