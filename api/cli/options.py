"""Options shared by the commands (most by those that run the user's program: estimate, plan, profile, run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

ProgramArgument = Annotated[str, typer.Argument(metavar="FILE.py:FACTORY", help="factory of the program")]
TpuOption = Annotated[
    Optional[str],
    typer.Option("--tpu", help="TPU generation: v2, v3, v4, v5e, v5p, v6e, TPU7x "
                               "(default: the one --topology names, as in v6e:2x4; else v5e)"),
]
TopologyOption = Annotated[Optional[str], typer.Option("--topology", help="chip grid such as 2x2 or v5e:2x4")]
DEFAULT_GENERATION = "v5e"


def target_generation(tpu: str | None, topology: str | None) -> str:
    """The generation to compile for: --tpu, else the prefix of ``--topology v6e:2x4``, else v5e.

    The target is checked here, so that a wrong one is refused before anything starts.
    """
    from oomkb.api.cli.boundary import user_errors
    from oomkb.diagnostics.tpu import resolve_target

    generation = tpu
    if generation is None:
        prefix, colon, _ = (topology or "").partition(":")
        generation = prefix.strip() if colon and prefix.strip() else DEFAULT_GENERATION
    with user_errors():
        resolve_target(generation, topology)
    return generation

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
    from oomkb.api.cli.boundary import fail

    out = []
    for p in paths or []:
        if not p.is_dir():
            fail(f"--path {p}: no such folder")
        out.append(str(p.resolve()))
    return out
