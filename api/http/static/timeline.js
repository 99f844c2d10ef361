// The memory timeline of an estimate (`report.timeline`) as inline SVG, built with DOM calls:
// HBM in use over the compiled program's order with the peak marked, then the largest buffers as
// bars (lifetime as width, size as height, colour by role, outlined when live at the peak).
// Hovering shows each buffer's size, steps, role, op and shape (SVG <title>). The same drawing
// as `oomkb estimate --timeline FILE.html` (diagnostics/timeline_html.py); colours and sizes are
// attributes, never inline styles, so the page's Content-Security-Policy holds.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  // The same colours as diagnostics/timeline_html.py ROLE_COLOURS (a test keeps them equal).
  const ROLE_COLOURS = {
    parameter: "#4c72b0", optimizer_state: "#8172b2", gradient: "#c44e52",
    activation: "#dd8452", temporary: "#937860", output: "#55a868", unknown: "#8c8c8c",
  };
  const WIDTH = 1000, CURVE_H = 220, BAR_H = 14, MAX_BARS = 120, LEFT = 70;

  function node(tag, attrs, children) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    for (const child of children || []) {
      n.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return n;
  }

  function tip(text) {
    return node("title", {}, [text]);
  }

  function svg(height, label, children) {
    return node("svg", { viewBox: `0 0 ${WIDTH} ${height}`, width: "100%", role: "img",
                         "aria-label": label, preserveAspectRatio: "xMinYMin meet" }, children);
  }

  // The figure for `timeline` (the estimate report's `timeline` object); `formatBytes` shows sizes.
  function render(timeline, formatBytes) {
    const steps = Math.max(timeline.steps, 1);
    const plotW = WIDTH - LEFT - 20;
    const x = (step) => LEFT + plotW * step / steps;
    const peak = Math.max(timeline.peak_bytes, 1);
    const per = timeline.steps_per_point;
    const points = timeline.usage.map((v, i) =>
      `${x(i * per).toFixed(1)},${(CURVE_H - 20 - (CURVE_H - 40) * v / peak).toFixed(1)}`).join(" ");
    const peakX = x(timeline.peak_step).toFixed(1);
    const peakText = `peak ${formatBytes(timeline.peak_bytes)} (step ${timeline.peak_step})`;
    const curve = svg(CURVE_H, "HBM in use over program order", [
      node("polyline", { fill: "none", stroke: "#333", "stroke-width": 1.5, points, class: "usage" }),
      node("line", { x1: peakX, x2: peakX, y1: 10, y2: CURVE_H - 20, stroke: "#c44e52",
                     "stroke-dasharray": "4 3" },
           [tip(`peak: ${formatBytes(timeline.peak_bytes)} at step ${timeline.peak_step}`)]),
      node("text", { x: (x(timeline.peak_step) + 4).toFixed(1), y: 20, fill: "#c44e52", class: "peak" },
           [peakText]),
      node("text", { x: 4, y: 24 }, [formatBytes(timeline.peak_bytes)]),
      node("text", { x: 4, y: CURVE_H - 20 }, ["0"]),
      node("text", { x: LEFT, y: CURVE_H - 4 }, ["step 0"]),
      node("text", { x: WIDTH - 80, y: CURVE_H - 4 }, [`step ${timeline.steps}`]),
    ]);

    const shown = timeline.buffers.slice(0, MAX_BARS);
    const biggest = Math.max(1, ...shown.map((b) => b.bytes));
    const barsH = 20 + shown.length * (BAR_H + 2);
    const bars = svg(barsH, "buffers over program order", [
      node("line", { x1: peakX, x2: peakX, y1: 0, y2: barsH, stroke: "#c44e52", "stroke-dasharray": "4 3" }),
    ]);
    shown.forEach((b, i) => {
      const y = 10 + i * (BAR_H + 2);
      const height = Math.max(3, BAR_H * Math.sqrt(b.bytes / biggest));
      const atPeak = b.start <= timeline.peak_step && timeline.peak_step <= b.end;
      const role = b.role || "unknown";
      const text = `${formatBytes(b.bytes)} ${role}, steps ${b.start}-${b.end}` +
        (atPeak ? " (live at the peak)" : "") + `\n${b.op_name || b.name}\n${b.shape}`;
      bars.append(
        node("rect", { x: x(b.start).toFixed(1), y: (y + (BAR_H - height) / 2).toFixed(1),
                       width: Math.max(x(b.end + 1) - x(b.start), 1.5).toFixed(1),
                       height: height.toFixed(1), fill: ROLE_COLOURS[role] || ROLE_COLOURS.unknown,
                       stroke: atPeak ? "#000" : "none", class: "buffer", "data-bytes": b.bytes,
                       "data-role": role, "data-at-peak": String(atPeak) }, [tip(text)]),
        node("text", { x: 4, y: y + BAR_H - 3, class: "size" }, [formatBytes(b.bytes)]),
      );
    });

    const legend = svg(22, "roles", []);
    Object.entries(ROLE_COLOURS).forEach(([role, colour], i) => {
      const left = 4 + i * 135;
      legend.append(node("rect", { x: left, y: 5, width: 12, height: 12, fill: colour }),
                    node("text", { x: left + 16, y: 15 }, [role.replace(/_/g, " ")]));
    });

    const figure = document.createElement("figure");
    figure.className = "timeline";
    const left = timeline.buffers.length - shown.length + (timeline.buffers_left_out || 0);
    const caption = document.createElement("figcaption");
    caption.textContent = `HBM in use per device over the compiled program's order: peak ` +
      `${formatBytes(timeline.peak_bytes)} at step ${timeline.peak_step} of ${timeline.steps}. ` +
      `The largest buffers: lifetime as width, size as height (outlined: live at the peak)` +
      (left > 0 ? `; ${left} smaller buffers are not drawn, the curve counts every buffer.` : ".");
    figure.append(curve, legend, bars, caption);
    return figure;
  }

  window.oomkbTimeline = { render, ROLE_COLOURS };
})();
