"""`oomkb run [OPTIONS] SCRIPT.py [ARGS...]`: run a script as `__main__` and catch its OOM.

Options of oomkb come before SCRIPT.py; everything after it goes to the script untouched (its
own `--json` or `--lang` included), exactly as `python SCRIPT.py ARGS...` would receive it.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from oomkb.api.cli.boundary import fail
from oomkb.api.cli.options import PythonOption
from oomkb.layout import floor_dir

EXIT_OOM = 1  # what Python itself returns for an uncaught exception
EXIT_INTERRUPTED = 130

RUN_HELP = (
    "Run SCRIPT.py as __main__ on the local backend and catch an out-of-memory error where it "
    "happens.\n\nOn an OOM (RESOURCE_EXHAUSTED or a known allocator message) the arrays alive at "
    "that moment are listed by shape, dtype and the line of your code that created them, with what "
    "keeps them alive; the device memory pprof is written, and the assistant answers with the "
    "report attached. The exit status is then non-zero; otherwise it is the script's own.\n\n"
    "oomkb's options go before SCRIPT.py; everything after SCRIPT.py is passed to the script."
)

_OWN_FILES = (
    "<frozen runpy>",
    os.path.dirname(runpy.__file__) + os.sep + "runpy.py",
    str(floor_dir("api")),
    str(floor_dir("diagnostics")),
)


def _run_in(python: str, path: Path, args: list[str], *, report: Path | None, as_json: bool,
            lang: str, answer: bool, index: Path | None) -> None:
    """`oomkb run` itself, started again in the user's interpreter (`--python`): the script runs
    there, with that environment's packages; the exit status is passed through."""
    import subprocess

    from oomkb.api.cli.boundary import user_errors
    from oomkb.diagnostics.interpreter import check_interpreter, oomkb_site_packages
    from oomkb.layout import lend_code

    with user_errors():
        interp = check_interpreter(python, need_tpu=False)
    # oomkb's command line runs there too: its packages are lent after the user's own folders
    # (same Python version only: compiled packages do not cross versions)
    support = interp.support_path or (oomkb_site_packages() if tuple(interp.version) == sys.version_info[:2] else [])
    options = ["--lang", lang, "--answer" if answer else "--no-answer"]
    options += ["--json"] * as_json
    options += ["--report", str(report.resolve())] if report is not None else []
    options += ["--index", str(index.resolve())] if index is not None else []
    code = lend_code("from oomkb.api.cli.main import main; sys.argv[0] = 'oomkb'; main()", support)
    env = dict(os.environ)
    try:
        done = subprocess.run([interp.executable, "-c", code, "run", *options, str(path), *args], env=env)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    raise typer.Exit(done.returncode)


def register(app: typer.Typer) -> None:
    """Add the `run` command to `app`."""
    app.command(
        "run",
        help=RUN_HELP,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                          "allow_interspersed_args": False},
    )(run_command)


def run_command(
    ctx: typer.Context,
    script: Annotated[str, typer.Argument(metavar="SCRIPT.py", help="the Python script to run")],
    report: Annotated[
        Optional[Path], typer.Option("--report", help="write the OOM report (JSON) to this file")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the OOM report as JSON on stdout")] = False,
    lang: Annotated[str, typer.Option("--lang", help="language of the assistant's answer")] = "en",
    answer: Annotated[bool, typer.Option("--answer/--no-answer", help="ask the assistant about the OOM")] = True,
    index: Annotated[Optional[Path], typer.Option("--index", help="index folder for the assistant")] = None,
    python: PythonOption = None,
) -> None:
    """Run SCRIPT.py [ARGS...] and report an out-of-memory error with the arrays alive at it."""
    from oomkb.diagnostics.capture import capture, user_traceback

    _check_language(lang)
    _check_report_path(report)
    path = _check_script(script)
    if python is not None:
        _run_in(python, path, ctx.args, report=report, as_json=as_json, lang=lang, answer=answer,
                index=index)
    code = _compile_script(path)
    del code  # compiled only to report a syntax error as a usage error; runpy runs the file
    argv, sys_path0 = list(sys.argv), list(sys.path)
    sys.argv = [str(path), *ctx.args]
    sys.path.insert(0, str(path.parent))
    catcher = capture(report, console=False)
    try:
        with catcher:
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit:
        raise  # the script's own exit status
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED)
    except BaseException as exc:  # the script's error: its traceback, then the report
        sys.stderr.write(user_traceback(exc, _OWN_FILES))
        sys.stderr.flush()
        if catcher.report is None:
            raise typer.Exit(EXIT_OOM)
        _show(catcher.report, as_json, lang, answer, index)
        raise typer.Exit(EXIT_OOM)
    finally:
        sys.argv = argv
        sys.path[:] = sys_path0


def _check_report_path(report: Path | None) -> None:
    """Refuse a --report that can never be written before the script runs (maybe for hours)."""
    if report is None:
        return
    if report.is_dir():
        fail(f"--report {report} is a folder; give a file name such as {report / 'oom.json'}")
    for parent in report.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                fail(f"--report {report}: {parent} is a file, not a folder")
            break


def _check_language(lang: str) -> None:
    """Refuse a malformed --lang before the script runs, not after it has failed."""
    from pydantic import TypeAdapter, ValidationError

    from oomkb.api.schemas import LanguageCode

    try:
        TypeAdapter(LanguageCode).validate_python(lang)
    except ValidationError as exc:
        fail(f"--lang: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")


def _check_script(script: str) -> Path:
    path = Path(script)
    if not path.exists():
        fail(f"no such script: {script}")
    if path.is_dir():
        fail(f"{script} is a folder; give the path of a Python script")
    return path.resolve()


def _compile_script(path: Path):
    try:
        source = path.read_bytes()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    try:
        return compile(source, str(path), "exec")
    except SyntaxError as exc:
        where = f"{path.name}:{exc.lineno}" if exc.lineno else path.name
        fail(f"{where}: the script does not parse: {exc.msg}")
    except ValueError as exc:  # NUL bytes
        fail(f"{path.name} is not a Python script: {exc}")


def _show(report, as_json: bool, lang: str, answer: bool, index: Path | None) -> None:
    if as_json:
        print(report.model_dump_json(indent=2))
        sys.stdout.flush()
        return
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    _print_table(report, err)
    if not answer:
        return
    try:
        from oomkb.api.core.assistant import load_assistant
        from oomkb.api.schemas import AskRequest

        response = load_assistant(index_dir=index).ask(AskRequest(question="", report=report, language=lang))
    except Exception as exc:  # the report is out; a missing index must not hide it
        err.print(f"[yellow]no answer from the assistant:[/] {escape(str(exc))}")
        return
    from rich.markdown import Markdown

    err.print(Markdown(response.answer))


def _print_table(report, console: Console) -> None:
    from oomkb.units import format_bytes

    error = report.error
    console.print(f"[bold red]out of memory[/] ({error.category}, backend {report.backend})"
                  + (f" at {escape(report.raised_at)}" if report.raised_at else ""))
    per_device = ", ".join(
        f"{d.id} {format_bytes(d.live_bytes)}"
        + (f" of {format_bytes(d.in_use_bytes)} in use" if d.in_use_bytes is not None else "")
        + (f", limit {format_bytes(d.limit_bytes)}" if d.limit_bytes is not None else "")
        for d in report.devices
    )
    console.print(f"live arrays at the error: {report.live_array_count}, "
                  f"{format_bytes(report.live_bytes_total)}" + (f" ({per_device})" if per_device else ""))
    table = Table(show_edge=False)
    for column in ("bytes", "count", "dtype", "shape"):
        table.add_column(column, no_wrap=True, justify="right" if column in ("bytes", "count") else "left")
    table.add_column("created at", overflow="fold")
    table.add_column("held by", overflow="fold")
    for group in report.live_buffers[:10]:
        table.add_row(format_bytes(group.bytes), str(group.count), group.dtype, group.shape,
                      escape(group.source or "unknown"),
                      escape("; ".join(h.describe() for h in group.held_by[:2]) or "-"))
    console.print(table)
    if report.pprof:
        console.print(f"device memory pprof: {escape(report.pprof)}  (open with: pprof -http=: {escape(report.pprof)})")
    if report.report_path:
        console.print(f"report: {escape(report.report_path)}")


__all__ = ["register"]
