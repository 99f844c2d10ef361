"""Where oomkb's floors live: one import name, two physical layouts.

Everything imports as ``oomkb.<floor>`` (``oomkb.kb``, ``oomkb.diagnostics`` …), so an install
claims exactly one top-level name and never shadows a user's own ``diagnostics/`` or ``api/``.

- **Installed** (a wheel): setuptools' ``package-dir`` (pyproject.toml) copies the repository's
  design folders into the package, so ``oomkb/kb/`` is a real folder.
- **From the repository** (the editable install, a job's child given the checkout on its path, the
  user's own interpreter lent oomkb's code by ``--python``): the folders stay at the top of the
  checkout, beside ``oomkb/``. :func:`install_source_floors` (run by ``import oomkb``) adds an
  import hook that answers for exactly those names, ``oomkb.kb`` → ``<checkout>/kb``, and nothing
  else; deeper modules follow from each floor's own ``__path__``.

This module is the base floor: it imports only the standard library.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

#: The design folders under the root, bottom floor first (``docs_src`` is package data: the guides).
FLOORS = ("docs_src", "diagnostics", "indexer", "kb", "api")

#: The ``oomkb`` package's own folder.
PACKAGE_DIR = Path(__file__).resolve().parent


def _source_root() -> Path | None:
    """The checkout holding the floors beside ``oomkb/``, or None when they are inside it."""
    if (PACKAGE_DIR / "kb" / "__init__.py").is_file():
        return None
    root = PACKAGE_DIR.parent
    if all((root / floor / "__init__.py").is_file() for floor in FLOORS):
        return root
    return None


SOURCE_ROOT = _source_root()


def floor_dir(floor: str) -> Path:
    """The folder of ``oomkb.<floor>`` in this layout."""
    return (SOURCE_ROOT or PACKAGE_DIR) / floor


def code_dirs() -> list[Path]:
    """Every folder of oomkb's own code: the package and each floor."""
    return [PACKAGE_DIR, *(floor_dir(floor) for floor in FLOORS)]


def import_root() -> Path:
    """The folder to put on another interpreter's path so that ``import oomkb`` finds this copy."""
    return PACKAGE_DIR.parent


def lend_code(then: str, support: list[str] | tuple[str, ...] = ()) -> str:
    """Python code (for ``-c``) that imports this copy of oomkb in another process, then runs `then`.

    oomkb's folder is on the path only while ``import oomkb`` runs, so nothing else in it (a
    checkout's ``tests/``) can shadow a user's module; `support` folders (oomkb's own
    site-packages, for what the user's environment lacks) go *after* the user's folders.
    """
    root = str(import_root())
    return (f"import sys; sys.path.insert(0, {root!r}); import oomkb; sys.path.remove({root!r}); "
            f"sys.path.extend({list(support)!r}); {then}")


class _SourceFloors(importlib.abc.MetaPathFinder):
    """Finds ``oomkb.<floor>`` in the checkout; answers for no other name."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002 - the finder protocol
        package, _, floor = fullname.partition(".")
        if package != "oomkb" or floor not in FLOORS:
            return None
        folder = self.root / floor
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def install_source_floors() -> None:
    """In a checkout, make ``oomkb.<floor>`` import from the top-level design folders (once)."""
    if SOURCE_ROOT is None:
        return
    if not any(isinstance(f, _SourceFloors) and f.root == SOURCE_ROOT for f in sys.meta_path):
        # First: setuptools' editable finder of another checkout must not answer for this one.
        sys.meta_path.insert(0, _SourceFloors(SOURCE_ROOT))


__all__ = ["FLOORS", "PACKAGE_DIR", "SOURCE_ROOT", "code_dirs", "floor_dir", "import_root",
           "install_source_floors", "lend_code"]
