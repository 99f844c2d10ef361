"""What the knowledge base indexes (guide chunks + knowledge cards) and keeping that index current."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from oomkb.indexer.build import BuildStats, build_index, chunk_items, docs_hash
from oomkb.indexer.errors import IndexMissingError
from oomkb.indexer.guides import Guide, load_guides
from oomkb.settings import default_index_dir
from oomkb.indexer.store import (FORMAT_VERSION, IndexItem, Manifest, ModelInfo, StoredIndex, load_index,
                           read_manifest)
from oomkb.kb.cards import SectionCard, card_items, cards_hash, load_cards


@dataclass
class Corpus:
    """The guides, their cards and the items to index, with one hash over all source text."""

    guides: list[Guide]
    cards: list[SectionCard]
    items: list[IndexItem]
    source_hash: str


@dataclass
class LoadedIndex:
    index: StoredIndex
    guides: list[Guide]
    cards: list[SectionCard]
    embedder: object
    build: BuildStats | None


def load_corpus(docs_dir: Path | None = None, cards_dir: Path | None = None,
                with_cards: bool = True) -> Corpus:
    """Read the guides and cards; `with_cards=False` indexes the raw chunks alone."""
    guides = load_guides(docs_dir)
    cards = load_cards(cards_dir) if with_cards else []
    items = chunk_items(guides) + card_items(cards, guides)
    return Corpus(guides, cards, items, docs_hash(guides, extra=cards_hash(cards)))


def model_info(embedder) -> ModelInfo:
    """What an index built with this loaded sentence-transformers model records about it."""
    from oomkb.indexer.model import model_info as describe

    return describe(embedder)


def _model_and_loader(embedder=None):
    """The model an index build records, and the embedder (loaded, or a loader called only when
    something must be embedded or exported): finding the model needs no torch once converted."""
    from oomkb.indexer.model import configured_model_info, is_complete, load_embedder

    if embedder is not None:
        return model_info(embedder), embedder
    expected = configured_model_info()
    if is_complete(expected):
        return expected, load_embedder
    embedder = load_embedder()  # converts the built-in model on first use
    return model_info(embedder), embedder


def build(index_dir: Path | None = None, docs_dir: Path | None = None, progress: bool = False,
          embedder=None, corpus: Corpus | None = None) -> BuildStats:
    """Build or refresh the index (incremental: unchanged texts are not re-embedded)."""
    model, embedder = _model_and_loader(embedder)
    corpus = corpus or load_corpus(docs_dir)
    return build_index(
        corpus.items,
        Path(index_dir) if index_dir else default_index_dir(),
        embedder,
        model,
        corpus.source_hash,
        progress=progress,
    )


def _query_model_current(manifest: Manifest) -> bool:
    """Whether the generation's query model is the export this oomkb makes (same export format,
    the configured precision); the model itself is checked against the manifest's model."""
    from oomkb.indexer.query_model import EXPORT_FORMAT_VERSION
    from oomkb.settings import query_precision_setting

    info = manifest.query_model
    return (info is not None and info.export_version == EXPORT_FORMAT_VERSION
            and info.precision == query_precision_setting())


def refresh_index(index_dir: Path | None = None, docs_dir: Path | None = None,
                  progress: bool = False, embedder=None, corpus: Corpus | None = None,
                  ) -> BuildStats | None:
    """Build the index if it is missing, of an older format, or its guides or cards changed
    (reusing every vector it can); None if it is current. Reads only the manifest and loads
    no model when it is current (the files themselves are verified when loaded)."""
    from oomkb.indexer.model import configured_model_info

    index_dir = Path(index_dir) if index_dir else default_index_dir()
    expected = model_info(embedder) if embedder is not None else configured_model_info()
    corpus = corpus or load_corpus(docs_dir)
    try:
        _, manifest = read_manifest(index_dir)
    except IndexMissingError:
        manifest = None
    if (manifest is not None and manifest.format_version == FORMAT_VERSION
            and expected.accepts(manifest.model)
            and manifest.docs_hash == corpus.source_hash
            and _query_model_current(manifest)):
        return None
    if manifest is not None:
        # Raises for a damaged index, one of an unknown format or built with another model:
        # those are not replaced silently.
        load_index(index_dir, expect_model=expected, vectors_only=True)
    model, loader = _model_and_loader(embedder)
    return build_index(corpus.items, index_dir, loader, model, corpus.source_hash,
                       progress=progress)


def ensure_index(index_dir: Path | None = None, docs_dir: Path | None = None,
                 progress: bool = False, embedder=None) -> LoadedIndex:
    """The current index with its query encoder, built on first use and refreshed when the
    guides or cards changed.

    With a current index this imports neither torch nor transformers: the configured model is
    identified from its files and queries are embedded by the generation's exported model
    (`LoadedIndex.embedder` is that `QueryEncoder`, loading in the background meanwhile). A
    damaged index or one built with another model is not silently replaced: the error says
    to run `oomkb index`, which rebuilds it."""
    from oomkb.indexer.model import configured_model_info
    from oomkb.indexer.query_model import load_query_encoder, prefetch

    index_dir = Path(index_dir) if index_dir else default_index_dir()
    # The query model takes the longest to load and needs no GIL meanwhile: it starts loading
    # from the current generation now, while the guides are read and the index checked (and is
    # dropped in the rare case that a new generation gets built first).
    prefetch(index_dir)
    corpus = load_corpus(docs_dir)
    stats = refresh_index(index_dir, docs_dir, progress=progress, embedder=embedder, corpus=corpus)
    expected = model_info(embedder) if embedder is not None else configured_model_info()
    index = load_index(index_dir, expect_model=expected)
    return LoadedIndex(index, corpus.guides, corpus.cards, load_query_encoder(index, background=True),
                       stats)
