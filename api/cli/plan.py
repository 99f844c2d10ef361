"""`oomkb plan FILE.py:FACTORY --tpu GEN [--vary NAME=LO..HI]`: what makes it fit, by compiling."""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from oomkb.api.cli.options import (
    IsolateOption, JsonOption, PathOption, ProgramArgument, PythonOption, TopologyOption, TpuOption,
    import_paths, target_generation,
)
from oomkb.api.cli.boundary import EXIT_USAGE, check_png_path, draw_or_fail, fail, user_errors

PLAN_HELP = (
    "Find what makes FILE.py:FACTORY fit on a TPU, by compiling each remedy with the real XLA:TPU "
    "compiler and no TPU.\n\n"
    "The program is estimated once, then compiled again with each fix that applies: donating "
    "the arguments that can alias outputs, the smallest scoped VMEM limit that compiles a kernel "
    "(never above the physical VMEM), a larger topology (factories taking `devices`/`mesh`), "
    "other TPU generations, and bfloat16 arguments (a what-if). Every fix marked verified was "
    "compiled; its figures are measured.\n\n"
    "--vary NAME=LO..HI: the factory takes an integer keyword argument NAME (batch size, "
    "sequence length, block size); the plan finds the largest value that fits, never with more "
    "compiles than plain bisection (it says how many), and lists every value compiled (--plot "
    "draws the curve). Values the factory refuses (it takes only multiples of 128, powers of "
    "two, ...) are skipped by following their pattern; NAME=LO..HI:STEP or NAME=a,b,c names "
    "the values to search.\n\n"
    "--choose NAME=a,b,c: compile each value of a categorical keyword argument of the factory "
    "(a remat policy, an offload target, a mesh layout, a dtype; given as the type of the "
    "keyword's default, else as text); with --vary, the largest value that fits under each "
    "choice (--plot draws one curve per choice). Runs in one child process with a timeout.\n\n"
    "--workers N runs the independent compiles (fixes, generations, topologies, a round of "
    "--vary values) on N worker processes at once, each in the same sandbox; --ray ADDRESS (or "
    "OOMKB_RAY_ADDRESS) on a Ray cluster's workers. The answer is the serial plan's; the report "
    "says how many compiles and rounds it took. Results are kept in a compile cache under "
    "OOMKB_HOME: a plan run again compiles only what changed. A cluster that cannot be reached "
    "is said so, and the plan runs on this machine."
)


def register(app: typer.Typer) -> None:
    """Add the `plan` command to `app`."""
    app.command("plan", help=PLAN_HELP)(plan_command)


def plan_command(
    program: ProgramArgument,
    tpu: TpuOption = None,
    topology: TopologyOption = None,
    vary: Annotated[
        Optional[str], typer.Option("--vary", metavar="NAME=LO..HI[:STEP]|NAME=a,b,c",
                                    help="find the largest value of the factory's argument NAME that fits")
    ] = None,
    choose: Annotated[
        Optional[str], typer.Option("--choose", metavar="NAME=a,b,c",
                                    help="compile each value of the factory's keyword NAME "
                                         "(with --vary: the largest fitting value per choice)")
    ] = None,
    as_json: JsonOption = False,
    plot: Annotated[
        Optional[Path], typer.Option("--plot", help="draw the --vary curve (one per --choose value), "
                                                    "or the fixes, to this PNG")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds before the plan is stopped")
    ] = 900.0,
    python: PythonOption = None,
    path: PathOption = None,
    isolate: IsolateOption = False,
    workers: Annotated[
        Optional[int], typer.Option("--workers", min=1, max=256,
                                    help="compile on N local worker processes at once")
    ] = None,
    ray_address: Annotated[
        Optional[str], typer.Option("--ray", metavar="ADDRESS", envvar="OOMKB_RAY_ADDRESS",
                                    help="compile on the Ray cluster at ADDRESS (HOST:PORT)")
    ] = None,
) -> None:
    """Compile FILE.py:FACTORY with each remedy and report what fits."""
    from oomkb.diagnostics.choose import check_choose
    from oomkb.diagnostics.plan import parse_vary, plan_program

    if timeout <= 0:
        fail(f"--timeout must be positive, got {timeout:g}", EXIT_USAGE)
    check_png_path(plot)
    tpu = target_generation(tpu, topology)
    paths = import_paths(path)
    with user_errors():
        vary_spec = parse_vary(vary) if vary is not None else None
        choose_spec = check_choose(choose, vary_spec) if choose is not None else None
    err = Console(stderr=True)
    executor = plan_executor(workers, ray_address, err)
    with tempfile.TemporaryDirectory(prefix="oomkb-plan-") as tmp:
        progress_file = Path(tmp) / "progress.jsonl"
        progress_file.touch()
        outcome: dict = {}

        def work() -> None:
            try:
                outcome["report"] = plan_program(program, target=tpu, topology=topology, python=python,
                                                 paths=paths, vary=vary_spec, choose=choose_spec,
                                                 timeout_s=timeout,
                                                 progress_file=progress_file, isolate=isolate,
                                                 executor=executor)
            except BaseException as exc:  # re-raised below, in the main thread
                outcome["error"] = exc

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        try:
            _follow(thread, progress_file, err if err.is_terminal or not as_json else None)
            thread.join()
        finally:
            if executor is not None:
                executor.close()
    if "error" in outcome:
        with user_errors():
            raise outcome["error"]
    report = outcome["report"]
    if plot is not None:
        from oomkb.diagnostics.plot import plot_plan

        draw_or_fail(plot_plan, report, plot)
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    print_plan(report, plot)


def plan_executor(workers: int | None, ray_address: str | None, err: Console):
    """The executor --workers/--ray ask for (None: the serial plan). A cluster that cannot be
    reached is said on stderr, and the plan runs here (on --workers processes, if given)."""
    from oomkb.diagnostics.executors import ClusterUnavailable, connect_executor

    if ray_address:
        try:
            return connect_executor(workers, ray_address)
        except ClusterUnavailable as exc:
            where = f"on {workers} local worker(s)" if workers else "locally"
            err.print(f"[yellow]warning:[/] {escape(str(exc))}; running the plan {where}")
    return connect_executor(workers, None)


def _follow(thread: threading.Thread, path: Path, console: Console | None) -> None:
    """Show the child's progress lines on the terminal until the plan ends."""
    if console is None:
        thread.join()
        return
    seen = 0
    count = 0
    with console.status("planning: starting ...") as status:
        while thread.is_alive():
            thread.join(timeout=0.25)
            try:
                lines = path.read_text("utf-8").splitlines()
            except OSError:
                continue
            for line in lines[seen:]:
                try:
                    message = json.loads(line)["message"]
                except (ValueError, KeyError, TypeError):
                    continue
                count += message.startswith("compiling")
                status.update(f"planning: {escape(message)} (compile {count})")
            seen = len(lines)


def print_plan(report, plot: Path | None = None) -> None:
    """The plan as text: the baseline verdict, each fix, the --vary answer."""
    from oomkb.api.cli.estimate import verdict_lines
    from oomkb.units import format_bytes as fb

    out = Console(soft_wrap=True)
    target = report.target
    out.print(f"[bold]{escape(report.function)}[/] on [bold]{target.topology}[/] "
              f"({target.device_kind}): {report.compiles} compiles in {report.seconds:.1f} s")
    if report.execution is not None:
        run = report.execution
        where = "Ray worker(s)" if run.executor == "ray" else "local worker process(es)"
        out.print(f"on {run.workers} {where}: {run.compiles} compiles in {run.rounds} rounds "
                  f"({run.speculative} measured ahead and not needed), {run.cached} from the "
                  f"compile cache, {run.seconds:.1f} s wall")
    for line in verdict_lines(report.baseline):
        out.print(line)
    if report.fixes:
        table = Table(title="fixes, each compiled with the change", show_edge=False,
                      title_justify="left")
        for column in ("fix", "verified", "fits", "total / device", "saves", "compiles"):
            table.add_column(column, overflow="fold")
        for fix in report.fixes:
            table.add_row(
                escape(fix.title), "yes" if fix.verified else "no",
                "[green]yes[/]" if fix.fits else "[red]no[/]",
                fb(fix.total_bytes) if fix.total_bytes is not None else "-",
                fb(fix.saving_bytes) if fix.saving_bytes else "-", str(fix.compiles),
            )
        out.print(table)
        for fix in report.fixes:
            if fix.snippet:
                out.print(f"[bold]{escape(fix.id)}[/]: {escape(fix.snippet)}")
            if fix.note:
                out.print(f"  {escape(fix.note)}")
    else:
        out.print("no fix applies (nothing to donate, no kernel short of VMEM, and it fits)")
    for fix in report.no_saving:
        out.print(f"[yellow]no saving:[/] {escape(fix.title)}: {escape(fix.note or '')}")
    vary = report.vary
    if vary is not None:
        count = (f"{vary.compiles} compiles; plain bisection needs up to "
                 f"{vary.bisection_compiles}")
        if vary.rounds is not None:
            count = f"{vary.compiles} compiles in {vary.rounds} rounds" + count[count.index(";"):]
        if not vary.searched:
            out.print(f"[red]could not search {escape(vary.name)}: no value the factory accepts "
                      f"was found ({escape(count)})[/]")
        elif vary.largest_fitting is None:
            out.print(f"[red]no value of {escape(vary.name)} in [{vary.low}, {vary.high}] fits[/]"
                      f" ({escape(count)})")
        else:
            edge = (f"; {vary.name}={vary.next_value} does not"
                    if vary.boundary and vary.next_value is not None else "")
            out.print(f"[green bold]largest {escape(vary.name)} that fits: "
                      f"{vary.largest_fitting}[/]{escape(edge)} ({escape(count)})")
        if vary.note:
            out.print(f"[yellow]note:[/] {escape(vary.note)}")
        compiled = [p for p in vary.curve if p.total_bytes is not None]
        if compiled:
            shown = ", ".join(f"{p.value}: {fb(p.total_bytes)}" for p in compiled[-6:])
            out.print(f"curve (last values compiled): {escape(shown)}")
    if report.choices:
        out.print(choices_table(report))
        for row in report.choices:
            if row.error:
                out.print(f"[yellow]{escape(row.name)}={escape(row.value)}:[/] {escape(row.error)}")
    for warning in report.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")
    if plot is not None:
        out.print(f"plot: {escape(str(plot))}")


def choices_table(report) -> Table:
    """--choose as a table: each choice, whether it fits, and with --vary the largest value that
    fits under it, the next value (which does not), the bytes at the largest and the compiles."""
    from oomkb.units import format_bytes as fb

    first = report.choices[0]
    vary = next((row.vary for row in report.choices if row.vary is not None), None)
    table = Table(title=f"choices of {first.name}, each compiled", show_edge=False,
                  title_justify="left")
    table.add_column("choice", overflow="fold")
    if vary is not None:
        for column in (f"largest {vary.name}", "next (does not fit)", "total / device at it",
                       "compiles"):
            table.add_column(column, overflow="fold")
        for row in report.choices:
            v = row.vary
            if v is None or not v.searched:
                largest = "[red]not searched[/]"
            elif row.at_value is None:
                largest = f"[red]none in [{v.low}, {v.high}][/]"
            else:
                largest = f"[green]{row.at_value}[/]"
            following = str(v.next_value) if v is not None and v.boundary else "-"
            table.add_row(f"{escape(row.name)}={escape(row.value)}", largest, following,
                          fb(row.total_bytes) if row.total_bytes is not None else "-",
                          str(v.compiles if v is not None else row.compiles))
        return table
    for column in ("fits", "total / device", "compiles"):
        table.add_column(column, overflow="fold")
    for row in report.choices:
        fits = "[green]yes[/]" if row.fits else f"[red]no[/] ({escape(row.status)})"
        table.add_row(f"{escape(row.name)}={escape(row.value)}", fits,
                      fb(row.total_bytes) if row.total_bytes is not None else "-", str(row.compiles))
    return table
