"""Which accelerator a question is about, and what holds on TPU only (`kb/catalogue/platforms.yaml`).

An A100 user asking about remat should not be sent `--xla_tpu_rematerialization_algo`: a
question that names a GPU and no TPU gets no step or guide card that names an XLA:TPU flag.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from oomkb.kb.catalogue_file import read_model

__all__ = ["Platforms", "load_platforms"]

FILE = "platforms.yaml"


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: list[str] = Field(min_length=1)
    tpu: list[str] = Field(min_length=1)
    tpu_only_marks: list[str] = Field(min_length=1)
    tpu_only_remedies: list[str] = Field(default_factory=list)
    no_gpu: list[str] = Field(default_factory=list)


def _words(terms: list[str]) -> re.Pattern[str]:
    parts = [rf"(?<![a-z0-9_]){re.escape(t.lower())}(?![a-z0-9_])" if t.isascii() else re.escape(t.lower())
             for t in terms]
    return re.compile("|".join(parts))


class Platforms:
    def __init__(self, data: _File):
        self._gpu = _words(data.gpu)
        self._tpu = _words(data.tpu)
        self._no_gpu = _words(data.no_gpu) if data.no_gpu else None
        self._marks = tuple(m.lower() for m in data.tpu_only_marks)
        self.tpu_only_remedies = frozenset(data.tpu_only_remedies)

    def gpu_only(self, text: str) -> bool:
        """`text` names a GPU and no TPU."""
        low = self._without_no_gpu((text or "").lower())
        return bool(self._gpu.search(low)) and not self._tpu.search(low)

    def tpu_named_only(self, text: str) -> bool:
        """`text` names a TPU and no GPU."""
        low = self._without_no_gpu((text or "").lower())
        return bool(self._tpu.search(low)) and not self._gpu.search(low)

    def no_gpu(self, text: str) -> bool:
        """`text` says there is no GPU ("I don't have a GPU", "CPU only") and names none besides."""
        low = (text or "").lower()
        return bool(self._no_gpu and self._no_gpu.search(low)) and not self._gpu.search(self._without_no_gpu(low))

    def _without_no_gpu(self, low: str) -> str:
        """`low` without the words that say there is no GPU ("no tengo GPU" names none)."""
        return self._no_gpu.sub(" ", low) if self._no_gpu else low

    def tpu_named_only(self, text: str) -> bool:
        """`text` names a TPU and no GPU."""
        low = (text or "").lower()
        return bool(self._tpu.search(low)) and not self._gpu.search(low)

    def tpu_only_remedy(self, remedy) -> bool:
        """A step (its id, text and flags) that holds on TPU only."""
        return (remedy.id in self.tpu_only_remedies or self.tpu_only(remedy.text)
                or any(self.tpu_only(f) for f in remedy.flags))

    def tpu_only(self, text: str | None) -> bool:
        """`text` (a step, a card) holds on TPU only."""
        low = (text or "").lower()
        return any(m in low for m in self._marks)


@lru_cache(maxsize=4)
def _load(folder: str) -> Platforms:
    return Platforms(read_model(Path(folder) / FILE, _File))


def load_platforms(folder: Path | None = None) -> Platforms:
    return _load(str(folder or Path(__file__).parent / "catalogue"))
