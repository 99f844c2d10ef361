"""What a diff report (`oomkb diff --json`) adds to an answer: the comparison in one line, the
versions when they differ, and the buffers at the peak that changed most, each with its op name,
shape, source line, change and role, in the asker's language (kb/catalogue/messages.yaml).

The verdict (the total's change, the role that grew most and what to do) comes from the evidence
rules (kb/catalogue/evidence_rules.yaml, the `diff-*` rules) like every other verdict.
"""

from __future__ import annotations

from collections.abc import Callable

from oomkb.diagnostics.diff import BufferDelta, DiffReport
from oomkb.diagnostics.roles import ROLES
from oomkb.kb.remedies.schema import MissingValue
from oomkb.units import format_bytes

__all__ = ["MAX_BUFFERS", "diff_lines", "diff_summary", "signed_bytes"]

#: Changed buffers an answer lists (the report keeps them all).
MAX_BUFFERS = 5

Message = Callable[..., str]


def signed_bytes(delta: int) -> str:
    """`+6.00 MiB`, `-2.00 MiB`, `0 B`."""
    return ("+" if delta > 0 else "") + format_bytes(delta)


def _code(text: str) -> str:
    text = " ".join(str(text).split()).replace("`", "'")
    return f"`{text}`" if text else text


def diff_summary(msg: Message, report: DiffReport, language: str) -> str:
    """B against A in one line: the target, the totals and the change; MissingValue when the
    report (a hand-made one) has no total figures."""
    total = next((f for f in report.figures if f.name == "total_bytes"), None)
    if total is None or total.before is None or total.after is None:
        raise MissingValue("the diff report has no total figures")
    return msg("diff_summary", language, target=_code(report.target_after),
               before=format_bytes(total.before), after=format_bytes(total.after),
               change=signed_bytes(report.total_delta_bytes))


def _shape(b: BufferDelta) -> str:
    if b.shape_before and b.shape_after and b.shape_before != b.shape_after:
        return f"{_code(b.shape_before)} → {_code(b.shape_after)}"
    return _code(b.shape_after or b.shape_before or "?")


def _buffer_line(msg: Message, b: BufferDelta, language: str) -> str:
    role = msg(f"role_{b.role}" if b.role in ROLES else "role_unknown", language)
    values = dict(op=_code(b.op_name or b.instruction or "?"), shape=_shape(b), change=signed_bytes(b.delta_bytes), role=role)
    if b.source:
        return msg("diff_buffer_line", language, source=_code(b.source), **values)
    return msg("diff_buffer_line_no_source", language, **values)


def diff_lines(msg: Message, report: DiffReport, language: str) -> list[str]:
    """Markdown in `language`: the versions when they differ, then the changed buffers, the
    largest growth first (at most MAX_BUFFERS); nothing for a report where nothing changed."""
    lines: list[str] = []
    versions = ((report.jax_before, report.libtpu_before), (report.jax_after, report.libtpu_after))
    if versions[0] != versions[1]:
        def named(jax, libtpu):
            return _code(f"jax {jax}, libtpu {libtpu}" if jax else f"libtpu {libtpu}")
        lines += [msg("diff_versions", language, before=named(*versions[0]), after=named(*versions[1])), ""]
    if not report.changed or not report.buffers:
        return lines
    lines += [f"### {msg('diff_heading', language)}", ""]
    for n, b in enumerate(report.buffers[:MAX_BUFFERS], start=1):
        try:
            lines.append(f"{n}. {_buffer_line(msg, b, language)}")
        except MissingValue:  # a hand-made report with a blank field: that line is left out
            continue
    lines.append("")
    return lines
