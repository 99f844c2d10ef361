"""`plan --choose NAME=a,b,c`: each value of a categorical keyword of the factory, compiled.

A factory often takes a choice that is not a number: a remat policy (``remat="full"``), an
offload target (``offload="pinned_host"``), a mesh layout (``mesh_kind="fsdp"``), a dtype
(``dtype="bfloat16"``). The plan compiles the program once per value (its session: the same
topology, HBM sizes and compile count) and, with ``--vary``, runs its search
(:mod:`diagnostics.vary_search`) under each choice, so the answer is a table: choice → the
largest value that fits, the bytes at it, the compiles it took.

Values arrive as text (a command line, JSON). Each is given to the factory as the type of the
keyword's default: ``int``, ``float`` and ``bool`` defaults convert the text (``true``/``false``,
``1``/``0``, ``yes``/``no``), the text ``None`` is ``None`` when the default is ``None``, and every
other keyword gets the text itself. The value equal to the factory's default is not compiled
again: the plan's baseline (or its ``--vary`` search) already measured it. A keyword the
signature names without a default is refused: a factory is called with no arguments.

This module reads the text and the factory's signature; :func:`diagnostics.plan.plan_factory`
compiles the choices in its session (``choose=``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.program import factory_accepts, factory_label

__all__ = ["MAX_CHOICES", "NO_DEFAULT", "ChooseError", "ChooseSpec", "check_choose",
           "choice_values", "keyword_default", "parse_choose", "same_value"]

#: The most values one --choose may name (each may cost a whole --vary search).
MAX_CHOICES = 16
_MAX_VALUE_CHARS = 200
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class ChooseError(DiagnosticsError, ValueError):
    """The --choose input is wrong (no such keyword, a value of the wrong type, ...)."""


class ChooseSpec(BaseModel):
    """What --choose compiles: the factory's keyword ``name`` at each of ``values``, as given
    (text; :func:`choice_values` converts each to the type of the keyword's default)."""

    name: str
    values: list[str]

    def describe(self) -> str:
        return f"{self.name}={','.join(self.values)}"


_USAGE = ("--choose takes NAME=a,b,c: a keyword argument of the factory and the values to "
          "compile (remat=none,full; dtype=float32,bfloat16; offload=none,pinned_host)")


def parse_choose(text: str) -> ChooseSpec:
    """``"remat=none,full"`` -> a :class:`ChooseSpec`, or a :class:`ChooseError` saying what is wrong."""
    form = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)", text or "", re.S)
    if not form:
        raise ChooseError(f"{_USAGE}, got {text!r}")
    values = [v.strip() for v in form.group(2).split(",")]
    if values and values[-1] == "":
        values.pop()  # a trailing comma
    if not values or any(v == "" for v in values):
        raise ChooseError(f"--choose {form.group(1)}: an empty value in {text!r}; {_USAGE}")
    return check_choose(ChooseSpec(name=form.group(1), values=values))


def check_choose(spec: ChooseSpec | str | tuple | list | Mapping,
                 vary: Any = None) -> ChooseSpec:
    """``spec`` checked: a name (not the one ``vary``, a --vary spec, searches), 1 to :data:`MAX_CHOICES`
    distinct values (repeats dropped, the order kept), none longer than 200 characters. Text is
    parsed (:func:`parse_choose`), a ``(name, values)`` pair or a ``{"name", "values"}`` mapping
    taken as they are."""
    if isinstance(spec, str):
        spec = parse_choose(spec)
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2 or isinstance(spec[1], str):
            raise ChooseError(f"choose: give (name, [values]), got {spec!r}")
        spec = ChooseSpec(name=str(spec[0]), values=[str(v) for v in spec[1]])
    elif isinstance(spec, Mapping):
        spec = ChooseSpec.model_validate(spec)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", spec.name):
        raise ChooseError(f"--choose {spec.name!r}: not a keyword argument name; {_USAGE}")
    if vary is not None and vary.name == spec.name:
        raise ChooseError(f"--choose {spec.name} and --vary {vary.name} name the same argument; "
                        "--vary searches a number under each --choose value")
    values = list(dict.fromkeys(spec.values))
    if not values:
        raise ChooseError(f"--choose {spec.name}=: the list of values is empty")
    if len(values) > MAX_CHOICES:
        raise ChooseError(f"--choose {spec.name}: at most {MAX_CHOICES} values, got {len(values)}")
    long = next((v for v in values if len(v) > _MAX_VALUE_CHARS or not v.strip()), None)
    if long is not None:
        raise ChooseError(f"--choose {spec.name}: a value must be 1 to {_MAX_VALUE_CHARS} "
                        f"characters, got {long[:40]!r}")
    return ChooseSpec(name=spec.name, values=values)


def _parameter(factory: Callable[..., Any], name: str) -> inspect.Parameter | None:
    try:
        return inspect.signature(factory).parameters.get(name)
    except (TypeError, ValueError):
        return None


def _convert(text: str, default: Any, name: str) -> Any:
    """``text`` as the type of the keyword's ``default`` (the module docstring's rules)."""
    if isinstance(default, bool):
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ChooseError(f"--choose {name}={text}: the factory's default {name}={default!r} is a "
                        "bool; give true or false")
    for kind in (int, float):
        if isinstance(default, kind):
            try:
                return kind(text)
            except ValueError:
                raise ChooseError(f"--choose {name}={text}: the factory's default {name}={default!r} "
                                f"is a number ({kind.__name__}); {text!r} is not one") from None
    if default is None and text == "None":
        return None
    return text


def choice_values(factory: Callable[..., Any], spec: ChooseSpec,
                  vary: Any = None) -> list[tuple[str, Any]]:
    """Each value of ``spec`` as given and as the factory will receive it; a :class:`ChooseError`
    before any compile when the factory takes no such keyword or a value cannot be converted."""
    spec = check_choose(spec, vary)
    if spec.name in ("devices", "mesh"):
        raise ChooseError(f"--choose {spec.name}: the plan gives the factory its {spec.name} itself "
                        "(the target topology); choose a keyword that names the layout instead")
    if not factory_accepts(factory, spec.name):
        raise ChooseError(f"--choose {spec.name}: the {factory_label(factory)} takes no keyword "
                        f"argument {spec.name!r}, so there is nothing to choose" + _takes(factory))
    param = _parameter(factory, spec.name)
    if param is not None and param.default is inspect.Parameter.empty:
        raise ChooseError(f"--choose {spec.name}: the {factory_label(factory)} has no default for "
                          f"{spec.name!r}; a factory is called with no arguments, so give it one "
                          f"({spec.name}={spec.values[0]!r}) and --choose compiles each value")
    default = keyword_default(factory, spec.name)
    if default is NO_DEFAULT:  # taken through **kwargs: as given
        return [(text, text) for text in spec.values]
    return [(text, _convert(text, default, spec.name)) for text in spec.values]


def _takes(factory: Callable[..., Any]) -> str:
    try:
        names = [p for p in inspect.signature(factory).parameters if p not in ("devices", "mesh")]
    except (TypeError, ValueError):
        return ""
    return f" (it takes: {', '.join(names)})" if names else " (it takes none)"


#: The default of a keyword the signature does not name (a factory taking ``**kwargs``).
NO_DEFAULT = object()


def keyword_default(factory: Callable[..., Any], name: str) -> Any:
    """The default of the factory's keyword ``name`` (the value the plan's baseline is compiled
    with), or :data:`NO_DEFAULT` when its signature does not name it."""
    param = _parameter(factory, name)
    if param is None or param.default is inspect.Parameter.empty:
        return NO_DEFAULT
    return param.default


def same_value(a: Any, b: Any) -> bool:
    """Whether choice ``a`` is the value ``b`` the baseline was compiled with (``1`` is not ``True``)."""
    return type(a) is type(b) and a == b
