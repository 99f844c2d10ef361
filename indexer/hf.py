"""Helpers for the Hugging Face libraries (transformers), imported only where a model loads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' per-load progress bars and load reports (the unused BERT pooler is
    reported as missing on every load) while inside."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if was_enabled:
            hf_logging.enable_progress_bar()
