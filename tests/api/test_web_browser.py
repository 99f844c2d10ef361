"""The web page in a real browser: headless Chromium drives the page served by a live uvicorn on
127.0.0.1, types a question, clicks Ask and reads the answer that appears.

Chromium is controlled over the DevTools protocol through a pipe (`--remote-debugging-pipe`: JSON
messages ending in NUL on file descriptors 3 and 4), so no websocket library is needed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from oomkb.api.http.app import create_app
from oomkb.settings import Settings

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-pipe",
]
ANSWER_TIMEOUT_S = 90


def chromium_path() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; CI must install it (apt-get install -y chromium)")
    pytest.skip("chromium is not installed (apt-get install -y chromium)")


class DevTools:
    """A Chromium process and a minimal DevTools-protocol client over its debugging pipe."""

    def __init__(self, binary: str, profile_dir: Path):
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # The browser expects the pipe on fds 3 (its input) and 4 (its output); park both ends
        # at 10 and above first so that the redirections cannot clobber one with the other
        # (bash, not sh: dash refuses fd numbers above 9).
        high_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        high_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)
        script = f'exec "$0" "$@" 3<&{high_in} 4>&{high_out} {high_in}<&- {high_out}>&-'
        self.proc = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", "-c", script, binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}",
             "about:blank"],
            pass_fds=(high_in, high_out), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        os.close(high_in)
        os.close(high_out)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_tail = b""
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while True:
            data = self._in.read(65536)
            if not data:
                break
            buffer += data
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._cond:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr_tail = (self._stderr_tail + line)[-4000:]

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict:
        with self._cond:
            self._next_id += 1
            msg_id = self._next_id
        message = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError(f"no reply to {method} from chromium; stderr: "
                                         f"{self._stderr_tail.decode(errors='replace')}")
                self._cond.wait(min(left, 0.5))
            reply = self._replies.pop(msg_id)
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply.get("result", {})

    def close(self) -> None:
        try:
            self._out.close()
        except OSError:
            pass
        try:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Page:
    """One browser tab attached with a flat session."""

    def __init__(self, browser: DevTools):
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Runtime.enable")
        self.send("Page.enable")

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, session=self.session)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = ANSWER_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except AssertionError as e:  # asked while a click's navigation replaces the page: ask again
                if "navigated or closed" not in str(e) and "context was destroyed" not in str(e):
                    raise
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {expression}")

    def exceptions(self) -> list[dict]:
        with self.browser._cond:
            return [e for e in self.browser.events if e.get("method") == "Runtime.exceptionThrown"
                    and e.get("sessionId") == self.session]

    def type_into(self, selector: str, text: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})


@pytest.fixture(scope="module")
def server_url(searcher):
    from oomkb.api.core.assistant import Assistant

    app = create_app(Settings(), Assistant(searcher))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = chromium_path()
    devtools = DevTools(binary, tmp_path_factory.mktemp("chromium-profile"))
    try:
        devtools.send("Browser.getVersion")
        yield devtools
    finally:
        devtools.close()


@pytest.fixture
def page(browser, server_url):
    tab = Page(browser)
    tab.send("Page.navigate", {"url": server_url + "/"})
    tab.wait_for("document.body && document.body.dataset.ready === 'true'", timeout=30)
    return tab


def test_question_typed_in_russian_gets_an_answer_in_russian_citing_a_guide(page):
    page.type_into("#question", "Как отследить время жизни тензоров и найти утечку памяти на TPU?")
    page.evaluate("document.getElementById('ask-button').click()")
    answer = page.wait_for("!document.getElementById('result').hidden && document.getElementById('answer').innerText")
    cyrillic = sum("\u0400" <= ch <= "\u04ff" for ch in answer)
    assert cyrillic > 40, answer
    assert page.evaluate("document.getElementById('answer').dataset.language") == "ru"
    sources = page.evaluate("[...document.querySelectorAll('#sources-list li')].map(li => li.dataset.docId)")
    assert "tensor-lifetime-leaks" in sources
    assert page.evaluate("document.querySelectorAll('#answer blockquote').length") > 0
    assert page.exceptions() == []


def test_arabic_answer_is_laid_out_right_to_left(page):
    page.type_into("#question", "كيف أستخدم عارض الذاكرة في XProf لتصحيح أخطاء نفاد الذاكرة؟")
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("!document.getElementById('result').hidden && document.getElementById('answer').innerText")
    assert page.evaluate("document.getElementById('answer').dataset.language") == "ar"
    directions = page.evaluate("[...document.querySelectorAll('#answer p, #answer li')]"
                               ".map(e => getComputedStyle(e).direction)")
    assert directions.count("rtl") >= len(directions) / 2, directions


def test_pasted_error_log_shows_the_diagnosis_with_its_numbers(page):
    page.type_into("#question", "What should I do?")
    page.type_into("#error-log", "Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. "
                                 "Exceeded hbm capacity by 17.34G.")
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("!document.getElementById('diagnosis').hidden")
    assert page.evaluate("document.getElementById('diagnosis-category').textContent") == "compile_hbm_oom"
    figures = page.evaluate("document.getElementById('diagnosis-figures').innerText")
    assert "17.34 GiB" in figures
    assert "17.34 GiB" in page.evaluate("document.getElementById('answer').innerText")


def test_answer_markdown_is_rendered_as_elements_and_markup_in_it_stays_text(page):
    markdown = ("### Steps\n\n1. Use **donate_argnums** and `jax.jit`\n2. <img src=x onerror=alert(1)>\n\n"
                "> quote with <script>bad()</script>\n\n- item _one_")
    rendered = page.evaluate(
        "(() => { const d = document.createElement('div');"
        f" d.append(window.oomkb.renderMarkdown({json.dumps(markdown)}));"
        " return {html: d.innerHTML, text: d.textContent,"
        " bad: d.querySelectorAll('img, script').length,"
        " tags: [...d.querySelectorAll('*')].map(e => e.tagName.toLowerCase())}; })()"
    )
    assert rendered["bad"] == 0
    assert "<img src=x onerror=alert(1)>" in rendered["text"]
    assert "&lt;script&gt;" in rendered["html"]
    assert {"h4", "ol", "li", "strong", "code", "blockquote", "ul", "em"} <= set(rendered["tags"])


def test_search_button_lists_guide_sections(page):
    page.type_into("#question", "vmem_limit_bytes Pallas kernel")
    page.evaluate("document.getElementById('search-button').click()")
    page.wait_for("!document.getElementById('search-results').hidden")
    docs = page.evaluate("[...document.querySelectorAll('#search-list li')].map(li => li.dataset.docId)")
    assert docs and docs[0] == "scoped-vmem-oom"


def test_a_translated_quote_comes_first_and_the_guides_own_wording_is_collapsed(page):
    markdown = ("- **Guía › Sección** (`doc#section`, es)\n\n> traducción del pasaje\n\n"
                "↳ _Texto original de la guía (chino)_ (`doc#section`, zh)\n\n> 原文的段落\n")
    rendered = page.evaluate(
        "(() => { const d = document.createElement('div');"
        f" d.append(window.oomkb.renderMarkdown({json.dumps(markdown)}));"
        " const q = d.querySelectorAll('blockquote'); const det = d.querySelector('details');"
        " return {quotes: [...q].map(b => [b.lang, b.textContent, !!b.closest('details')]),"
        " open: det && det.open, summary: det && det.querySelector('summary').textContent}; })()"
    )
    assert rendered["quotes"] == [["es", "traducción del pasaje", False], ["zh", "原文的段落", True]]
    assert rendered["open"] is False and rendered["summary"].startswith("Texto original de la guía")


def test_a_spanish_reader_gets_spanish_quotes_with_the_originals_collapsed(page):
    page.type_into("#question", "¿Cómo reduzco la memoria HBM de mi modelo JAX en TPU cuando la "
                                "compilación falla por falta de memoria?")
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("!document.getElementById('result').hidden && document.getElementById('answer').innerText")
    assert page.evaluate("document.getElementById('answer').dataset.language") == "es"
    outside = page.evaluate("[...document.querySelectorAll('#answer blockquote')]"
                            ".filter(b => !b.closest('details')).map(b => b.lang)")
    collapsed = page.evaluate("[...document.querySelectorAll('#answer details blockquote')].map(b => b.lang)")
    assert collapsed and "es" not in collapsed and all(lang in ("es", "") for lang in outside)
    assert page.evaluate("[...document.querySelectorAll('#answer details')].every(d => !d.open)")
    assert page.exceptions() == []
