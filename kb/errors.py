"""Errors the knowledge base raises for problems a user or operator can act on."""

from oomkb.errors import ServiceError, UserInputError


class KnowledgeBaseError(ServiceError):
    """Base for knowledge-base problems with a clear message."""


class CatalogueError(KnowledgeBaseError):
    """A catalogue or card data file is invalid."""


class QueryError(UserInputError):
    """A search query or option is unusable (empty, too long, unknown language filter)."""
