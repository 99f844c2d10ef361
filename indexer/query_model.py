"""The query half of the embedding model, without torch: an ONNX export run by ONNX Runtime.

Indexing loads the sentence-transformers model (torch) anyway, so it also exports the model once:
the encoder with its pooling and L2 normalisation, traced into one ONNX graph (token ids and
attention mask in, a normalised embedding out), optionally quantised to int8, beside the model's
own ``tokenizer.json``. Both files become part of every index generation (their checksums in the
manifest), so a generation carries the exact query model that matches its vectors. Searching then
needs only ``onnxruntime`` and ``tokenizers``: no torch, no transformers, no jax.

Exports are cached per model and precision under ``$OOMKB_HOME/models/query-onnx/`` and hard-linked
into each generation, so rebuilding the index after a guide changed costs no export.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import threading
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from oomkb.indexer.checksum import sha256_file
from oomkb.indexer.errors import IndexCorruptError, IndexerError, ModelError
from oomkb.settings import models_dir, query_precision_setting
from oomkb.indexer.store import (QUERY_ONNX, QUERY_TABLE, QUERY_TABLE_SCALES, QUERY_TOKENIZER, QUERY_VOCAB,
                           Manifest, ModelInfo, QueryModelInfo, StoredIndex, read_manifest)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

#: Bumped whenever the exported graph or its inputs change, so older exports are redone.
EXPORT_FORMAT_VERSION = 2  # 2: the token-embedding table outside the graph
PRECISIONS = ("fp32", "mixed", "int8")
_INFO_FILE = "query_model.json"
_LOCK_TIMEOUT_S = 900
_default_threads = 0  # 0: ONNX Runtime's choice (all cores); the server sets 1 per request
_default_batching = False


def set_default_threads(threads: int) -> None:
    """Intra-op threads for query encoders loaded from now on (the server uses 1 per request)."""
    global _default_threads
    _default_threads = max(0, int(threads))


def set_default_batching(batch: bool) -> None:
    """Whether query encoders loaded from now on batch concurrent queries (see QueryEncoder)."""
    global _default_batching
    _default_batching = bool(batch)


# --------------------------------------------------------------------------------------------
# Export (index time: imports torch through the loaded sentence-transformers model)
# --------------------------------------------------------------------------------------------


def _cache_dir(model: ModelInfo, precision: str) -> Path:
    key = json.dumps([model.name, model.version, model.dims, precision, EXPORT_FORMAT_VERSION])
    return models_dir() / "query-onnx" / hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


def _read_cached(folder: Path, model: ModelInfo, precision: str) -> QueryModelInfo | None:
    try:
        info = QueryModelInfo.model_validate_json((folder / _INFO_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if (info.model_name, info.model_version, info.precision, info.export_version) != (
        model.name, model.version, precision, EXPORT_FORMAT_VERSION
    ):
        return None
    if not (folder / QUERY_ONNX).is_file() or not (folder / QUERY_TOKENIZER).is_file():
        return None
    return info


def _intact(folder: Path, info: QueryModelInfo) -> bool:
    try:
        return ((folder / QUERY_TOKENIZER).is_file()
                and sha256_file(folder / QUERY_ONNX) == info.sha256
                and all(sha256_file(folder / n) == d for n, d in info.extra_sha256.items()))
    except OSError:
        return False


def _export(st_model: SentenceTransformer, model: ModelInfo, precision: str, folder: Path) -> None:
    """Trace the model into ``folder`` (ONNX graph, tokenizer, description)."""
    import torch

    tokenizer = getattr(st_model, "tokenizer", None)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ModelError(
            "the embedding model has no fast tokenizer (tokenizer.json), which the torch-free "
            "query path needs; use a model folder that includes one"
        )
    prompts = getattr(st_model, "prompts", None) or {}
    prompt = prompts.get("query", "")
    max_length = int(getattr(st_model, "max_seq_length", None) or 512)
    sample = tokenizer([prompt + "a short question", prompt + "x"], padding=True,
                       return_tensors="pt")
    input_names = [name for name in ("input_ids", "attention_mask", "token_type_ids")
                   if name in sample]
    modules = list(st_model)
    auto_model = getattr(modules[0], "auto_model", None) if modules else None
    table = auto_model.get_input_embeddings() if auto_model is not None else None
    split = isinstance(table, torch.nn.Embedding) and table.weight.shape[0] >= len(tokenizer)
    if split:
        # The token-embedding table leaves the graph: 250k rows of which a query reads a few
        # dozen. Stored beside it and memory-mapped, it costs nothing to load and is shared by
        # every process on the machine; the graph (the encoder) loads twice as fast.
        input_names[input_names.index("input_ids")] = "inputs_embeds"

    class _Embed(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            features = dict(zip(input_names, tensors))
            if split:
                embeds = features.pop("inputs_embeds")
                out = auto_model(inputs_embeds=embeds, **features, return_dict=True)
                features = {"token_embeddings": out.last_hidden_state,
                            "attention_mask": features["attention_mask"]}
                for module in modules[1:]:
                    features = module(features)
            else:
                features = self.inner(features)
            return torch.nn.functional.normalize(features["sentence_embedding"], p=2.0, dim=1)

    wrapper = _Embed(st_model).eval()
    traced = folder / "traced.onnx"
    axes = {name: {0: "batch", 1: "tokens"} for name in input_names}
    axes["embedding"] = {0: "batch"}
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about shape-dependent Python branches
        example = tuple(table(sample["input_ids"]) if name == "inputs_embeds" else sample[name]
                        for name in input_names)
        torch.onnx.export(
            wrapper, example, str(traced),
            input_names=input_names, output_names=["embedding"], dynamic_axes=axes,
            opset_version=17, dynamo=False,
        )
        if split:
            _save_table(table.weight.detach().cpu().numpy(), precision, folder)
    if precision == "int8" or (precision == "mixed" and not split):
        import logging

        from onnxruntime.quantization import QuantType, quantize_dynamic

        logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))
        if precision == "int8":
            # Everything: per-channel weights keep the query embedding within cosine 0.995 of
            # the float model (per-tensor: 0.988); activations are quantised per call.
            options = {"per_channel": True}
        else:
            # Only the token-embedding table (Gather), when it stayed in the graph.
            options = {"op_types_to_quantize": ["Gather"]}
        quantize_dynamic(str(traced), str(folder / QUERY_ONNX), weight_type=QuantType.QInt8,
                         **options)
        traced.unlink()
    else:
        os.replace(traced, folder / QUERY_ONNX)
    for extra in folder.glob("*.onnx.data"):  # no external-data files for a model this size
        extra.unlink()
    backend.save(str(folder / QUERY_TOKENIZER))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    info = QueryModelInfo(
        model_name=model.name, model_version=model.version, precision=precision,
        export_version=EXPORT_FORMAT_VERSION, prompt=prompt, max_length=max_length,
        pad_id=int(pad_id), inputs=input_names, dims=model.dims,
        sha256=sha256_file(folder / QUERY_ONNX),
        extra_sha256={n: sha256_file(folder / n) for n in (QUERY_TABLE, QUERY_TABLE_SCALES)}
        if split else {},
    )
    (folder / _INFO_FILE).write_text(info.model_dump_json(indent=1), encoding="utf-8")


def _save_table(weight: np.ndarray, precision: str, folder: Path) -> None:
    """The token-embedding table: float32 for ``fp32``, else int8 with one scale per row (the
    row's largest magnitude / 127; a query embedding stays within cosine 0.9999 of float32)."""
    weight = np.asarray(weight, dtype=np.float32)
    if precision == "fp32":
        rows, scales = weight, np.ones(len(weight), dtype=np.float32)
    else:
        scales = (np.abs(weight).max(axis=1) / 127.0).astype(np.float32)
        scales[scales == 0] = 1.0
        rows = np.clip(np.rint(weight / scales[:, None]), -127, 127).astype(np.int8)
    np.save(folder / QUERY_TABLE, rows)
    np.save(folder / QUERY_TABLE_SCALES, scales)


def ensure_query_model(
    model: ModelInfo,
    load_embedder: Callable[[], SentenceTransformer],
    precision: str | None = None,
    previous: StoredIndex | None = None,
) -> tuple[Path, QueryModelInfo]:
    """A folder holding the exported query model for ``model``, and its description.

    Found in the previous generation (same model and precision), else in the export cache, else
    exported now (about 40 s: loads the model, traces it, quantises it).
    """
    from filelock import FileLock, Timeout

    precision = precision or query_precision_setting()
    if previous is not None and previous.manifest.query_model is not None:
        info = previous.manifest.query_model
        same = (info.model_name, info.model_version, info.precision, info.export_version) == (
            model.name, model.version, precision, EXPORT_FORMAT_VERSION
        )
        if same and _intact(previous.path, info):
            return previous.path, info
    folder = _cache_dir(model, precision)
    info = _read_cached(folder, model, precision)
    if info is not None and _intact(folder, info):
        return folder, info
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the folder for the query model {folder.parent}: {exc}")
    lock = FileLock(str(folder.parent / f".{folder.name}.lock"))
    try:
        with lock.acquire(timeout=_LOCK_TIMEOUT_S):
            info = _read_cached(folder, model, precision)
            if info is None or not _intact(folder, info):
                work = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                work.mkdir()
                try:
                    _export(load_embedder(), model, precision, work)
                    if folder.exists():
                        shutil.rmtree(folder)
                    os.replace(work, folder)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                info = _read_cached(folder, model, precision)
    except Timeout:
        raise ModelError(
            f"waited {_LOCK_TIMEOUT_S} s for another process exporting the query model into "
            f"{folder}; if none is running, delete {lock.lock_file}"
        ) from None
    except OSError as exc:
        raise ModelError(f"could not export the query model into {folder}: {exc}") from exc
    if info is None:
        raise ModelError(f"the query model export in {folder} is incomplete")
    return folder, info


# --------------------------------------------------------------------------------------------
# Query time: onnxruntime + tokenizers only
# --------------------------------------------------------------------------------------------


class QueryEncoder:
    """Embeds queries with a generation's exported model; thread-safe, no torch.

    Concurrent callers are batched: while one embedding call runs, queries that arrive wait and
    go together into the next call (``batch=False`` embeds every call on its own).
    """

    def __init__(self, onnx_path: Path, tokenizer_path: Path, info: QueryModelInfo,
                 threads: int | None = None, batch: bool | None = None,
                 background: bool = False, vocab_path: Path | None = None) -> None:
        self.info = info
        self.dims = info.dims
        self.path = Path(onnx_path)
        self.batching = _default_batching if batch is None else batch
        self.calls = 0  # embedding calls made (for the benchmark: fewer than queries = batching)
        self._threads = _default_threads if threads is None else threads
        self._paths = (Path(onnx_path), Path(tokenizer_path))
        self._vocab_path = vocab_path
        self._session = self._tokenizer = self._table = None
        self._load_error: BaseException | None = None
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._running = False
        # ONNX Runtime builds its session without holding the GIL: in the background, a cold
        # `oomkb search` reads the guides and builds its lexical index meanwhile.
        self._loader = threading.Thread(target=self._load, name="oomkb-query-model", daemon=True)
        self._loader.start()
        _LOADERS.add(self._loader)
        if not background:
            self.wait()

    def _load(self) -> None:
        try:
            import onnxruntime as ort

            from oomkb.indexer.query_tokenizer import FullTokenizer, SubsetTokenizer

            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            onnx_path, tokenizer_path = self._paths
            # hashlib and onnxruntime both release the GIL: the checksums run beside the load.
            expected = {onnx_path: self.info.sha256,
                        **{onnx_path.parent / n: d for n, d in self.info.extra_sha256.items()}}
            found: dict[Path, str] = {}

            def hash_all() -> None:
                for path in expected:
                    try:
                        found[path] = sha256_file(path)
                    except OSError:
                        pass  # reported below as a mismatch (or by the loader, which needs it)

            hasher = threading.Thread(target=hash_all, daemon=True)
            hasher.start()
            session = ort.InferenceSession(str(onnx_path), options,
                                           providers=["CPUExecutionProvider"])
            if "inputs_embeds" in self.info.inputs:  # mapped, not read: pages come in as used
                table = (np.load(onnx_path.parent / QUERY_TABLE, mmap_mode="r"),
                         np.load(onnx_path.parent / QUERY_TABLE_SCALES))
                if table[0].ndim != 2 or table[0].shape[1] != self.dims or table[1].shape != (
                        table[0].shape[0],):
                    raise ValueError(f"{QUERY_TABLE} has shape {table[0].shape}, expected "
                                     f"(rows, {self.dims}) with one scale per row")
                self._table = table
            if self._vocab_path is not None:  # milliseconds (see indexer.query_tokenizer)
                tokenizer = SubsetTokenizer(self._vocab_path, max_length=self.info.max_length)
            else:
                tokenizer = FullTokenizer(tokenizer_path, max_length=self.info.max_length)
            hasher.join()
            for path, digest in expected.items():
                if found.get(path) != digest:
                    raise ValueError(f"{path.name} does not match its checksum")
            self._session, self._tokenizer = session, tokenizer
        except BaseException as exc:  # onnxruntime and tokenizers raise their own types
            self._load_error = exc

    def wait(self) -> QueryEncoder:
        """Block until the model is loaded; a damaged file is an IndexCorruptError."""
        self._loader.join()
        if self._load_error is not None:
            raise IndexCorruptError(
                f"the query model in {self.path.parent} cannot be loaded ({self._load_error}); "
                "rebuild the index with `oomkb index`"
            ) from self._load_error
        return self

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 rows, one per text, with the model's query prompt."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        if not self.batching:
            return self._run(texts)
        return self._batched(texts)

    def _run(self, texts: list[str]) -> np.ndarray:
        if self._session is None:
            self.wait()
        encodings = self._tokenizer.encode_ids([self.info.prompt + t for t in texts])
        width = max(len(e) for e in encodings)
        ids = np.full((len(texts), width), self.info.pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc)] = enc
            mask[row, : len(enc)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        if self._table is not None:
            rows, scales = self._table
            feeds["inputs_embeds"] = rows[ids].astype(np.float32) * scales[ids][..., None]
        self.calls += 1
        out = self._session.run(None, {name: feeds[name] for name in self.info.inputs})[0]
        return np.ascontiguousarray(out, dtype=np.float32)

    def _batched(self, texts: list[str]) -> np.ndarray:
        mine = _Pending(texts)
        with self._cond:
            self._queue.append(mine)
            while self._running and mine.result is None and mine.error is None:
                self._cond.wait()
            if mine.result is not None or mine.error is not None:
                return mine.take()
            self._running = True
            group, self._queue = self._queue, []
        try:
            rows = self._run([t for p in group for t in p.texts])
            start = 0
            for pending in group:
                pending.result = rows[start : start + len(pending.texts)]
                start += len(pending.texts)
        except BaseException as exc:
            for pending in group:
                pending.error = exc
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()
        return mine.take()


class _Pending:
    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None

    def take(self) -> np.ndarray:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def load_query_encoder(index: StoredIndex, threads: int | None = None,
                       batch: bool | None = None, background: bool = False) -> QueryEncoder:
    """The query encoder stored in an index generation (its checksum was verified on load).

    ``background`` returns at once and loads meanwhile; the first query waits for it."""
    return query_encoder_for(index.path, index.manifest, threads=threads, batch=batch,
                             background=background)


#: Loader threads not yet known to be finished. A process that exits while one is inside ONNX
#: Runtime's session constructor tears down the runtime under it: "terminate called without an
#: active exception", exit 134 (a CLI reporting a damaged index did, every time). At exit, each is
#: joined first: the load ends within seconds, by itself.
_LOADERS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


@atexit.register
def _join_loaders() -> None:
    for thread in list(_LOADERS):
        thread.join(timeout=120)


_prefetched: dict[Path, QueryEncoder] = {}
_prefetch_lock = threading.Lock()


def prefetch(index_dir: Path) -> None:
    """Start loading the current generation's query model in the background, for a process that
    opens the index soon: the model loads (mostly without the GIL) while the process imports
    and reads the rest. The next `query_encoder_for` of that generation takes it; a missing or
    damaged index is left for that call to report. One started already is kept, not doubled."""
    try:
        generation, manifest = read_manifest(Path(index_dir))
        with _prefetch_lock:
            if generation in _prefetched:
                return
        encoder = query_encoder_for(generation, manifest, background=True)
    except IndexerError:
        return
    with _prefetch_lock:
        _prefetched.setdefault(generation, encoder)


def query_encoder_for(generation: Path, manifest: Manifest, threads: int | None = None,
                      batch: bool | None = None, background: bool = False) -> QueryEncoder:
    """The query encoder of the generation folder ``generation``, described by ``manifest``
    (the one `prefetch` started, when it was started with the same settings)."""
    with _prefetch_lock:
        early = _prefetched.pop(generation, None)
    if early is not None and early._threads == (_default_threads if threads is None else threads) \
            and early.batching == (_default_batching if batch is None else batch):
        return early if background else early.wait()
    info = manifest.query_model
    if info is None:
        raise IndexCorruptError(
            f"the index in {generation} holds no query model; rebuild it with `oomkb index`"
        )
    if info.dims != manifest.model.dims:
        raise IndexCorruptError(
            f"the query model in {generation} makes {info.dims}-dim vectors but the index holds "
            f"{manifest.model.dims}-dim ones; rebuild it with `oomkb index`"
        )
    vocab = generation / QUERY_VOCAB if QUERY_VOCAB in manifest.files else None
    return QueryEncoder(generation / QUERY_ONNX, generation / QUERY_TOKENIZER, info,
                        threads=threads, batch=batch, background=background, vocab_path=vocab)
