"""Figures answered directly: HBM, VMEM, scoped VMEM limit and cores per TPU generation, the
defaults of the flags and API parameters that remedies name, and short answers about one concept
each (Adam's state, JAX's GPU pool, checkpoint policies …) (`kb/catalogue/figures.yaml`).

A question is recognised by data (keyword groups per kind of figure, in every language, and the
generation names and aliases of `diagnostics/tpu_generations.yaml`); the answer line names where
each figure comes from: a deviceless compile here, or a public page.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from oomkb.diagnostics.tpu import Generation, generations
from oomkb.units import format_bytes, parse_size
from oomkb.kb.catalogue_file import read_model
from oomkb.kb.errors import CatalogueError
from oomkb.kb.question import load_intents
from oomkb.kb.remedies import load_catalogue
from oomkb.kb.remedies.plurals import placeholders
from oomkb.kb.remedies.schema import Catalogue
from oomkb.kb.translations import check_texts

__all__ = ["FigureAnswer", "Figures", "load_figures"]

FILE = "figures.yaml"
Kind = Literal["setting_default", "setting", "scoped_vmem", "vmem", "hbm", "cores"]
ANSWER = "answer"  # the FigureAnswer kind of a short answer
SETTING_KINDS = ("setting", "setting_default")  # the question kinds about a setting (and its answers' kind)
MESSAGES: dict[str, tuple[str, ...]] = {
    "hbm": ("generation", "public", "public_source", "usable_chip", "usable_device", "devices",
            "measured_with"),
    "hbm_megacore": ("generation", "public", "public_source", "usable_chip", "usable_device", "devices",
                     "measured_with"),
    "vmem": ("generation", "vmem", "source"),
    "scoped_vmem": ("generation", "limit", "source", "vmem"),
    "scoped_vmem_full": ("generation", "limit", "source", "vmem"),
    "cores": ("generation", "cores", "source", "devices"),
    "setting_default": ("name", "default", "note", "source"),
    "answer": ("text", "source"),
    "not_recorded": ("generation",),
    "source_measured": ("measured_with",),
    "source_public": ("url",),
}
SETTING = "$setting"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    url: str | None


class Value(_Strict):
    value: str | int
    source: str


class GenerationFigures(_Strict):
    hbm_public: Value | None = None
    cores_per_chip: Value | None = None
    slice_counts: Value | None = None
    megacore: Value | None = None
    chips_per_host: Value | None = None  # a slice of several hosts: the chips each host has
    single_host_chips: Value | None = None  # the most chips a slice of one host has (v4-8: 4, v5e-8: 8)
    vmem: Value | None = None
    scoped_vmem: Value | None = None


class Setting(_Strict):
    name: str
    aliases: list[str]
    default: str
    remedies: list[str] = Field(default_factory=list)
    source: str
    note: dict[str, str]


class ShortAnswer(_Strict):
    """A question about one concept, recognised by keyword groups, answered from a public page."""

    id: str
    all: list[list[str]]
    source: str
    cite: str | None = Field(default=None, pattern=r"^[a-z0-9-]+#[a-z0-9-]+$",
                             description="the guide section (doc_id#section) it belongs with")
    text: dict[str, str]
    remedies: list[str] = Field(default_factory=list)
    replaces: list[str] = Field(default_factory=list, description="settings whose line this makes redundant")
    drops: list[Kind] = Field(default_factory=list, description="kinds of figure lines that this answer says "
                              "do not apply (SMEM: the generations' VMEM and the VMEM settings' defaults)")
    snippet: str | None = Field(default=None, description="Python code shown under the answer (it must parse)")
    unless: list[str] = Field(default_factory=list, description="more specific answers that replace this one")
    log_markers: list[str] = Field(default_factory=list,
                                   description="texts of a pasted log that call for this answer too")
    log_with: list[list[str]] = Field(default_factory=list, description="keyword groups the question must "
                                      "match too for `log_markers` to call for it (a kernel that fails to load "
                                      "after several inputs: \"after 6 pairs\")")
    about: str | None = Field(default=None, description="the intents.yaml `tried` item it explains how to "
                              "apply: not shown to someone who says they did that and asks what next")
    covered_by: list[str] = Field(default_factory=list, description="short answers that, given in an earlier "
                                  "turn, already said this one (the same code under another name)")
    none: list[str] = Field(default_factory=list, description="keywords any of which rules it out "
                            "(a GPU named beside a TPU that is not the asker's device)")
    code_for: list[str] = Field(default_factory=list, description="words naming what its snippet does "
                                "(optax, shard): a follow-up asking for code that names one gets the snippet")
    host_memory: bool = Field(default=False, description=(
        "the answer is about the host's RAM (a save, a load, a data pipeline): the device's sizing lines "
        "(training state, optimizer state, weights per device) are not shown beside it"))
    settles: list[str] = Field(default_factory=list, description="intents.yaml `tried` items this answer judges "
                               "(host RAM that grows: the GPU pool's settings tried do not touch it): their "
                               "general explanation is not shown beside it")
    defaults: list[str] = Field(default_factory=list, description=(
        "the settings (`NAME=value`) that the program this answer is about sets for itself (ColabFold's "
        "unified memory): the arithmetic reads them with the asker's figures where the asker sets none"))


class QuestionKind(_Strict):
    kind: Kind
    all: list[list[str]]
    needs_generation: bool = False
    remedies: list[str] = Field(default_factory=list)
    unless: list[str] = Field(default_factory=list, description="kinds that, matched, replace this one")
    # a scoped limit that is already the whole physical VMEM (v4): these remedies cannot raise it
    excludes_when_full: list[str] = Field(default_factory=list)
    remedies_when_full: list[str] = Field(default_factory=list)


class Message(_Strict):
    params: list[str]
    text: dict[str, str]


class FigureFile(_Strict):
    measured_with: str
    sources: dict[str, Source]
    generations: dict[str, GenerationFigures]
    settings: list[Setting]
    answers: list[ShortAnswer] = Field(default_factory=list)
    questions: list[QuestionKind]
    messages: dict[str, Message]


class FigureAnswer(BaseModel):
    """One figure the question asked for, as an answer line in the asker's language."""

    kind: str
    subject: str = Field(description="the TPU generation or the setting's name")
    text: str = Field(description="Markdown, in the answer language, with the figure's source")
    value_bytes: int | None = None
    sources: list[str] = Field(default_factory=list, description="'measured' or public URLs")
    remedies: list[str] = Field(default_factory=list, description="remedy ids that act on it")
    snippet: str | None = Field(default=None, description="code shown under the answer line")
    cite: str | None = Field(default=None, description="the guide section it belongs with")
    about: str | None = Field(default=None, description="the tried item it explains how to apply")
    excludes: list[str] = Field(default_factory=list, description="remedy ids this figure shows cannot help")
    settles: list[str] = Field(default_factory=list, description="tried items this answer judges")
    defaults: list[str] = Field(default_factory=list, description="settings its program sets for itself")


def _keyword(term: str) -> re.Pattern[str]:
    escaped = re.escape(term.lower())
    if term.isascii():
        return re.compile(rf"(?<![a-z0-9_]){escaped}")
    return re.compile(escaped)


#: the text just before a generation's name that makes it a model's version ("large-v2"), not
#: a TPU ("tpu-v4", "cloud-v5e" and a slice's own "v4-8" stay TPUs)
_MODEL_SUFFIX = re.compile(r"(?<![a-z])(?!tpu-|cloud-|google-)[a-z][a-z0-9.]*-$")
#: a model's size right after a version ("fuji v2 70B", "llama v2 7b"): the version is the model's
_MODEL_SIZE_AFTER = re.compile(r"\s*\d+(?:\.\d+)?\s*[bm](?![a-z0-9])")


def _model_version(low: str, m: re.Match) -> bool:
    """Whether a generation's name at `m` is a model's version ("large-v2", "fuji v2 70B")."""
    return bool(_MODEL_SUFFIX.search(low[max(0, m.start() - 12):m.start()]) or _MODEL_SIZE_AFTER.match(low, m.end()))


def _name(term: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9_]){re.escape(term.lower())}(?![a-z0-9_])")


def _assigned(term: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9_]){re.escape(term.lower())}\s*=\s*[a-z0-9.]")


class Figures:
    """The loaded figures file and what answers from it."""

    def __init__(self, data: FigureFile, gens: dict[str, Generation]):
        self.data = data
        self.gens = gens
        self._gen_names = [
            (name, _name(term))
            for name, gen in gens.items() if name in data.generations
            for term in {name, gen.topology_prefix, gen.device_kind, *gen.aliases,
                          gen.device_kind.lower().removeprefix("tpu ")}
        ]
        self._settings = [(s, [_name(a) for a in {s.name, *s.aliases}]) for s in data.settings]
        # a setting written as an identifier (XLA_PYTHON_CLIENT_ALLOCATOR, vmem_limit_bytes, a --flag),
        # not a word for its concept ("preallocation", "75%")
        # a setting named as code: a name with "_", or a short alias given a value ("PREALLOCATE=false")
        self._identifiers = [(s, [_name(a) for a in {s.name, *s.aliases} if "_" in a and " " not in a]
                              + [_assigned(a) for a in s.aliases if "_" not in a and a.isascii() and a.isalpha()])
                             for s in data.settings]
        self._kinds = [(q, [[_keyword(k) for k in group if k != SETTING] for group in q.all],
                        [SETTING in group for group in q.all]) for q in data.questions]
        self._answers = [(a, [[_keyword(k) for k in group] for group in a.all]) for a in data.answers]
        self._ruled_out = {a.id: [_keyword(k) for k in a.none] for a in data.answers}
        self._log_with = {a.id: [[_keyword(k) for k in group] for group in a.log_with] for a in data.answers}
        self._code_for = [(a, [_keyword(k) for k in a.code_for]) for a in data.answers if a.snippet and a.code_for]

    # -- recognising ------------------------------------------------------------------------

    def generations_in(self, text: str) -> list[str]:
        """Generations named in `text`, in order of appearance; a name inside a longer one
        (`v5` in `v5 lite`) does not count."""
        low = text.lower()
        # a version suffix of a model's name ("whisper large-v2", "llama-v2") is not a TPU generation
        spans = [(m.start(), m.end(), name) for name, pat in self._gen_names for m in pat.finditer(low)
                 if not _model_version(low, m)]
        kept = [s for s in spans
                if not any(o[0] <= s[0] and s[1] <= o[1] and (o[1] - o[0]) > (s[1] - s[0]) for o in spans)]
        # a bare family ("v5-256") beside a full name of that family ("(v5e)"): that one, not the family's alias
        kept = [s for s in kept if not (re.fullmatch(r"v\d", low[s[0]:s[1]]) and any(
            o[2] != s[2] and o[2].lower().startswith(low[s[0]:s[1]]) for o in kept))]
        ordered: list[str] = []
        for _, _, name in sorted(kept):
            if name not in ordered:
                ordered.append(name)
        return ordered

    def last_generation_at(self, text: str) -> int:
        """Where the last generation named in `text` starts; -1 when none is."""
        low = text.lower()
        return max((m.start() for _, pat in self._gen_names for m in pat.finditer(low) if not _model_version(low, m)),
                   default=-1)

    def without_generations(self, text: str) -> str:
        """`text` with the generations it names blanked out (to ask its question of another)."""
        low = text.lower()
        spans = sorted((m.start(), m.end()) for _, pat in self._gen_names for m in pat.finditer(low))
        out, pos = [], 0
        for start, end in spans:
            if start >= pos:
                out.append(text[pos:start] + " ")
                pos = end
        return "".join(out) + text[pos:]

    def settings_in(self, text: str) -> list[Setting]:
        low = text.lower()
        return [s for s, pats in self._settings if any(p.search(low) for p in pats)]

    def kinds_of(self, question: str) -> list[QuestionKind]:
        """The kinds of figure asked for: those whose every keyword group has a hit in
        `question`, less those replaced (`unless`) by a more specific kind that also matched."""
        low = question.lower()
        settings = bool(self.settings_in(question))
        matched = [q for q, groups, has_setting in self._kinds
                   if all((flag and settings) or any(p.search(low) for p in group)
                          for group, flag in zip(groups, has_setting))]
        names = {q.kind for q in matched}
        return [q for q in matched if not names.intersection(q.unless)]

    def asks_about_a_setting(self, question: str) -> bool:
        """Whether `question` asks what a setting does, its default or how to turn it off, without
        naming one ("and how do I turn it off?"): a follow-up's setting is its conversation's."""
        low = question.lower()
        return any(q.kind in SETTING_KINDS
                   and all(flag or any(p.search(low) for p in group) for group, flag in zip(groups, has_setting))
                   for q, groups, has_setting in self._kinds)

    @cached_property
    def host_memory_answers(self) -> frozenset[str]:
        """The short answers about the host's RAM, not the device's."""
        return frozenset(a.id for a in self.data.answers if a.host_memory)

    def short_answers_of(self, question: str) -> list[ShortAnswer]:
        """The short answers whose every keyword group has a hit in `question`."""
        low = question.lower()
        matched = [a for a, groups in self._answers if all(any(p.search(low) for p in g) for g in groups)
                   and not any(p.search(low) for p in self._ruled_out[a.id])]
        ids = {a.id for a in matched}
        return [a for a in matched if not ids.intersection(a.unless)]

    def asked_again(self, question: str, ids: set[str]) -> set[str]:
        """Those of the short answers `ids` that `question` asks in its own words, its topic (the
        first keyword group) left to the conversation: "would it use the 8 GPUs?" after an
        AlphaFold question asks `alphafold_one_gpu` again."""
        low = question.lower()
        return {a.id for a, groups in self._answers if a.id in ids and len(groups) >= 2
                and all(any(p.search(low) for p in g) for g in groups[1:])
                and not any(p.search(low) for p in self._ruled_out[a.id])}

    def short_answer(self, answer_id: str, language: str) -> FigureAnswer | None:
        """The short answer `answer_id` in `language` (None: no such answer)."""
        item = next((a for a, _ in self._answers if a.id == answer_id), None)
        return self._short(item, language) if item is not None else None

    def code_named(self, text: str, language: str) -> list[FigureAnswer]:
        """The short answers whose code `text` names ("the optax snippet and the embedding's
        sharding"), in the order it names them: what a follow-up asking for code is given."""
        low = text.lower()
        found = []
        for a, patterns in self._code_for:
            at = [m.start() for p in patterns for m in p.finditer(low)]
            if at and not any(p.search(low) for p in self._ruled_out[a.id]):
                found.append((min(at), a))
        return [self._short(a, language) for _, a in sorted(found, key=lambda x: x[0])]

    def given_with(self, ids: set[str]) -> set[str]:
        """`ids` and the short answers they already said (`covered_by`): what a conversation that
        gave `ids` does not need again."""
        return set(ids) | {a.id for a, _ in self._answers if ids.intersection(a.covered_by)}

    def log_answers(self, log: str, language: str, question: str = "") -> list[FigureAnswer]:
        """Short answers a pasted log calls for (a warning the log shows: "Involuntary full
        rematerialization"), whatever the question says, except those that also need the question's
        words (`log_with`)."""
        if not log:
            return []
        low = question.lower()
        return [self._short(a, language) for a, _ in self._answers
                if any(m in log for m in a.log_markers)
                and all(any(p.search(low) for p in g) for g in self._log_with[a.id])]

    def replaced_by(self, ids: set[str]) -> set[str]:
        """The short answers that any of `ids` replaces (their `unless` names one): a log's own
        answer ("JIT session error") replaces the general one the question's words matched."""
        return {a.id for a, _ in self._answers if ids.intersection(a.unless)}

    def settings_replaced_by(self, ids: set[str]) -> set[str]:
        """The settings whose line any of the short answers `ids` makes redundant (their `replaces`)."""
        return {name for a, _ in self._answers if a.id in ids for name in a.replaces}

    def follow_up_answers(self, subject: str, question: str, language: str) -> list[FigureAnswer]:
        """Short answers that a follow-up asks for in its conversation's terms ("and which policy
        keeps the matmuls?" after a remat question): those that match the subject and the
        question together but not the subject alone (that one was answered already)."""
        before = {a.id for a in self.short_answers_of(subject)}
        return [self._short(a, language) for a in self.short_answers_of(f"{subject}\n{question}")
                if a.id not in before]

    # -- answering --------------------------------------------------------------------------

    def answer(self, question: str, language: str, every_generation: bool = True,
               named_settings: bool = False) -> list[FigureAnswer]:
        """The figures `question` asks for, as lines in `language`; [] when it asks for none.
        A generation's figure asked without naming one is given for every generation, unless
        `every_generation` is False (the asker's own evidence says which figures matter).
        `named_settings`: a setting the question names is asked about even without a "what
        does" word ("and if I set ALLOCATOR=platform, is it fixed?"); the caller says so when
        the asker does not merely report having set it."""
        if not question or not question.strip():
            return []
        named = self.generations_in(question)
        short = self.short_answers_of(question)
        answers: list[FigureAnswer] = [self._short(a, language) for a in short]
        replaced = {name for a in short for name in a.replaces}
        dropped = {kind for a in short for kind in a.drops}
        kinds = [k for k in self.kinds_of(question) if k.kind not in dropped]
        if (named_settings and not dropped & set(SETTING_KINDS)
                and not any(k.kind in SETTING_KINDS for k in kinds)):
            low = question.lower()
            answers += [self._setting(s, language) for s, pats in self._identifiers
                        if s.name not in replaced and any(p.search(low) for p in pats)]
        for kind in kinds:
            if kind.kind in SETTING_KINDS:  # the same line: default, what it does
                answers += [self._setting(s, language) for s in self.settings_in(question)
                            if s.name not in replaced or kind.kind == "setting_default"]
                continue
            if (kind.needs_generation or not every_generation) and not named:
                continue
            subjects = named or [g for g, f in self.data.generations.items()
                                 if (kind.kind == "hbm" and f.hbm_public)
                                 or (kind.kind == "cores" and f.cores_per_chip)
                                 or (kind.kind in ("vmem", "scoped_vmem") and self.vmem(g, kind.kind))]
            answers += [self._generation(kind, g, language) for g in subjects]
        return answers

    def _msg(self, key: str, language: str, **values: object) -> str:
        texts = self.data.messages[key].text
        template = texts.get(language) or texts["en"]
        return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), template)

    def _source(self, key: str, language: str) -> tuple[str, str]:
        url = self.data.sources[key].url
        if url is None:
            return self._msg("source_measured", language, measured_with=self.data.measured_with), "measured"
        return self._msg("source_public", language, url=url), url

    def vmem(self, name: str, which: str) -> tuple[int, str] | None:
        """(bytes, source key) of a generation's physical VMEM (`vmem`) or default scoped limit
        (`scoped_vmem`): from tpu_generations.yaml when it carries the figure (one place for
        the estimator and the answers), else from this file's entry."""
        gen = self.gens[name]
        field = {"vmem": "vmem_bytes", "scoped_vmem": "scoped_vmem_default_bytes"}[which]
        value = getattr(gen, field, None)
        if isinstance(value, int) and value > 0:
            note = str(getattr(gen, field.replace("_bytes", "").replace("_default", "") + "_source", "") or "")
            return value, "measured" if note.startswith("measured") else "jax-tpu-info"
        entry = getattr(self.data.generations.get(name), which, None) if name in self.data.generations else None
        return (parse_size(str(entry.value)), entry.source) if entry else None

    def _generation(self, kind: QuestionKind, name: str, language: str) -> FigureAnswer:
        fig = self.data.generations[name]
        gen = self.gens[name]
        devices = gen.devices_per_chip
        out = FigureAnswer(kind=kind.kind, subject=name, text="", remedies=list(kind.remedies))
        if kind.kind == "hbm" and fig.hbm_public:
            per_device = parse_size(gen.hbm_reported)
            source, where = self._source(fig.hbm_public.source, language)
            out.text = self._msg(
                "hbm_megacore" if fig.megacore else "hbm", language, generation=name, public=fig.hbm_public.value, public_source=source,
                usable_chip=format_bytes(per_device * devices), usable_device=format_bytes(per_device),
                devices=devices, measured_with=self.data.measured_with)
            out.value_bytes = per_device * devices
            out.sources = [where, "measured"]
        elif kind.kind in ("vmem", "scoped_vmem") and self.vmem(name, kind.kind) and self.vmem(name, "vmem"):
            amount, source_key = self.vmem(name, kind.kind)
            source, where = self._source(source_key, language)
            vmem = format_bytes(self.vmem(name, "vmem")[0])
            values = {"vmem": vmem} if kind.kind == "vmem" else {"limit": format_bytes(amount), "vmem": vmem}
            full = kind.kind == "scoped_vmem" and amount >= self.vmem(name, "vmem")[0]
            # (v4: the default is all the VMEM a core has; no limit raises it, smaller blocks are the way)
            out.text = self._msg("scoped_vmem_full" if full else kind.kind, language, generation=name, source=source,
                                 **values)
            if full:
                out.remedies, out.excludes = list(kind.remedies_when_full), list(kind.excludes_when_full)
            out.value_bytes = amount
            out.sources = [where]
        elif kind.kind == "cores" and fig.cores_per_chip:
            source, where = self._source(fig.cores_per_chip.source, language)
            out.text = self._msg("cores", language, generation=name, cores=fig.cores_per_chip.value,
                                 source=source, devices=devices)
            out.sources = [where]
        else:
            out.text = self._msg("not_recorded", language, generation=name)
        return out

    def _setting(self, setting: Setting, language: str) -> FigureAnswer:
        source, where = self._source(setting.source, language)
        text = self._msg("setting_default", language, name=setting.name, default=f"`{setting.default}`",
                         note=setting.note.get(language) or setting.note["en"], source=source)
        return FigureAnswer(kind="setting_default", subject=setting.name, text=text,
                            sources=[where], remedies=list(setting.remedies))


    def _short(self, item: ShortAnswer, language: str) -> FigureAnswer:
        source, where = self._source(item.source, language)
        text = self._msg("answer", language, text=item.text.get(language) or item.text["en"], source=source)
        return FigureAnswer(kind=ANSWER, subject=item.id, text=text, sources=[where],
                            remedies=list(item.remedies), cite=item.cite, about=item.about,
                            settles=list(item.settles), defaults=list(item.defaults),
                            snippet=item.snippet.strip("\n") if item.snippet else None)


def load_figures(catalogue: Catalogue | None = None, dir: Path | str | None = None) -> Figures:
    """The figures file in `dir` (default: the catalogue's folder), checked: known generations,
    sources and remedies, sizes that parse, every text in every language with its placeholders."""
    cat = catalogue or load_catalogue()
    folder = Path(dir) if dir is not None else Path(cat.path)
    terms = tuple((r.id, tuple(r.flags + r.apis)) for r in cat.remedies)
    return _load(str((folder / FILE).resolve()), terms)


@lru_cache(maxsize=8)
def _load(path: str, remedy_terms_items: tuple[tuple[str, tuple[str, ...]], ...]) -> Figures:
    remedy_terms = dict(remedy_terms_items)
    remedy_ids = tuple(remedy_terms)
    data = read_model(path, FigureFile)
    gens = generations()

    def fail(item: str, problem: str) -> CatalogueError:
        return CatalogueError(f"{path}: {item}: {problem}")

    for name, fig in data.generations.items():
        if name not in gens:
            raise fail(f"generation {name!r}", f"not in tpu_generations.yaml ({', '.join(gens)})")
        for field in ("hbm_public", "cores_per_chip", "vmem", "scoped_vmem"):
            value = getattr(fig, field)
            if value is None:
                continue
            if value.source not in data.sources:
                raise fail(f"generation {name!r} {field}", f"unknown source {value.source!r}")
            if field in ("vmem", "scoped_vmem"):
                try:
                    parse_size(str(value.value))
                except ValueError as exc:
                    raise fail(f"generation {name!r} {field}", str(exc)) from exc
        if fig.scoped_vmem and not fig.vmem and not getattr(gens[name], "vmem_bytes", None):
            raise fail(f"generation {name!r}", "a scoped VMEM limit needs the physical VMEM too")
    for s in data.settings:
        if s.source not in data.sources:
            raise fail(f"setting {s.name!r}", f"unknown source {s.source!r}")
        check_texts(path, f"setting {s.name!r} note", s.note, set())
    setting_names = {s.name for s in data.settings}
    tried_ids = {t.id for t in load_intents().intents.tried}
    if len({a.id for a in data.answers}) != len(data.answers):
        raise fail("answers", "ids must be unique")
    for a in data.answers:
        if a.source not in data.sources:
            raise fail(f"answer {a.id!r}", f"unknown source {a.source!r}")
        if not a.all or any(not group for group in a.all):
            raise fail(f"answer {a.id!r}", "needs non-empty keyword groups")
        unknown = (set(a.unless) | set(a.covered_by)) - {b.id for b in data.answers}
        if unknown:
            raise fail(f"answer {a.id!r}", f"unless or covered_by names unknown answers {sorted(unknown)}")
        if not set(a.replaces) <= setting_names:
            raise fail(f"answer {a.id!r}", f"replaces unknown settings {sorted(set(a.replaces) - setting_names)}")
        if a.about is not None and a.about not in tried_ids:
            raise fail(f"answer {a.id!r}", f"about names an unknown tried item {a.about!r} (intents.yaml)")
        for tried_id in a.settles:
            if tried_id not in tried_ids:
                raise fail(f"answer {a.id!r}", f"settles an unknown tried item {tried_id!r} (intents.yaml)")
        check_texts(path, f"answer {a.id!r} text", a.text, set())
        if a.snippet is not None:
            try:
                ast.parse(a.snippet)
            except SyntaxError as exc:
                raise fail(f"answer {a.id!r} snippet", f"does not parse: {exc}") from exc
    kinds = {q.kind for q in data.questions}
    for q in data.questions:
        if not q.all or any(not group for group in q.all):
            raise fail(f"question {q.kind!r}", "needs non-empty keyword groups")
        if not set(q.unless) <= kinds - {q.kind}:
            raise fail(f"question {q.kind!r}", f"unless names unknown kinds {sorted(set(q.unless) - kinds)}")
    for rid in ([r for s in data.settings for r in s.remedies] + [r for q in data.questions for r in q.remedies]
                + [r for a in data.answers for r in a.remedies]):
        if rid not in remedy_ids:
            raise fail(f"remedy {rid!r}", "no remedy with that id")
    for s in data.settings:
        names = " ".join([s.name, *s.aliases])
        for rid in s.remedies:
            terms = remedy_terms.get(rid, ())
            if not any(t.split("=")[0].lstrip("-") in names for t in terms):
                raise fail(f"setting {s.name!r}", f"remedy {rid!r} names none of it ({list(terms)})")
    for key, params in MESSAGES.items():
        msg = data.messages.get(key)
        if msg is None or tuple(msg.params) != params:
            raise fail(f"message {key!r}", f"must exist and take exactly {list(params)}")
        check_texts(path, f"message {key!r}", msg.text, set(params))
        if placeholders(msg.text["en"]) != set(params):
            raise fail(f"message {key!r}", f"must show every one of {list(params)}")
    return Figures(data, gens)
