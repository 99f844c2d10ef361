"""The house, read from the code: one import root, floors that only point down, no cycles,
no module that re-exports another's names, one exception root.

Every import counts, including those inside functions (a lazy import hides a cycle from Python,
not from a reader). The floors, bottom first:

    base:  oomkb.errors, oomkb.settings, oomkb.units, oomkb.layout
    1:     oomkb.diagnostics   oomkb.indexer     (side by side: neither imports the other)
    2:     oomkb.kb
    3:     oomkb.api
    face:  oomkb (its __init__ and __main__)
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from oomkb import layout
from oomkb.errors import OomkbError

BASE = {"oomkb.errors", "oomkb.settings", "oomkb.units", "oomkb.layout"}
FLOOR = {"docs_src": 0, "diagnostics": 1, "indexer": 1, "kb": 2, "api": 3}


def _modules() -> dict[str, Path]:
    """Every module of oomkb's code: dotted name → file."""
    found = {"oomkb": layout.PACKAGE_DIR / "__init__.py", "oomkb.__main__": layout.PACKAGE_DIR / "__main__.py"}
    found.update({f"oomkb.{p.stem}": p for p in layout.PACKAGE_DIR.glob("*.py") if p.stem not in ("__init__", "__main__")})
    for floor in layout.FLOORS:
        folder = layout.floor_dir(floor)
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(["oomkb", floor, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """oomkb modules that `name` imports (anywhere in the file, resolved to existing modules)."""
    tree = ast.parse(path.read_text("utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in MODULES else base)
    resolved = set()
    for target in targets:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name and target.startswith("oomkb"):
            resolved.add(target)
    return resolved


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _floor(module: str) -> float:
    if module in BASE:
        return -1
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in FLOOR:
        return FLOOR[parts[1]]
    return 99  # the face: oomkb/__init__, oomkb/__main__


def test_the_walk_sees_the_whole_house():
    assert {"oomkb.kb.search", "oomkb.diagnostics.estimate", "oomkb.api.http.app", "oomkb.units"} <= set(MODULES)
    assert "oomkb.diagnostics.parse" in GRAPH["oomkb.api.core.assistant"]


def test_imports_only_point_down():
    upward = sorted(f"{a} → {b}" for a, targets in GRAPH.items() for b in targets
                    if _floor(b) > _floor(a) or (_floor(a) == _floor(b) == 1 and a.split(".")[1] != b.split(".")[1]))
    assert upward == []


def test_the_base_imports_nothing_above_it():
    assert {b for a in BASE for b in GRAPH[a]} <= BASE


def test_no_import_cycles():
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    # A package's __init__ importing its own submodules is not a cycle of ideas; anything else is.
    real = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)
            and not all(m == c[-1] or m.startswith(c[-1] + ".") for m in c)]
    assert real == []


def test_no_module_re_exports_another_modules_names():
    strays = []
    for name, path in MODULES.items():
        if name == "oomkb":
            continue  # the face: lazy names, documented there
        tree = ast.parse(path.read_text("utf-8"))
        imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("oomkb") for alias in node.names}
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                listed = {elt.value for elt in getattr(node.value, "elts", []) if isinstance(elt, ast.Constant)}
                strays += [f"{name}.{n}" for n in sorted(listed & imported)]
    assert strays == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.count(".") >= 1 and not m.endswith("__main__")))
def test_every_exception_class_descends_from_the_one_root_along_one_branch(module):
    if module.startswith("oomkb.api"):
        pytest.importorskip("fastapi")
    mod = importlib.import_module(module)
    from oomkb.errors import ServiceError, UserInputError

    for _, cls in inspect.getmembers(mod, inspect.isclass):
        if cls.__module__ != module or not issubclass(cls, BaseException):
            continue
        assert issubclass(cls, OomkbError), f"{module}.{cls.__qualname__} is outside the one root"
        assert issubclass(cls, UserInputError) != issubclass(cls, ServiceError) or cls is OomkbError, (
            f"{module}.{cls.__qualname__} is both the user's fault and the service's (or neither)")


def test_walk_packages_agrees_with_the_file_walk():
    import oomkb

    seen = {info.name for floor in layout.FLOORS
            for info in pkgutil.walk_packages([str(layout.floor_dir(floor))], prefix=f"oomkb.{floor}.")}
    assert seen <= set(MODULES)
    assert oomkb.__name__ == "oomkb"
