"""The project's one exception tree: what a caller needs to know about an error lives on its class.

Every exception oomkb defines descends from :class:`OomkbError` along exactly one path, through
one of two branches (a class never inherits from both; some also subclass a builtin such as
``ValueError`` so that pydantic validators and generic callers read them as such):

    OomkbError
    ├── UserInputError              the input is at fault: CLI exit 2, HTTP 4xx, never logged
    │   ├── SettingsError                     oomkb.settings: an OOMKB_* value
    │   ├── DiagnosticsError                  oomkb.diagnostics: the user's log, program or option
    │   │   ├── SizeFormatError, LogReadError, TargetError, PlanError, ProfileError, InterpreterError
    │   │   ├── TraceError, CompileError      (estimate)
    │   │   ├── ProgramError → ProgramSpecError, ProgramLoadError, ProgramNameError,
    │   │   │                  ProgramExited, FactoryError
    │   │   └── SandboxError → JobTimeout, JobCrashed, JobFailed, ProgramOutOfMemory …  (HTTP 422)
    │   ├── GuideError                        oomkb.indexer: a guide file the user gave
    │   ├── QueryError                        oomkb.kb: an unusable query or option
    │   ├── UnknownAnswer, UnknownGuide       oomkb.api: an id that does not exist (404)
    └── ServiceError                the environment is at fault: CLI exit 1, HTTP 503, logged
        ├── SignatureCatalogueError           shipped data (signatures.yaml) does not load
        ├── IsolationUnavailable              no sandbox for submitted programs
        ├── IndexerError → IndexCorruptError, IndexMismatchError, IndexMissingError, IndexBusyError
        ├── ModelError                        the embedding model cannot be loaded
        ├── KnowledgeBaseError → CatalogueError (→ GroundingError), FactError, MissingValue
        ├── FeedbackUnavailable
        └── NotReady, EstimateBusy            expected states (loading, busy: HTTP 429): not logged

A class may narrow its HTTP status (a program stopped by the sandbox is 422, a busy estimator
429), give a retry hint, or mark itself ``expected`` (a state to report, not a fault to log). The
edges (``oomkb.api.cli.boundary``, the HTTP app, the Slack adapter) read only these attributes;
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
    #: An expected state of the service (still loading, busy), answered as it is and not logged.
    expected: bool = False

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
