"""`oomkb estimate FILE.py:FACTORY --tpu GEN`: per-device TPU HBM needs, without a TPU."""

from __future__ import annotations

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

ESTIMATE_HELP = (
    "Estimate the TPU HBM that FILE.py:FACTORY needs, per device, with the real XLA:TPU compiler "
    "and no TPU.\n\n"
    "FACTORY returns (fn, args) or (fn, args, kwargs); args may be arrays or "
    "jax.ShapeDtypeStruct (use specs for big inputs: nothing is allocated). A factory with a "
    "`mesh` parameter gets a 1-D jax.sharding.Mesh over the target's devices (axis 'data'); one "
    "with `devices` gets the device list. Otherwise everything is placed on one device.\n\n"
    "The program runs in a child process with a timeout. The report lists argument, output, "
    "temp and code bytes, the biggest buffers at the peak (with padding and source lines), the "
    "arguments that could be donated (--donation-check measures the saving), host callbacks and "
    "replicated arguments; a program that does not fit still gets its report, with the "
    "compiler's error and the memory space (HBM or VMEM) that ran out."
)


def register(app: typer.Typer) -> None:
    """Add the `estimate` command to `app`."""
    app.command("estimate", help=ESTIMATE_HELP)(estimate_command)


def estimate_command(
    program: ProgramArgument,
    tpu: TpuOption = None,
    topology: TopologyOption = None,
    as_json: JsonOption = False,
    plot: Annotated[
        Optional[Path], typer.Option("--plot", help="also draw the buffers at the peak to this PNG")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds before the program is stopped")
    ] = 300.0,
    python: PythonOption = None,
    path: PathOption = None,
    isolate: IsolateOption = False,
    donation_check: Annotated[
        bool, typer.Option("--donation-check/--no-donation-check",
                           help="measure the saving of donating arguments with a second compile "
                                "(off by default: `oomkb plan` measures it with the other fixes)")
    ] = False,
    top: Annotated[int, typer.Option("--top", help="buffers to list")] = 10,
    timeline: Annotated[
        Optional[Path], typer.Option("--timeline", help="write every HBM buffer's live range over program "
                                     "order to this page (.html, self-contained) or picture (.png)")
    ] = None,
) -> None:
    """Compile FILE.py:FACTORY for a TPU in a child process and report its HBM needs."""
    from oomkb.diagnostics.estimate import estimate_program

    if timeout <= 0:
        fail(f"--timeout must be positive, got {timeout:g}", EXIT_USAGE)
    if top < 1:
        fail(f"--top must be at least 1, got {top}", EXIT_USAGE)
    check_png_path(plot)
    if timeline is not None and timeline.suffix.lower() not in (".html", ".htm", ".png"):
        fail(f"--timeline writes an .html page or a .png picture, not {timeline.name}", EXIT_USAGE)
    tpu = target_generation(tpu, topology)
    if not as_json:
        Console(stderr=True).print(f"compiling {escape(program)} for {escape(tpu)} ...")
    with user_errors():
        report = estimate_program(
            program, target=tpu, topology=topology, timeout_s=timeout,
            donation_check=donation_check, top_n=top, isolate=isolate, timeline=timeline is not None,
            python=python, paths=import_paths(path),
        )
    if plot is not None:
        from oomkb.diagnostics.plot import plot_estimate

        draw_or_fail(plot_estimate, report, plot)
    if timeline is not None:
        _write_timeline(report, timeline)
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    _print_report(report, plot)


def _write_timeline(report, path: Path) -> None:
    if report.timeline is None:
        fail("the compiler wrote no live ranges for this program, so there is no timeline "
             f"({'; '.join(report.warnings) or 'no reason given'})", 1)
    if path.suffix.lower() == ".png":
        from oomkb.diagnostics.plot import plot_timeline

        draw_or_fail(plot_timeline, report, path)
        return
    from oomkb.diagnostics.timeline_html import write_timeline_html

    title = f"{report.function} on {report.target.topology}: HBM over program order"
    draw_or_fail(lambda r, p: write_timeline_html(r.timeline, p, title), report, path)


def verdict_lines(report) -> list[str]:
    """The fits / does-not-fit lines (rich markup), naming the memory space that ran out."""
    from oomkb.diagnostics.estimate.vmem import vmem_summary
    from oomkb.units import format_bytes as fb

    target = report.target
    hbm = f"{fb(report.total_bytes)} of {fb(target.hbm_bytes)} HBM per device"
    basis = getattr(report, "verdict_basis", "total_bytes")
    if report.fits and basis == "peak_heap_bytes":
        return [f"[green bold]fits[/]: peak heap {fb(report.peak_heap_bytes)} of {fb(target.hbm_bytes)} HBM "
                f"per device, {fb(report.headroom_bytes)} free (decided by the peak heap: the compiler "
                f"accepted it; the total, {fb(report.total_bytes)}, counts buffers never live together)"]
    if report.fits:
        return [f"[green bold]fits[/]: {hbm}, {fb(report.headroom_bytes)} free (decided by the total)"]
    if report.vmem is not None:
        vmem = report.vmem
        what = ("over the scoped VMEM limit" if vmem.kind == "scoped_limit"
                else "over the physical VMEM")
        lines = [f"[red bold]does not fit in VMEM[/] ({what}): {escape(vmem_summary(vmem))}"]
        for window in vmem.windows:
            lines.append(f"  {escape(window.operand)} window {escape(window.window_shape)} x "
                         f"{window.buffers} buffers: {fb(window.bytes)}")
        lines.append(f"HBM (not the problem): {hbm}")
        return lines
    if report.oom_space not in (None, "hbm"):
        return [f"[red bold]does not fit[/]: the compile ran out of "
                f"{escape(report.oom_space.upper())}; HBM: {hbm}"]
    if report.headroom_bytes < 0:
        return [f"[red bold]does not fit[/]: needs {hbm} (over by {fb(-report.headroom_bytes)})"]
    return [f"[red bold]does not fit[/]: the compile ran out of HBM; the buffers it had "
            f"assigned add up to {hbm}"]


def _where(source: str | None) -> str:
    """``file.py:12`` (the base name is enough on a terminal)."""
    if not source:
        return ""
    path, sep, line = source.rpartition(":")
    return f"{Path(path).name}{sep}{line}" if sep else source


def _print_report(report, plot: Path | None) -> None:
    from oomkb.units import format_bytes as fb

    out = Console(soft_wrap=True)
    target = report.target
    out.print(
        f"[bold]{escape(report.function)}[/] on [bold]{target.topology}[/] ({target.device_kind}, "
        f"{target.devices_used} of {target.devices} devices, libtpu {target.libtpu_version})"
    )
    for line in verdict_lines(report):
        out.print(line)
    out.print(
        f"arguments {fb(report.argument_bytes)} + outputs {fb(report.output_bytes)} + temp "
        f"{fb(report.temp_bytes)} + code {fb(report.generated_code_bytes)} - aliased "
        f"{fb(report.alias_bytes)} = {fb(report.total_bytes)}  (compiled in "
        f"{report.compile_seconds:.1f} s)"
    )
    if report.peak_by_role:
        from oomkb.diagnostics.roles import role_sentence

        sentence = role_sentence(report.peak_by_role, fb)
        if sentence:
            out.print(escape(sentence))
    if report.compile_error is not None:
        out.print(f"[red]compiler:[/] {escape(report.compile_error_text or '')[:500]}")

    if report.top_buffers:
        padded = any(buf.padding_bytes for buf in report.top_buffers)
        table = Table(title="biggest buffers at the peak", show_edge=False, title_justify="left")
        table.add_column("size", justify="right", no_wrap=True)
        if padded:
            table.add_column("padding", justify="right", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("shape (TPU layout)", overflow="fold", min_width=20)
        table.add_column("op", overflow="fold")
        table.add_column("source", overflow="fold")
        for buf in report.top_buffers:
            op = (buf.op_name or buf.op or "").rsplit("/", 1)[-1]  # full JAX name in --json
            cells = [fb(buf.bytes)]
            if padded:
                cells.append(fb(buf.padding_bytes) if buf.padding_bytes else "")
            cells += [buf.kind, escape(buf.shape), escape(op), escape(_where(buf.source))]
            table.add_row(*cells)
        out.print(table)

    donation = report.donation
    if donation.checked and donation.savings_bytes > 0:
        out.print(f"[yellow]donation[/] saves {fb(donation.savings_bytes)} "
                  f"({fb(donation.total_without_donation_bytes or 0)} -> "
                  f"{fb(donation.total_with_donation_bytes or 0)}): {escape(donation.suggestion or '')}")
    elif donation.checked:
        out.print("donation: nothing to gain")
    elif donation.candidates:
        out.print(f"donation candidates (not measured): "
                  f"{escape(', '.join(c.argument for c in donation.candidates))}; "
                  "measure with --donation-check or `oomkb plan`")
    if donation.already_donated:
        out.print(f"already donated: {escape(', '.join(donation.already_donated))}")
    for callback in report.host_callbacks:
        out.print(f"[yellow]host callback[/] {escape(callback.kind)} at "
                  f"{escape(_where(callback.source) or '?')}")
    for arg in report.replicated_arguments:
        out.print(f"[yellow]replicated[/] {escape(arg.path)} {escape(arg.shape)}: "
                  f"{fb(arg.bytes)} on each of {arg.devices} devices")
    if report.padding.waste_bytes:
        out.print(f"padding at the peak: {fb(report.padding.waste_bytes)} "
                  f"({100 * report.padding.waste_bytes / max(report.total_bytes, 1):.1f}% of the total)")
    for warning in report.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")
    if plot is not None:
        out.print(f"plot: {escape(str(plot))}")
