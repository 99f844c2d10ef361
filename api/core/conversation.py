"""Conversations: a follow-up question inherits the subject, the evidence (error log, report) and
what the user already tried from the earlier turns of its conversation.

Three faces feed the same merge: REST keeps turns server-side under an unguessable
`conversation_id` tied to the caller (`ConversationStore`: bounded in conversations, turns and
characters, expiring), or takes them in the request (`history`, for stateless clients); Slack
reads a thread's earlier messages; the web page sends the turns it keeps. `merge` turns the
earlier turns and the new request into one effective request plus a `Context` the assistant uses
for retrieval and for the grounding decision (a follow-up of an OOM conversation is in scope).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from oomkb.api.schemas import MAX_CONVERSATION_TURNS, AskRequest, ConversationTurn
from oomkb.errors import UserInputError
from oomkb.layout import floor_dir
from oomkb.kb.catalogue_file import YAML_LOADER
from oomkb.kb.errors import CatalogueError
from oomkb.kb.question import analyse

#: Defaults of the server-side store (settings may narrow them).
MAX_CONVERSATIONS = 2_000
MAX_TURN_CHARS = 4_000          # a question kept for the subject: its first characters
MAX_EVIDENCE_CHARS = 200_000    # the error log kept with a turn: its last characters hold the error
MAX_CONVERSATION_CHARS = 400_000
TTL_SECONDS = 3_600.0
#: Earlier questions that join the new one for retrieval (the most recent ones).
SUBJECT_TURNS = 2
SUBJECT_CHARS = 600


class UnknownConversation(UserInputError):
    """The conversation id is unknown, expired, or belongs to another caller (one answer for all
    three: whether an id exists elsewhere is nobody else's business)."""

    http_status = 404


@dataclass
class _Stored:
    owner: str
    turns: list[ConversationTurn] = field(default_factory=list)
    touched: float = 0.0


class ConversationStore:
    """Conversations kept in memory: least recently used first out beyond `max_conversations`,
    each expiring `ttl_s` seconds after its last turn, at most `max_turns` turns and
    `max_chars` characters each (oldest turns dropped first). Thread-safe."""

    def __init__(self, max_conversations: int = MAX_CONVERSATIONS,
                 max_turns: int = MAX_CONVERSATION_TURNS, max_chars: int = MAX_CONVERSATION_CHARS,
                 ttl_s: float = TTL_SECONDS, clock=time.monotonic):
        self.max_conversations = max_conversations
        self.max_turns = max_turns
        self.max_chars = max_chars
        self.ttl_s = ttl_s
        self._clock = clock
        self._items: OrderedDict[str, _Stored] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def start(self, owner: str) -> str:
        """A new, empty conversation of `owner`; its unguessable id."""
        cid = secrets.token_hex(16)
        with self._lock:
            self._expire()
            self._items[cid] = _Stored(owner=owner, touched=self._clock())
            while len(self._items) > self.max_conversations:
                self._items.popitem(last=False)
        return cid

    def turns(self, cid: str, owner: str) -> list[ConversationTurn]:
        """The earlier turns of `owner`'s conversation `cid`, oldest first."""
        with self._lock:
            self._expire()
            return list(self._get(cid, owner).turns)

    def add(self, cid: str, owner: str, turn: ConversationTurn) -> None:
        """Append `turn`, then drop the oldest turns beyond the count and size bounds."""
        turn = bounded_turn(turn)
        with self._lock:
            self._expire()
            stored = self._get(cid, owner)
            stored.turns.append(turn)
            while len(stored.turns) > self.max_turns or (
                    len(stored.turns) > 1 and sum(_size(t) for t in stored.turns) > self.max_chars):
                stored.turns.pop(0)
            stored.touched = self._clock()
            self._items.move_to_end(cid)

    def _get(self, cid: str, owner: str) -> _Stored:
        stored = self._items.get(cid)
        if stored is None or not secrets.compare_digest(stored.owner, owner):
            raise UnknownConversation(
                "unknown or expired conversation_id; leave it out to start a new conversation")
        return stored

    def _expire(self) -> None:
        now = self._clock()
        for cid in [c for c, s in self._items.items() if now - s.touched > self.ttl_s]:
            del self._items[cid]


def _size(turn: ConversationTurn) -> int:
    return len(turn.question) + len(turn.error_log or "") + (
        len(turn.report.model_dump_json()) if turn.report is not None else 0)


def bounded_turn(turn: ConversationTurn) -> ConversationTurn:
    """The turn as kept: the question's first characters, the log's last ones (the error)."""
    log = turn.error_log
    return turn.model_copy(update={
        "question": turn.question[:MAX_TURN_CHARS],
        "error_log": log[-MAX_EVIDENCE_CHARS:] if log else log,
    })


def turn_of(request: AskRequest) -> ConversationTurn:
    """The turn `request` adds to its conversation (its own text and evidence)."""
    return bounded_turn(ConversationTurn(question=request.question, error_log=request.error_log,
                                         report=request.report))


# -- merging ----------------------------------------------------------------------------------


class Context(BaseModel):
    """What a follow-up inherits, as the assistant uses it."""

    follow_up: bool = False
    subject: str = Field(default="", description="the earlier questions, most recent last")
    inherited: list[str] = Field(default_factory=list, description="evidence taken from earlier turns")
    tried: list[str] = Field(default_factory=list, description="remedy ids the user says they tried")
    tried_items: list[str] = Field(default_factory=list, description="what they tried (intents.yaml ids)")


def merge(turns: list[ConversationTurn], request: AskRequest) -> tuple[AskRequest, Context]:
    """The effective request (the new turn's evidence, else the most recent earlier one's) and
    the context it was asked in."""
    if not turns:
        said = analyse(request.question)
        return request, Context(tried=said.tried_remedies, tried_items=said.tried)
    update: dict[str, Any] = {}
    inherited: list[str] = []
    if not (request.error_log or "").strip():
        log = next((_log_of(t) for t in reversed(turns) if _log_of(t)), None)
        if log:
            update["error_log"] = log
            inherited.append("error_log")
    if request.report is None:
        report = next((t.report for t in reversed(turns) if t.report is not None), None)
        if report is not None:
            update["report"] = report
            inherited.append("report")
    questions = [t.question.strip() for t in turns if t.question.strip()]
    subject = "\n".join(q[:SUBJECT_CHARS] for q in questions[-SUBJECT_TURNS:])
    said = [analyse(q) for q in [*questions, request.question]]
    done = sorted({r for a in said for r in a.tried_remedies})
    items = sorted({t for a in said for t in a.tried})
    effective = request.model_copy(update=update) if update else request
    return effective, Context(follow_up=True, subject=subject, inherited=inherited, tried=done,
                              tried_items=items)


def _log_of(turn: ConversationTurn) -> str | None:
    """A turn's error log: the one given, else its question when that reads as an OOM error."""
    if (turn.error_log or "").strip():
        return turn.error_log
    from oomkb.diagnostics.parse import parse_error

    q = turn.question.strip()
    return q if q and parse_error(q).category != "unknown" else None


def turns_from(history: list[Any]) -> list[ConversationTurn]:
    """Earlier turns as sent by a client (dicts or ConversationTurn), validated."""
    try:
        return [t if isinstance(t, ConversationTurn) else ConversationTurn.model_validate(t)
                for t in history]
    except ValidationError as exc:
        raise UserInputError(f"history: {exc.errors()[0].get('msg', 'invalid turn')}") from exc


# -- the conversation's words ---------------------------------------------------------------
# What was tried is read by the question analysis (kb/question.py); kb/catalogue/conversation.yaml
# holds the words that point back at the conversation.

CATALOGUE_FILE = floor_dir("kb") / "catalogue" / "conversation.yaml"


class _Catalogue(BaseModel):
    follow_up_cues: list[str]
    still_failing: list[str] = []
    greetings: list[str] = []
    the_code_of_that: list[str] = []


@lru_cache(maxsize=1)
def _catalogue() -> tuple[list[re.Pattern[str]], re.Pattern[str] | None, list[re.Pattern[str]],
                          list[re.Pattern[str]]]:
    try:
        data = _Catalogue.model_validate(
            yaml.load(CATALOGUE_FILE.read_text(encoding="utf-8"), Loader=YAML_LOADER))
        greeting = (re.compile(r"^\s*(?:" + "|".join(f"(?:{g})" for g in data.greetings) + r")[\s,.!:;\-—–、，！。]+",
                               re.IGNORECASE) if data.greetings else None)
        return ([re.compile(p, re.IGNORECASE) for p in data.follow_up_cues], greeting,
                [re.compile(p, re.IGNORECASE) for p in data.still_failing],
                [re.compile(p, re.IGNORECASE) for p in data.the_code_of_that])
    except (OSError, yaml.YAMLError, ValidationError, re.error) as exc:
        raise CatalogueError(f"{CATALOGUE_FILE.name} unreadable: {exc}") from exc


def _patterns() -> list[re.Pattern[str]]:
    return _catalogue()[0]


def still_failing(question: str) -> bool:
    """Whether `question` says that what was done did not help ("still the same error")."""
    return any(p.search(question) for p in _catalogue()[2])


def without_greeting(question: str) -> str:
    """`question` less a greeting that opens it ("hi all, ...", "大家好，..."), when something is left."""
    greeting = _catalogue()[1]
    if greeting is None:
        return question
    rest = greeting.sub("", question, count=1)
    return rest if rest.strip() else question


def asks_for_that_code(question: str) -> bool:
    """Whether `question` asks for the code of what was just said ("the optax code for that"),
    not for code it names itself."""
    return any(p.search(question) for p in _catalogue()[3])


def refers_back(question: str) -> bool:
    """Whether `question` holds words that point back at the conversation ("what next?",
    "still", "that flag")."""
    return any(p.search(question) for p in _patterns())
