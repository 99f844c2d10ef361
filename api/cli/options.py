"""Options shared by the commands that run the user's program (estimate, plan, profile, run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

PythonOption = Annotated[
    Optional[str],
    typer.Option("--python", metavar="PATH",
                 help="run the program in this Python (your virtualenv or conda env: it needs jax, "
                      "and libtpu for TPU targets) so that its own packages import"),
]
PathOption = Annotated[
    Optional[list[Path]],
    typer.Option("--path", metavar="DIR",
                 help="put DIR first on the program's import path (repeatable); the project's top "
                      "folder (pyproject.toml, setup.py or .git) is added by itself"),
]


def import_paths(paths: list[Path] | None) -> list[str]:
    """The --path folders, checked to exist."""
    from api.cli.boundary import fail

    out = []
    for p in paths or []:
        if not p.is_dir():
            fail(f"--path {p}: no such folder")
        out.append(str(p.resolve()))
    return out
