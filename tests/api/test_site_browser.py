"""Guide pages, the exported site and the feedback buttons in headless Chromium."""

from __future__ import annotations

import sqlite3
import socket
import threading
import time

import pytest
import uvicorn

from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from oomkb.api.core.site import export_site
from oomkb.indexer.guides import load_guides
from oomkb.kb.cards import load_cards
from tests.api.test_web_browser import DevTools, Page, chromium_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    devtools = DevTools(chromium_path(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        devtools.send("Browser.getVersion")
        yield devtools
    finally:
        devtools.close()


@pytest.fixture(scope="module")
def live(searcher, tmp_path_factory):
    from oomkb.api.core.assistant import Assistant

    db = tmp_path_factory.mktemp("db") / "oomkb.sqlite"
    app = create_app(Settings(db=db), Assistant(searcher))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", db
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def test_the_exported_site_opens_from_disk_and_its_search_finds_a_section(browser, tmp_path):
    export_site(tmp_path / "site", load_guides(), load_cards(), reader="ru")
    page = Page(browser)
    page.send("Page.navigate", {"url": (tmp_path / "site" / "index.html").as_uri()})
    page.wait_for("document.readyState === 'complete' && window.OOMKB_SEARCH && window.OOMKB_SEARCH.length > 0", 30)
    page.type_into("#site-search", "vmem_limit_bytes")
    links = page.wait_for("[...document.querySelectorAll('#site-results a')].map(a => a.getAttribute('href'))", 30)
    assert any(link.startswith("guides/scoped-vmem-oom.html#") for link in links), links
    page.evaluate("document.querySelector('#site-results a').click()")
    page.wait_for("location.pathname.endsWith('scoped-vmem-oom.html') && document.readyState === 'complete'", 30)
    assert page.evaluate("getComputedStyle(document.querySelector('aside.card')).borderInlineStartWidth") == "3px"
    assert page.exceptions() == []


def test_a_citation_link_opens_the_guide_at_its_section_with_the_card_beside_it(browser, live):
    url, _ = live
    page = Page(browser)
    page.send("Page.navigate", {"url": url + "/"})
    page.wait_for("document.body && document.body.dataset.ready === 'true'", 30)
    page.type_into("#question", "How do I raise vmem_limit_bytes for one Pallas kernel?")
    page.evaluate("document.getElementById('ask-button').click()")
    href = page.wait_for("(document.querySelector('#sources-list a') || {}).href", 90)
    assert "/guides/" in href and "#" in href
    page.send("Page.navigate", {"url": href})
    section = href.split("#", 1)[1]
    page.wait_for(f"document.readyState === 'complete' && !!document.getElementById({section!r})", 30)
    assert page.evaluate(f"!!document.getElementById({section!r}).querySelector('aside.card')")
    assert page.exceptions() == []


def test_thumbs_down_with_a_comment_is_stored_for_the_answer_shown(browser, live):
    url, db = live
    page = Page(browser)
    page.send("Page.navigate", {"url": url + "/"})
    page.wait_for("document.body && document.body.dataset.ready === 'true'", 30)
    page.type_into("#question", "Как отследить время жизни тензоров и найти утечку памяти на TPU?")
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("!document.getElementById('feedback').hidden", 90)
    page.type_into("#feedback-comment", "<script>x()</script> не хватает примера")
    page.evaluate("document.getElementById('feedback-down').click()")
    assert page.wait_for("document.getElementById('feedback').dataset.sent", 30) == "down"
    rows = sqlite3.connect(db).execute("SELECT helpful, comment FROM feedback").fetchall()
    assert (0, "<script>x()</script> не хватает примера") in rows
    assert page.exceptions() == []
