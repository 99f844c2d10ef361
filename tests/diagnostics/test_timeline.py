"""The memory timeline of a deviceless compile: live ranges over program order, its peak against
the Memory Viewer's, the self-contained page in Chromium, the PNG."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real compiles, a browser: `make test-quick` skips it

PROGRAMS = Path(__file__).parents[1] / "programs" / "roles_programs.py"
sys.path.insert(0, str(PROGRAMS.parent))

import roles_programs as rp  # noqa: E402


@pytest.fixture(scope="module")
def scan_report():
    pytest.importorskip("libtpu")
    from oomkb.diagnostics.estimate import estimate_factory

    return estimate_factory(rp.scan_grad, target="v5e", timeline=True)


def test_the_timeline_holds_the_compiled_buffers_and_peaks_where_the_viewer_does(scan_report):
    t = scan_report.timeline
    assert t is not None and t.steps > 10
    stacked = rp.SCAN_LAYERS * rp.SCAN_B * rp.SCAN_D * 4          # the scan's f32 residuals
    assert t.buffers[0].bytes == stacked and t.buffers[0].role == "activation"
    assert t.buffers[0].start <= t.peak_step <= t.buffers[0].end  # and they are live at the peak
    weights = [b for b in t.buffers if b.role == "parameter"]
    assert [b.bytes for b in weights] == [rp.SCAN_LAYERS * rp.SCAN_D * rp.SCAN_D * 4]
    assert (weights[0].start, weights[0].end) == (0, t.steps)      # an argument lives throughout
    assert max(t.usage) == t.peak_bytes
    # the heap simulator (the Memory Viewer's peak) and the live ranges agree but for the few
    # small tuple and constant buffers whose lifetimes each counts its own way
    assert abs(t.peak_bytes - scan_report.peak_heap_bytes) <= 4096


def test_no_timeline_unless_asked(tmp_path):
    pytest.importorskip("libtpu")
    from oomkb.diagnostics.estimate import estimate_factory

    assert estimate_factory(rp.scan_grad_remat, target="v5e").timeline is None


def test_the_cli_writes_a_self_contained_page_that_chromium_renders_offline(tmp_path):
    page = tmp_path / "timeline.html"
    done = subprocess.run([sys.executable, "-m", "oomkb", "estimate", f"{PROGRAMS}:scan_grad", "--tpu", "v5e",
                           "--timeline", str(page)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "default-src 'none'" in html                      # the page may fetch nothing
    assert not re.search(r"\b(src|href)=|url\(|https?://", html)
    assert html.count("<rect") >= 7 and "activation" in html
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert "<svg" in dom.stdout and "HBM over program order" in dom.stdout


def test_the_cli_draws_a_png_and_refuses_other_names(tmp_path):
    picture = tmp_path / "timeline.png"
    done = subprocess.run([sys.executable, "-m", "oomkb", "estimate", f"{PROGRAMS}:scan_grad", "--tpu", "v5e",
                           "--timeline", str(picture), "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert picture.read_bytes()[:4] == b"\x89PNG"
    assert json.loads(done.stdout)["timeline"]["peak_bytes"] > 0
    bad = subprocess.run([sys.executable, "-m", "oomkb", "estimate", f"{PROGRAMS}:scan_grad", "--tpu", "v5e",
                          "--timeline", str(tmp_path / "t.svg")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--timeline writes an .html page or a .png picture" in bad.stderr
