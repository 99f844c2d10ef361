"""`oomkb diff A.json B.json`: what changed between two estimate reports, largest growth first."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from oomkb.api.cli.boundary import EXIT_USAGE, fail, user_errors
from oomkb.api.cli.options import JsonOption

DIFF_HELP = (
    "Compare two reports of `oomkb estimate --json` (two revisions of your code, or the same code "
    "under two jax/libtpu versions with --python): every figure per device, and the buffers live at "
    "the peak matched by op name, source line and shape, the largest growth first."
)

#: The figures' names on a terminal.
LABELS = {"total_bytes": "total", "argument_bytes": "arguments", "output_bytes": "outputs",
          "temp_bytes": "temp", "generated_code_bytes": "code", "alias_bytes": "aliased",
          "peak_heap_bytes": "peak heap"}


def register(app: typer.Typer) -> None:
    """Add the `diff` command to `app`."""
    app.command("diff", help=DIFF_HELP)(diff_command)


def diff_command(
    before: Annotated[Path, typer.Argument(metavar="A.json", help="the earlier estimate report")],
    after: Annotated[Path, typer.Argument(metavar="B.json", help="the later estimate report")],
    as_json: JsonOption = False,
    top: Annotated[int, typer.Option("--top", help="changed buffers to list")] = 10,
) -> None:
    """Compare two estimate reports (B against A)."""
    from oomkb.diagnostics.diff import diff_reports, load_estimate_report

    if top < 1:
        fail(f"--top must be at least 1, got {top}", EXIT_USAGE)
    with user_errors():
        report = diff_reports(load_estimate_report(before), load_estimate_report(after))
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    print_diff(report, top)


def _signed(delta: int | None) -> str:
    from oomkb.units import format_bytes

    if delta is None:
        return "?"
    if delta == 0:
        return "0"
    return ("+" if delta > 0 else "-") + format_bytes(abs(delta))


def print_diff(report, top: int = 10) -> None:
    from oomkb.units import format_bytes as fb

    out = Console(soft_wrap=True)
    for note in report.notes:
        out.print(f"[yellow]note[/]: {escape(note)}")
    if not report.changed:
        out.print(f"[green bold]nothing changed[/]: the same figures and the same buffers at the peak "
                  f"(total {fb(report.figures[0].after or 0)} per device)")
        return
    total = report.figures[0]
    fits = {True: "fits", False: "does not fit"}
    out.print(f"[bold]total per device[/]: {fb(total.before or 0)} → {fb(total.after or 0)} "
              f"({_signed(report.total_delta_bytes)}); A {fits[report.fits_before]}, "
              f"B {fits[report.fits_after]}")
    table = Table(title="figures per device")
    for column in ("figure", "A", "B", "change"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for f in report.figures:
        if f.before is None and f.after is None:
            continue
        table.add_row(LABELS.get(f.name, f.name), fb(f.before) if f.before is not None else "?",
                      fb(f.after) if f.after is not None else "?", _signed(f.delta_bytes))
    out.print(table)
    roles = {role: d for role, d in (report.by_role_delta or {}).items() if d}
    if roles:
        out.print("[bold]at the peak, by role[/]: " + ", ".join(
            f"{role} {_signed(d)}" for role, d in sorted(roles.items(), key=lambda kv: -kv[1])))
    if not report.buffers:
        out.print(f"the {report.unchanged_buffers} buffers listed at the peak are the same")
        return
    table = Table(title=f"buffers at the peak that changed ({len(report.buffers)}; "
                        f"{report.unchanged_buffers} the same)")
    for column in ("change", "status", "role", "op", "source", "shape A → B"):
        table.add_column(column, overflow="fold")
    for b in report.buffers[:top]:
        shapes = " → ".join(s for s in (b.shape_before, b.shape_after) if s) if b.shape_before != b.shape_after \
            else (b.shape_after or "")
        table.add_row(_signed(b.delta_bytes), b.status, b.role or "", escape(b.op_name or b.instruction or "?"),
                      escape(Path(b.source).name if b.source else ""), escape(shapes))
    out.print(table)
