"""`oomkb diagnose [FILE|-]`: read an out-of-memory error out of a log and show its figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from oomkb.api.cli.options import JsonOption
from oomkb.api.cli.boundary import EXIT_USAGE, fail, terminal_safe
from oomkb.units import format_bytes

if TYPE_CHECKING:  # the parser compiles its patterns on import: only when diagnose runs
    from oomkb.diagnostics.parse import ParsedError

DIAGNOSE_HELP = (
    "Parse an out-of-memory error log into evidence: the error category (compile-time HBM, "
    "runtime allocation, scoped VMEM, GPU, host), the backend and every size in bytes.\n\n"
    "FILE is a log file (any surrounding output is fine); '-' or nothing reads standard input."
)

# The `diagnose --json` figures, in the order a reader wants them, with their labels.
_MAIN_SIZES = (
    ("requested_bytes", "requested"),
    ("available_bytes", "available"),
    ("used_bytes", "used"),
    ("exceeded_by_bytes", "exceeded by"),
    ("free_bytes", "free"),
    ("tensorcore_bytes", "TensorCore usage"),
    ("sparsecore_bytes", "SparseCore usage"),
)
_TEXT_FIELDS = (
    ("shape", "shape"),
    ("instruction", "instruction"),
    ("custom_call_target", "custom call target"),
    ("program_name", "program"),
    ("device", "device"),
    ("allocator", "allocator"),
)
_SHOWN_ALLOCATIONS = 10


def register(app: typer.Typer) -> None:
    """Add the `diagnose` command to `app`."""
    app.command("diagnose", help=DIAGNOSE_HELP)(diagnose_command)


def diagnose_command(
    log: Annotated[
        str, typer.Argument(metavar="FILE|-", help="error log file; '-' reads standard input")
    ] = "-",
    as_json: JsonOption = False,
) -> None:
    """Parse an out-of-memory error log into evidence."""
    from oomkb.diagnostics.exceptions import DiagnosticsError
    from oomkb.diagnostics.parse import parse_error

    try:
        text = _read_input(log)
    except DiagnosticsError as exc:
        fail(str(exc), EXIT_USAGE)
    result = parse_error(text)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    _render(result, Console(soft_wrap=False))


def _read_input(log: str) -> str:
    """The log text from the file named ``log``, or from standard input for '-': a regular file
    only, its last 8 MiB when longer; exit 2 for an empty log (api/cli/files.py)."""
    from oomkb.api.cli.files import read_log_bytes
    from oomkb.diagnostics.parse import decode_log

    return decode_log(read_log_bytes(log))


def _size(value: int) -> str:
    return f"{format_bytes(value)} ({value:,} bytes)"


def _render(result: ParsedError, console: Console) -> None:
    """Print a ParsedError for a person: figures in binary units, then the matched message."""
    if result.category == "unknown":
        note = Text("No known out-of-memory message was found in this log. ")
        note.append(
            "Give the whole output of the failing run (the RESOURCE_EXHAUSTED or "
            "'Out of memory' lines and what follows them)."
        )
        if result.backend:
            note.append(f" The log mentions the {result.backend.upper()} backend.")
        console.print(note)
        return

    table = Table(title=f"Diagnosis: {result.category}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("category", result.category)
    table.add_row("backend", result.backend or "unknown")
    if result.memory_space:
        table.add_row("memory space", result.memory_space)
    if result.error_code:
        table.add_row("error code", result.error_code)
    for name, label in _MAIN_SIZES:
        value = getattr(result, name)
        if value is not None:
            table.add_row(label, _size(value))
    for name, label in _TEXT_FIELDS:
        value = getattr(result, name)
        if value:
            table.add_row(label, Text(terminal_safe(value)))
    shown = {name for name, _ in _MAIN_SIZES}
    for name, value in result:
        if name.endswith("_bytes") and name not in shown and value is not None:
            table.add_row(name.removesuffix("_bytes").replace("_", " "), _size(value))
    if result.signature:
        table.add_row("matched", f"{result.signature} (line {result.line})")
    console.print(table)

    if result.allocations:
        allocations = Table(
            title=f"Largest allocations ({len(result.allocations)} listed)", title_justify="left"
        )
        for column in ("#", "size", "shape", "padding", "op / source"):
            allocations.add_column(column, overflow="fold")
        for item in result.allocations[:_SHOWN_ALLOCATIONS]:
            padding = format_bytes(item.padding_bytes) if item.padding_bytes is not None else ""
            where = " ".join(p for p in (item.op_name or item.instruction, item.source) if p)
            allocations.add_row(
                str(item.rank or ""),
                format_bytes(item.size_bytes) if item.size_bytes is not None else "",
                Text(terminal_safe(item.shape or "")),
                padding,
                Text(terminal_safe(where)),
            )
        console.print(allocations)

    if result.message:
        console.print(Panel(Text(terminal_safe(result.message)), title="matched message", title_align="left"))
