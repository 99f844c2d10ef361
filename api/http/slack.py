"""Slack adapter: the assistant as a Slack app (slack_bolt), on the service's own FastAPI app.

`POST /slack/events` takes Events API deliveries (app mentions, direct messages) and the `/oom`
slash command. Every request's signature is checked (bad, missing or stale → 401), the listener
acks at once and a lazy listener answers afterwards, in the thread of the question, as Block Kit
sections with a context block of sources. A delivery Slack repeats (`X-Slack-Retry-Num`) is
recognised by its `event_id` and not answered twice.

Nothing here calls Slack at start-up: no `auth.test` (the bot token is handed to Bolt through
`authorize`), so the network is used only to post replies.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.adapter.starlette.handler import to_starlette_response
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient

from oomkb.api.http.slack_evidence import SlackEvidence
from oomkb.api.http.slack_text import question_from_slack
from oomkb.api.core.feedback import FeedbackStore
from oomkb.api.schemas import AskResponse

if TYPE_CHECKING:
    from oomkb.api.http.holder import AssistantHolder
    from oomkb.settings import Settings

log = logging.getLogger("oomkb.slack")

SECTION_CHARS = 3000  # Slack's limit for a section's text
MAX_BLOCKS = 50  # Slack's limit per message
CONTEXT_ELEMENTS = 10
FALLBACK_TEXT_CHARS = 300
SLASH_COMMAND = "/oom"
SIGNATURE_MAX_AGE_S = 5 * 60  # as Slack and Bolt: older requests may be replays


# ---------------------------------------------------------------------------------------------
# Markdown → Slack mrkdwn


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack treats as markup: `&`, `<`, `>`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_]+?)(?<=\S)_(?![\w_])")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^\s)]+)\)")
_BOLD_MARK = "\x00"


def _inline(text: str) -> str:
    """Escape and convert one line's inline Markdown (code spans are left as they are)."""
    out = []
    pos = 0
    for m in _INLINE_CODE.finditer(text):
        out.append(_inline_plain(text[pos:m.start()]))
        out.append("`" + escape_mrkdwn(m.group(2).strip("`")) + "`")
        pos = m.end()
    out.append(_inline_plain(text[pos:]))
    return "".join(out)


def _inline_plain(text: str) -> str:
    links: list[str] = []

    def keep_link(m: re.Match) -> str:
        links.append(f"<{escape_mrkdwn(m.group(2))}|{escape_mrkdwn(m.group(1))}>")
        return f"\x01{len(links) - 1}\x01"

    text = _LINK.sub(keep_link, text)
    text = escape_mrkdwn(text)
    text = _BOLD.sub(lambda m: _BOLD_MARK + (m.group(1) or m.group(2)) + _BOLD_MARK, text)
    text = _ITALIC.sub(lambda m: "_" + (m.group(1) or m.group(2)) + "_", text)
    text = text.replace(_BOLD_MARK, "*")
    return re.sub(r"\x01(\d+)\x01", lambda m: links[int(m.group(1))], text)


def markdown_to_mrkdwn(markdown: str) -> str:
    """Slack mrkdwn for the assistant's Markdown: `**b**`→`*b*`, headings → bold lines,
    `> ` quotes kept, bullets as •, code kept; `&`, `<`, `>` in the text escaped."""
    lines: list[str] = []
    in_fence = False
    for raw in markdown.splitlines():
        if _FENCE.match(raw):
            in_fence = not in_fence
            lines.append("```")
            continue
        if in_fence:
            lines.append(escape_mrkdwn(raw))
            continue
        if m := _HEADING.match(raw):
            title = _inline(m.group(1)).replace("*", "").strip()
            lines.append(f"*{title}*" if title else "")
        elif m := _QUOTE.match(raw):
            lines.append(">" + _inline(m.group(1)) if m.group(1) else ">")
        elif m := _BULLET.match(raw):
            lines.append(f"{m.group(1)}• {_inline(m.group(2))}")
        else:
            lines.append(_inline(raw))
    if in_fence:
        lines.append("```")
    return "\n".join(lines).strip()


def split_sections(text: str, limit: int = SECTION_CHARS) -> list[str]:
    """Split mrkdwn into pieces of at most `limit` characters, at line ends where possible;
    a code block cut in two is closed and reopened so each piece renders on its own."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    in_fence = False

    def flush() -> None:
        nonlocal current, size
        if current:
            if in_fence:
                current.append("```")
            pieces.append("\n".join(current))
        current = ["```"] if in_fence else []
        size = sum(len(x) + 1 for x in current)

    for line in text.split("\n"):
        reserve = 4 if in_fence or line.startswith("```") else 0
        while len(line) + reserve > limit - 8:  # one very long line: cut it
            if current:
                flush()
            head, line = line[: limit - 8 - reserve], line[limit - 8 - reserve:]
            current.append(head)
            size += len(head) + 1
            flush()
        if size + len(line) + 1 + reserve > limit and current:
            flush()
        current.append(line)
        size += len(line) + 1
        if line.startswith("```"):
            in_fence = not in_fence
    if in_fence:
        in_fence = False
        current.append("```")
    if current and any(x.strip() for x in current):
        pieces.append("\n".join(current))
    return [p.strip("\n") for p in pieces if p.strip() and p.strip() != "```"]


#: The action ids of the 👍/👎 buttons under an answer (their value is the answer's `answer_id`).
FEEDBACK_ACTIONS = {"oomkb_helpful": True, "oomkb_unhelpful": False}


def answer_blocks(answer: AskResponse, limit_sections: int = MAX_BLOCKS - 2,
                  feedback: bool = False) -> list[dict[str, Any]]:
    """Block Kit for an answer: its Markdown as mrkdwn sections, a context block of sources (linked
    when the citations carry absolute URLs) and, with `feedback`, 👍/👎 buttons."""
    body, originals = _split_originals(answer.answer)
    sections = split_sections(markdown_to_mrkdwn(body))
    if len(sections) > limit_sections:
        sections = sections[: limit_sections - 1] + ["_… (answer shortened for Slack)_"]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": s}} for s in sections
    ]
    sources = []
    for c in answer.citations[:CONTEXT_ELEMENTS]:
        cite = c.citation or f"{c.doc_id}#{c.section}"
        title = f" {escape_mrkdwn(c.section_title)}" if c.section_title else ""
        shown = f"`{escape_mrkdwn(cite)}`"
        if c.url.startswith(("https://", "http://")) and not any(ch in c.url for ch in "<>| "):
            shown = f"<{c.url}|{escape_mrkdwn(cite)}>"  # a link only to the server's own guide page
        sources.append({"type": "mrkdwn", "text": f":books: {shown}{title} ({c.language})"[:SECTION_CHARS]})
    if sources:
        blocks.append({"type": "context", "elements": sources})
    # The guides' original wording of translated quotes: small print under the answer.
    small = [{"type": "mrkdwn", "text": markdown_to_mrkdwn(o)[:SECTION_CHARS]}
             for o in originals[:CONTEXT_ELEMENTS]]
    if small:
        blocks.append({"type": "context", "elements": small})
    if feedback:
        blocks.append({"type": "actions", "block_id": "oomkb_feedback", "elements": [
            {"type": "button", "action_id": action, "value": answer.answer_id,
             "text": {"type": "plain_text", "text": "👍" if helpful else "👎", "emoji": True}}
            for action, helpful in FEEDBACK_ACTIONS.items()
        ]})
    return blocks


ORIGINAL_MARK = "\u21b3"  # api/core/assistant.py: labels a guide's original wording


def _split_originals(markdown: str) -> tuple[str, list[str]]:
    """The answer without the guides' original wordings (an `↳` label line and the quote under
    it), and those wordings as one Markdown text each."""
    kept: list[str] = []
    originals: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith(ORIGINAL_MARK):
            kept.append(lines[i])
            i += 1
            continue
        block = [lines[i]]
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        while i < len(lines) and lines[i].lstrip().startswith(">"):
            block.append(lines[i])
            i += 1
        originals.append("\n".join(block))
    return "\n".join(kept), originals


def fallback_text(answer: AskResponse) -> str:
    """The plain notification text of a reply: the answer's first line, shortened."""
    for line in answer.answer.splitlines():
        line = re.sub(r"[*_`#>]", "", line).strip()
        if line:
            return escape_mrkdwn(line[:FALLBACK_TEXT_CHARS])
    return "oomkb"


# ---------------------------------------------------------------------------------------------
# Duplicate deliveries


class SeenEvents:
    """Event ids seen in the last `ttl_s` seconds (at most `max_size`), thread-safe."""

    def __init__(self, ttl_s: float = 3600.0, max_size: int = 10_000):
        self.ttl_s = ttl_s
        self.max_size = max_size
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, event_id: str) -> bool:
        """True the first time `event_id` is offered (then remembered), False for a repeat."""
        now = time.monotonic()
        with self._lock:
            while self._seen and (next(iter(self._seen.values())) < now - self.ttl_s
                                  or len(self._seen) >= self.max_size):
                self._seen.popitem(last=False)
            if event_id in self._seen:
                return False
            self._seen[event_id] = now
            return True


# ---------------------------------------------------------------------------------------------
# The Bolt app


class SlackBot:
    """The Bolt app and its listeners; answers with the service's shared assistant."""

    def __init__(self, holder: AssistantHolder, *, signing_secret: str, bot_token: str,
                 client: WebClient | None = None, bot_user_id: str | None = None,
                 api_url: str = "https://slack.com/api/", command_response: str = "ephemeral",
                 store: FeedbackStore | None = None, public_url: str | None = None):
        self.holder = holder
        self.store = store
        self.public_url = public_url
        self.bot_user_id = bot_user_id
        # /oom answers only the asker unless the operator chose "in_channel": a pasted log shows
        # paths, shapes and code the asker may not mean to share with the channel.
        self.command_response = command_response
        self.seen = SeenEvents()
        #: Estimates and plans asked for in Slack, on the job queue (api/http/slack_jobs.py).
        self.jobs: Any = None
        self._token = bot_token
        self.evidence = SlackEvidence(bot_token, bot_user_id)
        client = client or WebClient(base_url=api_url)
        # Bolt passes arguments by the parameter names of each function, so it is given plain
        # functions (a bound method's `self` would confuse it).

        def authorize(enterprise_id, team_id, user_id) -> AuthorizeResult:
            return self._authorize(enterprise_id, team_id, user_id)

        def skip_repeats(body, request, next):  # noqa: A002 - Bolt's name for it
            return self._skip_repeats(body, request, next)

        def is_plain_dm(event) -> bool:
            return self._is_plain_dm(event)

        def answer_mention(event, client) -> None:
            self._answer_mention(event, client)

        def answer_dm(event, client) -> None:
            self._post_in_thread(client, event)

        def answer_command(command, respond) -> None:
            self._answer_command(command, respond)

        self.app = App(
            name="oomkb",
            signing_secret=signing_secret,
            client=client,
            authorize=authorize,  # hands over the token: no auth.test call, ever
            token_verification_enabled=False,
            process_before_response=False,
            raise_error_for_unhandled_request=False,
            logger=log,
        )
        self.app.use(skip_repeats)
        self.app.event("app_mention")(ack=_ack, lazy=[answer_mention])
        self.app.event("message", matchers=[is_plain_dm])(ack=_ack, lazy=[answer_dm])
        self.app.event("message")(_ack)  # other messages: acknowledged, not answered
        self.app.command(SLASH_COMMAND)(ack=_ack_command, lazy=[answer_command])

        def record_verdict(ack, body, action, client) -> None:
            ack()
            self._record_verdict(body, action, client)

        for action_id in FEEDBACK_ACTIONS:
            self.app.action(action_id)(record_verdict)

    # -- Bolt plumbing --------------------------------------------------------------------

    def _authorize(self, enterprise_id, team_id, user_id) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, user_id=user_id,
                               bot_token=self._token, bot_user_id=self.bot_user_id)

    def _skip_repeats(self, body: dict, request, next) -> BoltResponse | None:
        """Let each Events API delivery through once; a retry of one already taken is acked only.
        A slash command has no event id: a replay of one (the same signed request, accepted for
        the signature's 5 minutes) is known by its signature, unique to timestamp and body."""
        event_id = body.get("event_id") if isinstance(body, dict) else None
        if not event_id and isinstance(body, dict) and body.get("command"):
            signature = request.headers.get("x-slack-signature", [""])[0]
            event_id = f"command:{signature}" if signature else None
        if event_id and not self.seen.first_time(str(event_id)):
            retry = request.headers.get("x-slack-retry-num", ["?"])[0]
            log.info("ignoring repeated delivery of %s (retry %s)", event_id, retry)
            return BoltResponse(status=200, body="")
        return next()

    def _is_plain_dm(self, event: dict) -> bool:
        return (event.get("channel_type") == "im" and event.get("subtype") in _ANSWERED_SUBTYPES
                and not event.get("bot_id") and event.get("user") != self.bot_user_id)

    # -- answering --------------------------------------------------------------------------

    def reply(self, text: str, event: dict | None = None,
              client: WebClient | None = None) -> tuple[list[dict[str, Any]], str]:
        """(blocks, fallback text) answering a Slack message's text; with its `event`, also
        from the files attached to it and the evidence earlier in its thread."""
        from oomkb.api.http.feedback import absolute_links, record_answer
        from oomkb.api.http.holder import NotReady
        from oomkb.errors import OomkbError

        language = _language_of(text)
        try:
            assistant = self.holder.require(language)
            request = question_from_slack(text)
            if event is not None and client is not None:
                request = self.evidence.complete(request, client, event)
            answer = absolute_links(assistant.ask(request), self.public_url)
        except NotReady as exc:
            return _notice(f":hourglass: {exc}")
        except OomkbError as exc:
            return _notice(f":warning: {exc}")
        except ValidationError as exc:  # text the request model refuses (a lone surrogate): the asker's
            first = exc.errors()[0]
            return _notice(f":warning: the message cannot be read: {first['msg']}")
        except Exception:
            log.exception("answering a Slack message failed")
            return _notice(":warning: " + _message("internal_error", language))
        if self.store is not None:
            record_answer(self.store, request, answer, source="slack")
        return answer_blocks(answer, feedback=self.store is not None), fallback_text(answer)

    def _record_verdict(self, body: dict, action: dict, client: WebClient) -> None:
        """A 👍/👎 click: stored once per click (a replayed interaction is recognised by its
        user, answer and action time), then a thank-you only the clicker sees."""
        from oomkb.api.core.feedback import FeedbackUnavailable, UnknownAnswer

        answer_id = str(action.get("value") or "")[:64]
        helpful = FEEDBACK_ACTIONS.get(str(action.get("action_id")))
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or "")
        if helpful is None or not answer_id or self.store is None:
            return
        key = f"slack:{user}:{answer_id}:{action.get('action_ts') or ''}"
        try:
            fresh = self.store.record_feedback(answer_id, helpful, source="slack", dedupe_key=key)
        except (UnknownAnswer, FeedbackUnavailable) as exc:
            log.warning("Slack feedback on %s not recorded: %s", answer_id, exc)
            return
        if fresh and channel and user:
            try:
                client.chat_postEphemeral(channel=channel, user=user, text=_message("feedback_thanks", "en"))
            except Exception:  # noqa: BLE001 - a thank-you that cannot be posted loses nothing
                log.info("could not post the feedback thank-you", exc_info=True)

    def _answer_mention(self, event: dict, client: WebClient) -> None:
        if event.get("bot_id") or event.get("subtype") not in _ANSWERED_SUBTYPES:
            return
        self._post_in_thread(client, event)

    def _post_in_thread(self, client: WebClient, event: dict) -> None:
        if self.jobs is not None and self.jobs.handle(event, client):
            return
        blocks, text = self.reply(event.get("text") or "", event, client)
        client.chat_postMessage(
            channel=event["channel"],
            thread_ts=event.get("thread_ts") or event.get("ts"),
            blocks=blocks,
            text=text,
            unfurl_links=False,
        )

    def _answer_command(self, command: dict, respond) -> None:
        if not (command.get("text") or "").strip():
            return
        blocks, text = self.reply(command["text"])
        respond(blocks=blocks, text=text, response_type=self.command_response, replace_original=False)


# Message subtypes answered: a plain message, and one with files attached (read as evidence).
_ANSWERED_SUBTYPES = (None, "file_share")


def _ack(ack) -> None:
    ack()


def _ack_command(ack, command) -> None:
    if not (command.get("text") or "").strip():
        ack(_message("slash_command_usage", "en", command=SLASH_COMMAND))
        return
    ack()


def _language_of(text: str) -> str:
    """The language a Slack message is written in (English when unsure or unsupported)."""
    from oomkb.kb.language import FALLBACK, detect_language

    try:
        found = detect_language(question_from_slack(text).question or "")
    except Exception:  # noqa: BLE001 - a notice never fails for want of a language
        return FALLBACK
    return found.language if found.supported else FALLBACK


def _message(key: str, language: str, **values: Any) -> str:
    from oomkb.kb.remedies import load_catalogue
    from oomkb.kb.remedies.rendering import message

    return message(load_catalogue(), key, language, **values)


def _notice(text: str) -> tuple[list[dict[str, Any]], str]:
    """A one-section reply; the text is escaped in the block and in the notification text alike."""
    text = escape_mrkdwn(text)
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}], text


#: Digits of a plausible Unix time in seconds (now: 10); more is malformed, not merely stale.
_TIMESTAMP_DIGITS = 12


def _signed_by_slack(secret: bytes, body: bytes, headers: Mapping[str, str]) -> bool:
    """True when the request carries Slack's v0 signature over these exact bytes, made within
    the last five minutes. Any malformed header (non-ASCII, not a plain decimal timestamp, a
    timestamp of absurd length) is simply not a valid signature."""
    timestamp = headers.get("x-slack-request-timestamp") or ""
    signature = headers.get("x-slack-signature") or ""
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= _TIMESTAMP_DIGITS):
        return False
    if not (signature.isascii() and signature.startswith("v0=")):
        return False
    if abs(time.time() - int(timestamp)) > SIGNATURE_MAX_AGE_S:
        return False
    expected = hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(("v0=" + expected).encode(), signature.encode())


def mount_slack(app: FastAPI, settings: Settings, holder: AssistantHolder,
                client: WebClient | None = None) -> SlackBot:
    """Add `POST /slack/events` to `app`, answering with `holder`'s assistant."""
    bot = SlackBot(
        holder,
        signing_secret=settings.slack_signing_secret.get_secret_value(),
        bot_token=settings.slack_bot_token.get_secret_value(),
        client=client,
        bot_user_id=settings.slack_bot_user_id,
        api_url=settings.slack_api_url,
        command_response=settings.slack_command_response,
        store=getattr(app.state, "feedback_store", None),
        public_url=settings.public_url,
    )

    secret = settings.slack_signing_secret.get_secret_value().encode()

    @app.post("/slack/events", include_in_schema=False)
    async def slack_events(request: Request) -> Response:
        body = await request.body()
        # Checked here before Bolt parses anything, so a malformed body or timestamp cannot
        # crash the parsing; Bolt checks again (same secret) in its own middleware.
        if not _signed_by_slack(secret, body, request.headers):
            return JSONResponse({"detail": "invalid, missing or expired Slack signature"}, status_code=401)
        try:
            bolt_request = BoltRequest(body=body.decode("utf-8"), query=str(request.url.query),
                                       headers=dict(request.headers))
        except ValueError:  # signed, but neither JSON nor a form in UTF-8
            return JSONResponse({"detail": "the Slack request body cannot be parsed"}, status_code=400)
        bolt_response = await run_in_threadpool(bot.app.dispatch, bolt_request)
        return to_starlette_response(bolt_response)

    if settings.enable_estimate and getattr(app.state, "job_queue", None) is not None:
        from oomkb.api.http.slack_jobs import SlackJobs

        bot.jobs = SlackJobs(app.state.job_queue, bot.evidence, bot.app.client)
    app.state.slack = bot
    return bot
