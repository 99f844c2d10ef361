"""The `oomkb` command line: one module per command (`main` assembles them), a thin layer over the
Python API."""
