"""Request and response models: the contract shared by the HTTP API (OpenAPI), the CLI's --json
output, Slack and the tests."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any, Union

from pydantic import (
    AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, WithJsonSchema, field_validator,
    model_validator,
)

from oomkb.diagnostics.capture import CaptureReport
from oomkb.diagnostics.diff import DiffReport
from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.parse import ParsedError
from oomkb.diagnostics.plan import PlanReport
from oomkb.diagnostics.profile import ProfileReport
from oomkb.kb.figures import FigureAnswer
from oomkb.kb.next_steps import NextStep

MAX_QUESTION_CHARS = 20_000
MAX_ERROR_LOG_CHARS = 1_000_000

LANGUAGE_CODE_PATTERN = r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$"
_LANGUAGE_CODE = re.compile(LANGUAGE_CODE_PATTERN)


def _language_code(value: str) -> str:
    if len(value) > 35 or not _LANGUAGE_CODE.match(value):
        raise ValueError(f"{value[:40]!r} is not a language code; give an ISO 639 code such as "
                         "en, zh, pt or pt-BR")
    return value


LanguageCode = Annotated[
    str,
    AfterValidator(_language_code),
    WithJsonSchema({"type": "string", "pattern": LANGUAGE_CODE_PATTERN, "maxLength": 35}),
]

#: The reports an answer can rest on (a diff's `report_kind` tells it from the others).
Report = Union[EstimateReport, ProfileReport, CaptureReport, PlanReport, DiffReport]
_REPORT = TypeAdapter(Report)
_MAX_NUMBER_DEPTH = 32  # deeper than any request model nests; deeper input is refused anyway


def _json_numbers(value: Any, depth: int = 0) -> Any:
    """A copy of parsed JSON with integral floats as ints: JSON has one kind of number, and JSON
    Schema counts 2.0 as the integer 2."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if depth < _MAX_NUMBER_DEPTH:
        if isinstance(value, dict):
            return {k: _json_numbers(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [_json_numbers(v, depth + 1) for v in value]
    return value


class JsonRequest(BaseModel):
    """A request body, read strictly: a JSON value of the wrong type is refused, never converted
    (`"5"` or `true` is not a count, `1` is not `true`); unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _one_kind_of_number(cls, data: Any) -> Any:
        return _json_numbers(data)


#: The longest program source an estimate or plan request may carry.
MAX_PROGRAM_CHARS = 200_000


class ProgramRequest(JsonRequest):
    """A submitted Python program, the factory in it and the TPU target (estimate and plan)."""

    source: str = Field(min_length=1, max_length=MAX_PROGRAM_CHARS,
                        description="the program's Python source; it defines the factory")
    factory: str = Field(default="make", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200,
                         description="name of the function returning (fn, args) or (fn, args, kwargs)")
    tpu: str = Field(default="v5e", min_length=1, max_length=32, description="TPU generation")
    topology: str | None = Field(default=None, max_length=32, description="chip grid such as 2x2")


#: Earlier turns a conversation keeps (and a request's `history` may carry).
MAX_CONVERSATION_TURNS = 8
CONVERSATION_ID_PATTERN = r"^[0-9a-f]{32}$"


class ConversationTurn(JsonRequest):
    """An earlier turn of a conversation: what the user asked and the evidence they gave."""

    question: str = Field(default="", max_length=MAX_QUESTION_CHARS, description="the earlier question")
    error_log: str | None = Field(default=None, max_length=MAX_ERROR_LOG_CHARS,
                                  description="the error log given with it, if any")
    report: Report | None = Field(default=None, description="the report given with it, if any")
    answered: bool = Field(default=True, description=(
        "whether the assistant answered this turn (a message in a Slack thread that nobody asked the "
        "bot about was not): what an unanswered turn's answer would have said is not taken as already "
        "said, so a follow-up does not leave it out"))

    @field_validator("report", mode="before")
    @classmethod
    def _report_exactly_typed(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return _REPORT.validate_python(value, strict=True)
        return value


class AskRequest(JsonRequest):
    """A question, optionally with a pasted error log and an estimate or profile report.

    A follow-up names its conversation: `conversation_id` (from an earlier answer; the server
    keeps the turns, for one caller, for an hour after the last one) or `history` (the earlier
    turns, sent by a client that keeps them). It inherits the earlier turns' error log and report
    when it has none, their subject, and what the user said they tried."""

    question: str = Field(max_length=MAX_QUESTION_CHARS,
                          description="the question, in any language (may be empty when an error log is given)")
    error_log: str | None = Field(default=None, max_length=MAX_ERROR_LOG_CHARS,
                                  description="the OOM error or a whole log around it")
    report: Report | None = Field(
        default=None,
        description="the JSON of `oomkb estimate --json`, `oomkb profile --json`, `oomkb run --json`, "
        "`oomkb plan --json` or `oomkb diff --json`",
    )
    language: LanguageCode | None = Field(
        default=None,
        description="answer language (en, ar, hi, ru, zh, pt, es, ja, de, fr, ko); detected "
        "from the question when absent; other languages are answered in English",
    )
    conversation_id: str | None = Field(
        default=None, pattern=CONVERSATION_ID_PATTERN,
        description="continue this conversation (the `conversation_id` of an earlier answer to the "
        "same caller); absent: a new conversation starts",
    )
    history: list[ConversationTurn] | None = Field(
        default=None, max_length=MAX_CONVERSATION_TURNS,
        description="the earlier turns, oldest first, for clients that keep the conversation "
        "themselves (with `conversation_id`: turns after the stored ones)",
    )

    @field_validator("report", mode="before")
    @classmethod
    def _report_exactly_typed(cls, value: Any) -> Any:
        """A report sent as JSON is read as strictly as the request around it."""
        if isinstance(value, dict):
            return _REPORT.validate_python(value, strict=True)
        return value


class Citation(BaseModel):
    """A guide passage the answer rests on; `quote` is in the guide's own language (`language`),
    `translation` is the section's knowledge card in the reader's language when that differs."""

    doc_id: str
    section: str
    language: str
    quote: str
    translation: str | None = Field(
        default=None, description="what the section says in the reader's language (its card), shown "
        "first; `quote` is then the guide's original wording, its source")
    translation_language: str | None = None
    section_title: str = ""
    guide_title: str = ""
    citation: str = Field(default="", description="doc_id#section")
    url: str = Field(default="", description="where to read the section: /guides/{doc_id}#{section}, "
                     "absolute when the server knows its public URL (OOMKB_PUBLIC_URL)")

    @model_validator(mode="after")
    def _default_url(self) -> Citation:
        if not self.url:
            self.url = f"/guides/{self.doc_id}#{self.section}"
        return self


class Remedy(BaseModel):
    """One step of the advice, rendered in the answer language."""

    id: str
    text: str
    cite: str
    flags: list[str] = []
    apis: list[str] = []
    triggered_by_evidence: bool = False
    snippet: str | None = Field(default=None, description="a short Python example of the step")


class AskResponse(BaseModel):
    """The assistant's answer (the `ask --json` fields first)."""

    # what the answer showed (its code blocks, guide cards, answer lines), for the conversation's
    # next turn not to show them again; not part of the response's JSON
    _shown: object = PrivateAttr(default=None)

    language: str
    diagnosis: ParsedError | None
    answer: str = Field(description="Markdown in `language`; guide quotes only as `> ` lines")
    citations: list[Citation]
    grounded: bool
    detected_language: str | None = None
    language_note: str | None = Field(
        default=None, description="why the answer is not in the asker's language, if so"
    )
    remedies: list[Remedy] = []
    confidence: float = Field(default=0.0, description="retrieval confidence, 0..1")
    facts: dict[str, Union[int, float, str, bool, None]] = Field(
        default_factory=dict, description="the evidence the advice was chosen on"
    )
    figures: list[FigureAnswer] = Field(
        default_factory=list, description="figures the question asked for, answered first"
    )
    next_steps: list[NextStep] = Field(
        default_factory=list, description="oomkb commands that would give the missing evidence"
    )
    verdict: str | None = Field(
        default=None, description="the answer's first sentence, from the user's own figures "
        "(e.g. arguments larger than the device's HBM), in `language`; null without such evidence")
    out_of_scope: str | None = Field(
        default=None, description="the other framework whose out-of-memory error was recognised "
        "(pytorch, tensorflow, cuda): the guides are about JAX/XLA, so nothing is grounded")
    answer_id: str = Field(default_factory=lambda: uuid.uuid4().hex,
                           description="names this answer in POST /v1/feedback")
    conversation_id: str | None = Field(
        default=None, description="send it with the next question to follow up (REST only)")
    follow_up: bool = Field(default=False, description="answered as a follow-up of earlier turns")
    inherited: list[str] = Field(
        default_factory=list, description="evidence taken from earlier turns: error_log, report")
    tried: list[str] = Field(
        default_factory=list, description="remedy ids the conversation says were already tried")
    tried_items: list[str] = Field(
        default_factory=list,
        description="what the user says they already did, this turn or earlier (kb/catalogue/intents.yaml "
                    "`tried` ids: batch, donation, bf16, remat, gpu_pool_flags ...)")


class SearchRequest(JsonRequest):
    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=5, ge=1, le=50)
    language: LanguageCode | None = Field(default=None, description="only guides in this language")


class DiagnoseRequest(JsonRequest):
    error_log: str = Field(max_length=MAX_ERROR_LOG_CHARS)


class GuideSection(BaseModel):
    id: str
    title: str
    level: int


class GuideInfo(BaseModel):
    doc_id: str
    title: str
    title_en: str
    language: str
    categories: list[str]
    sections: list[GuideSection]


class GuidesResponse(BaseModel):
    guides: list[GuideInfo]


class ErrorResponse(BaseModel):
    detail: str


__all__ = [
    "JsonRequest", "ConversationTurn", "AskRequest", "AskResponse", "Citation", "Remedy", "SearchRequest",
    "DiagnoseRequest", "GuideInfo", "GuideSection", "GuidesResponse", "ErrorResponse",
]


def validation_detail(errors: list[dict[str, Any]]) -> str:
    """One readable sentence for pydantic/FastAPI validation errors (REST 422s, MCP tool errors)."""
    parts = []
    for e in errors[:10]:
        if e.get("type") == "json_invalid":
            reason = (e.get("ctx") or {}).get("error", "")
            pos = e["loc"][-1] if e.get("loc") else "?"
            parts.append(f"the request body is not valid JSON ({reason} at character {pos})")
            continue
        loc = [str(p) for p in e.get("loc", ()) if p != "body"]
        where = ".".join(loc) if loc else "body"
        msg = e.get("msg", "invalid value")
        if where == "body" and e.get("type") in {"model_attributes_type", "dict_type"}:
            msg += " (send a JSON object with Content-Type: application/json)"
        elif e.get("type") == "missing" and where != "body":
            msg = "this field is required"
        parts.append(f"{where}: {msg}")
    more = len(errors) - len(parts)
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "invalid request: " + "; ".join(parts)
