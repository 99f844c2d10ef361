"""👍/👎 on answers: `POST /v1/feedback`, and recording each answer the service gives."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from oomkb.api.core.feedback import MAX_COMMENT_CHARS, FeedbackStore, FeedbackUnavailable
from oomkb.api.schemas import AskRequest, AskResponse, ErrorResponse, JsonRequest
from oomkb.settings import Settings

log = logging.getLogger("oomkb.feedback")

router = APIRouter()


class FeedbackRequest(JsonRequest):
    """A verdict on one answer."""

    answer_id: str = Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_-]+$",
                           description="the `answer_id` of the answer")
    helpful: bool
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)


class FeedbackResponse(BaseModel):
    answer_id: str
    recorded: bool = Field(description="false when this exact verdict was already recorded (a replay)")


def store_for(settings: Settings) -> FeedbackStore:
    return FeedbackStore(settings.db_path, store_logs=settings.store_logs,
                         retention_days=settings.retention_days)


def record_answer(store: FeedbackStore, req: AskRequest, answer: AskResponse, source: str) -> None:
    """Best effort: a store that cannot be written is logged; the answer is given all the same."""
    try:
        store.record_answer(
            answer_id=answer.answer_id, question=req.question or "", language=answer.language,
            category=answer.diagnosis.category if answer.diagnosis else None,
            grounded=answer.grounded, confidence=answer.confidence,
            cited=[c.citation or f"{c.doc_id}#{c.section}" for c in answer.citations],
            source=source, error_log=req.error_log,
        )
    except FeedbackUnavailable as exc:
        log.warning("answer %s not recorded: %s", answer.answer_id, exc)


def absolute_links(answer: AskResponse, public_url: str | None) -> AskResponse:
    """Citations point at the server's public URL when it is known."""
    if public_url:
        base = public_url.rstrip("/")
        for c in answer.citations:
            if c.url.startswith("/"):
                c.url = base + c.url
    return answer


@router.post("/v1/feedback", response_model=FeedbackResponse, tags=["assistant"], responses={
    400: {"model": ErrorResponse, "description": "the body is not usable JSON (not UTF-8, nested too deeply)"},
    404: {"model": ErrorResponse, "description": "no answer with this id"},
    413: {"model": ErrorResponse, "description": "the request body is over the limit"},
    422: {"model": ErrorResponse, "description": "invalid JSON or fields (a comment over the limit)"},
    503: {"model": ErrorResponse, "description": "the feedback database cannot be used right now"},
})
def feedback(body: FeedbackRequest, request: Request) -> FeedbackResponse:
    """Record 👍/👎 (and an optional comment) for an answer the service gave."""
    store: FeedbackStore = request.app.state.feedback_store
    recorded = store.record_feedback(body.answer_id, body.helpful, body.comment, source="web")
    return FeedbackResponse(answer_id=body.answer_id, recorded=recorded)
