"""``python -m oomkb``: the command line, as the ``oomkb`` console script."""

from oomkb.api.cli.main import main

main()
