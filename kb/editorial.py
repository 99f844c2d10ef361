"""House style of the knowledge base, as data and checks: one glossary per language (the one
translation of each technical term and its known wrong variants), one register per language,
and code written as code (in backticks) in every language.

The glossary lives in `kb/catalogue/glossary.yaml`. `style_problems` checks every text that a
user can see: each card (title, summary, actions) and every text of the remedy catalogue
(category names, diagnosis templates, remedy variants, messages), whatever their number, so
items added later are checked the same way. Each problem names the item, the language and the
exact change to make.

What must be in backticks (`code_tokens`): outside backtick spans and `{placeholders}`,

  * command-line flags: `--xla_tpu_scoped_vmem_limit_kib=65536`, `--logdir`;
  * environment variables: upper-case names with an underscore, `LIBTPU_INIT_ARGS`, `XLA_FLAGS`;
  * identifiers with an underscore: `donate_argnums`, `vmem_limit_bytes`, `feature_width`;
  * dotted names of two or more identifiers: `jax.jit`, `jax.debug.print`, `pltpu.CompilerParams`
    (not abbreviations such as "e.g." and not version numbers);
  * calls: a name followed by parentheses, `jax.debug.print()`, `ones(...)`;
  * HLO shapes: `f32[129,1024]`, `bf16[2048,4096]`;
  * shell commands, addresses and paths: `pip install xprof`, `http://localhost:6006`,
    `/tmp/xprof`;
  * the names a remedy declares in its `flags` and `apis`, wherever they appear.

A backtick span must hold the whole token: `` `--xla_foo`=true `` fails, and so does a span of one
token that ends with punctuation or a span with spaces at its ends, so copying a flag never
copies the sentence around it (a quoted log line may keep its own final period).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oomkb.kb.cards import SectionCard, load_cards
from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import SUPPORTED
from oomkb.kb.remedies import load_catalogue
from oomkb.kb.remedies.schema import Catalogue

__all__ = [
    "Glossary",
    "GlossaryTerm",
    "RegisterRule",
    "StyleProblem",
    "Text",
    "catalogue_texts",
    "card_texts",
    "code_spans",
    "code_tokens",
    "default_glossary_path",
    "load_glossary",
    "style_problems",
    "text_problems",
    "with_backticks",
]

# --------------------------------------------------------------------------- the glossary


class Variant(BaseModel):
    """A wrong variant: a plain string (matched case-insensitively after normalisation) or,
    written `/.../`, a regular expression."""

    model_config = ConfigDict(frozen=True)

    text: str

    @property
    def pattern(self) -> re.Pattern[str]:
        if len(self.text) > 2 and self.text.startswith("/") and self.text.endswith("/"):
            return re.compile(self.text[1:-1], re.IGNORECASE)
        return re.compile(re.escape(normalise(self.text)), re.IGNORECASE)


class GlossaryTerm(BaseModel):
    """One technical term: its translation per language and the variants that are wrong."""

    model_config = ConfigDict(extra="forbid")

    term: str = Field(description="the English term")
    note: str = ""
    use: dict[str, str] = Field(description="language -> the one translation")
    wrong: dict[str, list[str]] = Field(default_factory=dict, description="language -> variants")

    @field_validator("wrong", mode="before")
    @classmethod
    def _lists(cls, value: object) -> object:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value


class RegisterRule(BaseModel):
    """The register (form of address) of one language and the forms that break it."""

    model_config = ConfigDict(extra="forbid")

    use: str
    wrong: list[str] = Field(default_factory=list)


class Glossary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    terms: list[GlossaryTerm]
    registers: dict[str, RegisterRule] = Field(default_factory=dict)
    punctuation: dict[str, RegisterRule] = Field(default_factory=dict)


def default_glossary_path() -> Path:
    return Path(str(resources.files("oomkb.kb") / "catalogue" / "glossary.yaml"))


def load_glossary(path: Path | str | None = None) -> Glossary:
    """The validated glossary; a bad file is a CatalogueError naming it and the entry."""
    return _load_cached(str(Path(path) if path is not None else default_glossary_path()))


@lru_cache(maxsize=4)
def _load_cached(path: str) -> Glossary:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        glossary = Glossary.model_validate(data)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogueError(f"{path}: invalid glossary: {exc}") from exc
    for term in glossary.terms:
        for lang in (*term.use, *term.wrong):
            if lang not in SUPPORTED:
                raise CatalogueError(f"{path}: term {term.term!r}: unknown language {lang!r}")
        for lang, variants in term.wrong.items():
            for v in variants:
                if Variant(text=v).pattern.search(normalise(term.use.get(lang, ""))):
                    raise CatalogueError(
                        f"{path}: term {term.term!r} [{lang}]: wrong variant {v!r} matches the "
                        f"translation to use {term.use.get(lang)!r}"
                    )
    return glossary


def normalise(text: str) -> str:
    """NFC, Arabic short vowels and tatweel removed (التجزّؤ and التجزؤ are one word)."""
    text = unicodedata.normalize("NFC", text)
    return re.sub("[\u064b-\u0652\u0640]", "", text)


# --------------------------------------------------------------------------- the texts


class Text(BaseModel):
    """One user-visible text: where it is, its language and the text."""

    where: str
    language: str
    text: str
    declared: tuple[str, ...] = ()  # flags and APIs the item declares


def card_texts(cards: Iterable[SectionCard]) -> Iterator[Text]:
    for card in cards:
        for lang, t in card.texts.items():
            base = f"kb/cards/{card.doc_id}.yaml section {card.section!r}"
            yield Text(where=f"{base} title", language=lang, text=t.title)
            yield Text(where=f"{base} summary", language=lang, text=t.summary)
            for i, action in enumerate(t.actions):
                yield Text(where=f"{base} actions[{i}]", language=lang, text=action)


def catalogue_texts(catalogue: Catalogue) -> Iterator[Text]:
    for cid, info in catalogue.categories.items():
        for lang, text in info.name.items():
            yield Text(where=f"categories.yaml {cid!r} name", language=lang, text=text)
        for d in info.diagnosis:
            for lang, text in d.text.items():
                yield Text(
                    where=f"categories.yaml {cid!r} diagnosis {d.id!r}", language=lang, text=text
                )
    for r in catalogue.remedies:
        for n, variant in enumerate(r.text):
            where = f"remedies.yaml {r.id!r}" + (f" text variant {n + 1}" if len(r.text) > 1 else "")
            for lang, text in variant.items():
                yield Text(
                    where=where, language=lang, text=text, declared=(*r.flags, *r.apis)
                )
    for key, spec in catalogue.messages.items():
        for lang, text in spec.text.items():
            yield Text(where=f"messages.yaml {key!r}", language=lang, text=text)


# --------------------------------------------------------------------------- code as code

_BACKTICKS = re.compile(r"`[^`]*`")
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
CODE_TOKEN = re.compile(
    "|".join(
        (
            # flags, with a value when one follows `=`
            r"(?<![A-Za-z0-9_-])--[A-Za-z0-9][A-Za-z0-9_-]*(?:=[A-Za-z0-9_.:/+-]*[A-Za-z0-9_/])?",
            # a call: a (dotted) name and its parentheses
            rf"(?<![A-Za-z0-9_.@])@?(?:[a-z_][A-Za-z0-9_]*(?:\.{_IDENT})*|{_IDENT}(?:\.{_IDENT})+)"
            r"\((?:[\x20-\x27\x2a-\x7e]|\([\x20-\x27\x2a-\x7e]*\)){0,80}\)",
            # an assignment: `donate_argnums=(0,)`, `custom_call_target="tpu_custom_call"`
            rf"(?<![A-Za-z0-9_.-]){_IDENT}=(?:\"[^\"\s]*\"|'[^'\s]*'|\([0-9, ]*\)|[A-Za-z0-9_.=:/+-]*[A-Za-z0-9_/])",
            # dotted names (two identifiers or more, each of two characters or more)
            rf"(?<![A-Za-z0-9_.])[A-Za-z_][A-Za-z0-9_]++(?:\.[A-Za-z_][A-Za-z0-9_]++)++(?![(])",
            # commands and addresses
            r"(?<![A-Za-z0-9_])pip install [A-Za-z0-9_.\[\]-]*[A-Za-z0-9_\]]",
            r"https?://[^\s`'\"<>()]*[^\s`'\"<>().,;:]",
            # absolute paths: `/tmp/xprof`
            r"(?<![A-Za-z0-9_/:.~-])/[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+/?(?<![.])",
            # HLO shapes
            r"(?<![A-Za-z0-9_])(?:pred|[suf]\d{1,2}|bf16|c64|c128)\[[0-9,]*\]",
            # identifiers with an underscore (environment variables included)
            rf"(?<![A-Za-z0-9_.-])[A-Za-z][A-Za-z0-9]*+_[A-Za-z0-9_]*+(?![.(-]?[A-Za-z0-9_(])",
        )
    )
)
_NOT_CODE = re.compile(r"^(?:e\.g|i\.e)$", re.IGNORECASE)


def code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each code token of `text` that is not inside backticks."""
    blank = lambda m: " " * len(m.group(0))  # noqa: E731 - same length keeps the positions
    # a placeholder is neither space nor a name, so `name="{value}"` is one token
    bare = _PLACEHOLDER.sub(lambda m: "\u00a4" * len(m.group(0)), _BACKTICKS.sub(blank, text))
    found = []
    for m in CODE_TOKEN.finditer(bare):
        if "_" not in m.group(0) and _NOT_CODE.match(m.group(0)):
            continue
        found.append(m.span())
    return found


def code_tokens(text: str) -> list[str]:
    """The code tokens of `text` that are not inside backticks (see the module doc)."""
    return [text[a:b] for a, b in code_spans(text)]


def with_backticks(text: str) -> str:
    """`text` with each of its bare code tokens put in backticks."""
    for a, b in reversed(code_spans(text)):
        text = f"{text[:a]}`{text[a:b]}`{text[b:]}"
    return text


def _spans(text: str) -> list[str]:
    return [s[1:-1] for s in _BACKTICKS.findall(text)]


# --------------------------------------------------------------------------- the checks


class StyleProblem(BaseModel):
    where: str
    language: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where} [{self.language}]: {self.problem}"


def _prose(text: str) -> str:
    """`text` with backtick spans and placeholders blanked: code and numbers are not prose."""
    blank = lambda m: " " * len(m.group(0))  # noqa: E731
    return normalise(_PLACEHOLDER.sub(blank, _BACKTICKS.sub(blank, text)))


def text_problems(t: Text, glossary: Glossary) -> Iterator[StyleProblem]:
    norm = _prose(t.text)
    for term in glossary.terms:
        for variant in term.wrong.get(t.language, []):
            m = Variant(text=variant).pattern.search(norm)
            if m:
                use = term.use.get(t.language)
                fix = f"write {use!r}" if use else "use the glossary's wording"
                note = f" ({term.note})" if term.note else ""
                yield StyleProblem(
                    where=t.where, language=t.language,
                    problem=(
                        f"{_context(norm, m)} has {m.group(0)!r}, a wrong variant of "
                        f"{term.term!r}{note}; {fix} (kb/catalogue/glossary.yaml)"
                    ),
                )
    for kind, rules in (("register", glossary.registers), ("punctuation", glossary.punctuation)):
        rule = rules.get(t.language)
        for variant in rule.wrong if rule is not None else []:
            for m in Variant(text=variant).pattern.finditer(norm):
                yield StyleProblem(
                    where=t.where, language=t.language,
                    problem=f"{_context(norm, m)} has {m.group(0)!r}, which breaks the {kind}; "
                    f"write {rule.use}",
                )
    if t.text.count("`") % 2:
        yield StyleProblem(where=t.where, language=t.language, problem="unbalanced backtick")
        return
    for token in code_tokens(t.text):
        yield StyleProblem(
            where=t.where, language=t.language,
            problem=f"code {token!r} is not in backticks; write `{token}`",
        )
    spans = _spans(t.text)
    for m in _BACKTICKS.finditer(t.text):
        after = t.text[m.end() : m.end() + 1]
        before = t.text[m.start() - 1 : m.start()] if m.start() else ""
        if re.match(r"[A-Za-z0-9_=\[]|\.[A-Za-z0-9_(]", t.text[m.end() : m.end() + 2]):
            yield StyleProblem(
                where=t.where, language=t.language,
                problem=f"backtick span {m.group(0)} is followed by {after!r}; put the whole "
                "token in the backticks",
            )
        elif re.match(r"[A-Za-z0-9_]", before):
            yield StyleProblem(
                where=t.where, language=t.language,
                problem=f"backtick span {m.group(0)} follows {before!r}; put the whole token "
                "in the backticks",
            )
    for span in spans:
        if span != span.strip() or (
            " " not in span and span.endswith((".", ",", ";", ":", "。", "、"))
        ):
            yield StyleProblem(
                where=t.where, language=t.language,
                problem=f"backtick span `{span}` holds spaces or punctuation at its ends; "
                f"keep only the code inside",
            )
    for name in t.declared:
        if name in t.text and not any(name in s for s in spans):
            yield StyleProblem(
                where=t.where, language=t.language,
                problem=f"declared name {name!r} is not in backticks; write `{name}`",
            )


def _context(text: str, m: re.Match[str]) -> str:
    a, b = max(0, m.start() - 20), min(len(text), m.end() + 20)
    return repr(("…" if a else "") + " ".join(text[a:b].split()) + ("…" if b < len(text) else ""))


def style_problems(
    glossary: Glossary | None = None,
    catalogue: Catalogue | None = None,
    cards: list[SectionCard] | None = None,
) -> list[StyleProblem]:
    """Every glossary, register and code-span problem in the cards and the catalogue."""
    glossary = glossary or load_glossary()
    catalogue = catalogue or load_catalogue()
    cards = cards if cards is not None else load_cards()
    texts = [*card_texts(cards), *catalogue_texts(catalogue)]
    return [p for t in texts for p in text_problems(t, glossary)]
