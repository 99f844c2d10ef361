"""oomkb's Python API: what the command line does, a notebook can do too.

    import oomkb
    oomkb.search("什么是 Vmem？", k=3)                       # offline docs search, any language
    oomkb.diagnose(open("error.log").read())                 # an OOM log -> category and bytes
    oomkb.estimate("train.py:make_step", tpu="v5e")          # HBM on a TPU generation, no TPU
    oomkb.diff("before.json", "after.json")                  # what changed between two estimates
    oomkb.profile("train.py:step", repeat=5)                 # live memory and leaks, local backend
    oomkb.ask("Why does my compile run out of HBM?", error_log=text)

    with oomkb.capture("oom.json"):                          # or @oomkb.capture("oom.json")
        train()                                              # an OOM writes the live buffers

`capture` writes the out-of-memory report (the arrays alive at the error, the lines that created
them and what keeps them alive) and lets the error propagate; `held_by(obj)` names what keeps any
object alive; `parse_error(text)` is `diagnose` under its library name.

Names are loaded on first use, so ``import oomkb`` is cheap and imports neither jax nor torch.
Every error is an :class:`oomkb.OomkbError` (``UserInputError`` or ``ServiceError``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from oomkb import layout
from oomkb.errors import OomkbError, ServiceError, UserInputError

layout.install_source_floors()  # in a checkout, oomkb.kb & co. are the top-level design folders

if TYPE_CHECKING:  # pragma: no cover
    from oomkb.api.schemas import AskResponse
    from oomkb.diagnostics.diff import DiffReport
    from oomkb.diagnostics.estimate.report import EstimateReport
    from oomkb.diagnostics.parse import ParsedError
    from oomkb.diagnostics.profile import ProfileReport
    from oomkb.kb.search import SearchResponse


def _prepare() -> None:
    from oomkb.api import prepare_process

    prepare_process()


def search(query: str, k: int = 5, language: str | None = None) -> SearchResponse:
    """Search the built-in guides (hybrid dense + lexical) from any language; builds the index on first use."""
    return _assistant().searcher.search(query, k=k, language=language)


def diagnose(error_log: str) -> ParsedError:
    """Parse an out-of-memory error text into its category and exact sizes in bytes."""
    from oomkb.diagnostics.parse import parse_error

    return parse_error(error_log)


def estimate(program: str, tpu: str = "v5e", **options: Any) -> EstimateReport:
    """Estimate the HBM that ``FILE.py:FACTORY`` needs on a TPU generation, by a deviceless compile."""
    _prepare()
    from oomkb.diagnostics.estimate import estimate_program

    return estimate_program(program, target=tpu, **options)


def diff(before: Any, after: Any) -> DiffReport:
    """What changed from estimate `before` to `after` (reports, or paths of `estimate --json` files)."""
    from oomkb.diagnostics.diff import diff_reports, load_estimate_report

    def report(x: Any):
        return load_estimate_report(x) if isinstance(x, (str, os.PathLike)) else x

    return diff_reports(report(before), report(after))


def profile(program: str, repeat: int = 3, **options: Any) -> ProfileReport:
    """Run ``FILE.py:FUNC`` ``repeat`` times on the local backend; live memory per call and leak suspects."""
    _prepare()
    from oomkb.diagnostics.profile import profile_program

    return profile_program(program, repeat=repeat, **options)


def ask(question: str = "", error_log: str | None = None, report: dict | None = None,
        language: str | None = None) -> AskResponse:
    """The assistant: an answer in the asker's language with the evidence, remedies and citations."""
    from oomkb.api.schemas import AskRequest

    return _assistant().ask(AskRequest(question=question, error_log=error_log, report=report,
                                       language=language))


_ASSISTANT = None


def _assistant():
    global _ASSISTANT
    if _ASSISTANT is None:
        _prepare()
        from oomkb.api.core.assistant import load_assistant

        _ASSISTANT = load_assistant()
    return _ASSISTANT


#: Names implemented elsewhere, imported on first use (`import oomkb` stays cheap for a training
#: script that never fails).
_WHERE = {
    "capture": "oomkb.diagnostics.capture",
    "CaptureReport": "oomkb.diagnostics.capture",
    "held_by": "oomkb.diagnostics.holders",
    "Holder": "oomkb.diagnostics.holders",
    "parse_error": "oomkb.diagnostics.parse",
    "plan": "oomkb.diagnostics.plan",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'oomkb' has no attribute {name!r}")
    import importlib

    target = "plan_program" if name == "plan" else name
    value = getattr(importlib.import_module(_WHERE[name]), target)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["CaptureReport", "Holder", "OomkbError", "ServiceError", "UserInputError", "ask", "capture",
           "diagnose", "diff", "estimate", "held_by", "parse_error", "plan", "profile", "search"]
