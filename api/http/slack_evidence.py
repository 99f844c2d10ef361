"""Evidence for a Slack question beyond its own text: the error log or report JSON of the
thread it follows up (fetched with `conversations.replies`) and files attached to it or to the
thread (`files.info`, then the file's `url_private` downloaded with the bot token).

The follow-up's own evidence wins; otherwise the thread's first log and first report stay in
play. Downloads are bounded (size from `files.info` and while reading), go only to Slack's file
host or the configured Web API's host, never follow redirects (the bot token must not travel
elsewhere), and a file that cannot be read is skipped, never an error for the user.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from oomkb.api.http.slack_text import question_from_slack
from oomkb.api.schemas import MAX_CONVERSATION_TURNS, MAX_ERROR_LOG_CHARS, AskRequest, ConversationTurn

log = logging.getLogger("oomkb.slack")

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_FILES = 5
MAX_THREAD_MESSAGES = 50
DOWNLOAD_TIMEOUT_S = 10
SLACK_FILE_HOSTS = frozenset({"files.slack.com"})


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None  # a redirect is an error: the token stays with the host it was meant for


_OPENER = urllib.request.build_opener(_NoRedirects)


class SlackEvidence:
    """Completes a question from Slack with the evidence of its files and its thread."""

    def __init__(self, bot_token: str, bot_user_id: str | None = None,
                 max_file_bytes: int = MAX_FILE_BYTES):
        self._token = bot_token
        self.bot_user_id = bot_user_id
        self.max_file_bytes = max_file_bytes

    def complete(self, request: AskRequest, client: WebClient, event: dict[str, Any]) -> AskRequest:
        """`request` with `error_log` and `report` filled from `event`'s files, else from the
        earlier messages of its thread (oldest first), and with those messages as its
        `history` (the conversation a follow-up continues); unchanged when there is nothing."""
        own_log, own_report = self._files(client, event.get("files"))
        logs = [request.error_log, own_log]
        reports = [own_report]
        history: list[ConversationTurn] = []
        thread = event.get("thread_ts")
        follow_up = bool(thread) and thread != event.get("ts")
        if follow_up:
            for message in self._thread(client, event.get("channel"), thread, event.get("ts")):
                earlier = question_from_slack(message.get("text") or "")
                file_log, file_report = self._files(client, message.get("files"))
                log_text = earlier.error_log or _error_text(earlier.question) or file_log
                logs += [earlier.error_log or _error_text(earlier.question), file_log]
                reports.append(file_report)
                question = "" if log_text == earlier.question else earlier.question
                history.append(ConversationTurn(
                    question=question, error_log=(log_text or None) and log_text[-MAX_ERROR_LOG_CHARS:],
                    report=file_report, answered=message["_answered"]))
        error_log = next((x for x in logs if x and x.strip()), None)
        report = next((r for r in reports if r is not None), None)
        update: dict[str, Any] = {}
        if error_log and error_log != request.error_log:
            update["error_log"] = error_log[:MAX_ERROR_LOG_CHARS]
        if report is not None and request.report is None:
            update["report"] = report
        if history and request.history is None and request.conversation_id is None:
            update["history"] = history[-MAX_CONVERSATION_TURNS:]
        return request.model_copy(update=update) if update else request

    # -- the thread -------------------------------------------------------------------------

    def _thread(self, client: WebClient, channel: str | None, thread_ts: str,
                current_ts: str | None) -> list[dict[str, Any]]:
        """The thread's messages before the current one, oldest first, without the bot's own."""
        if not channel:
            return []
        try:
            reply = client.conversations_replies(channel=channel, ts=thread_ts, limit=MAX_THREAD_MESSAGES)
        except (SlackApiError, OSError, ValueError) as exc:
            log.warning("cannot read thread %s: %s", thread_ts, exc)
            return []
        messages = sorted((m for m in (reply.get("messages") or []) if isinstance(m, dict)
                           and m.get("ts") != current_ts
                           and (current_ts is None or _ts(m.get("ts")) < _ts(current_ts))),
                          key=lambda m: _ts(m.get("ts")))
        earlier = []
        for n, m in enumerate(messages):
            if self._from_bot(m):
                continue
            # answered: the bot's reply follows it (a message nobody asked the bot about was not
            # answered, so what its answer would have said is not taken as already said)
            answered = n + 1 < len(messages) and self._from_bot(messages[n + 1])
            earlier.append({**m, "_answered": answered})
        return earlier[:MAX_THREAD_MESSAGES]

    def _from_bot(self, message: dict[str, Any]) -> bool:
        return bool(message.get("bot_id")) or (self.bot_user_id is not None and message.get("user") == self.bot_user_id)

    # -- files ------------------------------------------------------------------------------

    def _files(self, client: WebClient, files: Any) -> tuple[str | None, Any]:
        """(log text, report) from a message's files: a JSON file that is an estimate or profile
        report is the report; other text files are taken as the error log, joined."""
        texts: list[str] = []
        report = None
        for item in (files if isinstance(files, list) else [])[:MAX_FILES]:
            text = self._download(client, item) if isinstance(item, dict) else None
            if text is None:
                continue
            parsed = _report(text)
            if parsed is not None and report is None:
                report = parsed
            elif parsed is None:
                texts.append(text)
        return ("\n".join(texts) or None), report

    def download(self, client: WebClient, item: dict[str, Any]) -> str | None:
        """The text of a message's file (bounded, from Slack's file host only), or None."""
        return self._download(client, item)

    def _download(self, client: WebClient, item: dict[str, Any]) -> str | None:
        file_id = item.get("id")
        try:
            info = client.files_info(file=file_id).get("file") if file_id else None
        except (SlackApiError, OSError, ValueError) as exc:
            log.warning("files.info failed for %s: %s", file_id, exc)
            info = None
        info = info if isinstance(info, dict) else item
        size = info.get("size")
        if isinstance(size, int) and size > self.max_file_bytes:
            log.info("file %s skipped: %d bytes is over the limit", file_id, size)
            return None
        url = info.get("url_private_download") or info.get("url_private")
        if not isinstance(url, str) or not self._allowed(url, client):
            return None
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self._token}"})
        try:
            with _OPENER.open(request, timeout=DOWNLOAD_TIMEOUT_S) as response:
                data = response.read(self.max_file_bytes + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.warning("cannot download file %s: %s", file_id, exc)
            return None
        if len(data) > self.max_file_bytes or b"\x00" in data:
            return None  # too big once read, or not text
        return data.decode("utf-8", errors="replace")

    @staticmethod
    def _allowed(url: str, client: WebClient) -> bool:
        """Slack's file host over HTTPS, or the host of the Web API the client talks to (a
        local stand-in in tests, an Enterprise proxy in production)."""
        parts = urlsplit(url)
        api = urlsplit(client.base_url)
        if parts.hostname in SLACK_FILE_HOSTS and parts.scheme == "https":
            return True
        return bool(parts.hostname) and (parts.hostname, parts.port, parts.scheme) == (
            api.hostname, api.port, api.scheme)


def _error_text(text: str) -> str | None:
    """An earlier message pasted without a code block: its text, when it reads as an OOM error."""
    from oomkb.diagnostics.parse import parse_error

    return text if text and parse_error(text).category != "unknown" else None


def _ts(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _report(text: str) -> Any:
    """The estimate or profile report in `text`, or None when it is not one."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
        return AskRequest.model_validate({"question": "", "report": data}).report
    except (ValueError, ValidationError, RecursionError):
        return None
