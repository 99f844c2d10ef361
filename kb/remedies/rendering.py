"""Filling the catalogue's texts with the user's values: remedies, the diagnosis line, category
names and the answer's fixed strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import FALLBACK
from oomkb.kb.remedies.conditions import check_facts, evaluate, fact_value, is_number, type_ok
from oomkb.kb.remedies.plurals import PLACEHOLDER, placeholders, PLURAL, plural
from oomkb.kb.remedies.schema import Catalogue, ChosenRemedy, FactSpec, MissingValue, Remedy, Texts

__all__ = ["best_variant", "category_name", "diagnosis_line", "display_values", "message", "remedy_text", "render"]


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
        value = fact_value(facts, name)
        if value is None or not type_ok(spec, value):
            continue
        if spec.unit in ("bytes", "count", "fraction", "number") and not is_number(value):
            continue
        shown[spec.display_name] = _display(spec, value, format_bytes)
    return shown


def _fill(template: str, values: Mapping[str, Any], language: str = FALLBACK) -> str:
    missing = sorted(n for n in placeholders(template) if values.get(n) in (None, ""))
    if missing:
        raise MissingValue(f"no value for {', '.join(missing)}")
    template = PLURAL.sub(lambda m: plural(m, values, language), template)
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)


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


def best_variant(variants: list[Texts], language: str, shown: Mapping[str, str]) -> str | None:
    best: tuple[int, str] | None = None
    for variant in variants:
        template = variant[language]
        names = placeholders(template)
        if all(n in shown for n in names) and (best is None or len(names) > best[0]):
            best = (len(names), template)
    return None if best is None else _fill(best[1], shown, language)


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
    text = best_variant(remedy.text, lang, display_values(catalogue, facts, format_bytes))
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
    text = best_variant(variants, lang, shown)
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
