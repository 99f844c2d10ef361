"""Where oomkb keeps its files, and which embedding model it uses (read from :mod:`oomkb.settings`)."""

from __future__ import annotations

from pathlib import Path

from oomkb.settings import DEFAULT_MODEL_NAME, prepare_offline_environment, storage

__all__ = ["DEFAULT_MODEL_NAME", "default_index_dir", "model_setting", "models_dir", "oomkb_home",
           "prepare_offline_environment"]


def oomkb_home() -> Path:
    """The folder holding oomkb's index and models: ``$OOMKB_HOME``, else the user's cache dir."""
    return storage().home_dir


def default_index_dir() -> Path:
    """Where the search index lives unless a command is given another folder."""
    return oomkb_home() / "index"


def models_dir() -> Path:
    """Where converted embedding models are kept."""
    return oomkb_home() / "models"


def model_setting() -> str:
    """The embedding model to use: ``$OOMKB_MODEL`` if set, else :data:`DEFAULT_MODEL_NAME`.

    The value is either the default name or a path to a local sentence-transformers model folder.
    """
    return storage().model


#: How the query model is exported into the index (chosen on benchmarks/retrieval.py's query sets):
#: ``fp32`` (448 MB; retrieval identical to sentence-transformers), ``mixed`` (the token-embedding
#: table in int8, the encoder in float32: 173 MB, loads about twice as fast, cosine to fp32
#: >= 0.9999, retrieval identical) or ``int8`` (everything, per-channel: 112 MB, embeds twice as
#: fast, but hybrid recall@1 fell from 0.9375 to 0.9219 on the tuning set and from 0.9286 to
#: 0.8810 held out, more than the 0.01 allowed).
DEFAULT_QUERY_PRECISION = "mixed"


def query_precision_setting() -> str:
    """``$OOMKB_QUERY_PRECISION`` (``fp32``, ``mixed`` or ``int8``), else :data:`DEFAULT_QUERY_PRECISION`."""
    return storage().query_precision
