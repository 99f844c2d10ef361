"""Reading one catalogue YAML file into a pydantic model, every failure a CatalogueError naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from oomkb.kb.errors import CatalogueError

# libyaml's safe loader when PyYAML has it (about 10x faster on the catalogue), else the pure one.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YAML_LOADER(_SAFE_LOADER):  # noqa: N801 (a loader class, named as the constant it replaces)
    """The safe loader, refusing a key said twice in one mapping: YAML keeps the last one silently,
    so a second entry under a name in use (a cue, a message) would replace the first unseen."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path | str) -> Any:
    """The mapping at the top of a catalogue file."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
    except FileNotFoundError as exc:
        raise CatalogueError(f"catalogue file missing: {path}") from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CatalogueError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogueError(f"{path}: expected a mapping at the top level")
    return data


def read_model(path: Path | str, model: type[M]) -> M:
    """A catalogue file validated as `model`; the first problem is named with its place."""
    raw = read_yaml(path)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise CatalogueError(f"{path}: {where}: {err['msg']}") from exc
