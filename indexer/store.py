"""The index on disk: FAISS vectors, the items beside them, and a manifest that vouches for both.

Layout of an index folder::

    CURRENT              name of the generation readers should use (replaced atomically)
    gen-<stamp>/         one complete, immutable generation
        manifest.json    format, model identity, per-item content hashes, file checksums
        vectors.faiss    inner-product index over L2-normalised vectors, row i = item i
        items.jsonl      one IndexItem per line, in row order
        query_model.onnx the model that embeds queries for these vectors (ONNX, no torch needed)
        query_tokenizer.json  its tokenizer (``tokenizers`` format)
        query_table.npy  its token-embedding table (int8 rows, memory-mapped when searching)
        query_table_scales.npy  one scale per row of that table
        query_vocab.npz  the tokenizer's pieces, sorted, for loading only those a query uses
        lexical.npz      the BM25 weights of every term in every item (indexer.lexical)
    .lock                held by a builder

A writer fills a new generation folder, then swaps CURRENT with os.replace, so a reader sees the
old index or the new one, never half of one. Old generations are pruned after the swap, keeping
the previous one for readers that opened it a moment ago.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Literal

import faiss
import numpy as np
from pydantic import BaseModel, ValidationError

from oomkb.indexer.checksum import sha256_file
from oomkb.indexer.errors import IndexCorruptError, IndexMismatchError, IndexMissingError
from oomkb.indexer.lexical import LexicalIndex
from oomkb.indexer.query_tokenizer import write_vocab

FORMAT_VERSION = 3  # 2: the query model (ONNX + tokenizer) is part of the generation; 3: lexical.npz
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
VECTORS = "vectors.faiss"
ITEMS = "items.jsonl"
QUERY_ONNX = "query_model.onnx"
QUERY_TOKENIZER = "query_tokenizer.json"
QUERY_TABLE = "query_table.npy"
QUERY_TABLE_SCALES = "query_table_scales.npy"
LEXICAL = "lexical.npz"
QUERY_VOCAB = "query_vocab.npz"
KEEP_GENERATIONS = 2


class IndexItem(BaseModel):
    """One searchable text: a chunk of a guide, or a knowledge card that points at a section."""

    id: str
    kind: Literal["chunk", "card"]
    doc_id: str
    section: str
    section_title: str
    language: str
    text: str
    embed_text: str
    start_char: int | None = None
    end_char: int | None = None

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(f"{self.kind}\n{self.embed_text}".encode("utf-8")).hexdigest()


class ModelInfo(BaseModel):
    """The embedding model an index was built with. As an expectation, ``dims`` 0 means "any"
    and a ``version`` without the `` weights:`` part matches any weights of that version."""

    name: str
    version: str
    dims: int

    def accepts(self, found: ModelInfo) -> bool:
        """Whether an index built with ``found`` fits this (possibly partial) expectation."""
        if found.name != self.name or (self.dims and found.dims != self.dims):
            return False
        if " weights:" in self.version:
            return found.version == self.version
        return found.version == self.version or found.version.startswith(self.version + " weights:")


class QueryModelInfo(BaseModel):
    """How the generation's query model was made and how to feed it."""

    model_name: str
    model_version: str
    precision: Literal["fp32", "mixed", "int8"]
    export_version: int
    prompt: str
    max_length: int
    pad_id: int
    inputs: list[str]
    dims: int
    sha256: str
    # Files beside the graph (the token-embedding table and its scales) and their checksums.
    extra_sha256: dict[str, str] = {}


class FileInfo(BaseModel):
    bytes: int
    sha256: str


class Manifest(BaseModel):
    format_version: int
    model: ModelInfo
    docs_hash: str
    count: int
    item_hashes: list[str]
    files: dict[str, FileInfo]
    created_at: float
    query_model: QueryModelInfo | None = None


class StoredIndex(BaseModel, arbitrary_types_allowed=True):
    """A loaded, verified index generation."""

    path: Path
    manifest: Manifest
    items: list[IndexItem]
    vectors: faiss.Index
    lexical: LexicalIndex | None = None  # None only when loaded with ``vectors_only``

    def vector(self, row: int) -> np.ndarray:
        return self.vectors.reconstruct(row)


def current_generation(index_dir: Path) -> Path | None:
    """The generation folder CURRENT names, or None when there is no index yet."""
    pointer = Path(index_dir) / CURRENT
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexCorruptError(f"cannot read {pointer}: {exc}") from exc
    gen = Path(index_dir) / name
    if not name or "/" in name or not gen.is_dir():
        raise IndexCorruptError(
            f"{pointer} names a missing generation {name!r}; rebuild with `oomkb index`"
        )
    return gen


def read_manifest(index_dir: Path) -> tuple[Path, Manifest]:
    """The current generation and its manifest, files unread (IndexMissingError: no index)."""
    gen = current_generation(index_dir)
    if gen is None:
        raise IndexMissingError(f"no index in {index_dir}; build it with `oomkb index`")
    hint = "; rebuild it with `oomkb index`"
    try:
        return gen, Manifest.model_validate_json((gen / MANIFEST).read_bytes())
    except FileNotFoundError as exc:
        raise IndexCorruptError(f"index manifest missing in {gen}{hint}") from exc
    except (ValidationError, ValueError, OSError) as exc:
        raise IndexCorruptError(f"index manifest in {gen} is unreadable{hint}") from exc


def load_index(
    index_dir: Path, expect_model: ModelInfo | None = None, vectors_only: bool = False
) -> StoredIndex:
    """Load and verify the current generation; any damage is an IndexCorruptError, never a crash.

    ``vectors_only`` is for a build reusing vectors: it also accepts an index of an older format
    and reads neither the query model nor the lexical index."""
    gen, manifest = read_manifest(index_dir)
    hint = "; rebuild it with `oomkb index`"
    readable = (FORMAT_VERSION, 2, 1) if vectors_only else (FORMAT_VERSION,)
    if manifest.format_version not in readable:
        raise IndexMismatchError(
            f"index in {gen} has format {manifest.format_version}, this oomkb reads "
            f"{FORMAT_VERSION}{hint}"
        )
    if expect_model is not None and not expect_model.accepts(manifest.model):
        dims = f", {expect_model.dims} dims" if expect_model.dims else ""
        raise IndexMismatchError(
            f"index in {gen} was built with model {manifest.model.name} "
            f"({manifest.model.version}, {manifest.model.dims} dims) but the configured model is "
            f"{expect_model.name} ({expect_model.version}{dims}){hint}"
        )
    for name in (VECTORS, ITEMS):
        _verify_file(gen / name, manifest.files.get(name), hint)
    if not vectors_only:
        if manifest.query_model is None:
            raise IndexCorruptError(f"index manifest in {gen} describes no query model{hint}")
        # The ONNX file is hundreds of MB: its size is checked here, its checksum by the query
        # encoder while it loads (indexer.query_model), in parallel instead of in front of it.
        _verify_file(gen / QUERY_ONNX, manifest.files.get(QUERY_ONNX), hint, checksum=False)
        # With the sorted pieces beside it, the tokenizer file is not read when searching.
        vocab = QUERY_VOCAB in manifest.files
        _verify_file(gen / QUERY_TOKENIZER, manifest.files.get(QUERY_TOKENIZER), hint,
                     checksum=not vocab)
        if vocab:
            _verify_file(gen / QUERY_VOCAB, manifest.files[QUERY_VOCAB], hint)
        for name, digest in manifest.query_model.extra_sha256.items():  # checksums: by the encoder
            _verify_file(gen / name, manifest.files.get(name), hint, checksum=False)
            if manifest.files[name].sha256 != digest:
                raise IndexCorruptError(f"{name} in {gen} is not the one its manifest names{hint}")
        _verify_file(gen / LEXICAL, manifest.files.get(LEXICAL), hint)
        if manifest.files[QUERY_ONNX].sha256 != manifest.query_model.sha256:
            raise IndexCorruptError(f"the query model in {gen} is not the one its manifest names"
                                    f"{hint}")
    try:
        lines = (gen / ITEMS).read_text(encoding="utf-8").splitlines()
        items = [IndexItem.model_validate_json(line) for line in lines if line.strip()]
        vectors = faiss.read_index(str(gen / VECTORS))
        lexical = None if vectors_only else LexicalIndex.load(gen / LEXICAL)
    except (ValidationError, ValueError, OSError, RuntimeError) as exc:
        raise IndexCorruptError(f"index files in {gen} are unreadable ({exc}){hint}") from exc
    if len(items) != manifest.count or vectors.ntotal != manifest.count:
        raise IndexCorruptError(
            f"index in {gen} holds {len(items)} items and {vectors.ntotal} vectors, the manifest "
            f"says {manifest.count}{hint}"
        )
    if lexical is not None and lexical.size != manifest.count:
        raise IndexCorruptError(f"the lexical index in {gen} covers {lexical.size} items, the "
                                f"manifest says {manifest.count}{hint}")
    if vectors.d != manifest.model.dims:
        raise IndexCorruptError(f"index vectors in {gen} have {vectors.d} dims, expected "
                                f"{manifest.model.dims}{hint}")
    return StoredIndex(path=gen, manifest=manifest, items=items, vectors=vectors, lexical=lexical)


def write_index(
    index_dir: Path,
    items: list[IndexItem],
    vectors: np.ndarray,
    model: ModelInfo,
    docs_hash: str,
    query_model: tuple[Path, QueryModelInfo],
    lexical: LexicalIndex | None = None,
) -> Path:
    """Write a new generation and make it current atomically; returns the generation folder.

    ``query_model`` is a folder holding the exported query model files and their description;
    ``lexical`` the items' BM25 weights (computed here when not given)."""
    index_dir = Path(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(items), model.dims)
    name = f"gen-{time.time_ns()}-{os.getpid()}"
    tmp = index_dir / f".tmp-{name}"
    tmp.mkdir()
    try:
        flat = faiss.IndexFlatIP(model.dims)
        if len(items):
            flat.add(vectors)
        faiss.write_index(flat, str(tmp / VECTORS))
        with open(tmp / ITEMS, "w", encoding="utf-8") as fh:
            for item in items:
                fh.write(item.model_dump_json() + "\n")
        lexical = lexical or LexicalIndex.build([i.embed_text for i in items])
        if lexical.size != len(items):
            raise ValueError(f"the lexical index covers {lexical.size} texts, not {len(items)}")
        lexical.save(tmp / LEXICAL)
        source, query_info = query_model
        names = [VECTORS, ITEMS, LEXICAL, QUERY_ONNX, QUERY_TOKENIZER, *query_info.extra_sha256]
        for file_name in names[3:]:
            _link_or_copy(Path(source) / file_name, tmp / file_name)
        if write_vocab(tmp / QUERY_TOKENIZER, tmp / QUERY_VOCAB):
            names.append(QUERY_VOCAB)
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            model=model,
            docs_hash=docs_hash,
            count=len(items),
            item_hashes=[i.content_hash for i in items],
            files={n: _file_info(tmp / n) for n in names},
            created_at=time.time(),
            query_model=query_info,
        )
        if manifest.files[QUERY_ONNX].sha256 != query_info.sha256 or any(
                manifest.files[n].sha256 != d for n, d in query_info.extra_sha256.items()):
            raise IndexCorruptError(f"the query model in {source} does not match its checksum")
        (tmp / MANIFEST).write_text(manifest.model_dump_json(indent=1), encoding="utf-8")
        for path in tmp.iterdir():
            _fsync(path)
        gen = index_dir / name
        os.replace(tmp, gen)
        pointer_tmp = index_dir / f".{CURRENT}.{os.getpid()}"
        pointer_tmp.write_text(name + "\n", encoding="utf-8")
        _fsync(pointer_tmp)
        os.replace(pointer_tmp, index_dir / CURRENT)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(index_dir, keep=name)
    return gen


def _link_or_copy(source: Path, target: Path) -> None:
    """Hard-link an immutable file into a generation; copy it where links cannot be made."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _prune(index_dir: Path, keep: str) -> None:
    gens = sorted(
        (p for p in index_dir.glob("gen-*") if p.is_dir() and p.name != keep),
        key=lambda p: p.stat().st_mtime,
    )
    for old in gens[: max(0, len(gens) - (KEEP_GENERATIONS - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in index_dir.glob(".tmp-gen-*"):
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)


def _file_info(path: Path) -> FileInfo:
    return FileInfo(bytes=path.stat().st_size, sha256=sha256_file(path))


def _verify_file(path: Path, info: FileInfo | None, hint: str, checksum: bool = True) -> None:
    if info is None:
        raise IndexCorruptError(f"manifest does not describe {path.name}{hint}")
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise IndexCorruptError(f"index file {path} is missing{hint}") from exc
    if size != info.bytes:
        raise IndexCorruptError(
            f"index file {path} has {size} bytes, the manifest says {info.bytes} "
            f"(truncated or overwritten){hint}"
        )
    if checksum and sha256_file(path) != info.sha256:
        raise IndexCorruptError(f"index file {path} does not match its checksum{hint}")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
