"""The `oomkb` command line: one module per command, a thin layer over the Python API."""

from oomkb.api.cli.main import app, main

__all__ = ["app", "main"]
