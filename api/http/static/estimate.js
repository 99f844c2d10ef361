// The page's estimate: a program sent to POST /v1/estimate (when the operator enabled it), or a
// saved `oomkb estimate --json` report opened from disk (read in the page, sent nowhere); either
// is shown as its verdict, its peak by role and its memory timeline (timeline.js).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const fb = (n) => window.oomkb.formatBytes(n);

  function line(text) {
    const p = document.createElement("p");
    p.textContent = text;
    return p;
  }

  // The report's figures and, when it has one, its timeline.
  function showEstimate(report) {
    const summary = $("estimate-summary");
    const drawing = $("timeline");
    summary.replaceChildren();
    drawing.replaceChildren();
    if (!report || typeof report !== "object" || !report.target || typeof report.total_bytes !== "number") {
      throw new Error("this is not an `oomkb estimate --json` report");
    }
    const t = report.target;
    summary.append(line(`${report.function} on ${t.topology} (${t.device_kind}): ` +
      (report.fits ? "fits" : "does not fit") +
      `: ${fb(report.total_bytes)} of ${fb(t.hbm_bytes)} HBM per device`));
    const roles = Object.entries(report.peak_by_role || {}).filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1]);
    if (roles.length) {
      summary.append(line("at the peak: " + roles.map(([r, v]) => `${fb(v)} ${r.replace(/_/g, " ")}`).join(", ")));
    }
    const timeline = report.timeline;
    $("estimate-result").dataset.state = timeline ? "timeline" : "no-timeline";
    if (!timeline) {
      summary.append(line("This report has no timeline: estimate with `oomkb estimate FILE.py:FACTORY " +
                          "--json --timeline page.html` (or from this page)."));
    } else {
      // The two figures count differently: the live ranges' sum at the worst step, and the
      // compiler's total, which sizes the temp allocation as a whole.
      summary.append(line(`timeline peak (live buffers at the worst step): ${fb(timeline.peak_bytes)}; ` +
                          `total (memory_analysis, the temp allocation whole): ${fb(report.total_bytes)}`));
      drawing.append(window.oomkbTimeline.render(timeline, fb));
    }
    $("estimate-result").hidden = false;
  }

  function fail(message) {
    const box = $("estimate-error");
    box.textContent = message || "";
    box.hidden = !message;
  }

  async function estimate(event) {
    event.preventDefault();
    fail("");
    const source = $("estimate-source").value;
    if (!source.trim()) {
      fail("Paste a program whose factory returns (fn, args).");
      return;
    }
    const body = { source, factory: $("estimate-factory").value.trim() || "make",
                   tpu: $("estimate-tpu").value, timeline: true };
    $("estimate-button").disabled = true;
    $("estimate-status").textContent = "Compiling for " + body.tpu + "…";
    try {
      const response = await fetch("/v1/estimate", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
      });
      let data = null;
      try { data = await response.json(); } catch (_) { /* not JSON */ }
      if (!response.ok) {
        throw new Error(data && typeof data.detail === "string" ? data.detail : response.status + " " + response.statusText);
      }
      showEstimate(data);
    } catch (err) {
      fail(err.message);
    } finally {
      $("estimate-button").disabled = false;
      $("estimate-status").textContent = "";
    }
  }

  function openReport() {
    fail("");
    const file = $("estimate-file").files[0];
    if (!file) return;
    const reader = new FileReader();
    reader.onload = () => {
      try {
        showEstimate(JSON.parse(String(reader.result)));
      } catch (err) {
        fail(`${file.name}: ${err.message}`);
      }
    };
    reader.onerror = () => fail(`${file.name}: could not be read`);
    reader.readAsText(file);
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("estimate-form").addEventListener("submit", estimate);
    $("estimate-file").addEventListener("change", openReport);
    document.body.dataset.estimateReady = "true";
  });

  window.oomkbEstimate = { showEstimate };
})();
