"""The product's own commands as next steps (`kb/catalogue/next_steps.yaml`): which `oomkb`
command would settle the question, filled with the user's names where the evidence has them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from oomkb.kb.catalogue_file import read_model
from oomkb.kb.errors import CatalogueError
from oomkb.kb.remedies import load_catalogue
from oomkb.kb.remedies.conditions import evaluate
from oomkb.kb.remedies.plurals import placeholders
from oomkb.kb.remedies.schema import Catalogue, Condition
from oomkb.kb.translations import check_texts

__all__ = ["NextStep", "NextSteps", "load_next_steps", "names_from_log"]

FILE = "next_steps.yaml"
MAX_STEPS = 2
NAMES = ("target", "factory", "script", "tpu")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tool(_Strict):
    id: str
    command: str
    when: Condition
    keywords: list[str]
    text: dict[str, str]


class NextStepFile(_Strict):
    stand_ins: dict[str, str]
    heading: dict[str, str]
    tools: list[Tool]


class NextStep(BaseModel):
    """A command to run next and what it will tell, in the answer language."""

    tool: str
    command: str
    text: str
    user_names: bool = Field(description="true when the command carries the user's own names")


# A traceback frame: File "train.py", line 12, in step
_FRAME = re.compile(r'File "([^"\n]+?\.py)", line \d+, in ([A-Za-z_<>][\w<>]*)')
_SOURCE = re.compile(r"^([^\s:]+\.py):\d+$")
_LIBRARY = ("site-packages", "dist-packages", "/jax/", "/jaxlib/", "/lib/python")
_SAFE = re.compile(r"^[\w./:-]{1,200}$")


def _short(path: str) -> str:
    return path if not path.startswith("/") else path.rsplit("/", 1)[-1]


def names_from_log(log: str | None) -> dict[str, str]:
    """The user's script and step function from a Python traceback in `log` (innermost user
    frame for the function, outermost for the script); {} when there is none."""
    frames = [(f, fn) for f, fn in _FRAME.findall(log or "") if not any(x in f for x in _LIBRARY)]
    names: dict[str, str] = {}
    if frames:
        names["script"] = _short(frames[0][0])
        inner = [(f, fn) for f, fn in frames if not fn.startswith("<")]
        if inner:
            names["target"] = f"{_short(inner[-1][0])}:{inner[-1][1]}"
    return names


def _names_from_facts(facts: Mapping[str, Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for key in ("leak_suspect_source", "largest_allocation_source", "host_callback_source"):
        m = _SOURCE.match(str(facts.get(key) or ""))
        if m:
            names.setdefault("script", _short(m.group(1)))
    if facts.get("target_generation"):
        names["tpu"] = str(facts["target_generation"])
    return names


def _keyword(term: str) -> re.Pattern[str]:
    escaped = re.escape(term.lower())
    return re.compile(rf"(?<![a-z0-9_]){escaped}" if term.isascii() else escaped)


class NextSteps:
    def __init__(self, data: NextStepFile):
        self.data = data
        self._keywords = {t.id: [_keyword(k) for k in t.keywords] for t in data.tools}

    def heading(self, language: str) -> str:
        return self.data.heading.get(language) or self.data.heading["en"]

    def choose(self, question: str, facts: Mapping[str, Any], language: str,
               names: Mapping[str, str] | None = None) -> list[NextStep]:
        """At most two commands: those whose condition holds for `facts` or whose keywords
        occur in `question`, in file order, with the user's names filled in where known."""
        low = (question or "").lower()
        known = {**_names_from_facts(facts), **{k: v for k, v in (names or {}).items() if v}}
        known = {k: v for k, v in known.items() if k in NAMES and _SAFE.match(v)}
        if "script" not in known and "target" in known:
            known["script"] = known["target"].split(":")[0]
        if "script" in known:
            known.setdefault("target", f"{known['script']}:FUNCTION")
            known.setdefault("factory", f"{known['script']}:FACTORY")
        steps: list[NextStep] = []
        for tool in self.data.tools:
            if len(steps) >= MAX_STEPS:
                break
            if not (evaluate(tool.when, facts) or any(p.search(low) for p in self._keywords[tool.id])):
                continue
            used = placeholders(tool.command)
            values = {n: known.get(n) or self.data.stand_ins[n] for n in used}
            steps.append(NextStep(
                tool=tool.id,
                command=re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], tool.command),
                text=tool.text.get(language) or tool.text["en"],
                user_names=any(n in known for n in used),
            ))
        return steps


def load_next_steps(catalogue: Catalogue | None = None, dir: Path | str | None = None) -> NextSteps:
    """The next-steps file in `dir` (default: the catalogue's folder), checked: conditions on
    known facts, commands with known placeholders, texts in every language."""
    cat = catalogue or load_catalogue()
    folder = Path(dir) if dir is not None else Path(cat.path)
    return _load(str((folder / FILE).resolve()), tuple(cat.facts))


@lru_cache(maxsize=8)
def _load(path: str, fact_names: tuple[str, ...]) -> NextSteps:
    data = read_model(path, NextStepFile)
    if set(data.stand_ins) != set(NAMES):
        raise CatalogueError(f"{path}: stand_ins must name exactly {list(NAMES)}")
    check_texts(path, "heading", data.heading, set())
    for tool in data.tools:
        item = f"tool {tool.id!r}"
        unknown = sorted(tool.when.facts() - set(fact_names))
        if unknown:
            raise CatalogueError(f"{path}: {item}: condition reads unknown fact(s) {unknown}")
        if not placeholders(tool.command) <= set(NAMES) or not tool.command.startswith("oomkb "):
            raise CatalogueError(f"{path}: {item}: command must be `oomkb ...` with placeholders from {list(NAMES)}")
        check_texts(path, item, tool.text, set())
    return NextSteps(data)
