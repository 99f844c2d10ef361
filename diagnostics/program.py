"""The program contract: a user's ``FILE.py:NAME``, its factory, and the user's own source line.

One module owns what every command (``estimate``, ``profile``, ``plan``) means by "the user's
program":

* :func:`resolve_program` / :func:`load_program_object` find the file and the name in it, turning
  every way that can go wrong (no file, not Python, syntax error, failing import, no such name)
  into a clear :class:`ProgramError`.
* :func:`call_factory` calls a factory: with no arguments, with ``devices=`` / ``mesh=`` when its
  signature asks for them (a 1-D mesh named :data:`MESH_AXIS` over the given devices), plus any
  keyword arguments the caller adds (``plan --vary batch=1..4096`` passes ``batch=``).
* :func:`as_program` / :func:`unpack_program` read what a factory returned: ``(fn, args)`` or
  ``(fn, args, kwargs)``, as a tuple or a list, ``args`` a tuple or list, ``kwargs`` any Mapping.
* :func:`user_location` / :func:`user_frame` name the innermost line of the user's own code, with
  one definition of what is *not* the user's code (this package, the standard library, installed
  packages, JAX).

Process isolation (timeouts, limits, a child process) is :mod:`diagnostics.sandbox`'s business.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import re
import sys
import sysconfig
import tempfile
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.layout import code_dirs

__all__ = [
    "MESH_AXIS",
    "FactoryError",
    "Program",
    "ProgramError",
    "ProgramExited",
    "ProgramLoadError",
    "ProgramNameError",
    "ProgramSpec",
    "ProgramSpecError",
    "as_program",
    "call_factory",
    "callable_name",
    "describe_exception",
    "factory_accepts",
    "load_factory",
    "load_program_object",
    "resolve_program",
    "unpack_program",
    "user_frame",
    "user_location",
]

#: Name of the mesh axis when a factory asks for ``mesh``: a 1-D mesh over all devices.
MESH_AXIS = "data"


# ---------------------------------------------------------------------------------------------
# Errors


class ProgramError(DiagnosticsError):
    """The user's program could not be found, loaded or called as the contract says."""


class ProgramSpecError(ProgramError, ValueError):
    """``FILE.py:NAME`` is malformed, or the file is missing or not a Python file."""


class ProgramLoadError(ProgramError):
    """Importing the user's file failed (syntax error, missing module, exception at import)."""


class ProgramNameError(ProgramError, LookupError):
    """The user's file has no object of the requested name."""


class ProgramExited(ProgramError):
    """The user's code called ``sys.exit`` (or raised ``SystemExit``) instead of returning."""


class FactoryError(ProgramError, TypeError):
    """The factory raised, or returned something other than ``(fn, args)``/``(fn, args, kwargs)``."""


# ---------------------------------------------------------------------------------------------
# FILE.py:NAME


class ProgramSpec(BaseModel):
    """A user's ``FILE.py:NAME``, with the file made absolute and known to exist."""

    path: Path
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"

    @property
    def label(self) -> str:
        """``train.py:make``: the short form for messages."""
        return f"{self.path.name}:{self.name}"


_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def resolve_program(spec: str | ProgramSpec) -> ProgramSpec:
    """Check ``FILE.py:NAME`` without importing anything: the file exists and NAME is a name."""
    if isinstance(spec, ProgramSpec):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ProgramSpecError(
            f"expected FILE.py:NAME (a Python file and a function in it), got {spec!r}"
        )
    file_part, name = spec.rsplit(":", 1)
    name = name.strip()
    if not file_part:
        raise ProgramSpecError(f"no file before ':' in {spec!r}; expected FILE.py:NAME")
    if not _NAME_RE.fullmatch(name):
        raise ProgramSpecError(f"{name!r} is not a Python name; expected FILE.py:NAME")
    path = Path(file_part).expanduser()
    if not path.exists():
        raise ProgramSpecError(f"no such file: {file_part}")
    if path.is_dir():
        raise ProgramSpecError(f"{file_part} is a directory; expected a .py file")
    if path.suffix != ".py":
        raise ProgramSpecError(f"{file_part} is not a Python file (expected a name ending in .py)")
    return ProgramSpec(path=path.resolve(), name=name)


def _frame_in(tb: Any, path: Path) -> str | None:
    """``file:line`` of the innermost traceback frame inside the user's file."""
    found = None
    for frame in traceback.extract_tb(tb):
        if Path(frame.filename) == path:
            found = f"{path.name}:{frame.lineno}"
    return found


#: Files that mark the top folder of a user's project (its imports resolve from there).
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(path: Path) -> Path | None:
    """The nearest folder above `path` holding a project marker, so that ``from mymodel import X``
    works from a script in a subfolder; None when there is none (or it is the file's own folder).
    The walk stops below the system's temporary folder (``tempfile.gettempdir()``)."""
    folder = path.resolve().parent
    temp = Path(tempfile.gettempdir()).resolve()
    for candidate in (folder, *folder.parents):
        if candidate == temp:
            # Never the temporary folder or above it: anyone may put a marker in /tmp, and a
            # submitted program (written to TMPDIR/oomkb-job-*) has no project at all.
            break
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return None if candidate == folder else candidate
        if candidate == Path.home() or candidate.parent == candidate:
            break
    return None


def load_program_object(program: ProgramSpec | str) -> Any:
    """Import the user's file as a module and return its object ``NAME``.

    The file's directory goes first on ``sys.path`` (as with ``python FILE.py``), then its
    project's top folder (:func:`project_root`); the file's ``if __name__ == "__main__":`` block
    does not run.
    """
    program = resolve_program(program)
    path, name = program.path, program.name
    if not path.is_file():
        raise ProgramSpecError(f"no such file: {path}")
    stem = re.sub(r"\W", "_", path.stem) or "user_program"
    module_name = stem if stem not in sys.modules else f"_oomkb_user_{stem}"
    for folder in reversed([str(path.parent), *([str(root)] if (root := project_root(path)) else [])]):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:  # pragma: no cover - .py always loads
        raise ProgramLoadError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as err:
        sys.modules.pop(module_name, None)
        where = f"{Path(err.filename or path).name}:{err.lineno}" if err.lineno else path.name
        raise ProgramLoadError(f"syntax error in {where}: {err.msg}") from None
    except SystemExit as err:
        sys.modules.pop(module_name, None)
        raise ProgramExited(
            f"{path.name} called sys.exit({err.code!r}) while being imported; "
            "keep top-level code free of sys.exit (put it under if __name__ == '__main__':)"
        ) from None
    except BaseException as err:  # noqa: BLE001 - anything the user's module raises
        sys.modules.pop(module_name, None)
        if isinstance(err, (KeyboardInterrupt, MemoryError)):
            raise  # a MemoryError is reported as such by the job's child (with its limit)
        where = _frame_in(err.__traceback__, path) or path.name
        raise ProgramLoadError(
            f"importing {path.name} failed at {where}: {type(err).__name__}: {err}"
        ) from None
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            callables = sorted(
                n for n, v in vars(module).items()
                if callable(v) and not n.startswith("_")
                and getattr(v, "__module__", module_name) == module_name
            )
            hint = f"; functions there: {', '.join(callables[:20])}" if callables else ""
            raise ProgramNameError(f"{path.name} has no {name!r}{hint}")
        obj = getattr(obj, part)
    return obj


def load_factory(program: ProgramSpec | str) -> Callable[..., Any]:
    """:func:`load_program_object`, checked to be callable (a factory or a step function)."""
    program = resolve_program(program)
    obj = load_program_object(program)
    if not callable(obj) or isinstance(obj, type):
        raise FactoryError(
            f"{program.label} is of type {type(obj).__name__}, not a function; a factory must "
            "be a function returning (fn, args) or (fn, args, kwargs)"
        )
    return obj


# ---------------------------------------------------------------------------------------------
# Calling a factory


class Program(NamedTuple):
    """What a factory produced: call ``fn(*args, **kwargs)``; ``mesh`` if the factory got one."""

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any]
    mesh: Any = None


def callable_name(fn: Any) -> str:
    """The function's name, looking through ``functools.partial``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__name__", None) or type(fn).__name__


def factory_label(factory: Any) -> str:
    """How messages name a factory: "factory make_step", or just "factory" when that is its name
    (not "factory factory returned ...")."""
    name = callable_name(factory)
    return "factory" if name == "factory" else f"factory {name}"


def _parameters(factory: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    try:
        return inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None


def factory_accepts(factory: Callable[..., Any], name: str) -> bool:
    """Whether ``factory`` can be called with the keyword argument ``name``."""
    params = _parameters(factory)
    if params is None:
        return True  # a builtin or C callable: let the call itself tell
    param = params.get(name)
    if param is not None:
        return param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
    return any(p.kind is p.VAR_KEYWORD for p in params.values())


def wants_devices(factory: Callable[..., Any]) -> bool:
    """Whether the factory's signature names ``devices`` or ``mesh`` (it can be given a topology)."""
    params = _parameters(factory) or {}
    return "devices" in params or "mesh" in params


def call_factory(
    factory: Callable[..., Any],
    *,
    devices: list[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    label: str | None = None,
    raised: str = "raised",
) -> tuple[Any, Any]:
    """Call ``factory`` as the contract says; return ``(what it returned, the mesh or None)``.

    ``devices=`` / ``mesh=`` are passed when the signature names them (``mesh`` is a 1-D mesh
    over ``devices`` with axis :data:`MESH_AXIS`); ``kwargs`` are passed as given and must be
    accepted by the signature. Any other parameter without a default is an error, as is an
    exception raised by the factory (named with the user's line, ``raised`` being the verb).
    """
    label = label or factory_label(factory)
    params = _parameters(factory) or {}
    extra = dict(kwargs or {})
    for key in extra:
        if not factory_accepts(factory, key):
            takes = [p for p in params if p not in ("devices", "mesh")]
            raise FactoryError(
                f"{label} takes no argument {key!r}"
                + (f" (it takes: {', '.join(takes)})" if takes else " (it takes none)")
            )
    call_kwargs: dict[str, Any] = {}
    mesh = None
    if devices is not None and ("mesh" in params or "devices" in params):
        if "mesh" in params:
            import numpy as np
            from jax.sharding import Mesh

            mesh = Mesh(np.array(devices), (MESH_AXIS,))
            call_kwargs["mesh"] = mesh
        if "devices" in params:
            call_kwargs["devices"] = list(devices)
    call_kwargs.update(extra)
    required = [
        p.name for p in params.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in call_kwargs
    ]
    if required:
        raise FactoryError(
            f"{label} needs arguments ({', '.join(required)}); a factory is called with "
            "no arguments, or with mesh=/devices= when its signature asks for them"
        )
    try:
        produced = factory(**call_kwargs)
    except (DiagnosticsError, MemoryError):
        raise  # the sandbox reports a MemoryError with the memory limit it hit
    except Exception as err:
        raise FactoryError(f"{label} {raised} {describe_exception(err)}") from None
    return produced, mesh


_EXPECTED = "a factory must return (fn, args) or (fn, args, kwargs)"


def as_program(produced: Any, mesh: Any = None) -> Program | None:
    """``produced`` read as ``(fn, args[, kwargs])`` (tuple or list, ``fn`` callable), else None.

    Only the shape is recognised here; :func:`unpack_program` checks ``args`` and ``kwargs``.
    """
    if isinstance(produced, (tuple, list)) and len(produced) in (2, 3) and callable(produced[0]):
        fn, args = produced[0], produced[1]
        kwargs = produced[2] if len(produced) == 3 else {}
        return Program(fn, args, kwargs, mesh)
    return None


def unpack_program(produced: Any, label: str, mesh: Any = None) -> Program:
    """Check what a factory returned and normalise it to a :class:`Program`, or raise."""
    if not isinstance(produced, (tuple, list)) or len(produced) not in (2, 3):
        got = type(produced).__name__
        if isinstance(produced, (tuple, list)):
            got = f"a {got} of {len(produced)}"
        raise FactoryError(f"{label} returned {got}; {_EXPECTED}")
    if not callable(produced[0]):
        raise FactoryError(
            f"{label} returned {type(produced[0]).__name__} as fn, not a function; {_EXPECTED}"
        )
    fn, args, kwargs, _ = as_program(produced, mesh)
    if not isinstance(args, (tuple, list)):
        raise FactoryError(
            f"{label} returned {type(args).__name__} as args, not a tuple or list; "
            f"{_EXPECTED} (write (x,) for one argument)"
        )
    if not isinstance(kwargs, Mapping):
        raise FactoryError(
            f"{label} returned {type(kwargs).__name__} as kwargs, not a dict; {_EXPECTED}"
        )
    return Program(fn, tuple(args), dict(kwargs), mesh)


# ---------------------------------------------------------------------------------------------
# The user's own line


@functools.lru_cache(maxsize=1)
def _not_user_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(this package's folders, every folder that is library code: ours, stdlib, site, JAX)."""
    ours = {str(folder) for folder in code_dirs()}
    libraries = set(ours)
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            libraries.add(os.path.realpath(paths[key]))
    for module in ("jax", "jaxlib"):
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        for location in (found.submodule_search_locations or []) if found else []:
            libraries.add(os.path.realpath(location))
    return (tuple(os.path.join(d, "") for d in ours),
            tuple(os.path.join(d, "") for d in libraries))


def _real(filename: str) -> str:
    return os.path.realpath(filename) if os.path.isabs(filename) else filename


def not_user_dirs() -> tuple[str, ...]:
    """Folder prefixes whose files are never the user's code."""
    return _not_user_dirs()[1]


def is_user_file(filename: str | None) -> bool:
    """Whether ``filename`` is the user's code (not ours, not a library, not ``<string>``)."""
    if not filename or filename.startswith("<"):
        return False
    real = _real(filename)
    if not os.path.isabs(real):
        real = os.path.realpath(real)
    return not real.startswith(_not_user_dirs()[1])


def user_frame(frames: Iterable[tuple[str, int, str]]) -> str | None:
    """``file:line (function)`` of the first user frame in ``frames`` (innermost first).

    Reaching this package's own code first (the profiler calling the function, the estimator
    tracing it) means no line of the user's code is on record: None.
    """
    ours = _not_user_dirs()[0]
    for filename, line, function in frames:
        if filename and _real(filename).startswith(ours):
            return None
        if is_user_file(filename):
            return f"{filename}:{line} ({function})"
    return None


def array_creation_site(array: Any) -> str | None:
    """'file:line (function)' of the innermost user frame in a jax array's creation traceback."""
    try:
        traceback = array.traceback
        frames = list(traceback.frames) if traceback is not None else []
    except Exception:  # noqa: BLE001 - an array without a traceback (or a deleted one)
        return None
    return user_frame((f.file_name, f.line_num, f.function_name) for f in frames)


def user_location(exc: BaseException) -> str | None:
    """``file.py:line`` of the innermost frame of ``exc``'s traceback that is the user's code."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if is_user_file(frame.filename):
            found = f"{Path(frame.filename).name}:{frame.lineno}"
    return found


def describe_exception(exc: BaseException) -> str:
    """``ValueError: message at train.py:12``, the location being the user's innermost line."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    where = user_location(exc)
    return f"{text} at {where}" if where else text
