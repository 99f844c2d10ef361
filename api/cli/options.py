"""Options shared by the commands (most by those that run the user's program: estimate, plan, profile, run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

ProgramArgument = Annotated[str, typer.Argument(metavar="FILE.py:FACTORY", help="factory of the program")]
TpuOption = Annotated[str, typer.Option("--tpu", help="TPU generation: v2, v3, v4, v5e, v5p, v6e, TPU7x")]
TopologyOption = Annotated[Optional[str], typer.Option("--topology", help="chip grid such as 2x2 or v5e:2x4")]
JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable output")]
IsolateOption = Annotated[
    bool,
    typer.Option("--isolate", help="run the program in a bubblewrap sandbox: no network, no other "
                 "processes, no files but its own folder and the Python packages"),
]
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
