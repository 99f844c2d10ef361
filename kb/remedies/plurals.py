"""Placeholders and ICU plural forms in the catalogue's texts, per language (babel's plural rules)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

__all__ = ["PLACEHOLDER", "PLURAL", "PLURAL_FORM", "placeholders", "plural", "plural_categories"]


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


# A count with the noun that agrees with it, ICU-style: `{calls, plural, one {# call} other
# {# calls}}`; `#` is the number, the category comes from the language's CLDR plural rules.
PLURAL = re.compile(
    r"\{([A-Za-z_][A-Za-z0-9_]*),\s*plural,\s*"
    r"((?:(?:zero|one|two|few|many|other|=\d+)\s*\{[^{}]*\}\s*)+)\}"
)


PLURAL_FORM = re.compile(r"(zero|one|two|few|many|other|=\d+)\s*\{([^{}]*)\}")


def placeholders(template: str) -> set[str]:
    """The `{name}` placeholders of a template, plural counts (`{n, plural, ...}`) included."""
    return set(PLACEHOLDER.findall(template)) | {m.group(1) for m in PLURAL.finditer(template)}


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


def plural(m: re.Match[str], values: Mapping[str, Any], language: str) -> str:
    value = values[m.group(1)]
    forms = dict(PLURAL_FORM.findall(m.group(2)))
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
