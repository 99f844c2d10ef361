"""Reading the source guides: Markdown with YAML front matter and `{#anchor}` section ids."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, Field

from oomkb.indexer.errors import GuideError

_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_ANCHOR = re.compile(r"\s*\{#([A-Za-z0-9][A-Za-z0-9_-]*)\}\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
INTRO_SECTION = "intro"


class Section(BaseModel):
    """One heading of a guide and the text under it (up to the next heading of any level)."""

    id: str = Field(description="stable ASCII anchor, cited as doc_id#id")
    title: str
    level: int = Field(description="1 for the text under the guide title, 2 for ##, ...")
    path: list[str] = Field(description="titles from the guide's top section down to this one")
    text: str = Field(description="the section's body without its heading line")
    start_char: int = Field(description="offset of the body in the guide file's text")
    end_char: int


#: What a guide's `doc_id` and `language` may be (checked when a guide is read).
DOC_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?")
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}")


class Guide(BaseModel):
    """A source guide as written: front matter, raw Markdown and its sections in order."""

    doc_id: str
    title: str
    title_en: str = ""
    language: str
    source: str = ""
    categories: list[str] = []
    path: str
    text: str
    sections: list[Section]

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.id == section_id), None)


def default_docs_dir() -> Path:
    """The guides shipped inside the package (`docs_src/*.md`)."""
    return Path(str(resources.files("oomkb.docs_src")))


def load_guides(docs_dir: Path | None = None) -> list[Guide]:
    """Parse every `*.md` guide in `docs_dir` (default: the built-in guides), sorted by doc_id."""
    root = Path(docs_dir) if docs_dir is not None else default_docs_dir()
    if not root.is_dir():
        raise GuideError(f"guides folder not found: {root}")
    files = sorted(p for p in root.glob("*.md") if p.is_file())
    if not files:
        raise GuideError(f"no Markdown guides (*.md) in {root}")
    guides = [parse_guide(p) for p in files]
    seen: dict[str, str] = {}
    for g in guides:
        if g.doc_id in seen:
            raise GuideError(f"doc_id {g.doc_id!r} appears in both {seen[g.doc_id]} and {g.path}")
        seen[g.doc_id] = g.path
    return sorted(guides, key=lambda g: g.doc_id)


def parse_guide(path: Path) -> Guide:
    """Parse one guide file; a missing front matter field or anchor is a GuideError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GuideError(f"cannot read guide {path}: {exc}") from exc
    text = text.replace("\r\n", "\n")
    m = _FRONT_MATTER.match(text)
    if not m:
        raise GuideError(f"{path}: missing YAML front matter (--- ... ---) at the top")
    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        raise GuideError(f"{path}: front matter is not valid YAML: {exc}") from exc
    for key in ("doc_id", "title", "language"):
        if not meta.get(key):
            raise GuideError(f"{path}: front matter lacks {key!r}")
    # The id names files and URLs, the language goes into `lang` attributes: both are checked here,
    # once, so no page or export trusts front matter (`doc_id: ../../x` wrote outside the site).
    if not DOC_ID.fullmatch(str(meta["doc_id"])):
        raise GuideError(f"{path}: doc_id {str(meta['doc_id'])[:80]!r} is not a lower-case name of letters, "
                         "digits and hyphens (it names files and URLs)")
    if not LANGUAGE_TAG.fullmatch(str(meta["language"])):
        raise GuideError(f"{path}: language {str(meta['language'])[:80]!r} is not a language code such as "
                         "en, pt or zh-Hant")
    sections = _split_sections(text, m.end(), str(meta["title"]), path)
    return Guide(
        doc_id=str(meta["doc_id"]),
        title=str(meta["title"]),
        title_en=str(meta.get("title_en") or ""),
        language=str(meta["language"]),
        source=str(meta.get("source") or ""),
        categories=[str(c) for c in meta.get("categories") or []],
        path=str(path),
        text=text,
        sections=sections,
    )


def _split_sections(text: str, body_start: int, doc_title: str, path: Path) -> list[Section]:
    """Cut the body at headings outside code fences; the text under `# title` is the intro."""
    headings: list[tuple[int, int, int, str, str]] = []  # line start, body start, level, title, id
    in_fence = False
    pos = body_start
    for line in text[body_start:].splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            h = _HEADING.match(line.rstrip("\n"))
            if h:
                level = len(h.group(1))
                title = h.group(2)
                a = _ANCHOR.search(title)
                if level == 1:
                    anchor = INTRO_SECTION
                elif a:
                    anchor = a.group(1)
                else:
                    raise GuideError(f"{path}: heading {title!r} has no {{#anchor}}")
                if a:
                    title = title[: a.start()].strip()
                headings.append((pos, pos + len(line), level, title, anchor))
        pos += len(line)
    if not headings or headings[0][2] != 1:
        headings.insert(0, (body_start, body_start, 1, doc_title, INTRO_SECTION))

    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    ids: set[str] = set()
    for i, (_, start, level, title, anchor) in enumerate(headings):
        end = headings[i + 1][0] if i + 1 < len(headings) else len(text)
        if anchor in ids:
            raise GuideError(f"{path}: section anchor {anchor!r} is used twice")
        ids.add(anchor)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        body = text[start:end]
        lead = len(body) - len(body.lstrip())
        sections.append(
            Section(
                id=anchor,
                title=title,
                level=level,
                path=[t for _, t in stack],
                text=body.strip(),
                start_char=start + lead,
                end_char=start + lead + len(body.strip()),
            )
        )
    return sections
