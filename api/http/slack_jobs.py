"""Estimates and plans asked for in Slack, run on the server's job queue (a Ray cluster), the
result posted in the thread when the job ends.

Only on a server with ``OOMKB_ENABLE_ESTIMATE`` and ``OOMKB_RAY_ADDRESS``: a mention (or a direct
message) whose text starts with ``estimate`` or ``plan`` and that attaches the program as a
``.py`` file is queued as a job of the asker (``slack:USER``)::

    @oomkb estimate make_step --tpu v5e
    @oomkb plan make_step --vary batch=1..4096

The bot answers in the thread at once (the job is queued, its place in the line), and again when
the job ends: the verdict and the figures, or why it failed. Any other message is a question for
the assistant, as before.
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
from typing import Any

from slack_sdk import WebClient

from oomkb.api.http.queue import JobQueue, JobStatus
from oomkb.api.http.slack_evidence import SlackEvidence
from oomkb.errors import OomkbError
from oomkb.units import format_bytes

log = logging.getLogger("oomkb.slack")

__all__ = ["SlackJobs", "job_command"]

#: "<@U0BOT> estimate make --tpu v5e": the command word after an optional mention.
_COMMAND = re.compile(r"^\s*(?:<@[A-Z0-9]+>\s*)?(estimate|plan)\b(.*)$", re.IGNORECASE | re.DOTALL)
_OPTIONS = {"--tpu": "tpu", "--topology": "topology", "--vary": "vary"}


def job_command(text: str) -> tuple[str, dict[str, str]] | None:
    """``("estimate"|"plan", {"factory", "tpu", "topology", "vary"})`` from a message that asks
    for one, or None. :class:`ValueError` for an option it does not know."""
    match = _COMMAND.match(text or "")
    if not match:
        return None
    kind = match.group(1).lower()
    words = shlex.split(match.group(2).replace("\u201c", '"').replace("\u201d", '"'))
    fields: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        name, _, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in _OPTIONS:
            if not value:
                i += 1
                value = words[i] if i < len(words) else ""
            fields[_OPTIONS[name]] = value
        elif word.startswith("--"):
            raise ValueError(f"{kind}: unknown option {word} (use --tpu, --topology"
                             + (", --vary" if kind == "plan" else "") + ")")
        elif "factory" not in fields:
            fields["factory"] = word
        i += 1
    return kind, fields


class SlackJobs:
    """Queues the estimates and plans asked for in Slack and posts each result in its thread."""

    def __init__(self, queue: JobQueue, evidence: SlackEvidence, client: WebClient) -> None:
        self.queue = queue
        self.evidence = evidence
        self.client = client
        self.lock = threading.Lock()
        self.threads: dict[str, tuple[str, str]] = {}  # job id -> (channel, thread ts)
        queue.on_finish.append(self._finished)

    def handle(self, event: dict[str, Any], client: WebClient) -> bool:
        """Answer ``event`` when it asks for an estimate or a plan (True), else leave it (False)."""
        try:
            command = job_command(event.get("text") or "")
        except ValueError as err:
            self._post(client, event, f":warning: {err}")
            return True
        if command is None:
            return False
        kind, fields = command
        programs = [f for f in event.get("files") or []
                    if isinstance(f, dict) and str(f.get("name") or "").endswith(".py")]
        if not programs:
            self._post(client, event, f":paperclip: attach the program as a .py file to the "
                                      f"`{kind}` message (its factory returns `(fn, args)`)")
            return True
        source = self.evidence.download(client, programs[0])
        if not source:
            self._post(client, event, ":warning: the attached program could not be read")
            return True
        try:
            body = _request(kind, source, fields)
            accepted = self.queue.submit(kind, body, f"slack:{event.get('user') or '-'}")
        except OomkbError as err:
            self._post(client, event, f":warning: {err}")
            return True
        except ValueError as err:  # a request the models refuse (a bad name, a bad range)
            self._post(client, event, f":warning: {err}")
            return True
        with self.lock:
            self.threads[accepted.job_id] = (str(event.get("channel")),
                                             str(event.get("thread_ts") or event.get("ts")))
        self._post(client, event, f":hourglass: the {kind} of `{body.factory}` is queued "
                                  f"(place {accepted.position}); the result will be posted here")
        return True

    def _finished(self, status: JobStatus, owner: str) -> None:
        with self.lock:
            where = self.threads.pop(status.job_id, None)
        if where is None:
            return
        try:
            self.client.chat_postMessage(channel=where[0], thread_ts=where[1],
                                         text=result_text(status), unfurl_links=False)
        except Exception:  # noqa: BLE001 - the job's answer stays fetchable; only the post is lost
            log.warning("could not post the result of a %s in its thread", status.kind, exc_info=True)

    @staticmethod
    def _post(client: WebClient, event: dict[str, Any], text: str) -> None:
        client.chat_postMessage(channel=event["channel"], text=text, unfurl_links=False,
                                thread_ts=event.get("thread_ts") or event.get("ts"))


def _request(kind: str, source: str, fields: dict[str, str]) -> Any:
    from oomkb.api.http.jobs import EstimateRequest
    from oomkb.api.http.plan import PlanRequest, VaryRequest

    common = {"source": source, "factory": fields.get("factory") or "make",
              "tpu": fields.get("tpu") or "v5e", "topology": fields.get("topology")}
    if kind == "estimate":
        return EstimateRequest(**common)
    vary = None
    if fields.get("vary"):
        from oomkb.diagnostics.plan import parse_vary

        spec = parse_vary(fields["vary"])
        vary = VaryRequest(name=spec.name, low=spec.low, high=spec.high, step=spec.step,
                           values=spec.values)
    return PlanRequest(**common, vary=vary)


def result_text(status: JobStatus) -> str:
    """The job's end in one or a few lines of Slack text."""
    if status.state != "done" or status.result is None:
        return f":warning: the {status.kind} {status.state}: {status.error or 'no result'}"
    report = status.result
    baseline = report.get("baseline", report)
    target = baseline.get("target") or {}
    total, capacity = baseline.get("total_bytes"), target.get("hbm_bytes")
    verdict = "fits" if baseline.get("fits") else "does not fit"
    lines = [f"*{baseline.get('function')}* on `{target.get('topology')}`: {verdict}"
             + (f" ({format_bytes(total)} of {format_bytes(capacity)} per device)"
                if isinstance(total, int) and isinstance(capacity, int) else "")]
    if status.kind == "plan":
        for fix in report.get("fixes") or []:
            if fix.get("fits"):
                lines.append(f"• {fix.get('title')}: fits"
                             + (f", {format_bytes(fix['total_bytes'])}" if fix.get("total_bytes") else ""))
        vary = report.get("vary")
        if vary and vary.get("largest_fitting") is not None:
            lines.append(f"• largest {vary.get('name')} that fits: {vary['largest_fitting']}")
    return "\n".join(lines)
