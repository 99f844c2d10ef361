"""Errors the indexer raises where the problem is; the CLI and HTTP layers turn them into messages."""

from oomkb.errors import ServiceError, UserInputError


class IndexerError(ServiceError):
    """Base for problems with guides or the index that a user can act on."""


class GuideError(UserInputError):
    """A guide file is missing, unreadable or malformed."""


class IndexCorruptError(IndexerError):
    """The index on disk is damaged (truncated or unreadable files); rebuild it with `oomkb index`."""


class IndexMismatchError(IndexerError):
    """The index on disk was built by another model or format; rebuild it with `oomkb index`."""


class IndexMissingError(IndexerError):
    """No index exists at the expected place."""


class IndexBusyError(IndexerError):
    """Another process is building the index right now."""


class ModelError(ServiceError):
    """The embedding model cannot be found, converted, exported or loaded; the message says why."""
