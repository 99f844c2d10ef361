"""Who keeps an object alive: a bounded walk up the garbage collector's referrers.

`held_by(obj)` answers "why is this array still here?" with the Python roots that reach it: a
module global (`GRADS` in `train`, with the line that binds it), an attribute of an object, a
closure cell of a function, a local variable of a running frame, or a cache inside jax. Each
answer carries the access path from the root (`GRADS[17]`, `trainer.history[3]`) and a
`file:line` where one can be found. The walk is breadth-first and bounded in depth and in the
number of `gc.get_referrers` scans, so it costs at most a few hundred milliseconds on a large heap.
"""

from __future__ import annotations

import gc
import inspect
import linecache
import os
import re
import sys
import time
import types
from typing import Any, Iterable, Literal

from pydantic import BaseModel, Field

HolderKind = Literal[
    "module_global", "object_attribute", "closure", "local_variable", "jax_cache", "class_attribute", "function_cache"
]

MAX_DEPTH = 6
MAX_SCANS = 40  # gc.get_referrers calls per object (each scans the whole heap)
MAX_HOLDERS = 3

_HERE = os.path.dirname(os.path.realpath(__file__))


class Holder(BaseModel):
    """One Python root that keeps an object alive, and how it reaches it."""

    kind: HolderKind
    name: str = Field(description="the root's name: a global, a local variable, a function, a class")
    path: str = Field(description="the expression from the root to the object, e.g. 'GRADS[17]'")
    container: str | None = Field(default=None, description="type of the object that holds it directly (list, dict, ...)")
    module: str | None = Field(default=None, description="module of a global, class or function")
    source: str | None = Field(default=None, description="'file:line' where the root is bound or defined")

    def label(self) -> str:
        """The same in words of no language: "GRADS[4] (list, module_global train, train.py:4)"."""
        parts = [p for p in (self.container, f"{self.kind} {self.module or self.name}", self.source) if p]
        return f"{self.path} ({', '.join(parts)})"

    def describe(self) -> str:
        """One line for people: "list `GRADS` (global of module `train`, train.py:4)"."""
        what = f"{self.container} " if self.container else ""
        where = f", {self.source}" if self.source else ""
        label = {
            "module_global": f"global of module `{self.module}`",
            "object_attribute": "attribute of an object",
            "class_attribute": f"class attribute in `{self.module}`",
            "closure": f"closure of `{self.name}`",
            "local_variable": f"local variable in `{self.name}`",
            "jax_cache": f"a cache inside `{self.module}`",
            "function_cache": f"the cache of `{self.name}`",
        }[self.kind]
        return f"{what}`{self.path}` ({label}{where})"


def held_by(
    obj: Any,
    ignore: Iterable[Any] = (),
    limit: int = MAX_HOLDERS,
    frames: Iterable[types.FrameType] = (),
    deadline: float | None = None,
) -> list[Holder]:
    """The Python roots that keep `obj` alive (at most `limit`), nearest first.

    `ignore` lists objects of the caller that refer to `obj` only for the inspection (lists of
    arrays being examined); frames of this package are never counted as holders. Running frames
    keep their locals out of the garbage collector's sight, so the caller's stack and `frames`
    (e.g. those of an exception's traceback) are searched for locals explicitly. `deadline` (a
    `time.perf_counter()` value) stops the walk early on a huge heap, with what was found so far.
    """
    skip = {id(o) for o in ignore}
    scopes = _frame_scopes(frames)
    skip.update(id(local) for _, local in scopes)
    skip.add(id(scopes))
    nodes: list[Any] = [obj]  # keeps the objects of the walk alive while it runs
    parents: dict[int, tuple[int, str]] = {}  # id(holder) -> (id(what it holds on the way), step)
    by_id: dict[int, Any] = {id(obj): obj}
    skip.update((id(nodes), id(parents), id(by_id), id(skip)))
    found: list[Holder] = []
    seen_roots: set[tuple[str, str, str]] = set()
    frontier = [obj]
    scans = 0
    for _ in range(MAX_DEPTH):
        next_frontier: list[Any] = []
        for node in frontier:
            if scans >= MAX_SCANS or len(found) >= limit:
                break
            if deadline is not None and time.perf_counter() > deadline:
                scans = MAX_SCANS
                break
            scans += 1
            for frame, local in scopes:
                name = next((k for k, v in local.items() if v is node), None)
                if name is not None:
                    path, container = _path(node, obj, parents, by_id)
                    code = frame.f_code
                    holder = Holder(kind="local_variable", name=getattr(code, "co_qualname", code.co_name),
                                    path=name + path, container=_container(container, node, obj),
                                    source=f"{code.co_filename}:{frame.f_lineno}")
                    if _root_key(holder) not in seen_roots:
                        seen_roots.add(_root_key(holder))
                        found.append(holder)
            referrers = gc.get_referrers(node)
            skip.add(id(referrers))
            skip.add(id(frontier))
            skip.add(id(next_frontier))
            for ref in referrers:
                if id(ref) in skip or id(ref) in by_id:
                    continue
                root = _root(ref, node, obj, parents, by_id)
                if root is not None:
                    key = _root_key(root)
                    if key not in seen_roots:
                        seen_roots.add(key)
                        found.append(root)
                    continue
                step = _step(ref, node)
                if step is None:
                    continue
                parents[id(ref)] = (id(node), step)
                by_id[id(ref)] = ref
                nodes.append(ref)
                next_frontier.append(ref)
            del referrers
        frontier = next_frontier
        if not frontier or scans >= MAX_SCANS or len(found) >= limit:
            break
    del nodes, frontier
    return found[:limit]


def _root_key(holder: Holder) -> tuple[str, str, str]:
    """One root found twice (a running frame is both searched and a referrer) counts once."""
    name = holder.name if holder.kind == "local_variable" else ""
    return holder.kind, name, holder.path


# -------------------------------------------------------------------------- the steps up


def _frame_scopes(extra: Iterable[types.FrameType]) -> list[tuple[types.FrameType, dict]]:
    """(frame, locals) of the caller's stack and of `extra`, outside this package and jax."""
    frames: list[types.FrameType] = list(extra)
    frame = sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    scopes, seen = [], set()
    for frame in frames:
        if id(frame) in seen:
            continue
        seen.add(id(frame))
        filename = os.path.realpath(frame.f_code.co_filename)
        if filename.startswith(_HERE) or filename.startswith(_library_dirs()) or frame.f_code.co_filename.startswith("<frozen"):
            continue
        if frame.f_globals.get("__name__") == "runpy":
            continue
        local = frame.f_locals
        if frame.f_code.co_name == "<module>":
            continue  # module scope: its globals are found as module globals
        scopes.append((frame, local))
    return scopes


def _library_dirs() -> tuple[str, ...]:
    """Folders of library code (ours, the standard library, installed packages, JAX)."""
    from oomkb.diagnostics.program import not_user_dirs

    return not_user_dirs()


def _is_module_dict(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("__name__"), str) and "__builtins__" in value


def _step(ref: Any, child: Any) -> str | None:
    """How `ref` holds `child`, as an access step ('[3]', "['key']", '.attr'); None to stop here."""
    if isinstance(ref, types.FrameType):
        return None
    if isinstance(ref, (list, tuple)):
        for index, item in enumerate(ref):
            if item is child:
                return f"[{index}]"
        return None
    if isinstance(ref, dict):
        for key, value in ref.items():
            if value is child:
                return f"[{key!r}]" if not isinstance(key, str) or not key.isidentifier() else f"[{key!r}]"
        return None
    if isinstance(ref, (set, frozenset)):
        return "{…}"
    if isinstance(ref, types.CellType):
        return ""
    if isinstance(ref, (types.FunctionType, types.ModuleType, type)):
        return None
    # An object whose attribute dict, once Python has made it a real dict (any `vars(obj)` or
    # `obj.__dict__` does), is what the garbage collector shows as the child's referrer.
    if isinstance(child, dict) and getattr(ref, "__dict__", None) is child:
        return _INSTANCE_DICT
    # An object whose __dict__ (or slots) hold the child directly.
    for name, value in _attributes(ref):
        if value is child:
            return f".{name}"
    return None


#: The step from an object to its own attribute dict; the key step after it reads as ``.name``.
_INSTANCE_DICT = "\x00__dict__"


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    try:
        pairs.extend(vars(obj).items())
    except TypeError:
        pass
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()) or ():
            if isinstance(slot, str) and hasattr(obj, slot):
                pairs.append((slot, getattr(obj, slot, None)))
    return pairs


def _path(node: Any, target: Any, down: dict[int, tuple[int, str]], by_id: dict[int, Any]) -> tuple[str, str | None]:
    """The access path from `node` down to `target`, and the type of target's direct holder."""
    steps: list[str] = []
    holder_type = None
    current = node
    for _ in range(MAX_DEPTH + 2):
        if current is target:
            break
        entry = down.get(id(current))
        if entry is None:
            break
        child_id, step = entry
        steps.append(step)
        if by_id[child_id] is target:
            holder_type = type(current).__name__
        current = by_id[child_id]
    text = []
    for index, step in enumerate(steps):
        if step == _INSTANCE_DICT:
            continue
        if index and steps[index - 1] == _INSTANCE_DICT and step.startswith("['") and step.endswith("']"):
            step = "." + step[2:-2]
        text.append(step)
    return "".join(text), holder_type


def _root(ref: Any, node: Any, target: Any, parents, by_id) -> Holder | None:
    """A Holder when `ref` is a root (module globals, a frame, a closure cell's function, a class)."""
    if isinstance(ref, types.FrameType):
        code = ref.f_code
        real = os.path.realpath(code.co_filename)
        if real.startswith(_HERE) or real.startswith(_library_dirs()) or code.co_filename.startswith("<"):
            return None
        name = next((k for k, v in ref.f_locals.items() if v is node), None)
        if name is None:
            return None
        path, container = _path(node, target, parents, by_id)
        return Holder(kind="local_variable", name=code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
                      path=name + path, container=_container(container, node, target),
                      source=f"{code.co_filename}:{ref.f_lineno}")
    if _is_module_dict(ref):
        key = next((k for k, v in ref.items() if v is node), None)
        if key is None:
            return None
        module = ref["__name__"]
        path, container = _path(node, target, parents, by_id)
        kind: HolderKind = "jax_cache" if module.split(".")[0] in ("jax", "jaxlib", "flax", "optax") else "module_global"
        return Holder(kind=kind, name=str(key), path=f"{key}{path}", module=module,
                      container=_container(container, node, target),
                      source=_global_source(ref.get("__file__"), str(key)))
    if isinstance(ref, types.CellType):
        functions = [f for f in gc.get_referrers(ref) if isinstance(f, tuple)]
        for closure in functions:
            for fn in gc.get_referrers(closure):
                if isinstance(fn, types.FunctionType) and fn.__closure__ is closure:
                    code = fn.__code__
                    index = next(i for i, cell in enumerate(closure) if cell is ref)
                    var = code.co_freevars[index] if index < len(code.co_freevars) else "?"
                    path, container = _path(node, target, parents, by_id)
                    return Holder(kind="closure", name=fn.__qualname__, path=var + path, module=fn.__module__,
                                  container=_container(container, node, target),
                                  source=f"{code.co_filename}:{code.co_firstlineno}")
        return None
    if callable(ref) and hasattr(ref, "cache_info") and hasattr(ref, "__wrapped__"):  # functools caches
        wrapped = ref.__wrapped__
        module = getattr(wrapped, "__module__", None) or ""
        code = getattr(wrapped, "__code__", None)
        name = getattr(wrapped, "__qualname__", repr(wrapped))
        path, container = _path(node, target, parents, by_id)
        return Holder(kind="jax_cache" if module.split(".")[0] in ("jax", "jaxlib") else "function_cache",
                      name=name, path=f"{name}.cache{path}", module=module or None,
                      container=_container(container, node, target),
                      source=f"{code.co_filename}:{code.co_firstlineno}" if code else None)
    if isinstance(ref, dict):
        owner = _class_owning(ref)
        if owner is not None:
            key = next((k for k, v in ref.items() if v is node), None)
            path, container = _path(node, target, parents, by_id)
            return Holder(kind="class_attribute", name=owner.__qualname__, path=f"{owner.__qualname__}.{key}{path}",
                          module=owner.__module__, container=_container(container, node, target),
                          source=_class_source(owner))
    return None


def _container(holder_type: str | None, node: Any, target: Any) -> str | None:
    if holder_type is not None:
        return holder_type
    return None if node is target else type(node).__name__


def _class_owning(namespace: dict) -> type | None:
    for ref in gc.get_referrers(namespace):
        if isinstance(ref, type) and getattr(ref, "__dict__", None) is namespace:
            return ref
    return None


def _class_source(cls: type) -> str | None:
    try:
        return f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        return None


def _global_source(filename: str | None, name: str) -> str | None:
    """'file:line' of the first top-level statement that binds `name` in the module's file."""
    if not filename:
        return None
    binding = re.compile(rf"^(?:{re.escape(name)}\s*(?::[^=]*)?=|(?:def|class)\s+{re.escape(name)}\b|"
                         rf"(?:from\s+\S+\s+)?import\s+.*\b{re.escape(name)}\b|for\s+{re.escape(name)}\b)")
    for number, line in enumerate(linecache.getlines(filename), start=1):
        if binding.match(line):
            return f"{filename}:{number}"
    return filename


__all__ = ["Holder", "held_by"]
