"""What was asked and whether the answer helped: a small SQLite store shared by every server process.

Each answer the service gives is recorded with its metadata (question, language, category, the
grounded flag, confidence and the cited sections) under its ``answer_id``; 👍/👎 and an optional
comment attach to it. The raw error log is kept only when the operator opts in
(``OOMKB_STORE_LOGS=1``): logs can hold paths, host names and model names.

The database runs in WAL mode with a busy timeout, so several server processes (``--workers``,
replicas on one machine) write to it safely; the schema carries a version (``PRAGMA user_version``)
and is migrated forward on open. A store that cannot be opened or written (missing folder that
cannot be created, read-only file, a corrupt file) never stops the service from answering: recording
an answer is best effort, and feedback calls raise :class:`FeedbackUnavailable` (HTTP 503).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from oomkb.errors import ServiceError, UserInputError

log = logging.getLogger("oomkb.feedback")

MAX_COMMENT_CHARS = 2000
MAX_QUESTION_CHARS = 4000
MAX_LOG_CHARS = 64_000
#: How long opening a database waits for another process that is switching it to WAL.
MIGRATE_WAIT_S = 15.0
#: The answers table keeps at most this many rows (feedback rows hang off them, one per answer);
#: past it the oldest are dropped, so anonymous `/v1/ask` traffic cannot grow the file without end.
MAX_ANSWERS = 50_000

#: Each entry moves the schema from version N-1 to N; never edit a released step, add one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: answers and feedback
        """CREATE TABLE answers (
            answer_id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            source TEXT NOT NULL,
            question TEXT NOT NULL,
            language TEXT NOT NULL,
            category TEXT,
            grounded INTEGER NOT NULL,
            confidence REAL NOT NULL,
            cited TEXT NOT NULL,
            error_log TEXT
        )""",
        """CREATE TABLE feedback (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            answer_id TEXT NOT NULL REFERENCES answers(answer_id) ON DELETE CASCADE,
            created REAL NOT NULL,
            helpful INTEGER NOT NULL,
            comment TEXT,
            source TEXT NOT NULL,
            dedupe_key TEXT UNIQUE
        )""",
    ),
    (  # 2: the gaps report reads by time and by verdict
        "CREATE INDEX answers_created ON answers(created)",
        "CREATE INDEX answers_grounded ON answers(grounded, created)",
        "CREATE INDEX feedback_answer ON feedback(answer_id)",
    ),
    (  # 3: one verdict per answer (the latest wins); each question's vector, kept for the gaps report
        """DELETE FROM feedback WHERE id NOT IN (
               SELECT (SELECT f.id FROM feedback f WHERE f.answer_id = g.answer_id
                       ORDER BY f.created DESC, f.id DESC LIMIT 1)
               FROM (SELECT DISTINCT answer_id FROM feedback) g)""",
        "DROP INDEX feedback_answer",
        "CREATE UNIQUE INDEX feedback_one_per_answer ON feedback(answer_id)",
        "ALTER TABLE answers ADD COLUMN vector BLOB",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


class FeedbackUnavailable(ServiceError):
    """The feedback database cannot be used right now; answers still work."""


class UnknownAnswer(UserInputError):
    """No answer with this id was recorded (or it is older than the retention period)."""

    http_status = 404


class AnswerRecord(BaseModel):
    """One recorded answer, as the gaps report reads it."""

    answer_id: str
    created: float
    source: str
    question: str
    language: str
    category: str | None
    grounded: bool
    confidence: float
    cited: list[str] = Field(default_factory=list)
    helpful: bool | None = Field(default=None, description="the latest verdict, if any")
    comments: list[str] = Field(default_factory=list)
    vector: bytes | None = Field(default=None, exclude=True, repr=False,
                                 description="the question's float32 vector, once the gaps report stored it")


class FeedbackStore:
    """The SQLite file at `path`; every call opens its own short connection (thread- and process-safe)."""

    def __init__(self, path: Path, *, store_logs: bool = False, retention_days: float | None = 90,
                 max_answers: int = MAX_ANSWERS):
        self.path = Path(path)
        self.max_answers = max_answers
        self.store_logs = store_logs
        self.retention_days = retention_days
        self._ready = False

    # -- connections --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=15.0, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise FeedbackUnavailable(f"the feedback database cannot be opened: {_reason(exc)}") from None
        try:
            conn.execute("PRAGMA busy_timeout = 15000")
            conn.execute("PRAGMA foreign_keys = ON")
            if not self._ready:
                self._migrate(conn)
            yield conn
        except sqlite3.Error as exc:
            raise FeedbackUnavailable(f"the feedback database cannot be used: {_reason(exc)}") from None
        finally:
            conn.close()

    def _migrate(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL takes the database's exclusive lock, and SQLite answers "locked" at once,
        # without its busy handler, while another process opening it does the same: try again.
        deadline = time.monotonic() + MIGRATE_WAIT_S
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if str(mode).lower() != "wal":
            log.warning("feedback database %s runs in %s mode, not WAL", self.path, mode)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise FeedbackUnavailable(
                f"the feedback database has schema version {version}, newer than this oomkb "
                f"knows ({SCHEMA_VERSION}); upgrade oomkb or point OOMKB_DB elsewhere")
        while version < SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = conn.execute("PRAGMA user_version").fetchone()[0]
                if current == version:  # another process may have migrated meanwhile
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        self._ready = True

    def schema_version(self) -> int:
        with self._connect() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    # -- writing ------------------------------------------------------------------------------

    def record_answer(self, *, answer_id: str, question: str, language: str, category: str | None,
                      grounded: bool, confidence: float, cited: list[str], source: str,
                      error_log: str | None = None) -> None:
        """Store one answer's metadata (raises :class:`FeedbackUnavailable`; callers log and go on)."""
        log_text = error_log[:MAX_LOG_CHARS] if (self.store_logs and error_log) else None
        with self._connect() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO answers (answer_id, created, source, question, language, category, "
                "grounded, confidence, cited, error_log) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (answer_id, time.time(), source[:32], question[:MAX_QUESTION_CHARS], language, category,
                 int(grounded), float(confidence), json.dumps(cited[:20]), log_text),
            )
            self._purge(conn)

    def record_feedback(self, answer_id: str, helpful: bool, comment: str | None = None, *,
                        source: str, dedupe_key: str | None = None) -> bool:
        """Set an answer's verdict: one per answer, the latest replaces the one before. False when
        `dedupe_key` was seen before (a replay) or the same verdict and comment are already stored.

        Raises :class:`UnknownAnswer` for an id that was never recorded."""
        comment = (comment or None) and comment[:MAX_COMMENT_CHARS]
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("SELECT 1 FROM answers WHERE answer_id = ?", (answer_id,)).fetchone() is None:
                    raise UnknownAnswer(f"no answer with id {answer_id!r} is known to this service")
                if dedupe_key is not None and conn.execute(
                        "SELECT 1 FROM feedback WHERE dedupe_key = ?", (dedupe_key,)).fetchone():
                    changed = False
                else:
                    cursor = conn.execute(
                        "INSERT INTO feedback (answer_id, created, helpful, comment, source, dedupe_key) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(answer_id) DO UPDATE SET "
                        "created = excluded.created, helpful = excluded.helpful, comment = excluded.comment, "
                        "source = excluded.source, dedupe_key = excluded.dedupe_key "
                        "WHERE helpful IS NOT excluded.helpful OR comment IS NOT excluded.comment",
                        (answer_id, time.time(), int(helpful), comment, source[:32], dedupe_key),
                    )
                    changed = cursor.rowcount == 1
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return changed

    def store_vectors(self, vectors: dict[str, bytes]) -> None:
        """Keep questions' vectors (answer_id → float32 bytes) so each is embedded once, not per report."""
        if vectors:
            with self._connect() as conn:
                conn.execute("BEGIN IMMEDIATE")  # one transaction, not one per row
                conn.executemany("UPDATE answers SET vector = ? WHERE answer_id = ?",
                                 [(v, k) for k, v in vectors.items()])
                conn.execute("COMMIT")

    def _purge(self, conn: sqlite3.Connection) -> None:
        if self.retention_days is not None:
            cutoff = time.time() - self.retention_days * 86400
            conn.execute("DELETE FROM answers WHERE created < ?", (cutoff,))
        # The row cap: the oldest answers (and their verdicts, by cascade) go first.
        conn.execute("DELETE FROM answers WHERE answer_id IN (SELECT answer_id FROM answers "
                     "ORDER BY created DESC LIMIT -1 OFFSET ?)", (self.max_answers,))

    # -- reading ------------------------------------------------------------------------------

    def unhelpful_or_unanswered(self, since_days: float | None = None,
                                limit: int = MAX_ANSWERS) -> list[AnswerRecord]:
        """Answers given `grounded: false` or marked unhelpful (latest verdict), newest first, of the
        newest `limit` recorded."""
        since = time.time() - since_days * 86400 if since_days is not None else 0.0
        with self._connect() as conn:
            rows = conn.execute(
                """SELECT a.answer_id, a.created, a.source, a.question, a.language, a.category,
                          a.grounded, a.confidence, a.cited,
                          (SELECT helpful FROM feedback f WHERE f.answer_id = a.answer_id
                           ORDER BY f.created DESC, f.id DESC LIMIT 1) AS helpful,
                          (SELECT json_group_array(comment) FROM feedback f
                           WHERE f.answer_id = a.answer_id AND comment IS NOT NULL) AS comments,
                          a.vector
                   FROM answers a WHERE a.created >= ?
                   ORDER BY a.created DESC LIMIT ?""",
                (since, limit),
            ).fetchall()
        out = []
        for r in rows:
            helpful = None if r[9] is None else bool(r[9])
            if r[6] and helpful is not False:
                continue
            out.append(AnswerRecord(
                answer_id=r[0], created=r[1], source=r[2], question=r[3], language=r[4], category=r[5],
                grounded=bool(r[6]), confidence=r[7], cited=json.loads(r[8] or "[]"), helpful=helpful,
                comments=[c for c in json.loads(r[10] or "[]") if c], vector=r[11],
            ))
        return out


def _reason(exc: BaseException) -> str:
    """A short reason without file-system paths (they stay in the server log)."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


__all__ = ["AnswerRecord", "FeedbackStore", "FeedbackUnavailable", "MIGRATIONS", "SCHEMA_VERSION",
           "UnknownAnswer"]
