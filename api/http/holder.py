"""The one Assistant of a serving process, loaded in a background thread on start-up."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from oomkb.settings import Settings
from oomkb.errors import OomkbError, ServiceError

if TYPE_CHECKING:
    from oomkb.api.core.assistant import Assistant

log = logging.getLogger("oomkb.api")


class NotReady(ServiceError):
    """The model and index are still loading (or failed to load); the message says which."""

    retry_after_s = 5
    expected = True


class AssistantHolder:
    """Holds the one Assistant of the app; loads it in a background thread on start-up."""

    def __init__(self, settings: Settings, assistant: Assistant | None = None):
        self.settings = settings
        self.assistant = assistant
        self.error: str | None = None
        self.load_seconds: float | None = 0.0 if assistant is not None else None
        self.ready = threading.Event()
        self._finished = threading.Event()  # loading ended, either way
        if assistant is not None:
            self.ready.set()
            self._finished.set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start_loading(self) -> None:
        """Begin loading the assistant unless it is loaded or loading already."""
        with self._lock:
            if self.assistant is not None or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._load, name="oomkb-load", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        from oomkb.api.core.assistant import load_assistant

        started = time.monotonic()
        log.info("loading the embedding model and the index ...")
        try:
            assistant = load_assistant(index_dir=self.settings.index_dir, docs_dir=self.settings.docs_dir)
            assistant.warm_up()  # ready means the first answer is as quick as the next
        except Exception as exc:  # keep serving /healthz; /readyz and the API say what failed
            # The full message (it may name files and folders) goes to the server log only;
            # /readyz and the 503s say what kind of problem it is.
            if isinstance(exc, OomkbError):
                self.error = short_reason(exc)
                log.error("cannot load the assistant: %s", exc)
            else:
                self.error = "the assistant failed to load; see the server log"
                log.exception("cannot load the assistant")
            return
        else:
            self.assistant = assistant
            self.load_seconds = time.monotonic() - started
            self.ready.set()
            log.info("ready in %.1f s", self.load_seconds)
        finally:
            self._finished.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until loading ends; True when the assistant is loaded, False on failure or timeout."""
        self._finished.wait(timeout)
        return self.ready.is_set()

    def require(self, language: str = "en") -> Assistant:
        """The loaded assistant, or :class:`NotReady` saying why there is none yet (in `language`)."""
        if self.assistant is not None:
            return self.assistant
        raise NotReady(self.not_ready_text(language))

    def not_ready_text(self, language: str = "en") -> str:
        """Why there is no assistant yet, from the catalogue's messages in `language`."""
        from oomkb.kb.remedies import load_catalogue
        from oomkb.kb.remedies.rendering import message

        catalogue = load_catalogue()
        if self.error:
            return message(catalogue, "service_failed", language, reason=self.error)
        return message(catalogue, "service_loading", language)


def short_reason(exc: BaseException) -> str:
    """What kind of problem `exc` is, in a clause without file names: the first clause of the
    docstring of its most specific class that has one (the message itself stays in the log)."""
    for cls in type(exc).__mro__:
        doc = (cls.__doc__ or "").strip()
        if cls is BaseException or cls is Exception:
            break
        if doc and not doc.startswith("Base for"):
            clause = doc.splitlines()[0].split(";")[0].strip().rstrip(".")
            return f"{clause[:1].lower()}{clause[1:]}; see the server log"
    return "the assistant failed to load; see the server log"
