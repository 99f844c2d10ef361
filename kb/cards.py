"""Knowledge cards: for each section of each guide, what it says and what to do, in every
supported language. Cards are data (`kb/cards/<doc_id>.yaml`), each citing `doc_id#section`;
they are indexed beside the raw chunks so a question meets text in its own language."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError

from oomkb.indexer.guides import Guide
from oomkb.indexer.store import IndexItem
from oomkb.kb.errors import CatalogueError

#: libyaml's parser when PyYAML has it (ten times faster: the cards are read on every CLI search)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CardText(BaseModel):
    """A card in one language."""

    title: str
    summary: str = Field(description="two or three sentences: what the section says")
    actions: list[str] = Field(default=[], description="what to do, in order, per the section")
    keywords: list[str] = []


class SectionCard(BaseModel):
    """All language versions of the card for one section."""

    doc_id: str = ""
    section: str
    terms: list[str] = Field(default=[], description="language-neutral technical terms")
    texts: dict[str, CardText]

    @property
    def citation(self) -> str:
        return f"{self.doc_id}#{self.section}"

    def text(self, language: str, fallback: str = "en") -> CardText | None:
        return self.texts.get(language) or self.texts.get(fallback)


class CardFile(BaseModel):
    doc_id: str
    sections: list[SectionCard]


def default_cards_dir() -> Path:
    return Path(str(resources.files("oomkb.kb") / "cards"))


@lru_cache(maxsize=8)
def _load_cached(cards_dir: str) -> tuple[SectionCard, ...]:
    root = Path(cards_dir)
    cards: list[SectionCard] = []
    for path in sorted(root.glob("*.yaml")):
        try:
            data = CardFile.model_validate(yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER))
        except (yaml.YAMLError, ValidationError, OSError) as exc:
            raise CatalogueError(f"knowledge cards file {path} is invalid: {exc}") from exc
        for card in data.sections:
            cards.append(card.model_copy(update={"doc_id": data.doc_id}))
    return tuple(cards)


def load_cards(cards_dir: Path | None = None) -> list[SectionCard]:
    """All cards (validated), in file order; an invalid file is a CatalogueError naming it."""
    root = Path(cards_dir) if cards_dir is not None else default_cards_dir()
    if not root.is_dir():
        return []
    return list(_load_cached(str(root.resolve())))


def cards_hash(cards: list[SectionCard]) -> str:
    h = hashlib.sha256()
    for c in cards:
        h.update(c.model_dump_json().encode("utf-8"))
    return h.hexdigest()


def card_items(cards: list[SectionCard], guides: list[Guide]) -> list[IndexItem]:
    """Index items for the cards whose section exists in `guides` (cards of other guides are
    skipped, so a custom docs folder works with the built-in cards)."""
    sections = {(g.doc_id, s.id): s for g in guides for s in g.sections}
    items = []
    for card in cards:
        section = sections.get((card.doc_id, card.section))
        if section is None:
            continue
        for lang, t in card.texts.items():
            embed = "\n".join(
                part
                for part in (
                    t.title,
                    t.summary,
                    " ".join(t.actions),
                    ", ".join(t.keywords + card.terms),
                )
                if part
            )
            items.append(
                IndexItem(
                    id=f"card:{card.citation}:{lang}",
                    kind="card",
                    doc_id=card.doc_id,
                    section=card.section,
                    section_title=section.title,
                    language=lang,
                    text=t.summary,
                    embed_text=embed,
                )
            )
    return items
