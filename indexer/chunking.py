"""Heading-aware chunking that works for Arabic, Devanagari, Cyrillic, CJK and Latin text.

Each chunk belongs to exactly one section, carries the section's title path for embedding, and
records its character offsets in the guide file so a citation can point back at the source.
"""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel

from oomkb.indexer.guides import Guide, Section

DEFAULT_MAX_CHARS = 600

# Sentence ends in the scripts of the guides: Latin/Cyrillic `.!?`, Arabic `؟` and `۔`, Devanagari
# danda `।`/`॥`, CJK full-width `。！？；`. Latin-style ends need whitespace after them (so `v5e.`
# inside `jax.numpy` or `3.5` does not split); CJK and danda ends split immediately.
_SENTENCE_END = re.compile(r"(?<=[.!?؟۔])\s+|(?<=[。！？；।॥])\s*")
_FENCE = re.compile(r"^\s*(```|~~~)")


class Chunk(BaseModel):
    """A passage of a guide small enough to embed, with where it came from."""

    id: str
    doc_id: str
    section: str
    section_title: str
    section_path: list[str]
    language: str
    text: str
    start_char: int
    end_char: int

    @property
    def embed_text(self) -> str:
        """What the model sees: the guide and section titles, then the passage."""
        return " › ".join(self.section_path) + "\n" + self.text

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.embed_text.encode("utf-8")).hexdigest()


def chunk_guide(guide: Guide, max_chars: int = DEFAULT_MAX_CHARS) -> list[Chunk]:
    """Split every section of `guide` into chunks of at most about `max_chars` characters."""
    chunks: list[Chunk] = []
    for section in guide.sections:
        for n, (start, end) in enumerate(_section_spans(guide.text, section, max_chars)):
            chunks.append(
                Chunk(
                    id=f"{guide.doc_id}#{section.id}/{n}",
                    doc_id=guide.doc_id,
                    section=section.id,
                    section_title=section.title,
                    section_path=section.path,
                    language=guide.language,
                    text=guide.text[start:end],
                    start_char=start,
                    end_char=end,
                )
            )
    return chunks


def _section_spans(text: str, section: Section, max_chars: int) -> list[tuple[int, int]]:
    """Pack the section's blocks (paragraphs, lists, code, tables) greedily into spans."""
    if section.start_char >= section.end_char:
        return []
    pieces: list[tuple[int, int]] = []
    for start, end in _blocks(text, section.start_char, section.end_char):
        if end - start <= max_chars:
            pieces.append((start, end))
        else:
            pieces.extend(_split_long(text, start, end, max_chars))
    spans: list[tuple[int, int]] = []
    for start, end in pieces:
        if spans and end - spans[-1][0] <= max_chars:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _blocks(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Blank-line separated blocks; a fenced code block is one block even with blank lines inside."""
    blocks: list[tuple[int, int]] = []
    block_start: int | None = None
    in_fence = False
    pos = start
    for line in text[start:end].splitlines(keepends=True):
        line_end = pos + len(line)
        if _FENCE.match(line):
            in_fence = not in_fence
        if line.strip() == "" and not in_fence:
            if block_start is not None:
                blocks.append((block_start, pos))
                block_start = None
        elif block_start is None:
            block_start = pos
        pos = line_end
    if block_start is not None:
        blocks.append((block_start, end))
    return [(s, _rstrip_end(text, s, e)) for s, e in blocks]


def _split_long(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Split an oversized block at line breaks, then at sentence ends, then hard at max_chars."""
    out: list[tuple[int, int]] = []
    for ls, le in _cut(text, start, end, re.compile(r"\n")):
        if le - ls <= max_chars:
            out.append((ls, le))
            continue
        for ss, se in _cut(text, ls, le, _SENTENCE_END):
            while se - ss > max_chars:
                out.append((ss, ss + max_chars))
                ss += max_chars
            if se > ss:
                out.append((ss, se))
    return out


def _cut(text: str, start: int, end: int, sep: re.Pattern[str]) -> list[tuple[int, int]]:
    spans = []
    pos = start
    for m in sep.finditer(text, start, end):
        if m.start() > pos:
            spans.append((pos, m.start()))
        pos = max(pos, m.end())
    if end > pos:
        spans.append((pos, end))
    return [(s, _rstrip_end(text, s, e)) for s, e in spans if text[s:e].strip()]


def _rstrip_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end
