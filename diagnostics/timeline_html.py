"""The memory timeline as one self-contained HTML page: inline SVG and CSS, no script, nothing
fetched from a network (opened from disk, it works offline). Hovering a bar or the curve shows the
buffer's size, live range, role, op and shape (SVG ``<title>``)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from oomkb.diagnostics.timeline import Timeline
from oomkb.units import format_bytes

__all__ = ["ROLE_COLOURS", "timeline_html", "write_timeline_html"]

#: One colour per role, shared with the PNG.
ROLE_COLOURS = {"parameter": "#4c72b0", "optimizer_state": "#8172b2", "gradient": "#c44e52",
                "activation": "#dd8452", "temporary": "#937860", "output": "#55a868", "unknown": "#8c8c8c"}

WIDTH, CURVE_H, BAR_H, MAX_BARS, LEFT = 1000, 220, 14, 120, 70


def timeline_html(timeline: Timeline, title: str) -> str:
    """The page (a string of HTML)."""
    steps = max(timeline.steps, 1)
    plot_w = WIDTH - LEFT - 20

    def x(step: float) -> float:
        return LEFT + plot_w * step / steps

    peak = max(timeline.peak_bytes, 1)
    per = timeline.steps_per_point
    points = " ".join(f"{x(i * per):.1f},{CURVE_H - 20 - (CURVE_H - 40) * v / peak:.1f}"
                      for i, v in enumerate(timeline.usage))
    curve = [f'<svg width="{WIDTH}" height="{CURVE_H}" role="img" aria-label="HBM in use over program order">',
             f'<polyline fill="none" stroke="#333" stroke-width="1.5" points="{points}"/>',
             f'<line x1="{x(timeline.peak_step):.1f}" x2="{x(timeline.peak_step):.1f}" y1="10" '
             f'y2="{CURVE_H - 20}" stroke="#c44e52" stroke-dasharray="4 3"><title>peak: '
             f'{escape(format_bytes(timeline.peak_bytes))} at step {timeline.peak_step}</title></line>',
             f'<text x="{x(timeline.peak_step) + 4:.1f}" y="20" fill="#c44e52">peak '
             f'{escape(format_bytes(timeline.peak_bytes))} (step {timeline.peak_step})</text>',
             f'<text x="4" y="24">{escape(format_bytes(timeline.peak_bytes))}</text>',
             f'<text x="4" y="{CURVE_H - 20}">0</text>',
             f'<text x="{LEFT}" y="{CURVE_H - 4}">step 0</text>',
             f'<text x="{WIDTH - 80}" y="{CURVE_H - 4}">step {timeline.steps}</text></svg>']
    shown = timeline.buffers[:MAX_BARS]
    biggest = max((b.bytes for b in shown), default=1)
    rows = []
    for i, b in enumerate(shown):
        y = 10 + i * (BAR_H + 2)
        height = max(3.0, BAR_H * (b.bytes / biggest) ** 0.5)
        at_peak = b.start <= timeline.peak_step <= b.end
        tip = (f"{format_bytes(b.bytes)} {b.role or 'unknown'}, steps {b.start}-{b.end}"
               f"{' (live at the peak)' if at_peak else ''}\n{b.op_name or b.name}\n{b.shape}")
        rows.append(
            f'<rect x="{x(b.start):.1f}" y="{y + (BAR_H - height) / 2:.1f}" '
            f'width="{max(x(b.end + 1) - x(b.start), 1.5):.1f}" height="{height:.1f}" '
            f'fill="{ROLE_COLOURS.get(b.role or "unknown", "#8c8c8c")}" '
            f'stroke="{"#000" if at_peak else "none"}"><title>{escape(tip)}</title></rect>'
            f'<text x="4" y="{y + BAR_H - 3}" class="s">{escape(format_bytes(b.bytes))}</text>')
    bars_h = 20 + len(shown) * (BAR_H + 2)
    bars = [f'<svg width="{WIDTH}" height="{bars_h}" role="img" aria-label="buffers over program order">',
            f'<line x1="{x(timeline.peak_step):.1f}" x2="{x(timeline.peak_step):.1f}" y1="0" y2="{bars_h}" '
            'stroke="#c44e52" stroke-dasharray="4 3"/>', *rows, "</svg>"]
    legend = " ".join(f'<span><i style="background:{c}"></i>{escape(r.replace("_", " "))}</span>'
                      for r, c in ROLE_COLOURS.items())
    left_out = (f"<p>{len(timeline.buffers) - len(shown) + timeline.buffers_left_out} smaller buffers "
                "are not drawn; the curve counts every buffer.</p>"
                if len(timeline.buffers) > len(shown) or timeline.buffers_left_out else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{escape(title)}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 20px; color: #222; }}
svg text {{ font: 11px system-ui, sans-serif; }} svg text.s {{ fill: #555; }}
.legend span {{ margin-right: 14px; }} .legend i {{ display: inline-block; width: 12px; height: 12px;
  margin-right: 4px; vertical-align: -1px; }}
</style></head><body>
<h1>{escape(title)}</h1>
<p>HBM in use per device over the compiled program's order (steps of its instruction sequence), from
XLA's buffer assignment and live ranges of a deviceless compile. Peak: <b>{escape(format_bytes(timeline.peak_bytes))}</b>
at step {timeline.peak_step} of {timeline.steps}.</p>
{''.join(curve)}
<h2>The largest buffers: lifetime as width, size as height (outlined: live at the peak)</h2>
<p class="legend">{legend}</p>
{''.join(bars)}
{left_out}
</body></html>
"""


def write_timeline_html(timeline: Timeline, path: str | Path, title: str) -> Path:
    path = Path(path)
    path.write_text(timeline_html(timeline, title), "utf-8")
    return path
