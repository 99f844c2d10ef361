"""The guides as readable pages: one HTML page per guide, an index, and a static export.

A guide page renders the guide's Markdown from ``docs_src`` (code blocks, tables, lists; raw HTML
in the source is shown as text, never interpreted) in the guide's own language and direction
(Arabic right-to-left). Every section keeps its stable anchor (``id``) and carries, beside it, the
section's knowledge card in the *reader's* language, so a Hindi reader of the Chinese guide knows
what each section says. Pages load only this server's own stylesheet and script.

The same functions write the static site of ``oomkb export-site`` (relative links, a small
client-side search over the cards and sections, no server needed).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from markdown_it import MarkdownIt

from oomkb.layout import floor_dir
from oomkb.errors import UserInputError
from oomkb.indexer.guides import Guide, Section
from oomkb.kb.cards import SectionCard
from oomkb.kb.language import FALLBACK, LANGUAGES, base_language, is_supported, language_name

STATIC_DIR = floor_dir("api") / "http" / "static"
RTL_LANGUAGES = frozenset({"ar", "he", "fa", "ur"})
SITE_ASSETS = ("guide.css", "site-search.js")

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_ANCHOR_SUFFIX = re.compile(r"\s*\{#[A-Za-z0-9_-]+\}\s*$")


def direction(language: str) -> str:
    return "rtl" if base_language(language) in RTL_LANGUAGES else "ltr"


def reader_language(query_lang: str | None, accept_language: str | None) -> str:
    """The reader's language: `?lang=` if supported, else the best of `Accept-Language`, else English."""
    if query_lang and is_supported(base_language(query_lang)):
        return base_language(query_lang)
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate((accept_language or "")[:1000].split(",")[:30]):
        code, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        if code and code != "*" and q > 0:
            ranked.append((-q, position, base_language(code)))
    for _, _, code in sorted(ranked):
        if is_supported(code):
            return code
    return FALLBACK


def guide_url(doc_id: str, section: str | None = None, *, base: str = "", static: bool = False) -> str:
    """Where a guide (and a section of it) is read: `/guides/{doc_id}#{section}` on the server,
    `guides/{doc_id}.html#{section}` in an exported site; `base` makes it absolute."""
    path = f"guides/{doc_id}.html" if static else f"/guides/{doc_id}"
    url = f"{base.rstrip('/')}{path}" if base else path
    return f"{url}#{section}" if section else url


def render_markdown(text: str) -> str:
    """Markdown to HTML with raw HTML escaped (the guides are data, never markup to trust)."""
    return _md.render(text)


def render_inline(text: str) -> str:
    return _md.renderInline(text)


def _card_html(card: SectionCard | None, reader: str) -> str:
    if card is None:
        return ""
    text = card.text(reader)
    if text is None:
        return ""
    lang = reader if reader in card.texts else FALLBACK
    actions = "".join(f"<li>{render_inline(a)}</li>" for a in text.actions)
    return (
        f'<aside class="card" lang="{lang}" dir="{direction(lang)}">'
        f"<h3>{render_inline(text.title)}</h3><p>{render_inline(text.summary)}</p>"
        + (f"<ol>{actions}</ol>" if actions else "")
        + "</aside>"
    )


def _section_html(guide: Guide, section: Section, card: SectionCard | None, reader: str) -> str:
    level = min(max(section.level, 1) + 1, 6)
    title = html.escape(_ANCHOR_SUFFIX.sub("", section.title))
    gdir = direction(guide.language)
    heading = "" if section.level <= 1 else (  # the top section's title is the page's <h1>
        f'<h{level}>{title} <a class="anchor" href="#{html.escape(section.id)}" '
        f'aria-label="link to this section">#</a></h{level}>')
    return (
        f'<section class="guide-section" id="{html.escape(section.id)}">'
        f'<div class="guide-text" lang="{html.escape(guide.language)}" dir="{gdir}">{heading}'
        f"{render_markdown(section.text)}</div>"
        f"{_card_html(card, reader)}</section>"
    )


def _language_links(reader: str, *, static: bool, doc_id: str | None) -> str:
    if static:
        return ""
    links = []
    for code in LANGUAGES:
        here = ' aria-current="true"' if code == reader else ""
        links.append(f'<a href="?lang={code}" lang="{code}"{here}>{html.escape(language_name(code, code))}</a>')
    return f'<nav class="languages" aria-label="card language">{" · ".join(links)}</nav>'


def page_html(title: str, body: str, *, reader: str, root: str, static: bool, csp: str | None) -> str:
    meta_csp = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">' if csp else ""
    home = f'{root}index.html' if static else "/"
    guides = f"{root}index.html#guides" if static else "/guides"
    return (
        "<!doctype html>\n"
        f'<html lang="{reader}" dir="{direction(reader)}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta_csp}<title>{html.escape(title)} — oomkb</title>"
        f'<link rel="stylesheet" href="{root}static/guide.css"></head><body>'
        f'<header class="site"><a href="{home}">oomkb</a> · <a href="{guides}">guides</a></header>'
        f"{body}</body></html>\n"
    )


def render_guide(guide: Guide, cards: Iterable[SectionCard], reader: str, *, static: bool = False,
                 csp: str | None = None) -> str:
    """The HTML page of one guide with each section's card in `reader`'s language."""
    by_section = {c.section: c for c in cards if c.doc_id == guide.doc_id}
    gdir = direction(guide.language)
    sections = "".join(_section_html(guide, s, by_section.get(s.id), reader) for s in guide.sections)
    heading = (
        f'<h1 lang="{html.escape(guide.language)}" dir="{gdir}">{html.escape(guide.title)}</h1>'
        f'<p class="meta">{html.escape(guide.title_en)} · {html.escape(language_name(guide.language, reader))}'
        f" · <code>{html.escape(guide.doc_id)}</code></p>"
    )
    body = (f"<main><article class=\"guide\">{heading}"
            f"{_language_links(reader, static=static, doc_id=guide.doc_id)}{sections}</article></main>")
    root = "../" if static else "/"
    return page_html(guide.title_en or guide.title, body, reader=reader, root=root, static=static, csp=csp)


def render_index(guides: Sequence[Guide], reader: str, *, static: bool = False, csp: str | None = None) -> str:
    """The list of guides (and, in an exported site, the search box)."""
    items = []
    for g in guides:
        url = guide_url(g.doc_id, static=static)
        items.append(
            f'<li><a href="{url}" lang="{html.escape(g.language)}" dir="{direction(g.language)}">{html.escape(g.title)}</a>'
            f' <span class="meta">{html.escape(g.title_en)} · {html.escape(language_name(g.language, reader))}'
            f"</span></li>"
        )
    search = ""
    if static:
        search = ('<section class="search"><label for="site-search">Search</label>'
                  '<input id="site-search" type="search" dir="auto" autocomplete="off">'
                  '<ol id="site-results"></ol></section>'
                  '<script src="search-data.js"></script><script src="static/site-search.js"></script>')
    body = (f'<main><h1>oomkb guides</h1>{_language_links(reader, static=static, doc_id=None)}{search}'
            f'<ul id="guides" class="guides">{"".join(items)}</ul></main>')
    root = "" if static else "/"
    return page_html("guides", body, reader=reader, root=root, static=static, csp=csp)


def search_records(guides: Sequence[Guide], cards: Sequence[SectionCard]) -> list[dict]:
    """What the exported site's client-side search looks through: every section and every card text."""
    records = []
    for g in guides:
        for s in g.sections:
            records.append({"u": guide_url(g.doc_id, s.id, static=True), "t": _ANCHOR_SUFFIX.sub("", s.title),
                            "l": g.language, "x": s.text[:1500]})
    for c in cards:
        for lang, text in c.texts.items():
            records.append({"u": guide_url(c.doc_id, c.section, static=True), "t": text.title, "l": lang,
                            "x": " ".join([text.summary, *text.actions, *text.keywords, *c.terms])})
    return records


#: The exported pages carry their policy in a meta tag: scripts and styles from the site itself only.
EXPORT_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; base-uri 'none'"


def export_site(target: Path, guides: Sequence[Guide], cards: Sequence[SectionCard],
                reader: str = FALLBACK) -> list[Path]:
    """Write the static site into `target` (created; existing oomkb files replaced). Returns the pages.

    Each file is written to a new temporary file beside it and renamed over the old one, so a link
    already in the folder is replaced, never followed (a link there overwrote a victim file, a
    dangling one created a file anywhere); a folder of the site that is a link is refused
    (ExportRefused)."""
    for folder in (target, target / "guides", target / "static"):
        if folder.is_symlink():
            raise ExportRefused(f"{folder} is a symbolic link; oomkb writes only into real folders")
        folder.mkdir(parents=True, exist_ok=True)
    for name in SITE_ASSETS:
        _write(target / "static" / name, (STATIC_DIR / name).read_bytes())
    pages = [target / "index.html"]
    _write(pages[0], render_index(guides, reader, static=True, csp=EXPORT_CSP))
    data = json.dumps(search_records(guides, cards), ensure_ascii=False).replace("</", "<\\/")
    _write(target / "search-data.js", f"window.OOMKB_SEARCH = {data};\n")
    for g in guides:
        page = target / "guides" / f"{g.doc_id}.html"
        _write(page, render_guide(g, cards, reader, static=True, csp=EXPORT_CSP))
        pages.append(page)
    return pages


class ExportRefused(UserInputError):
    """The export folder holds something oomkb will not write through (a symbolic link)."""


def _write(path: Path, content: str | bytes) -> None:
    """`content` into `path` by a new file (O_EXCL, no link followed) renamed over whatever is there."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


__all__ = ["EXPORT_CSP", "direction", "export_site", "guide_url", "page_html", "reader_language", "render_guide",
           "render_index", "render_markdown", "search_records"]
