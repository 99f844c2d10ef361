"""The remedy catalogue: error categories, the guides' remedies and the answer's fixed strings,
as data in `kb/catalogue/*.yaml`, and the one place that chooses and renders them.

The assistant turns its evidence (a parsed error, an estimate, a profile) into a flat dict of
*facts* whose names and units `facts.yaml` defines. Remedies say when they apply with a small
declarative condition on those facts (no `eval`), cite `doc_id#section`, and carry a text per
supported language with placeholders for the user's numbers. Adding a remedy, a fact or a
language is an edit to the data files; this module only reads, checks and applies them.

Conditions (`when`), one form per mapping:

    {always: true}
    {all: [COND, ...]}   {any: [COND, ...]}   {not: COND}
    {fact: NAME, OP: VALUE}      OP: gt ge lt le eq ne (VALUE a number/string or {fact: NAME}),
                                     in (a list), contains (a substring), present (true/false)

A comparison involving a missing fact (absent, None or "") is false, so a remedy never fires on
evidence it does not have. Placeholders are display names: a `*_bytes` fact appears without the
suffix in human units (`{exceeded_by}`), a `*_fraction` fact as a percentage
(`{padding_waste_percent}`), others as themselves.

The package, one module per concept: :mod:`.schema` (the catalogue's models), :mod:`.plurals`
(placeholders and ICU plural forms), :mod:`.validation` (the load-time checks), :mod:`.conditions`
(evaluating `when`), :mod:`.choice` (the remedies that apply), :mod:`.rendering` (filling texts and
the answer's fixed strings); this module loads the catalogue.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from oomkb.indexer.errors import GuideError
from oomkb.indexer.guides import load_guides
from oomkb.kb.catalogue_file import read_yaml
from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import SUPPORTED
from oomkb.kb.remedies.schema import Catalogue
from oomkb.kb.remedies.validation import CatalogueValidator

__all__ = ["default_catalogue_dir", "load_catalogue"]


FILES = ("facts.yaml", "categories.yaml", "remedies.yaml", "messages.yaml")


def default_catalogue_dir() -> Path:
    return Path(str(resources.files("oomkb.kb") / "catalogue"))


def load_catalogue(dir: Path | str | None = None, guides_dir: Path | str | None = None) -> Catalogue:
    """Read and validate the catalogue in `dir` (default: the built-in one) against the guides
    in `guides_dir` (default: the built-in guides). Cached per folder pair; any problem is a
    CatalogueError naming the file and the item."""
    root = Path(dir) if dir is not None else default_catalogue_dir()
    docs = str(Path(guides_dir).resolve()) if guides_dir is not None else ""
    return _load_cached(str(root.resolve()), docs)


@lru_cache(maxsize=8)
def _load_cached(root: str, guides_dir: str) -> Catalogue:
    folder = Path(root)
    if not folder.is_dir():
        raise CatalogueError(f"catalogue folder not found: {folder}")
    raw = {name: read_yaml(folder / name) for name in FILES}
    try:
        guides = load_guides(Path(guides_dir) if guides_dir else None)
    except GuideError as exc:
        raise CatalogueError(f"cannot check the catalogue's citations: {exc}") from exc
    return CatalogueValidator(folder, raw, guides, SUPPORTED).catalogue()
