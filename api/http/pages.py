"""Readable pages: the guides (`/guides`, `/guides/{doc_id}`) and, for operators, `/gaps`."""

from __future__ import annotations

import base64
import binascii
import hmac
import html
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from oomkb.api.core.site import page_html, reader_language, render_guide, render_index
from oomkb.errors import UserInputError

#: The same policy as the web page: only this server's own scripts, styles and requests.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = {"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


class UnknownGuide(UserInputError):
    http_status = 404


def _guides_and_cards(request: Request):
    from oomkb.indexer.guides import load_guides
    from oomkb.kb.cards import load_cards

    settings = request.app.state.settings
    return load_guides(settings.docs_dir), load_cards()


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)


@router.get("/guides")
def guides_index(request: Request, lang: Annotated[str | None, Query(max_length=35)] = None,
                 accept_language: Annotated[str | None, Header()] = None) -> HTMLResponse:
    guides, _ = _guides_and_cards(request)
    return _html(render_index(guides, reader_language(lang, accept_language)))


@router.get("/guides/{doc_id}")
def guide_page(doc_id: str, request: Request, lang: Annotated[str | None, Query(max_length=35)] = None,
               accept_language: Annotated[str | None, Header()] = None) -> HTMLResponse:
    guides, cards = _guides_and_cards(request)
    guide = next((g for g in guides if g.doc_id == doc_id), None)
    if guide is None:
        known = ", ".join(g.doc_id for g in guides)
        raise UnknownGuide(f"no guide {doc_id[:80]!r}; the guides are: {known}")
    return _html(render_guide(guide, cards, reader_language(lang, accept_language)))


def _token_matches(authorization: str | None, token: str) -> bool:
    """`Bearer TOKEN`, or HTTP Basic with TOKEN as the password (what a browser prompt sends)."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    given = ""
    if scheme.lower() == "bearer":
        given = value.strip()
    elif scheme.lower() == "basic":
        try:
            given = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return False
    return bool(given) and hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


@router.get("/gaps", response_model=None)
def gaps_page(request: Request, since: Annotated[float | None, Query(gt=0, le=3650)] = None,
              authorization: Annotated[str | None, Header()] = None) -> HTMLResponse | JSONResponse:
    """Coverage gaps for operators: off unless OOMKB_ADMIN_TOKEN is set, then behind it."""
    from oomkb.api.core.gaps import group_questions, searcher_functions

    settings = request.app.state.settings
    token = settings.admin_token.get_secret_value() if settings.admin_token else ""
    if not token:
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    if not _token_matches(authorization, token):
        return JSONResponse({"detail": "the gaps report needs the operator's token: Authorization: "
                             "Bearer <OOMKB_ADMIN_TOKEN>, or a browser's login prompt with the token "
                             "as the password"}, status_code=401,
                            headers={"WWW-Authenticate": 'Basic realm="oomkb operators", charset="UTF-8"'})
    store = request.app.state.feedback_store
    searcher = request.app.state.holder.require().searcher
    embed, nearest = searcher_functions(searcher)
    report = group_questions(store.unhelpful_or_unanswered(since), embed, nearest, since_days=since,
                             store=store)
    items = []
    for g in report.groups:
        examples = "".join(f'<li dir="auto">{html.escape(e)}</li>' for e in g.examples)
        near = html.escape(g.nearest_section or "—")
        items.append(f"<li><strong>{g.size}</strong> · {html.escape(', '.join(g.languages))} · "
                     f"nearest <code>{near}</code><ul>{examples}</ul></li>")
    body = (f"<main><h1>Coverage gaps</h1><p class=\"meta\">{report.questions} questions answered "
            f"<code>grounded: false</code> or marked unhelpful"
            f"{f' in the last {since:g} days' if since else ''}, grouped by meaning.</p>"
            f"<ol class=\"gaps\">{''.join(items)}</ol></main>")
    return _html(page_html("coverage gaps", body, reader="en", root="/", static=False, csp=None))
