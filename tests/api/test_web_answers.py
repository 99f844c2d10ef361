"""The web page reads top-down and shows each guide quote once: diagnosis, what to do with the
snippets, the next oomkb command, then the sources with their quotes; the panel of cited guides
below repeats no quote. Headless Chromium against the live app, as in test_web_browser."""

from __future__ import annotations

import pytest

from tests.api.test_web_browser import browser, page, server_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow

VMEM_LOG = ('Ran out of memory in memory space vmem while allocating on stack for %k = bf16[2048,4096]'
            '{1,0} custom-call(%a), custom_call_target="tpu_custom_call". Scoped allocation with '
            "size 34.00M and limit 16.00M exceeded scoped vmem limit by 18.00M.")

ORDER = """(() => {
  const answer = document.getElementById('answer');
  const all = [...answer.querySelectorAll('*')];
  const at = (pred) => all.findIndex(pred);
  const heading = (text) => at(e => /^H[3-6]$/.test(e.tagName) && e.textContent.includes(text));
  return {
    diagnosis: at(e => e.tagName === 'STRONG' && e.textContent.startsWith('Diagnosis')),
    what_to_do: heading('What to do'),
    snippet: at(e => e.tagName === 'PRE' && e.textContent.includes('vmem_limit_bytes=')),
    next_step: at(e => e.tagName === 'PRE' && e.textContent.startsWith('oomkb ')),
    sources: heading('Sources'),
    quote: at(e => e.tagName === 'BLOCKQUOTE'),
    panel_before_answer: !!(document.getElementById('diagnosis').compareDocumentPosition(answer)
                            & Node.DOCUMENT_POSITION_FOLLOWING),
  };
})()"""


def _ask(page, question: str, log: str = "") -> None:
    page.type_into("#question", question)
    if log:
        page.type_into("#error-log", log)
    page.evaluate("document.getElementById('ask-button').click()")
    page.wait_for("!document.getElementById('result').hidden && document.getElementById('answer').innerText")


def test_answer_reads_top_down_diagnosis_steps_with_snippets_next_command_sources(page):
    _ask(page, "What should I do?", VMEM_LOG)
    order = page.evaluate(ORDER)
    assert order["panel_before_answer"]
    positions = [order[k] for k in ("diagnosis", "what_to_do", "snippet", "next_step", "sources", "quote")]
    assert min(positions) >= 0, order
    assert positions == sorted(positions), order
    assert "oomkb plan" in page.evaluate(
        "[...document.querySelectorAll('#answer pre')].map(p => p.textContent).join('\\n')")
    assert page.exceptions() == []


def test_each_quote_appears_once_on_the_page(page):
    _ask(page, "Как отследить время жизни тензоров и найти утечку памяти на TPU?")
    quotes = page.evaluate("[...document.querySelectorAll('blockquote')].map(q => q.textContent.trim())")
    assert quotes and len(quotes) == len(set(quotes)), quotes
    assert page.evaluate("document.querySelectorAll('#sources-list blockquote').length") == 0
    cited = page.evaluate("[...document.querySelectorAll('#sources-list li')].map(li => li.dataset.docId)")
    assert "tensor-lifetime-leaks" in cited
    # each quote carries its language (for fonts, screen readers, direction): a guide's own wording
    # its guide's, a passage shown in the reader's language first (issue 21 item 8) the reader's
    langs = page.evaluate("[...document.querySelectorAll('#answer blockquote')].map(q => q.lang)")
    cited_langs = page.evaluate("[...document.querySelectorAll('#sources-list .cite')]"
                                ".map(c => /\\((\\w+)\\)$/.exec(c.textContent)[1])")
    assert set(cited_langs) <= set(langs) <= set(cited_langs) | {"ru"}, (langs, cited_langs)


def test_a_figure_question_shows_the_figure_first(page):
    _ask(page, "How much HBM does one TPU v6e chip have?")
    first = page.evaluate("document.querySelector('#answer > *').textContent")
    assert first.startswith("v6e:") and "31.25 GiB" in first, first
