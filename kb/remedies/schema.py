"""The remedy catalogue's data model: facts, conditions, categories, remedies and messages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from oomkb.kb.errors import KnowledgeBaseError
from oomkb.kb.language import FALLBACK

__all__ = ["Catalogue", "CategoryInfo", "ChosenRemedy", "Condition", "DiagnosisTemplate", "EQUALITY_OPS", "FactError", "FactRef", "FactSpec", "MessageSpec", "MissingValue", "NUMERIC_OPS", "REQUIRED_MESSAGES", "Remedy", "Texts"]


NUMERIC_OPS = ("gt", "ge", "lt", "le")


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


EQUALITY_OPS = ("eq", "ne")


Scalar = bool | int | float | str


Texts = dict[str, str]


class FactError(KnowledgeBaseError, ValueError):
    """A fact handed to the catalogue has a value of the wrong type (a bug in the caller)."""


class MissingValue(KnowledgeBaseError, LookupError):
    """A template needs a value that the facts (or message values) do not provide."""


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
        names = [*NUMERIC_OPS, *EQUALITY_OPS, "in_", "contains", "present"]
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
        for op in (*NUMERIC_OPS, *EQUALITY_OPS):
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
