"""Errors the knowledge base raises for problems a user or operator can act on."""


class KnowledgeBaseError(Exception):
    """Base for knowledge-base problems with a clear message."""


class CatalogueError(KnowledgeBaseError):
    """A catalogue or card data file is invalid."""


class QueryError(KnowledgeBaseError):
    """A search query or option is unusable (empty, too long, unknown language filter)."""
