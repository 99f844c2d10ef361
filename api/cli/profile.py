"""`oomkb profile FILE.py:FUNC`: live memory profile of a user's function on the local backend."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from oomkb.api.cli.options import IsolateOption, JsonOption, PathOption, PythonOption, import_paths
from oomkb.api.cli.boundary import EXIT_USAGE, check_png_path, draw_or_fail, fail, user_errors

PROFILE_HELP = (
    "Profile the live memory of FILE.py:FUNC on the local backend (CPU, GPU or TPU).\n\n"
    "FUNC runs in a child process. It is called once with no arguments (or with devices=/mesh= "
    "when it asks for them). If it returns (fn, args) or (fn, args, kwargs), it is a factory and "
    "fn(*args, **kwargs) is profiled; otherwise FUNC is a step function: that first call is the "
    "warm-up and FUNC() is profiled.\n\n"
    "Each of the N calls runs under jax.profiler.trace; the live array bytes after every call "
    "give the peak, the growth per call and the arrays that pile up (leak suspects). Open the "
    "trace with `xprof --logdir DIR`; memory.prof beside it is a pprof snapshot of device memory "
    "after the last call."
)


def register(app: typer.Typer) -> None:
    """Add the `profile` command to `app`."""
    app.command("profile", help=PROFILE_HELP)(profile_command)


def profile_command(
    target: Annotated[str, typer.Argument(metavar="FILE.py:FUNC", help="step function or factory")],
    repeat: Annotated[int, typer.Option("--repeat", "-n", help="calls to profile")] = 5,
    logdir: Annotated[
        Optional[Path], typer.Option("--logdir", help="trace folder (default: a new temporary one)")
    ] = None,
    as_json: JsonOption = False,
    plot: Annotated[
        Optional[Path], typer.Option("--plot", help="also draw live bytes per call to this PNG")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds before the program is stopped")
    ] = 300.0,
    isolate: IsolateOption = False,
    python: PythonOption = None,
    path: PathOption = None,
) -> None:
    """Run FILE.py:FUNC N times in a child process and report its live memory."""
    from oomkb.diagnostics.profile import profile_program

    if timeout <= 0:
        fail(f"--timeout must be positive, got {timeout:g}", EXIT_USAGE)
    check_png_path(plot)
    err = Console(stderr=True)
    if not as_json:
        err.print(f"profiling {escape(target)} ({repeat} calls) ...")
    with user_errors():
        report = profile_program(target, repeat=repeat, logdir=logdir, timeout_s=timeout,
                                 isolate=isolate, python=python, paths=import_paths(path))
    if plot is not None:
        from oomkb.diagnostics.plot import plot_profile

        draw_or_fail(plot_profile, report, plot)
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    _print_report(report, plot)


def _print_report(report, plot: Path | None) -> None:
    from oomkb.units import format_bytes

    out = Console(soft_wrap=True)
    kind = {"factory": "factory's fn", "step": "step function"}.get(report.target_kind, "function")
    out.print(
        f"[bold]{escape(report.target or 'function')}[/] ({kind}) on [bold]{report.backend}[/]"
        f"{f' ({escape(report.device)})' if report.device else ''}: {report.calls} calls"
    )
    table = Table(show_edge=False)
    for column in ("call", "live bytes", "change", "seconds"):
        table.add_column(column, justify="right")
    previous = report.baseline_bytes
    table.add_row("before", format_bytes(report.baseline_bytes), "", "")
    for call, (live, seconds) in enumerate(zip(report.live_bytes_per_call, report.call_seconds), 1):
        change = live - previous
        sign = "+" if change > 0 else ""
        mark = " [bold](peak)[/]" if call == report.peak_call else ""
        table.add_row(str(call), format_bytes(live) + mark, sign + format_bytes(change) if change else "0",
                      f"{seconds:.3f}")
        previous = live
    out.print(table)
    out.print(f"peak live arrays: [bold]{format_bytes(report.peak_bytes)}[/]")
    if report.memory_stats_peak_bytes is not None:
        out.print(f"device peak (memory_stats): {format_bytes(report.memory_stats_peak_bytes)}")
    growth = report.growth_bytes_per_call
    colour = "red" if growth > 0 else "green"
    out.print(f"growth per call: [{colour}]{format_bytes(growth)}[/]")
    if report.leak_suspects:
        suspects = Table(title="leak suspects (arrays that pile up from call to call)", show_edge=False)
        for column in ("shape", "dtype", "count", "bytes"):
            suspects.add_column(column, no_wrap=True)
        suspects.add_column("created at", overflow="fold")
        suspects.add_column("held by", overflow="fold")
        for suspect in report.leak_suspects:
            holders = "; ".join(h.describe() for h in suspect.held_by) or "unknown"
            suspects.add_row(suspect.shape, suspect.dtype, str(suspect.count), format_bytes(suspect.bytes),
                             escape(_shorter_path(suspect.source) or "unknown"), escape(holders))
        out.print(suspects)
    else:
        out.print("no leak suspects")
    out.print(f"trace: {escape(report.trace_dir)}  (open with: {escape(report.xprof_command)})")
    if report.pprof_path:
        out.print(f"device memory pprof: {escape(report.pprof_path)}")
    if plot is not None:
        out.print(f"plot: {escape(str(plot))}")


def _shorter_path(source: str | None) -> str | None:
    """``file:line (function)`` with the file relative to the current folder when inside it."""
    if not source:
        return source
    path, sep, rest = source.partition(":")
    try:
        relative = Path(path).resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        return source
    return f"{relative}{sep}{rest}"
