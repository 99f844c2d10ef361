"""Errors that diagnostics raise for problems a user can cause.

Each carries a human message saying what went wrong and what to do about it; the CLI and
the HTTP layer catch :class:`oomkb.errors.OomkbError` once and show that message instead of a
traceback.
"""

from __future__ import annotations

from oomkb.errors import ServiceError, UserInputError


class DiagnosticsError(UserInputError):
    """Base class for user-facing diagnostics failures; ``str(err)`` is the message to show."""


class LogReadError(DiagnosticsError):
    """An error log could not be read (missing file, a directory, no permission)."""


class SignatureCatalogueError(ServiceError):
    """The error-signature catalogue (``signatures.yaml``) is malformed: shipped data, not the user's input."""
