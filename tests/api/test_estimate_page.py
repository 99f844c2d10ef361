"""The web page's estimate: POST /v1/estimate with `timeline` gives the page the memory timeline,
and the page draws it (a program estimated from the page, and a saved report opened from disk) in
headless Chromium under the page's Content-Security-Policy, fetching nothing from elsewhere."""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from oomkb.api.http.app import PAGE_CSP, STATIC_DIR, create_app
from oomkb.settings import Settings

PROGRAMS = Path(__file__).parents[1] / "programs"
SOURCE = (PROGRAMS / "choose_programs.py").read_text()
LOCAL = "http://127.0.0.1"

slow = pytest.mark.slow  # real compiles and a browser: `make test-quick` skips them


def test_the_page_draws_with_the_same_role_colours_as_the_timeline_page():
    from oomkb.diagnostics.timeline_html import ROLE_COLOURS

    script = (STATIC_DIR / "timeline.js").read_text()
    block = re.search(r"const ROLE_COLOURS = \{(.*?)\};", script, re.S).group(1)
    assert dict(re.findall(r'(\w+): "(#[0-9a-f]{6})"', block)) == ROLE_COLOURS


def test_the_page_loads_the_timeline_scripts_from_this_server_only():
    from fastapi.testclient import TestClient

    client = TestClient(create_app(Settings()), base_url=LOCAL)  # no lifespan: nothing loads
    page = client.get("/")
    assert page.headers["content-security-policy"] == PAGE_CSP
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    assert "/static/timeline.js" in scripts and "/static/estimate.js" in scripts
    assert all(s.startswith("/static/") for s in scripts)
    for name in ("timeline.js", "estimate.js"):
        served = client.get(f"/static/{name}")
        assert served.status_code == 200 and served.headers["content-security-policy"] == PAGE_CSP
        assert "innerHTML" not in served.text and "style=" not in served.text


@pytest.fixture(scope="module")
def reference():
    """Our own in-process estimate of the same program, with its timeline."""
    pytest.importorskip("libtpu")
    from oomkb.diagnostics.estimate import estimate_factory

    sys.path.insert(0, str(PROGRAMS))
    import choose_programs

    report = estimate_factory(choose_programs.scaled, target="v5e", timeline=True)
    assert report.timeline is not None and report.timeline.buffers
    return report


def _settings() -> Settings:
    from oomkb.diagnostics.isolation import isolation_status

    sandbox = "bwrap" if isolation_status().available else "none"
    return Settings(enable_estimate=True, estimate_timeout_s=120, estimate_sandbox=sandbox)


@slow
def test_post_estimate_with_timeline_gives_the_page_the_compiled_live_ranges(searcher, reference):
    from fastapi.testclient import TestClient

    from oomkb.api.core.assistant import Assistant

    with TestClient(create_app(_settings(), Assistant(searcher)), base_url=LOCAL) as client:
        r = client.post("/v1/estimate", json={"source": SOURCE, "factory": "scaled", "timeline": True})
        assert r.status_code == 200, r.text
        timeline = r.json()["timeline"]
        ours = reference.timeline
        assert (timeline["peak_bytes"], timeline["peak_step"], timeline["steps"]) == (
            ours.peak_bytes, ours.peak_step, ours.steps)
        assert [b["bytes"] for b in timeline["buffers"]] == [b.bytes for b in ours.buffers]
        plain = client.post("/v1/estimate", json={"source": SOURCE, "factory": "scaled"})
        assert plain.status_code == 200 and plain.json()["timeline"] is None
        schema = client.get("/openapi.json").json()["components"]["schemas"]["EstimateRequest"]
        assert schema["properties"]["timeline"]["default"] is False


# --- in Chromium -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def estimate_server(searcher):
    import uvicorn

    from oomkb.api.core.assistant import Assistant

    app = create_app(_settings(), Assistant(searcher))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def estimate_page(estimate_server, tmp_path_factory):
    from tests.api.test_web_browser import DevTools, Page, chromium_path

    browser = DevTools(chromium_path(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        tab = Page(browser)
        tab.send("Network.enable")
        tab.send("Page.navigate", {"url": estimate_server + "/"})
        tab.wait_for("document.body && document.body.dataset.estimateReady === 'true'", timeout=30)
        # every Content-Security-Policy violation from here on is kept
        tab.evaluate("window.violations = []; document.addEventListener('securitypolicyviolation',"
                     " e => window.violations.push(e.violatedDirective + ' ' + e.blockedURI)); true")
        yield tab
    finally:
        browser.close()


def _requests(page) -> list[str]:
    with page.browser._cond:
        return [e["params"]["request"]["url"] for e in page.browser.events
                if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == page.session]


def _drawn(page) -> dict:
    return page.evaluate(
        "(() => { const f = document.querySelector('#timeline figure.timeline');"
        " if (!f) return null; const rects = [...f.querySelectorAll('rect.buffer')];"
        " return {peak: f.querySelector('text.peak').textContent,"
        " bytes: rects.map(r => Number(r.dataset.bytes)),"
        " outlined: rects.map(r => r.getAttribute('stroke') !== 'none'),"
        " atPeak: rects.map(r => r.dataset.atPeak === 'true'),"
        " tips: rects.map(r => r.querySelector('title').textContent),"
        " summary: document.getElementById('estimate-summary').innerText}; })()")


def _check_drawing(page, reference) -> dict:
    ours = reference.timeline
    drawn = _drawn(page)
    peak = page.evaluate(f"window.oomkb.formatBytes({ours.peak_bytes})")
    assert drawn["peak"] == f"peak {peak} (step {ours.peak_step})"
    shown = ours.buffers[:120]
    assert drawn["bytes"] == [b.bytes for b in shown]
    assert drawn["atPeak"] == [b.start <= ours.peak_step <= b.end for b in shown] == drawn["outlined"]
    for tip, b in zip(drawn["tips"], shown):
        assert f"steps {b.start}-{b.end}" in tip and b.shape in tip and (b.role or "unknown") in tip
    return drawn


@slow
def test_an_estimate_run_from_the_page_draws_its_timeline_under_the_pages_policy(
        estimate_page, estimate_server, reference):
    page = estimate_page
    page.evaluate("document.getElementById('estimate-panel').open = true")
    page.type_into("#estimate-source", SOURCE)
    page.evaluate("document.getElementById('estimate-factory').value = 'scaled'")
    page.evaluate("document.getElementById('estimate-button').click()")
    page.wait_for("document.getElementById('estimate-result').dataset.state === 'timeline'"
                  " || !document.getElementById('estimate-error').hidden", timeout=180)
    assert page.evaluate("document.getElementById('estimate-error').hidden"), \
        page.evaluate("document.getElementById('estimate-error').textContent")
    drawn = _check_drawing(page, reference)
    assert "_scale on v5e:2x2" in drawn["summary"] and "timeline peak" in drawn["summary"]
    assert page.evaluate("window.violations") == []
    assert page.exceptions() == []
    urls = _requests(page)
    assert f"{estimate_server}/v1/estimate" in urls
    assert all(u.startswith(estimate_server + "/") for u in urls), urls


@slow
def test_a_saved_report_opened_from_disk_is_drawn_without_a_request(estimate_page, reference, tmp_path):
    page = estimate_page
    saved = tmp_path / "estimate.json"
    saved.write_text(reference.model_dump_json(), encoding="utf-8")
    page.evaluate("document.getElementById('timeline').replaceChildren(); true")
    before = len(_requests(page))
    root = page.send("DOM.getDocument")["root"]["nodeId"]
    node = page.send("DOM.querySelector", {"nodeId": root, "selector": "#estimate-file"})["nodeId"]
    page.send("DOM.setFileInputFiles", {"files": [str(saved)], "nodeId": node})
    page.wait_for("!!document.querySelector('#timeline figure.timeline')", timeout=30)
    _check_drawing(page, reference)
    assert len(_requests(page)) == before  # read in the page, sent nowhere
    # a file that is not an estimate report is refused in words, not drawn
    (tmp_path / "other.json").write_text(json.dumps({"kind": "plan"}), encoding="utf-8")
    page.send("DOM.setFileInputFiles", {"files": [str(tmp_path / "other.json")], "nodeId": node})
    message = page.wait_for("!document.getElementById('estimate-error').hidden"
                            " && document.getElementById('estimate-error').textContent", timeout=30)
    assert "other.json: this is not an `oomkb estimate --json` report" == message
    assert page.evaluate("window.violations") == [] and page.exceptions() == []
