"""The remedy catalogue: error categories, the guides' remedies and the answer's fixed strings,
as data in `kb/catalogue/*.yaml`, and the one place that chooses and renders them.

The assistant turns its evidence (a parsed error, an estimate, a profile) into a flat dict of
*facts* whose names and units `facts.yaml` defines. Remedies say when they apply with a small
declarative condition on those facts (no `eval`), cite `doc_id#section`, and carry a text per
supported language with placeholders for the user's numbers. Adding a remedy, a fact or a
language is an edit to the data files; this module only reads, checks and applies them.

Conditions (`when`), one form per mapping:

    {always: true}
    {all: [COND, ...]}   {any: [COND, ...]}   {not: COND}
    {fact: NAME, OP: VALUE}      OP: gt ge lt le eq ne (VALUE a number/string or {fact: NAME}),
                                     in (a list), contains (a substring), present (true/false)

A comparison involving a missing fact (absent, None or "") is false, so a remedy never fires on
evidence it does not have. Placeholders are display names: a `*_bytes` fact appears without the
suffix in human units (`{exceeded_by}`), a `*_fraction` fact as a percentage
(`{padding_waste_percent}`), others as themselves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from oomkb.indexer.errors import GuideError
from oomkb.indexer.guides import Guide, load_guides
from oomkb.kb.catalogue_file import read_yaml
from oomkb.kb.errors import CatalogueError, KnowledgeBaseError
from oomkb.kb.language import FALLBACK, SUPPORTED

__all__ = [
    "REQUIRED_MESSAGES",
    "Catalogue",
    "CategoryInfo",
    "ChosenRemedy",
    "Condition",
    "DiagnosisTemplate",
    "FactError",
    "FactSpec",
    "MissingValue",
    "MessageSpec",
    "Remedy",
    "category_name",
    "check_facts",
    "choose_remedies",
    "default_catalogue_dir",
    "diagnosis_line",
    "display_values",
    "evaluate",
    "load_catalogue",
    "message",
    "placeholders",
    "plural_categories",
    "remedy_text",
    "render",
]

FILES = ("facts.yaml", "categories.yaml", "remedies.yaml", "messages.yaml")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A count with the noun that agrees with it, ICU-style: `{calls, plural, one {# call} other
# {# calls}}`; `#` is the number, the category comes from the language's CLDR plural rules.
_PLURAL = re.compile(
    r"\{([A-Za-z_][A-Za-z0-9_]*),\s*plural,\s*"
    r"((?:(?:zero|one|two|few|many|other|=\d+)\s*\{[^{}]*\}\s*)+)\}"
)
_PLURAL_FORM = re.compile(r"(zero|one|two|few|many|other|=\d+)\s*\{([^{}]*)\}")
_NUMERIC_OPS = ("gt", "ge", "lt", "le")

# The answer's fixed strings that callers rely on, with the values each one takes; a catalogue
# without one of them (or with other values) is rejected at load time, not when a user asks.
REQUIRED_MESSAGES: dict[str, tuple[str, ...]] = {
    "diagnosis": (),
    "what_to_do": (),
    "from_the_guides": (),
    "sources": (),
    "not_covered": (),
    "paste_log_hint": (),
    "unsupported_language": ("language_name",),
}
_EQUALITY_OPS = ("eq", "ne")


Scalar = bool | int | float | str
Texts = dict[str, str]


class FactError(KnowledgeBaseError, ValueError):
    """A fact handed to the catalogue has a value of the wrong type (a bug in the caller)."""


class MissingValue(KnowledgeBaseError, LookupError):
    """A template needs a value that the facts (or message values) do not provide."""


# --------------------------------------------------------------------------- models


class FactSpec(BaseModel):
    """One name of the facts vocabulary: what it holds and where the assistant gets it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: Literal["int", "float", "str", "bool"]
    unit: Literal["bytes", "fraction", "count", "text", "flag", "number"]
    description: str
    source: str = Field(description="ParsedError / EstimateReport / ProfileReport field or rule")
    display: str | None = Field(None, description="placeholder name; derived from the unit if unset")
    values: list[str] | None = Field(None, description="the allowed values of a text fact")

    @model_validator(mode="after")
    def _unit_matches_type(self) -> FactSpec:
        allowed = {
            "bytes": {"int"},
            "count": {"int"},
            "fraction": {"float"},
            "number": {"int", "float"},
            "text": {"str"},
            "flag": {"bool"},
        }[self.unit]
        if self.type not in allowed:
            raise ValueError(f"unit {self.unit!r} needs type {sorted(allowed)}, not {self.type!r}")
        return self

    @property
    def display_name(self) -> str:
        """The placeholder that shows this fact: `exceeded_by` for `exceeded_by_bytes`."""
        if self.display:
            return self.display
        if self.unit == "bytes" and self.name.endswith("_bytes"):
            return self.name[: -len("_bytes")]
        if self.unit == "fraction" and self.name.endswith("_fraction"):
            return self.name[: -len("_fraction")] + "_percent"
        return self.name

    @property
    def numeric(self) -> bool:
        return self.type in ("int", "float")


class FactRef(BaseModel):
    """The value of another fact, as the right-hand side of a comparison."""

    model_config = ConfigDict(extra="forbid")

    fact: str


Operand = FactRef | Scalar


class Condition(BaseModel):
    """A declarative condition on facts; exactly one form per mapping (see the module doc)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    always: Literal[True] | None = None
    all_: list[Condition] | None = Field(None, alias="all")
    any_: list[Condition] | None = Field(None, alias="any")
    not_: Condition | None = Field(None, alias="not")
    fact: str | None = None
    gt: Operand | None = None
    ge: Operand | None = None
    lt: Operand | None = None
    le: Operand | None = None
    eq: Operand | None = None
    ne: Operand | None = None
    in_: list[Scalar] | None = Field(None, alias="in")
    contains: str | None = None
    present: bool | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Condition:
        forms = [n for n in ("always", "all_", "any_", "not_", "fact") if getattr(self, n) is not None]
        if len(forms) != 1:
            raise ValueError("a condition needs exactly one of: always, all, any, not, fact")
        ops = self.operators()
        if self.fact is not None and len(ops) != 1:
            raise ValueError(
                f"a fact condition needs exactly one operator "
                f"(gt, ge, lt, le, eq, ne, in, contains, present), got {ops or 'none'}"
            )
        if self.fact is None and ops:
            raise ValueError(f"operator {ops[0]} needs a fact")
        for name in ("all_", "any_"):
            if getattr(self, name) == []:
                raise ValueError(f"{name.rstrip('_')} needs at least one condition")
        return self

    def operators(self) -> list[str]:
        names = [*_NUMERIC_OPS, *_EQUALITY_OPS, "in_", "contains", "present"]
        return [n.rstrip("_") for n in names if getattr(self, n) is not None]

    @property
    def is_always(self) -> bool:
        return self.always is True

    def facts(self) -> set[str]:
        """Every fact name this condition reads."""
        if self.all_ is not None or self.any_ is not None:
            return set().union(*(c.facts() for c in (self.all_ or self.any_ or [])))
        if self.not_ is not None:
            return self.not_.facts()
        if self.fact is None:
            return set()
        found = {self.fact}
        for op in (*_NUMERIC_OPS, *_EQUALITY_OPS):
            rhs = getattr(self, op)
            if isinstance(rhs, FactRef):
                found.add(rhs.fact)
        return found

    def guaranteed(self) -> set[str]:
        """Facts that are certainly present whenever this condition holds."""
        if self.all_ is not None:
            return set().union(*(c.guaranteed() for c in self.all_))
        if self.any_ is not None:
            return set.intersection(*(c.guaranteed() for c in self.any_))
        if self.fact is None or self.present is False:
            return set()
        return self.facts()


class DiagnosisTemplate(BaseModel):
    """A one-line diagnosis in every language; applies when its placeholders are all known."""

    model_config = ConfigDict(extra="forbid")

    id: str
    when: Condition = Field(default_factory=lambda: Condition(always=True))
    text: Texts


class CategoryInfo(BaseModel):
    """An error category: its guide sections, its name and its diagnosis templates."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    cite: list[str] = Field(default_factory=list, description="doc_id#section, primary first")
    name: Texts
    diagnosis: list[DiagnosisTemplate]
    jax_remedies_apply: bool = Field(
        True, description="false for another framework's error: the assistant names it and declines"
    )


class Remedy(BaseModel):
    """One step a guide recommends, when it applies, and its text in every language.

    `text` is one mapping language -> template, or a list of them (variants, most specific
    first); the rendered variant is the one with the most placeholders whose values are known.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    category: list[str]
    when: Condition = Field(default_factory=lambda: Condition(always=True))
    kind: Literal["evidence", "general"] | None = Field(
        None, description="evidence: fires on the user's numbers; default: general iff always"
    )
    group: str | None = Field(None, description="alternatives: at most one per group is chosen")
    flags: list[str] = Field(default_factory=list)
    apis: list[str] = Field(default_factory=list)
    cite: str
    text: list[Texts]

    @field_validator("category", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("text", mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    @property
    def is_evidence(self) -> bool:
        if self.kind is not None:
            return self.kind == "evidence"
        return not self.when.is_always

    @property
    def doc_id(self) -> str:
        return self.cite.partition("#")[0]

    @property
    def section(self) -> str:
        return self.cite.partition("#")[2]


class MessageSpec(BaseModel):
    """A fixed string of an answer, in every language, with its named values."""

    model_config = ConfigDict(extra="forbid")

    params: list[str] = Field(default_factory=list)
    text: Texts


class Catalogue(BaseModel):
    """The whole validated catalogue: facts, categories, remedies (in file order), messages."""

    model_config = ConfigDict(frozen=True)

    path: str
    languages: tuple[str, ...]
    facts: dict[str, FactSpec]
    categories: dict[str, CategoryInfo]
    remedies: list[Remedy]
    messages: dict[str, MessageSpec]

    def displays(self) -> dict[str, FactSpec]:
        """Placeholder name -> the fact it shows."""
        return {f.display_name: f for f in self.facts.values()}

    def remedy(self, remedy_id: str) -> Remedy:
        for r in self.remedies:
            if r.id == remedy_id:
                return r
        raise KeyError(remedy_id)

    def remedies_for(self, category: str) -> list[Remedy]:
        """The category's remedies in catalogue (= guide) order."""
        return [r for r in self.remedies if category in r.category]

    def language(self, language: str | None) -> str:
        """`language` when the catalogue has it, else the fallback language."""
        return language if language in self.languages else FALLBACK


class ChosenRemedy(BaseModel):
    """A remedy chosen for the user's evidence, in answer order."""

    id: str
    category: str
    evidence: bool = Field(description="true when the user's numbers triggered it")
    facts: list[str] = Field(description="the facts its condition read")
    cite: str
    doc_id: str
    section: str
    flags: list[str]
    apis: list[str]
    remedy: Remedy


# --------------------------------------------------------------------------- loading


def default_catalogue_dir() -> Path:
    return Path(str(resources.files("oomkb.kb") / "catalogue"))


def load_catalogue(dir: Path | str | None = None, guides_dir: Path | str | None = None) -> Catalogue:
    """Read and validate the catalogue in `dir` (default: the built-in one) against the guides
    in `guides_dir` (default: the built-in guides). Cached per folder pair; any problem is a
    CatalogueError naming the file and the item."""
    root = Path(dir) if dir is not None else default_catalogue_dir()
    docs = str(Path(guides_dir).resolve()) if guides_dir is not None else ""
    return _load_cached(str(root.resolve()), docs)


@lru_cache(maxsize=8)
def _load_cached(root: str, guides_dir: str) -> Catalogue:
    folder = Path(root)
    if not folder.is_dir():
        raise CatalogueError(f"catalogue folder not found: {folder}")
    raw = {name: read_yaml(folder / name) for name in FILES}
    try:
        guides = load_guides(Path(guides_dir) if guides_dir else None)
    except GuideError as exc:
        raise CatalogueError(f"cannot check the catalogue's citations: {exc}") from exc
    return _Validator(folder, raw, guides, SUPPORTED).catalogue()


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


class _Validator:
    """Builds the Catalogue from the raw files, checking every cross-reference."""

    def __init__(
        self, folder: Path, raw: dict[str, Any], guides: list[Guide], languages: tuple[str, ...]
    ):
        self.folder = folder
        self.raw = raw
        self.guides = {g.doc_id: g for g in guides}
        self.languages = languages

    def fail(self, file: str, item: str, problem: str) -> CatalogueError:
        return CatalogueError(f"{self.folder / file}: {item}: {problem}")

    def catalogue(self) -> Catalogue:
        facts = self._facts()
        self.displays = {f.display_name: f for f in facts.values()}
        categories = self._categories(facts)
        remedies = self._remedies(facts, categories)
        messages = self._messages()
        return Catalogue(
            path=str(self.folder),
            languages=self.languages,
            facts=facts,
            categories=categories,
            remedies=remedies,
            messages=messages,
        )

    # facts.yaml
    def _facts(self) -> dict[str, FactSpec]:
        file = "facts.yaml"
        entries = self.raw[file].get("facts")
        if not isinstance(entries, list) or not entries:
            raise self.fail(file, "facts", "expected a non-empty list under 'facts'")
        facts: dict[str, FactSpec] = {}
        displays: dict[str, str] = {}
        for i, entry in enumerate(entries):
            name = entry.get("name", f"#{i + 1}") if isinstance(entry, dict) else f"#{i + 1}"
            try:
                spec = FactSpec.model_validate(entry)
            except ValidationError as exc:
                raise self.fail(file, f"fact {name!r}", _first_error(exc)) from exc
            if spec.name in facts:
                raise self.fail(file, f"fact {spec.name!r}", "defined twice")
            if spec.display_name in displays:
                raise self.fail(
                    file, f"fact {spec.name!r}",
                    f"placeholder {spec.display_name!r} is also the one of {displays[spec.display_name]!r}",
                )
            facts[spec.name] = spec
            displays[spec.display_name] = spec.name
        for required in ("category",):
            if required not in facts or not facts[required].values:
                raise self.fail(file, f"fact {required!r}", "must exist and list its values")
        return facts

    # categories.yaml
    def _categories(self, facts: dict[str, FactSpec]) -> dict[str, CategoryInfo]:
        file = "categories.yaml"
        entries = self.raw[file].get("categories")
        if not isinstance(entries, dict):
            raise self.fail(file, "categories", "expected a mapping category -> entry")
        known = facts["category"].values or []
        missing = [c for c in known if c not in entries]
        if missing:
            raise self.fail(file, f"category {missing[0]!r}", "has no entry")
        categories: dict[str, CategoryInfo] = {}
        for cid, entry in entries.items():
            item = f"category {cid!r}"
            if cid not in known:
                raise self.fail(file, item, f"is not a known category {known}")
            try:
                info = CategoryInfo.model_validate({**(entry or {}), "id": cid})
            except ValidationError as exc:
                raise self.fail(file, item, _first_error(exc)) from exc
            for cite in info.cite:
                self._check_cite(file, item, cite)
            self._check_texts(file, f"{item} name", info.name, set())
            if not info.diagnosis:
                raise self.fail(file, item, "needs at least one diagnosis template")
            ids = set()
            for t in info.diagnosis:
                titem = f"{item} diagnosis {t.id!r}"
                if t.id in ids:
                    raise self.fail(file, titem, "id used twice")
                ids.add(t.id)
                self._check_condition(file, titem, t.when, facts)
                self._check_texts(file, titem, t.text, self.displays.keys())
            if not any(t.when.is_always and not self._placeholders(t.text) for t in info.diagnosis):
                raise self.fail(
                    file, item, "needs a diagnosis template without placeholders or condition"
                )
            categories[cid] = info
        return categories

    # remedies.yaml
    def _remedies(
        self, facts: dict[str, FactSpec], categories: dict[str, CategoryInfo]
    ) -> list[Remedy]:
        file = "remedies.yaml"
        entries = self.raw[file].get("remedies")
        if not isinstance(entries, list):
            raise self.fail(file, "remedies", "expected a list under 'remedies'")
        remedies: list[Remedy] = []
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            rid = entry.get("id", f"#{i + 1}") if isinstance(entry, dict) else f"#{i + 1}"
            item = f"remedy {rid!r}"
            try:
                remedy = Remedy.model_validate(entry)
            except ValidationError as exc:
                raise self.fail(file, item, _first_error(exc)) from exc
            if remedy.id in seen:
                raise self.fail(file, item, "id used twice")
            seen.add(remedy.id)
            for c in remedy.category:
                if c not in categories:
                    raise self.fail(file, item, f"unknown category {c!r}")
            self._check_condition(file, item, remedy.when, facts)
            section = self._check_cite(file, item, remedy.cite)
            if not remedy.text:
                raise self.fail(file, item, "needs a text")
            for n, variant in enumerate(remedy.text):
                vitem = f"{item} text variant {n + 1}" if len(remedy.text) > 1 else f"{item} text"
                self._check_texts(file, vitem, variant, self.displays.keys())
                for term in (*remedy.flags, *remedy.apis):
                    for lang in self.languages:
                        if term not in variant[lang]:
                            raise self.fail(
                                file, f"{vitem} [{lang}]",
                                f"does not name {term!r} verbatim",
                            )
            guaranteed = {self.facts_display(f, facts) for f in remedy.when.guaranteed()}
            last = self._placeholders(remedy.text[-1])
            if not last <= guaranteed:
                raise self.fail(
                    file, item,
                    f"its last (least specific) text needs {sorted(last - guaranteed)}, which "
                    "its condition does not guarantee; add a variant without them",
                )
            for term in remedy.flags + remedy.apis:
                if term not in section:
                    raise self.fail(
                        file, item, f"{term!r} does not appear in the cited section {remedy.cite}"
                    )
            remedies.append(remedy)
        return remedies

    @staticmethod
    def facts_display(name: str, facts: dict[str, FactSpec]) -> str:
        return facts[name].display_name

    # messages.yaml
    def _messages(self) -> dict[str, MessageSpec]:
        file = "messages.yaml"
        entries = self.raw[file].get("messages")
        if not isinstance(entries, dict) or not entries:
            raise self.fail(file, "messages", "expected a mapping key -> message")
        messages: dict[str, MessageSpec] = {}
        for key, entry in entries.items():
            item = f"message {key!r}"
            try:
                spec = MessageSpec.model_validate(entry)
            except ValidationError as exc:
                raise self.fail(file, item, _first_error(exc)) from exc
            self._check_texts(file, item, spec.text, set(spec.params))
            messages[key] = spec
        for key, params in REQUIRED_MESSAGES.items():
            if key not in messages:
                raise self.fail(file, f"message {key!r}", "is required but missing")
            if set(messages[key].params) != set(params):
                raise self.fail(
                    file, f"message {key!r}",
                    f"must take exactly the values {list(params)}, not {messages[key].params}",
                )
        return messages

    # shared checks
    def _check_cite(self, file: str, item: str, cite: str) -> str:
        doc_id, sep, section_id = cite.partition("#")
        if not sep or not doc_id or not section_id:
            raise self.fail(file, item, f"citation {cite!r} is not doc_id#section")
        guide = self.guides.get(doc_id)
        if guide is None:
            raise self.fail(file, item, f"citation {cite!r}: no guide {doc_id!r}")
        section = guide.section(section_id)
        if section is None:
            raise self.fail(file, item, f"citation {cite!r}: guide {doc_id!r} has no section {section_id!r}")
        return section.text

    def _check_plurals(self, file: str, item: str, lang: str, template: str) -> None:
        needed = plural_categories(lang)
        for m in _PLURAL.finditer(template):
            forms = {k for k, _ in _PLURAL_FORM.findall(m.group(2))}
            missing = sorted(needed - forms)
            if missing:
                raise self.fail(
                    file, f"{item} [{lang}]",
                    f"plural {{{m.group(1)}, plural, ...}} lacks the form(s) {', '.join(missing)} "
                    f"({lang} counts take {', '.join(sorted(needed))})",
                )

    @staticmethod
    def _placeholders(texts: Texts) -> set[str]:
        return set().union(*(placeholders(t) for t in texts.values())) if texts else set()

    def _check_texts(self, file: str, item: str, texts: Texts, allowed: Any) -> None:
        missing = [lang for lang in self.languages if not (texts.get(lang) or "").strip()]
        if missing:
            raise self.fail(file, item, f"missing language(s) {', '.join(missing)}")
        reference: set[str] | None = None
        for lang in self.languages:
            self._check_plurals(file, item, lang, texts[lang])
            names = placeholders(texts[lang])
            unknown = sorted(n for n in names if n not in allowed)
            if unknown:
                raise self.fail(
                    file, f"{item} [{lang}]", f"unknown placeholder(s) {', '.join(unknown)}"
                )
            if reference is None:
                reference = names
            elif names != reference:
                raise self.fail(
                    file, f"{item} [{lang}]",
                    f"uses placeholders {sorted(names)} but [{self.languages[0]}] uses "
                    f"{sorted(reference)}; every language must show the same numbers",
                )

    def _check_condition(
        self, file: str, item: str, cond: Condition, facts: dict[str, FactSpec]
    ) -> None:
        for sub in (*(cond.all_ or []), *(cond.any_ or [])):
            self._check_condition(file, item, sub, facts)
        if cond.not_ is not None:
            self._check_condition(file, item, cond.not_, facts)
        if cond.fact is None:
            return
        spec = facts.get(cond.fact)
        if spec is None:
            raise self.fail(file, item, f"condition reads unknown fact {cond.fact!r}")
        op = cond.operators()[0]
        rhs = getattr(cond, {"in": "in_"}.get(op, op))
        if isinstance(rhs, FactRef):
            other = facts.get(rhs.fact)
            if other is None:
                raise self.fail(file, item, f"condition reads unknown fact {rhs.fact!r}")
            if op in _NUMERIC_OPS and not (spec.numeric and other.numeric):
                raise self.fail(file, item, f"{op} compares non-numeric facts {cond.fact}, {rhs.fact}")
            return
        if op in _NUMERIC_OPS:
            if not spec.numeric or isinstance(rhs, (bool, str)):
                raise self.fail(file, item, f"{op} on {cond.fact!r} needs a numeric fact and number")
        elif op == "contains" and spec.type != "str":
            raise self.fail(file, item, f"contains on {cond.fact!r} needs a text fact")
        elif op in ("eq", "ne", "in"):
            values = rhs if op == "in" else [rhs]
            for v in values:
                if not _type_ok(spec, v):
                    raise self.fail(file, item, f"{op} compares {cond.fact!r} ({spec.type}) with {v!r}")
                if spec.values and v not in spec.values:
                    raise self.fail(file, item, f"{v!r} is not a value of {cond.fact!r}")


def _type_ok(spec: FactSpec, value: Any) -> bool:
    if spec.type == "bool":
        return isinstance(value, bool)
    if spec.type == "str":
        return isinstance(value, str)
    if spec.type == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------- evaluation


def _value(facts: Mapping[str, Any], name: str) -> Any:
    value = facts.get(name)
    return None if value is None or value == "" else value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
        isinstance(value, float) and math.isnan(value)
    )


def evaluate(cond: Condition, facts: Mapping[str, Any]) -> bool:
    """Whether `cond` holds for `facts`; a comparison with a missing fact is false."""
    if cond.always:
        return True
    if cond.all_ is not None:
        return all(evaluate(c, facts) for c in cond.all_)
    if cond.any_ is not None:
        return any(evaluate(c, facts) for c in cond.any_)
    if cond.not_ is not None:
        return not evaluate(cond.not_, facts)
    assert cond.fact is not None
    left = _value(facts, cond.fact)
    if cond.present is not None:
        return (left is not None) == cond.present
    if left is None:
        return False
    if cond.in_ is not None:
        return left in cond.in_
    if cond.contains is not None:
        return isinstance(left, str) and cond.contains in left
    for op in (*_NUMERIC_OPS, *_EQUALITY_OPS):
        rhs = getattr(cond, op)
        if rhs is None:
            continue
        right = _value(facts, rhs.fact) if isinstance(rhs, FactRef) else rhs
        if right is None:
            return False
        if op in _EQUALITY_OPS:
            same = left == right
            return same if op == "eq" else not same
        if not (_is_number(left) and _is_number(right)):
            return False
        return {
            "gt": left > right, "ge": left >= right, "lt": left < right, "le": left <= right
        }[op]
    return False  # pragma: no cover - the model guarantees one operator


def check_facts(catalogue: Catalogue, facts: Mapping[str, Any]) -> None:
    """Raise FactError when a known fact has a value of the wrong type; unknown names and
    None values are allowed (they are simply not evidence)."""
    for name, value in facts.items():
        spec = catalogue.facts.get(name)
        if spec is None or value is None:
            continue
        if not _type_ok(spec, value):
            raise FactError(f"fact {name!r} must be {spec.type} ({spec.unit}), got {value!r}")


# --------------------------------------------------------------------------- rendering


def placeholders(template: str) -> set[str]:
    """The `{name}` placeholders of a template, plural counts (`{n, plural, ...}`) included."""
    return set(_PLACEHOLDER.findall(template)) | {m.group(1) for m in _PLURAL.finditer(template)}


@lru_cache(maxsize=32)
def plural_categories(language: str) -> frozenset[str]:
    """The CLDR plural categories that whole numbers take in `language` (babel's rules):
    {one, other} in English, {one, few, many} in Russian, {other} in Chinese."""
    rule = _plural_rule(language)
    return frozenset(rule(n) for n in range(0, 1000))


@lru_cache(maxsize=32)
def _plural_rule(language: str) -> Callable[[int], str]:
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(language).plural_form
    except (UnknownLocaleError, ValueError):
        return lambda n: "other"


def _plural(m: re.Match[str], values: Mapping[str, Any], language: str) -> str:
    value = values[m.group(1)]
    forms = dict(_PLURAL_FORM.findall(m.group(2)))
    try:
        n = int(float(str(value)))
    except ValueError:
        n = None
    if n is not None and f"={n}" in forms:
        form = forms[f"={n}"]
    else:
        category = _plural_rule(language)(n) if n is not None else "other"
        form = forms.get(category, forms.get("other", ""))
    return form.replace("#", str(value))


def _percent(fraction: float) -> str:
    pct = fraction * 100
    if pct != 0 and abs(pct) < 10:
        return f"{pct:.1f}%"
    return f"{pct:.0f}%"


def _display(spec: FactSpec, value: Any, format_bytes: Callable[[int], str]) -> str:
    if spec.unit == "bytes":
        return format_bytes(int(value))
    if spec.unit == "fraction":
        return _percent(float(value))
    if spec.unit == "count":
        return str(int(value))
    if spec.unit == "number" and isinstance(value, float):
        return f"{value:g}"
    return str(value)


def display_values(
    catalogue: Catalogue, facts: Mapping[str, Any], format_bytes: Callable[[int], str]
) -> dict[str, str]:
    """Placeholder name -> the fact's value in human form, for every known fact that is set."""
    shown: dict[str, str] = {}
    for name, spec in catalogue.facts.items():
        value = _value(facts, name)
        if value is None or not _type_ok(spec, value):
            continue
        if spec.unit in ("bytes", "count", "fraction", "number") and not _is_number(value):
            continue
        shown[spec.display_name] = _display(spec, value, format_bytes)
    return shown


def _fill(template: str, values: Mapping[str, Any], language: str = FALLBACK) -> str:
    missing = sorted(n for n in placeholders(template) if values.get(n) in (None, ""))
    if missing:
        raise MissingValue(f"no value for {', '.join(missing)}")
    template = _PLURAL.sub(lambda m: _plural(m, values, language), template)
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


def render(
    template: str,
    facts: Mapping[str, Any],
    format_bytes: Callable[[int], str],
    catalogue: Catalogue,
    language: str = FALLBACK,
) -> str:
    """Fill `template`'s placeholders from `facts` in human units (bytes via `format_bytes`,
    fractions as percentages), plural forms by `language`'s rules. Raises MissingValue when a
    placeholder has no value, so a raw `{...}` never reaches the user."""
    return _fill(template, display_values(catalogue, facts, format_bytes), language)


def _best_variant(variants: list[Texts], language: str, shown: Mapping[str, str]) -> str | None:
    best: tuple[int, str] | None = None
    for variant in variants:
        template = variant[language]
        names = placeholders(template)
        if all(n in shown for n in names) and (best is None or len(names) > best[0]):
            best = (len(names), template)
    return None if best is None else _fill(best[1], shown, language)


# --------------------------------------------------------------------------- choosing


def choose_remedies(
    catalogue: Catalogue, facts: Mapping[str, Any], category: str, limit: int = 5
) -> list[ChosenRemedy]:
    """The category's remedies that apply to `facts`, at most `limit`: those triggered by the
    user's evidence first, then general advice, each part in the guide's order; at most one
    remedy per group (an evidence remedy displaces its general alternative)."""
    if category not in catalogue.categories:
        raise CatalogueError(
            f"unknown error category {category!r}; known: {', '.join(catalogue.categories)}"
        )
    check_facts(catalogue, facts)
    shown = display_values(catalogue, facts, lambda n: str(n))
    applicable = [
        r
        for r in catalogue.remedies_for(category)
        if evaluate(r.when, facts) and _best_variant(r.text, catalogue.languages[0], shown)
    ]
    ordered = [r for r in applicable if r.is_evidence] + [r for r in applicable if not r.is_evidence]
    chosen: list[ChosenRemedy] = []
    groups: set[str] = set()
    for r in ordered:
        if len(chosen) >= limit:
            break
        if r.group is not None:
            if r.group in groups:
                continue
            groups.add(r.group)
        chosen.append(
            ChosenRemedy(
                id=r.id,
                category=category,
                evidence=r.is_evidence,
                facts=sorted(r.when.facts()),
                cite=r.cite,
                doc_id=r.doc_id,
                section=r.section,
                flags=list(r.flags),
                apis=list(r.apis),
                remedy=r,
            )
        )
    return chosen


def remedy_text(
    catalogue: Catalogue,
    chosen: ChosenRemedy | Remedy,
    facts: Mapping[str, Any],
    language: str,
    format_bytes: Callable[[int], str],
) -> str:
    """The remedy as one imperative step in `language` (or the fallback language), with the
    most specific variant whose numbers are all known."""
    remedy = chosen.remedy if isinstance(chosen, ChosenRemedy) else chosen
    lang = catalogue.language(language)
    text = _best_variant(remedy.text, lang, display_values(catalogue, facts, format_bytes))
    if text is None:
        raise MissingValue(f"remedy {remedy.id!r} has no text variant for these facts")
    return text


def diagnosis_line(
    catalogue: Catalogue,
    facts: Mapping[str, Any],
    language: str,
    format_bytes: Callable[[int], str],
) -> str:
    """One line saying what happened, with the user's numbers, in `language`: the category's
    most specific template (most placeholders) whose condition holds and values are known."""
    check_facts(catalogue, facts)
    category = facts.get("category")
    info = catalogue.categories.get(category if isinstance(category, str) else "unknown")
    if info is None:
        info = catalogue.categories["unknown"]
    lang = catalogue.language(language)
    shown = display_values(catalogue, facts, format_bytes)
    variants = [t.text for t in info.diagnosis if evaluate(t.when, facts)]
    text = _best_variant(variants, lang, shown)
    assert text is not None  # validation guarantees an unconditional template without numbers
    return text


def category_name(catalogue: Catalogue, category: str, language: str) -> str:
    """The category's name in `language`."""
    info = catalogue.categories.get(category) or catalogue.categories["unknown"]
    return info.name[catalogue.language(language)]


def message(catalogue: Catalogue, key: str, language: str, **values: Any) -> str:
    """The fixed answer string `key` in `language` (or the fallback language), its `{name}`
    parts filled from `values` as given (format sizes before passing them)."""
    spec = catalogue.messages.get(key)
    if spec is None:
        raise CatalogueError(f"no message {key!r} in the catalogue")
    unknown = sorted(set(values) - set(spec.params))
    if unknown:
        raise MissingValue(f"message {key!r} takes {spec.params}, not {unknown}")
    lang = catalogue.language(language)
    return _fill(spec.text[lang], values, lang)
