"""The project's one exception tree: what a caller needs to know about an error lives on its class.

Every exception oomkb defines descends from :class:`OomkbError`, through one of two branches:

- :class:`UserInputError`: the input is at fault (a query, a log, a program, an option); the
  CLI exits with 2 and HTTP answers 4xx.
- :class:`ServiceError`: the environment is at fault (a damaged index, a missing model, shipped
  data that does not load, a service still loading); the CLI exits with 1 and HTTP answers 503.

A class may narrow its HTTP status (a program stopped by the sandbox is 422, a busy estimator
429). The edges (``api.cli.boundary``, the HTTP app, the Slack adapter) read these attributes;
Python's method resolution order makes the most specific class win, as with any attribute.
"""

from __future__ import annotations


class OomkbError(Exception):
    """Root of every error oomkb raises on purpose; ``str(err)`` is the sentence to show."""

    #: CLI exit status when this error ends a command.
    exit_code: int = 1
    #: HTTP status when this error ends a request.
    http_status: int = 500
    #: Seconds a client should wait before retrying (a ``Retry-After`` header), when retrying helps.
    retry_after_s: int | None = None

    @property
    def user_fault(self) -> bool:
        """True when the caller's input is at fault (so the message is for them, not the operator)."""
        return isinstance(self, UserInputError)


class UserInputError(OomkbError):
    """The input cannot be used; the message says what to change."""

    exit_code = 2
    http_status = 400


class ServiceError(OomkbError):
    """The service or its environment cannot do the work right now; the message says why."""

    exit_code = 1
    http_status = 503


__all__ = ["OomkbError", "ServiceError", "UserInputError"]
