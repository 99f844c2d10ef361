"""Request and response models: the contract shared by the HTTP API (OpenAPI), the CLI's --json
output, Slack and the tests."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from diagnostics.estimate import EstimateReport
from diagnostics.parse import ParsedError
from diagnostics.profile import ProfileReport
from kb.search import SearchResponse, SearchResult

MAX_QUESTION_CHARS = 20_000
MAX_ERROR_LOG_CHARS = 1_000_000

LanguageCode = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$", max_length=35),
]


class AskRequest(BaseModel):
    """A question, optionally with a pasted error log and an estimate or profile report."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(max_length=MAX_QUESTION_CHARS,
                          description="the question, in any language (may be empty when an error log is given)")
    error_log: str | None = Field(default=None, max_length=MAX_ERROR_LOG_CHARS,
                                  description="the OOM error or a whole log around it")
    report: Union[EstimateReport, ProfileReport, None] = Field(
        default=None, description="the JSON of `oomkb estimate --json` or `oomkb profile --json`"
    )
    language: LanguageCode | None = Field(
        default=None,
        description="answer language (en, ar, hi, ru, zh, pt, es, ja, de, fr, ko); detected "
        "from the question when absent; other languages are answered in English",
    )


class Citation(BaseModel):
    """A guide passage the answer rests on; `quote` is in the guide's own language."""

    doc_id: str
    section: str
    language: str
    quote: str
    section_title: str = ""
    guide_title: str = ""
    citation: str = Field(default="", description="doc_id#section")


class Remedy(BaseModel):
    """One step of the advice, rendered in the answer language."""

    id: str
    text: str
    cite: str
    flags: list[str] = []
    apis: list[str] = []
    triggered_by_evidence: bool = False


class AskResponse(BaseModel):
    """The assistant's answer (CONTRACT `ask` shape first)."""

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


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=5, ge=1, le=50)
    language: LanguageCode | None = Field(default=None, description="only guides in this language")


class DiagnoseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    "AskRequest", "AskResponse", "Citation", "Remedy", "SearchRequest", "SearchResponse",
    "SearchResult", "DiagnoseRequest", "ParsedError", "GuideInfo", "GuideSection",
    "GuidesResponse", "ErrorResponse", "EstimateReport", "ProfileReport",
]
