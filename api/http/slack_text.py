"""A Slack message's text as a question: mentions removed, Slack's escapes undone, and the text
in ``` code blocks ``` taken as the pasted error log (read by the event handler and, for the
earlier messages of a thread, by the evidence collector)."""

from __future__ import annotations

import re

from oomkb.api.schemas import AskRequest

__all__ = ["MAX_SLACK_TEXT_CHARS", "question_from_slack"]

#: Slack caps a message at 40,000 characters; longer text is cut before any pattern reads it.
MAX_SLACK_TEXT_CHARS = 40_000
# Every repetition is bounded and none crosses a `<`, so a failed match at one `<` stops at the
# next one: matching stays linear in the text (unbounded `[^>]*` made 8,000 × "<@A|" quadratic).
_MENTION = re.compile(r"<@[A-Z0-9]{1,64}(?:\|[^<>]{0,256})?>")
_SLACK_LINK = re.compile(r"<(?:[^<>|]{0,2048}\|)?([^<>]{0,2048})>")
_CODE_BLOCK = re.compile(r"```(.*?)```", re.DOTALL)


def question_from_slack(text: str) -> AskRequest:
    """The question of a Slack message: mentions removed, Slack's escapes undone, and the text in
    ``` code blocks ``` taken as the pasted error log."""
    text = _MENTION.sub(" ", (text or "")[:MAX_SLACK_TEXT_CHARS])
    text = _SLACK_LINK.sub(lambda m: m.group(1), text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    logs = [m.group(1).strip("\n") for m in _CODE_BLOCK.finditer(text)]
    question = _CODE_BLOCK.sub(" ", text)
    question = re.sub(r"[ \t]+", " ", question).strip()
    error_log = "\n".join(x for x in logs if x.strip()) or None
    return AskRequest(question=question[:20_000], error_log=error_log)
