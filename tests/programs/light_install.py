"""Run the oomkb CLI as if only the base install were present: the extras' modules cannot be imported.

Usage: python light_install.py ARGS...  (the oomkb command line's arguments)
"""

import importlib.abc
import sys

from oomkb.api.cli.boundary import EXTRA_OF_MODULE


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRA_OF_MODULE:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
sys.argv = ["oomkb", *sys.argv[1:]]
from oomkb.api.cli.main import main  # noqa: E402

main()
