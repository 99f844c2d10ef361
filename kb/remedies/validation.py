"""The load-time checks of the catalogue: every reference, placeholder, plural form and language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from oomkb.indexer.guides import Guide
from oomkb.kb.errors import CatalogueError
from oomkb.kb.remedies.conditions import type_ok
from oomkb.kb.remedies.plurals import placeholders, PLURAL, plural_categories, PLURAL_FORM
from oomkb.kb.remedies.schema import (
    Catalogue,
    CategoryInfo,
    Condition,
    FactRef,
    FactSpec,
    MessageSpec,
    NUMERIC_OPS,
    Remedy,
    REQUIRED_MESSAGES,
    Texts,
)

__all__ = ["CatalogueValidator"]


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


class CatalogueValidator:
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
        for m in PLURAL.finditer(template):
            forms = {k for k, _ in PLURAL_FORM.findall(m.group(2))}
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
            if op in NUMERIC_OPS and not (spec.numeric and other.numeric):
                raise self.fail(file, item, f"{op} compares non-numeric facts {cond.fact}, {rhs.fact}")
            return
        if op in NUMERIC_OPS:
            if not spec.numeric or isinstance(rhs, (bool, str)):
                raise self.fail(file, item, f"{op} on {cond.fact!r} needs a numeric fact and number")
        elif op == "contains" and spec.type != "str":
            raise self.fail(file, item, f"contains on {cond.fact!r} needs a text fact")
        elif op in ("eq", "ne", "in"):
            values = rhs if op == "in" else [rhs]
            for v in values:
                if not type_ok(spec, v):
                    raise self.fail(file, item, f"{op} compares {cond.fact!r} ({spec.type}) with {v!r}")
                if spec.values and v not in spec.values:
                    raise self.fail(file, item, f"{v!r} is not a value of {cond.fact!r}")
