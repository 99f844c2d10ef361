"""Choosing the remedies of a category whose conditions the facts meet and which have a text to show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oomkb.kb.errors import CatalogueError
from oomkb.kb.remedies.conditions import check_facts, evaluate
from oomkb.kb.remedies.rendering import best_variant, display_values
from oomkb.kb.remedies.schema import Catalogue, ChosenRemedy

__all__ = ["choose_remedies"]


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
        if evaluate(r.when, facts) and best_variant(r.text, catalogue.languages[0], shown)
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
