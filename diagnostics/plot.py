"""Pictures of diagnostics evidence, sized to stay readable as a Slack thumbnail (PNG).

One function per picture. Figures are drawn on matplotlib's Agg canvas directly, so drawing never
touches pyplot's global state or needs a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from oomkb.units import format_bytes

if TYPE_CHECKING:
    from oomkb.diagnostics.estimate.report import EstimateReport

__all__ = ["KIND_COLOURS", "plot_estimate"]

#: One colour per buffer kind; padding is drawn hatched grey beside it.
KIND_COLOURS = {
    "argument": "#1f77b4",
    "output": "#2ca02c",
    "temp": "#ff7f0e",
    "other": "#9467bd",
}
PADDING_COLOUR = "#bdbdbd"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _buffer_label(shape: str, op_name: str | None, source: str | None) -> str:
    logical = shape.split("{", 1)[0]
    what = op_name.rsplit("/", 1)[-1] if op_name else ""
    where = Path(source).name if source else ""
    second = "  ".join(part for part in (what, where) if part)
    return _short(logical, 34) + ("\n" + _short(second, 40) if second else "")


_STEPS = sorted(m * 1024**k for k in range(6) for m in (1, 2, 5, 10, 20, 50, 100, 256, 512))


def _nice_step(maximum: float, ticks: int = 4) -> int:
    """A tick step in bytes that reads well in binary units (1, 2, 5, ..., 256, 512 KiB, 1 MiB...)."""
    raw = max(maximum / ticks, 1.0)
    return next((step for step in _STEPS if step >= raw), _STEPS[-1])


def _byte_ticks(ax, maximum: int) -> None:
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    limit = maximum * 1.08 if maximum > 0 else 1
    ax.set_xlim(0, limit)
    ax.xaxis.set_major_locator(MultipleLocator(_nice_step(limit)))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _: format_bytes(int(x)).replace(".00 ", " ") if x >= 0 else "")
    )


def plot_estimate(report: EstimateReport, path: str | Path, top_n: int = 8) -> Path:
    """Draw the biggest buffers at the HBM peak, stacked by kind with padding as its own segment.

    The title says whether the program fits and by how much; a footer gives the per-device
    totals. Returns the path of the PNG written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    path = Path(path)
    buffers = list(report.top_buffers[:top_n])
    rows = 1 + len(report.vmem.windows) if report.vmem is not None else max(len(buffers), 1)
    height = 2.5 + 0.55 * rows
    fig = Figure(figsize=(8.0, height), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    target = report.target
    name = _short(f"{report.function} on {target.topology} ({target.device_kind})", 70)
    if report.fits:
        verdict, colour = "fits", "#1b5e20"
        detail = (f"{format_bytes(report.total_bytes)} of {format_bytes(target.hbm_bytes)} HBM "
                  f"per device, {format_bytes(report.headroom_bytes)} free")
    elif report.vmem is not None:
        verdict, colour = "DOES NOT FIT IN VMEM", "#b71c1c"
        vmem = report.vmem
        bound = (f"the {format_bytes(vmem.limit_bytes or 0)} scoped limit"
                 if vmem.kind == "scoped_limit"
                 else f"the {format_bytes(vmem.capacity_bytes)} physical VMEM")
        detail = (f"kernel needs {format_bytes(vmem.used_bytes)} of VMEM, over {bound} by "
                  f"{format_bytes(vmem.over_by_bytes)} (core: {format_bytes(vmem.capacity_bytes)})")
    else:
        verdict, colour = "DOES NOT FIT", "#b71c1c"
        if report.oom_space not in (None, "hbm"):
            detail = f"the compile ran out of {report.oom_space.upper()}"
        elif report.headroom_bytes < 0:
            detail = (f"needs {format_bytes(report.total_bytes)} of "
                      f"{format_bytes(target.hbm_bytes)} HBM per device, over by "
                      f"{format_bytes(-report.headroom_bytes)}")
        else:
            detail = (f"the compile ran out of HBM ({format_bytes(report.total_bytes)} assigned "
                      f"of {format_bytes(target.hbm_bytes)} per device)")
    fig.text(0.01, 0.985, f"{name}: {verdict}", fontsize=12, color=colour, weight="bold",
             va="top")
    fig.text(0.01, 0.985 - 0.3 / fig.get_figheight(), detail, fontsize=10, color=colour,
             va="top")

    if report.vmem is not None:
        _vmem_windows(ax, report.vmem)
    elif buffers:
        labels = []
        kinds_seen: list[str] = []
        for row, buf in enumerate(buffers):
            kind = buf.kind if buf.kind in KIND_COLOURS else "other"
            if kind not in kinds_seen:
                kinds_seen.append(kind)
            ax.barh(row, buf.unpadded_bytes, color=KIND_COLOURS[kind], height=0.7)
            if buf.padding_bytes > 0:
                ax.barh(row, buf.padding_bytes, left=buf.unpadded_bytes, color=PADDING_COLOUR,
                        hatch="///", edgecolor="#757575", height=0.7, linewidth=0)
            ax.text(buf.bytes, row, " " + format_bytes(buf.bytes), va="center", fontsize=9)
            labels.append(_buffer_label(buf.shape, buf.op_name, buf.source))
        ax.set_yticks(range(len(buffers)), labels, fontsize=8.5)
        ax.invert_yaxis()
        _byte_ticks(ax, max(b.bytes for b in buffers) * 1.15)
        handles = [Patch(color=KIND_COLOURS[k], label=k) for k in kinds_seen]
        if any(b.padding_bytes for b in buffers):
            handles.append(Patch(facecolor=PADDING_COLOUR, hatch="///", edgecolor="#757575",
                                 label="padding"))
        ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(handles),
                  fontsize=9, frameon=False, borderaxespad=0.2)
        ax.set_xlabel("bytes per device (buffers live at the peak)", fontsize=9)
    else:
        parts = [("argument", report.argument_bytes), ("output", report.output_bytes),
                 ("temp", report.temp_bytes)]
        left = 0
        for kind, size in parts:
            ax.barh(0, size, left=left, color=KIND_COLOURS[kind], label=kind, height=0.6)
            left += size
        ax.set_yticks([0], ["total"], fontsize=9)
        _byte_ticks(ax, max(left, 1))
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=3, fontsize=9, frameon=False,
                  borderaxespad=0.2)
        ax.set_xlabel("bytes per device (no buffer list available)", fontsize=9)

    footer = (f"arguments {format_bytes(report.argument_bytes)} · outputs "
              f"{format_bytes(report.output_bytes)} · temp {format_bytes(report.temp_bytes)} · "
              f"padding {format_bytes(report.padding.waste_bytes)}")
    if report.donation.savings_bytes > 0:
        footer += f" · donation saves {format_bytes(report.donation.savings_bytes)}"
    fig.text(0.01, 0.01, footer, fontsize=8, color="#424242")
    ax.tick_params(axis="x", labelsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout(rect=(0, 0.25 / height, 1, 1 - 0.7 / height))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _vmem_windows(ax, vmem) -> None:
    """The kernel's VMEM need and its windows as bars, the bound it ran into as a dashed line."""
    rows = [("kernel total", vmem.used_bytes, KIND_COLOURS["temp"])]
    for w in vmem.windows:
        colour = KIND_COLOURS["argument" if w.operand.startswith("input") else "output"]
        rows.append((f"{w.operand}: {w.window_shape} x{w.buffers}", w.bytes, colour))
    for row, (_, size, colour) in enumerate(rows):
        ax.barh(row, size, color=colour, height=0.7)
        ax.text(size, row, " " + format_bytes(size), va="center", fontsize=9)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in rows], fontsize=8.5)
    ax.invert_yaxis()
    bound = vmem.limit_bytes if vmem.kind == "scoped_limit" else vmem.capacity_bytes
    ax.axvline(bound or 0, color="#b71c1c", linestyle="--", linewidth=1)
    _byte_ticks(ax, max(vmem.used_bytes, bound or 0) * 1.15)
    ax.set_xlabel("VMEM; dashed: the "
                  + ("scoped limit" if vmem.kind == "scoped_limit" else "physical VMEM"),
                  fontsize=9)


# ---------------------------------------------------------------------------------------------
# Live memory profile (diagnostics.profile)

if TYPE_CHECKING:
    from oomkb.diagnostics.profile import ProfileReport

__all__.append("plot_profile")

_PROFILE_BAR = "#1f77b4"
_PROFILE_BASELINE = "#bdbdbd"
_PROFILE_PEAK = "#d62728"
_PROFILE_CLEAN = "#1b5e20"


def plot_profile(report: ProfileReport, path: str | Path) -> Path:
    """Draw live array bytes per call of a profile as bars and write them to a PNG at ``path``.

    The baseline (before the first call) is grey, the peak bar red and labelled, the growth trend
    (least-squares line) dashed with its slope in a box, and the biggest leak suspect named under
    the title. Returns the path of the PNG written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    path = Path(path)
    live = list(report.live_bytes_per_call)
    calls = list(range(1, len(live) + 1))
    top = max([report.baseline_bytes, *live, 1])
    # Plot in one binary unit (KiB, MiB, ...) so that the ticks fall on round numbers of it.
    exponent = 0
    while exponent < 4 and top >= 1024 ** (exponent + 1):
        exponent += 1
    scale, unit = 1024**exponent, ("B", "KiB", "MiB", "GiB", "TiB")[exponent]

    fig = Figure(figsize=(8.0, 4.6), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar([0], [report.baseline_bytes / scale], color=_PROFILE_BASELINE, width=0.7)
    ax.bar(calls, [b / scale for b in live], width=0.7,
           color=[_PROFILE_PEAK if c == report.peak_call else _PROFILE_BAR for c in calls])
    ax.annotate(f"peak {format_bytes(report.peak_bytes)}", xy=(report.peak_call, report.peak_bytes / scale),
                xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                fontsize=10, weight="bold", color=_PROFILE_PEAK)

    growth = report.growth_bytes_per_call
    growth_colour = _PROFILE_PEAK if growth > 0 else _PROFILE_CLEAN
    if len(live) >= 2 and growth != 0:
        mean_x = sum(calls) / len(calls)
        mean_y = sum(live) / len(live)
        trend = [(mean_y + growth * (x - mean_x)) / scale for x in calls]
        ax.plot(calls, trend, linestyle="--",
                linewidth=1.6, color="#212121")
    sign = "+" if growth > 0 else ""
    ax.text(0.02, 0.97, f"growth {sign}{format_bytes(growth)} per call", transform=ax.transAxes,
            ha="left", va="top", fontsize=11, weight="bold", color=growth_colour,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": growth_colour})

    if report.target:
        file_part, _, func = report.target.rpartition(":")
        name = f"{Path(file_part).name}:{func}"
    else:
        name = "function"
    fig.suptitle(_short(f"Live memory of {name} on {report.backend}, {report.calls} calls", 80),
                 fontsize=12, weight="bold", x=0.02, ha="left")
    if report.leak_suspects:
        suspect = report.leak_suspects[0]
        where = ""
        if suspect.source:
            file_part, _, rest = suspect.source.partition(":")
            where = f" at {Path(file_part).name}:{rest}"
        more = f" (+{len(report.leak_suspects) - 1} more)" if len(report.leak_suspects) > 1 else ""
        subtitle = (f"leak suspect: {suspect.count} × {suspect.dtype}{suspect.shape} = "
                    f"{format_bytes(suspect.bytes)}{where}{more}")
        ax.set_title(_short(subtitle, 100), fontsize=9.5, color=_PROFILE_PEAK, loc="left")
    else:
        ax.set_title("no leak suspects", fontsize=9.5, color=_PROFILE_CLEAN, loc="left")

    if len(calls) <= 20:
        ax.set_xticks([0, *calls], ["before", *map(str, calls)], fontsize=9)
    else:  # too many calls to label each: let matplotlib pick whole numbers, 0 being "before"
        ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: "before" if x == 0 else f"{x:g}"))
        ax.tick_params(axis="x", labelsize=9)
    ax.set_xlabel("call", fontsize=9)
    ax.set_ylabel("bytes of live arrays after the call", fontsize=9)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 4, 5, 8, 10]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g} {unit}" if y >= 0 else ""))
    ax.set_ylim(0, top / scale * 1.22)
    ax.tick_params(axis="y", labelsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    footer = f"baseline {format_bytes(report.baseline_bytes)} · trace: {report.xprof_command}"
    if report.memory_stats_peak_bytes is not None:
        footer = f"device peak {format_bytes(report.memory_stats_peak_bytes)} · " + footer
    fig.text(0.01, 0.01, _short(footer, 120), fontsize=7.5, color="#424242")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


# ---------------------------------------------------------------------------------------------
# A plan (diagnostics.plan)

if TYPE_CHECKING:
    from oomkb.diagnostics.plan import PlanReport

__all__.append("plot_plan")


def plot_plan(report: PlanReport, path: str | Path) -> Path:
    """Draw a plan: with ``--vary``, bytes per device against the value, the HBM as a line and
    the largest value that fits marked; otherwise the baseline and each fix's measured total."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    path = Path(path)
    fig = Figure(figsize=(8.0, 4.5), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    hbm = report.target.hbm_bytes
    byte_axis = FuncFormatter(lambda y, _: format_bytes(int(y)).replace(".00 ", " ") if y >= 0 else "")
    vary = report.vary
    title = _short(f"{report.function} on {report.target.topology}", 60)
    searched = [row for row in report.choices if row.vary is not None]
    if searched:
        title += _plot_choices(ax, searched, hbm)
    elif vary is not None:
        compiled = [p for p in vary.curve if p.total_bytes is not None]
        for fits, colour, label in ((True, "#1b5e20", "fits"), (False, "#b71c1c", "does not fit")):
            points = [p for p in compiled if p.fits is fits]
            if points:
                ax.plot([p.value for p in points], [p.total_bytes for p in points], "o",
                        color=colour, label=label, markersize=4)
        if len(compiled) > 1:
            ax.plot([p.value for p in compiled], [p.total_bytes for p in compiled], "-",
                    color="#9e9e9e", linewidth=0.8, zorder=0)
        failed = [p for p in vary.curve if p.status == "oom"]
        if failed:
            ax.plot([p.value for p in failed], [hbm] * len(failed), "x", color="#b71c1c",
                    label="compile ran out of memory")
        ax.axhline(hbm, color="#b71c1c", linestyle="--", linewidth=1)
        ax.text(vary.low, hbm, f" HBM {format_bytes(hbm)}", va="bottom", fontsize=8, color="#b71c1c")
        if vary.largest_fitting is not None:
            ax.axvline(vary.largest_fitting, color="#1b5e20", linestyle=":", linewidth=1)
            title += f": largest {vary.name} that fits = {vary.largest_fitting}"
        else:
            title += f": no {vary.name} in [{vary.low}, {vary.high}] fits"
        ax.set_xlabel(f"{vary.name} ({vary.compiles} compiles)", fontsize=9)
        from matplotlib.ticker import MultipleLocator

        top = max([hbm] + [p.total_bytes for p in compiled]) * 1.1
        ax.set_ylim(0, top)
        ax.yaxis.set_major_locator(MultipleLocator(_nice_step(top)))
        ax.yaxis.set_major_formatter(byte_axis)
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    else:
        rows = [("baseline", report.baseline.total_bytes, report.baseline.fits)]
        rows += [(_short(f.title, 40), f.total_bytes, f.fits) for f in report.fixes
                 if f.total_bytes is not None]
        for row, (_, size, fits) in enumerate(rows):
            ax.barh(row, size, color="#1b5e20" if fits else "#b71c1c", height=0.6)
            ax.text(size, row, " " + format_bytes(size), va="center", fontsize=8)
        ax.set_yticks(range(len(rows)), [label for label, _, _ in rows], fontsize=8)
        ax.invert_yaxis()
        ax.axvline(hbm, color="#b71c1c", linestyle="--", linewidth=1)
        ax.xaxis.set_major_formatter(byte_axis)
        ax.set_xlim(0, max([hbm] + [size for _, size, _ in rows]) * 1.2)
        ax.set_xlabel(f"bytes per device (dashed: HBM {format_bytes(hbm)})", fontsize=9)
    ax.set_title(title, fontsize=10, loc="left")
    ax.tick_params(labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


#: One colour per --choose value (cycled), each a curve of bytes against the varied value.
CHOICE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                  "#bcbd22")


def _plot_choices(ax, rows, hbm: int) -> str:
    """--choose with --vary: one curve per choice (bytes per device against the varied value),
    its largest fitting value marked with a filled dot on the curve; returns the title's tail."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    name = rows[0].vary.name
    top = hbm
    for n, row in enumerate(rows):
        colour = CHOICE_COLOURS[n % len(CHOICE_COLOURS)]
        compiled = [p for p in row.vary.curve if p.total_bytes is not None]
        largest = "none fits" if row.at_value is None else f"largest {row.at_value}"
        label = _short(f"{row.name}={row.value}: {largest} ({row.vary.compiles} compiles)", 60)
        if compiled:
            ax.plot([p.value for p in compiled], [p.total_bytes for p in compiled], "-o",
                    color=colour, markersize=3, linewidth=1, label=label)
            top = max(top, *(p.total_bytes for p in compiled))
        else:
            ax.plot([], [], "-o", color=colour, label=label)
        stated = [p for p in row.vary.curve if p.total_bytes is None and p.reported_bytes]
        if stated:  # out-of-memory compiles: the need their message states
            ax.plot([p.value for p in stated], [p.reported_bytes for p in stated], "x",
                    color=colour, markersize=5)
            top = max(top, *(p.reported_bytes for p in stated))
        if row.at_value is not None and row.total_bytes is not None:
            ax.plot([row.at_value], [row.total_bytes], "o", color=colour, markersize=8,
                    markeredgecolor="black")
            ax.axvline(row.at_value, color=colour, linestyle=":", linewidth=1)
    ax.axhline(hbm, color="#b71c1c", linestyle="--", linewidth=1)
    ax.text(rows[0].vary.low, hbm, f" HBM {format_bytes(hbm)}", va="bottom", fontsize=8,
            color="#b71c1c")
    top *= 1.1
    ax.set_ylim(0, top)
    ax.yaxis.set_major_locator(MultipleLocator(_nice_step(top)))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda y, _: format_bytes(int(y)).replace(".00 ", " ") if y >= 0 else ""))
    ax.set_xlabel(f"{name} (a dot per compile, x: out of memory at the need it states; "
                  "ringed: the largest that fits)", fontsize=9)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return f": largest {name} per {rows[0].name}"


def plot_timeline(report: EstimateReport, path: str | Path, bars: int = 40) -> Path:
    """HBM in use over program order (top) and the largest buffers' live ranges (bottom)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from oomkb.diagnostics.timeline_html import ROLE_COLOURS

    timeline = report.timeline
    if timeline is None:
        raise ValueError("the report has no timeline (estimate with --timeline)")
    fig = Figure(figsize=(10, 7), dpi=110)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    steps = [i * timeline.steps_per_point for i in range(len(timeline.usage))]
    top.step(steps, timeline.usage, where="post", color="#333")
    top.axvline(timeline.peak_step, color="#c44e52", linestyle="--")
    top.set_title(f"{report.function}: HBM in use per device, peak {format_bytes(timeline.peak_bytes)} "
                  f"at step {timeline.peak_step}")
    from matplotlib.ticker import FuncFormatter

    top.yaxis.set_major_formatter(FuncFormatter(lambda value, _: format_bytes(int(max(value, 0)))))
    top.set_ylim(0, max(timeline.usage or [1]) * 1.08)
    top.set_xlim(0, timeline.steps + 1)
    shown = timeline.buffers[:bars]
    for i, b in enumerate(shown):
        bottom.barh(i, b.end - b.start + 1, left=b.start, color=ROLE_COLOURS.get(b.role or "unknown"),
                    edgecolor="black" if b.start <= timeline.peak_step <= b.end else "none")
    bottom.set_yticks(range(len(shown)), [format_bytes(b.bytes) for b in shown], fontsize=7)
    bottom.invert_yaxis()
    bottom.axvline(timeline.peak_step, color="#c44e52", linestyle="--")
    bottom.set_xlabel("step of the compiled program")
    bottom.legend(handles=[Patch(color=c, label=r.replace("_", " ")) for r, c in ROLE_COLOURS.items()],
                  fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(str(path))
    return Path(path)
