"""Running a job in the user's own Python (``--python PATH``): their virtualenv or conda env.

The user's program imports what their environment has (optax, flax, their own packages), so it
is best loaded by their interpreter. oomkb's child code is put on that interpreter's path; what
the job needs from the user's environment is **jax** (and **libtpu** for a TPU target). oomkb's own
pure helpers (pydantic, PyYAML) come from the user's environment when it has them, otherwise from
oomkb's, appended *after* the user's own folders so that nothing of theirs is ever shadowed; that
works when both interpreters are the same Python version (pydantic's core is compiled).

:func:`check_interpreter` asks the interpreter, in a short child of its own, what it has, and turns
every shortcoming into one line saying what to install there.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from pydantic import BaseModel

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.layout import lend_code

__all__ = ["Interpreter", "InterpreterError", "check_interpreter", "child_bootstrap"]

_PROBE = r"""
import importlib.util as u, json, sys
def has(name):
    try:
        return u.find_spec(name) is not None
    except Exception:
        return False
print(json.dumps({"version": list(sys.version_info[:2]), "executable": sys.executable,
                  "prefix": sys.prefix, "base_prefix": sys.base_prefix,
                  "modules": {m: has(m) for m in ("jax", "jaxlib", "libtpu", "pydantic", "pydantic_core",
                                                  "yaml", "numpy")}}))
"""


class InterpreterError(DiagnosticsError):
    """``--python`` names something that is not a usable Python for the job; the message says what to do."""


class Interpreter(BaseModel):
    """What a Python interpreter has, as it reported itself."""

    path: str
    executable: str
    version: tuple[int, int]
    prefix: str
    base_prefix: str
    modules: dict[str, bool]
    #: oomkb's own site-packages, appended to the child's path for what the interpreter lacks
    support_path: list[str] = []

    @property
    def folders(self) -> list[Path]:
        """Folders the interpreter reads (for an isolated child to see them read-only)."""
        return sorted({Path(self.prefix), Path(self.base_prefix), Path(self.executable).resolve().parent})


def oomkb_site_packages() -> list[str]:
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def _inside(folder: str) -> str:
    """`, e.g. FOLDER/bin/python` for a virtualenv or conda env given by its folder."""
    for relative in ("bin/python", "bin/python3", "Scripts/python.exe"):
        candidate = os.path.join(folder, relative)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return f", e.g. --python {candidate}"
    return " (such as ENV/bin/python)"


@functools.lru_cache(maxsize=16)
def _probe(path: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    try:
        done = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60,
                              env=env, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise InterpreterError(f"--python {path}: no such file") from None
    except PermissionError:
        if os.path.isdir(path):
            raise InterpreterError(f"--python {path} is a folder; give its Python executable"
                                   + _inside(path)) from None
        raise InterpreterError(f"--python {path}: not executable") from None
    except OSError as exc:
        raise InterpreterError(f"--python {path}: cannot run it ({exc.strerror or exc})") from None
    except subprocess.TimeoutExpired:
        raise InterpreterError(f"--python {path}: it did not answer within 60 s") from None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InterpreterError(f"--python {path}: not a Python interpreter oomkb can use "
                               f"(it printed {done.stdout[-200:]!r}, exit {done.returncode})") from None


def check_interpreter(path: str | os.PathLike[str], *, need_tpu: bool) -> Interpreter:
    """The interpreter at `path`, checked for what a job needs (raises :class:`InterpreterError`)."""
    path = os.fspath(path)
    info = _probe(path)
    interp = Interpreter(path=path, executable=info["executable"], version=tuple(info["version"]),
                         prefix=info["prefix"], base_prefix=info["base_prefix"], modules=info["modules"])
    has = interp.modules
    version = ".".join(map(str, interp.version))
    if interp.version < (3, 10):
        raise InterpreterError(f"--python {path} is Python {version}; oomkb's worker needs Python 3.10 or newer")
    if not (has.get("jax") and has.get("jaxlib")):
        raise InterpreterError(f"--python {path} has no jax; install it there with: "
                               f"{path} -m pip install 'jax[tpu]'")
    if need_tpu and not has.get("libtpu"):
        raise InterpreterError(f"--python {path} has jax but no libtpu, which TPU compiles need; "
                               f"install it there with: {path} -m pip install 'jax[tpu]'")
    if not (has.get("pydantic") and has.get("pydantic_core") and has.get("yaml")):
        if interp.version != tuple(sys.version_info[:2]):
            ours = f"{sys.version_info[0]}.{sys.version_info[1]}"
            raise InterpreterError(
                f"--python {path} (Python {version}) lacks pydantic or PyYAML, and oomkb (Python {ours}) "
                f"cannot lend its own to another Python version; install them there with: "
                f"{path} -m pip install pydantic pyyaml")
        interp.support_path = oomkb_site_packages()
    return interp


def child_bootstrap(interp: Interpreter | None) -> str:
    """The ``-c`` code that starts a job's child (in `interp`, or in oomkb's own Python)."""
    support = interp.support_path if interp is not None else []
    return lend_code("from oomkb.diagnostics.sandbox import _child_main; _child_main()", support)
