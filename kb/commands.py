"""Launch commands built from the settings a conversation states (`kb/catalogue/commands.yaml`):
"the train command for my setup" after a MaxText conversation gets `python3 -m MaxText.train ...`
with the asker's own `key=value` settings and model, and placeholders for what they did not say."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from oomkb.kb.catalogue_file import read_model
from oomkb.kb.figures import FigureAnswer

__all__ = ["Commands", "load_commands"]

FILE = "commands.yaml"
KIND = "command"


class Tool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    named: list[str] = Field(min_length=1)
    setting: str
    model: str | None = None
    model_setting: str | None = None
    ignore: list[str] = Field(default_factory=list)
    #: how one setting is written (`{key}`, `{KEY}` upper-cased, `{value}`), and what joins them
    line: str = "  {key}={value}"
    joiner: str = " \\\n"
    #: other values the template names ({name}): the first group of the last match in the conversation,
    #: formatted by `fill_format`; the placeholder in `fill_default` where the conversation has none
    fills: dict[str, str] = Field(default_factory=dict)
    fill_format: dict[str, str] = Field(default_factory=dict)
    fill_default: dict[str, str] = Field(default_factory=dict)
    #: settings the conversation implies in words (regex -> key=value), where it does not write them out
    implied: dict[str, str] = Field(default_factory=dict)
    template: str


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    asked: list[str] = Field(min_length=1)
    tools: list[Tool]


class Commands:
    def __init__(self, tools: list[Tool], asked: list[str]):
        self._asked = [re.compile(p) for p in asked]
        self._tools = [(t, [re.compile(p) for p in t.named], re.compile(t.setting),
                        re.compile(t.model) if t.model else None) for t in tools]

    def asks_for_one(self, turn: str) -> bool:
        """Whether the turn asks for a command line ("write me the train command")."""
        low = (turn or "").lower()
        return any(p.search(low) for p in self._asked)

    def command(self, conversation: str, text: str = "", cite: str | None = None) -> FigureAnswer | None:
        """The command of the tool the conversation names, filled with its settings, under `text` (the
        line saying what it is, in the asker's language); None when it names no tool or states none
        of its settings."""
        low = (conversation or "").lower()
        for tool, named, setting, model in self._tools:
            if not any(p.search(low) for p in named):
                continue
            settings = {k: v for k, v in setting.findall(low) if k not in tool.ignore}
            found = model.findall(low) if model is not None else []
            if found and tool.model_setting:  # ("Mixtral 8x7B", "mixtral_8x7b": the config's "mixtral-8x7b")
                name = re.sub(r"[ _]", "-", found[-1])
                settings = {tool.model_setting: name, **{k: v for k, v in settings.items()
                                                         if k != tool.model_setting}}
            for pattern, pair in tool.implied.items():
                key, value = pair.split("=", 1)
                hit = re.search(pattern, low) if key not in settings else None
                if hit:  # a setting said in words ("FSDP over the 64 chips": ici_fsdp_parallelism={1} is 64)
                    settings[key] = value.replace("{1}", hit.group(1) or "") if hit.groups() else value
            if not settings:
                return None
            lines = [tool.line.format(key=k, KEY=k.upper(), value=v) for k, v in settings.items()]
            fills = {}
            for name, pattern in tool.fills.items():
                hits = re.findall(pattern, conversation or "", re.IGNORECASE)
                fills[name] = (tool.fill_format.get(name, "{}").format(hits[-1]) if hits
                               else tool.fill_default.get(name, f"${name.upper()}"))
            code = tool.template.format(settings=tool.joiner.join(lines), **fills).rstrip() + "\n"
            return FigureAnswer(kind=KIND, subject=f"{tool.id}_command", text=text, snippet=code,
                                sources=["conversation"], cite=cite)
        return None


@lru_cache(maxsize=4)
def _load(folder: str) -> Commands:
    data = read_model(Path(folder) / FILE, _File)
    return Commands(data.tools, data.asked)


def load_commands(folder: Path | None = None) -> Commands:
    return _load(str(folder or Path(__file__).parent / "catalogue"))
