"""The five source guides in docs_src/ are faithful Markdown versions of the received seeds.

These tests read the real files: the Markdown guides in ``docs_src/`` and the plain-text seeds they
were made from (``shared/seeds`` beside the checkout, else ``/work/shared/seeds``, unless ``OOMKB_SEEDS_DIR``
points elsewhere). The tests that
compare against the seeds are skipped, with the reason, where the seeds are not present.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS_DIR = REPO_ROOT / "docs_src"
_BESIDE = Path(__file__).resolve().parents[3] / "shared" / "seeds"  # shared/ beside the checkout
SEEDS_DIR = Path(os.environ.get("OOMKB_SEEDS_DIR") or (_BESIDE if _BESIDE.is_dir() else "/work/shared/seeds"))

# doc_id -> (language, seed file), as fixed by CONTRACT.md and the seeds' README.
GUIDES: dict[str, tuple[str, str]] = {
    "xprof-debug-oom": ("ar", "000_a6735f9733b06df7.txt"),
    "runtime-buffer-allocation": ("hi", "001_8f4d63f17436a1d0.txt"),
    "tensor-lifetime-leaks": ("ru", "002_a4a9160d0053f974.txt"),
    "e1000-compile-hbm-oom": ("zh", "003_908ea12720b3639b.txt"),
    "scoped-vmem-oom": ("pt", "004_66e4f7cb0b8217e4.txt"),
}

CONTRACT_CATEGORIES = {
    "compile_hbm_oom",
    "runtime_allocation",
    "scoped_vmem_oom",
    "gpu_oom",
    "host_oom",
    "unknown",
}

# The section ids the whole project cites as ``doc_id#anchor``. They must never change; a new
# section gets a new anchor added here.
EXPECTED_ANCHORS: dict[str, list[str]] = {
    "xprof-debug-oom": ["example-program", "run-xprof"],
    "runtime-buffer-allocation": ["overview", "debugging", "tooling"],
    "tensor-lifetime-leaks": [
        "overview",
        "memory-profile-timeline",
        "memory-viewer-buffer-lifetimes",
    ],
    "e1000-compile-hbm-oom": [
        "overview",
        "debugging",
        "scenario-1-tc-sc-balance",
        "scenario-2-large-allocations",
        "scenario-3-total-allocations",
        "scenario-3a-configuration",
        "scenario-3b-architecture-sharding",
        "scenario-3c-padding",
        "scenario-3d-memory-flags",
        "scenario-3e-rematerialization",
        "scenario-3f-profiling-tools",
    ],
    "scoped-vmem-oom": ["overview", "debugging", "retune-kernel"],
}

# Places where the plain-text extraction flattened structure into the wording itself, so the seed
# line cannot appear verbatim in the Markdown. Each entry is (seed file, text in the seed, what the
# seed text becomes once the lost structure is accounted for). Every "text in the seed" must still
# occur in its seed, so an entry cannot silently go stale.
SEED_REPAIRS: list[tuple[str, str, str]] = [
    # ar: a two-item bullet list was flattened into one paragraph with " * " separators; the
    # Markdown restores it as a list, whose markers are stripped before comparing.
    ("000_a6735f9733b06df7.txt", "ما يلي: * مدخلات", "ما يلي: مدخلات"),
    ("000_a6735f9733b06df7.txt", "ذلك * بيانات", "ذلك بيانات"),
    # hi: the list under "यह गड़बड़ी तब दिखती है, जब" was flattened into "या- " (end of item one,
    # marker of item two) and the checkpoint bullet was glued to the donation bullet as ". - ".
    ("001_8f4d63f17436a1d0.txt", "गड़बड़ियां या- उपयोगकर्ता", "गड़बड़ियां या उपयोगकर्ता"),
    ("001_8f4d63f17436a1d0.txt", "जा सकता है. - चेकपॉइंट", "जा सकता है. चेकपॉइंट"),
    # hi: inline code spans lost the spaces around them ("jax.device_putके"); the Markdown
    # puts the space back between the code span and the following word / previous sentence.
    ("001_8f4d63f17436a1d0.txt", "jax.device_putके", "jax.device_put के"),
    ("001_8f4d63f17436a1d0.txt", "हो.jax.Array", "हो. jax.Array"),
    ("001_8f4d63f17436a1d0.txt", "jax.Arrayऑब्जेक्ट", "jax.Array ऑब्जेक्ट"),
]

# Wording present in the Markdown but not in any seed. The Russian seed has no title line, so
# its "#" title was written for it (the English original's title, in Russian).
ADDED_LINES: dict[str, set[str]] = {
    "tensor-lifetime-leaks": {"Отслеживание времени жизни тензоров и утечек памяти"},
}

FRONT_MATTER_RE = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
ANCHOR_RE = re.compile(r"^(.*?)\s*\{#([a-z0-9]+(?:-[a-z0-9]+)*)\}$")
FENCE_RE = re.compile(r"^```(.*)$")
ENTITY_RE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")
LIST_MARKER_RE = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
TABLE_SEPARATOR_RE = re.compile(r"^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
EMPHASIS_RE = re.compile(r"(\*\*|\*)(?=\S)(.+?)(?<=\S)\1")
FENCE_LANGUAGES = {"python", "text", "shell"}


def guide_path(doc_id: str) -> Path:
    """Return the path of the Markdown guide for ``doc_id``."""
    return DOCS_DIR / f"{doc_id}.md"


def read_guide(doc_id: str) -> str:
    """Return the guide's text, decoded strictly as UTF-8."""
    return guide_path(doc_id).read_bytes().decode("utf-8")


def split_front_matter(text: str) -> tuple[dict, str]:
    """Return the parsed YAML front matter and the Markdown body that follows it."""
    match = FRONT_MATTER_RE.match(text)
    assert match, "the guide must start with front matter between '---' lines"
    return yaml.safe_load(match.group(1)), text[match.end() :]


def iter_body_lines(body: str):
    """Yield ``(line, in_code)`` for each body line; fence lines themselves count as code."""
    in_code = False
    for line in body.split("\n"):
        if FENCE_RE.match(line):
            yield line, True
            in_code = not in_code
            continue
        yield line, in_code


def headings(body: str) -> list[tuple[int, str]]:
    """Return ``(level, text)`` for every Markdown heading outside code blocks."""
    found = []
    for line, in_code in iter_body_lines(body):
        match = HEADING_RE.match(line)
        if match and not in_code:
            found.append((len(match.group(1)), match.group(2)))
    return found


def collapse(text: str) -> str:
    """Collapse every run of whitespace to one space and trim the ends."""
    return " ".join(text.split())


def markdown_to_text_lines(body: str) -> list[str]:
    """Strip Markdown syntax line by line, returning the wording lines that remain."""
    lines = []
    for line, in_code in iter_body_lines(body):
        if FENCE_RE.match(line):
            continue
        if not in_code:
            if TABLE_SEPARATOR_RE.match(line) and "-" in line:
                continue
            heading = HEADING_RE.match(line)
            if heading:
                line = heading.group(2)
                anchored = ANCHOR_RE.match(line)
                if anchored:
                    line = anchored.group(1)
            line = LIST_MARKER_RE.sub("", line)
            if line.lstrip().startswith("|"):
                line = line.replace("|", " ")
            line = line.replace("`", "")
            line = EMPHASIS_RE.sub(r"\2", line)
        line = collapse(line)
        if line:
            lines.append(line)
    return lines


def seed_text(seed_name: str) -> str:
    """Return the seed's text, or skip the test when the seeds are not available here."""
    path = SEEDS_DIR / seed_name
    if not path.is_file():
        pytest.skip(f"seed {path} not present (set OOMKB_SEEDS_DIR to the seeds folder)")
    return path.read_text(encoding="utf-8")


def normalized_seed_lines(seed_name: str) -> list[str]:
    """Return the seed's non-empty lines with entities fixed, repairs applied, markers stripped."""
    text = html.unescape(seed_text(seed_name))
    for name, old, new in SEED_REPAIRS:
        if name == seed_name:
            text = text.replace(old, new)
    lines = []
    for line in text.split("\n"):
        line = collapse(LIST_MARKER_RE.sub("", line))
        if line:
            lines.append(line)
    return lines


def table_rows(body: str) -> list[list[str]]:
    """Return the cells of every row of every Markdown table in ``body``, header rows included."""
    parser = MarkdownIt("commonmark").enable("table")
    rows: list[list[str]] = []
    cell_open = False
    for token in parser.parse(body):
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open"):
            cell_open = True
        elif token.type in ("th_close", "td_close"):
            cell_open = False
        elif token.type == "inline" and cell_open:
            rows[-1].append(token.content)
    return rows


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_guide_file_exists_as_utf8_with_lf_endings_and_final_newline(doc_id):
    raw = guide_path(doc_id).read_bytes()
    raw.decode("utf-8")
    assert b"\r" not in raw
    assert raw.endswith(b"\n") and not raw.endswith(b"\n\n")


def test_docs_src_holds_exactly_the_contract_guides():
    on_disk = {path.stem for path in DOCS_DIR.glob("*.md")}
    assert on_disk == set(GUIDES)


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_front_matter_names_the_guide_its_language_source_and_categories(doc_id):
    language, seed_name = GUIDES[doc_id]
    meta, body = split_front_matter(read_guide(doc_id))
    assert meta["doc_id"] == doc_id
    assert meta["language"] == language
    assert meta["source"] == seed_name
    for field in ("title", "title_en"):
        assert isinstance(meta[field], str) and meta[field].strip()
    assert meta["title_en"].isascii()
    assert isinstance(meta["categories"], list) and meta["categories"]
    assert set(meta["categories"]) <= CONTRACT_CATEGORIES
    first_heading = headings(body)[0]
    assert first_heading == (1, meta["title"]), "the '#' title must be the front matter title"


def test_each_error_specific_guide_is_filed_under_its_own_category():
    expected = {
        "runtime-buffer-allocation": "runtime_allocation",
        "e1000-compile-hbm-oom": "compile_hbm_oom",
        "scoped-vmem-oom": "scoped_vmem_oom",
    }
    for doc_id, category in expected.items():
        meta, _ = split_front_matter(read_guide(doc_id))
        assert category in meta["categories"], doc_id


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_every_section_heading_has_a_unique_ascii_anchor(doc_id):
    _, body = split_front_matter(read_guide(doc_id))
    found = headings(body)
    assert [level for level, _ in found].count(1) == 1, "exactly one '#' title"
    anchors = []
    for level, text in found[1:]:
        assert level >= 2
        match = ANCHOR_RE.match(text)
        assert match, f"heading without a {{#anchor}}: {text!r}"
        assert match.group(1).strip(), f"heading with an anchor but no text: {text!r}"
        anchors.append(match.group(2))
    assert len(anchors) == len(set(anchors)), f"duplicate anchors: {anchors}"
    assert anchors == EXPECTED_ANCHORS[doc_id]


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_heading_levels_never_skip_a_level(doc_id):
    _, body = split_front_matter(read_guide(doc_id))
    levels = [level for level, _ in headings(body)]
    assert levels[0] == 1
    for previous, current in zip(levels, levels[1:]):
        assert current <= previous + 1, f"heading level jumps from {previous} to {current}"


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_no_html_entities_remain(doc_id):
    assert not ENTITY_RE.findall(read_guide(doc_id))


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_code_fences_are_balanced_and_tagged(doc_id):
    _, body = split_front_matter(read_guide(doc_id))
    fence_infos = [match.group(1) for match in map(FENCE_RE.match, body.split("\n")) if match]
    assert len(fence_infos) % 2 == 0, "unbalanced code fences"
    openings, closings = fence_infos[0::2], fence_infos[1::2]
    assert all(info in FENCE_LANGUAGES for info in openings), openings
    assert all(info == "" for info in closings), closings


def test_xprof_guide_shows_the_program_as_python_and_the_command_as_shell():
    _, body = split_front_matter(read_guide("xprof-debug-oom"))
    assert "```python\nimport jax\n" in body
    assert "```shell\nxprof --logdir=/tmp/xprof/ --port=6006\n```" in body


def test_e1000_flag_table_is_a_markdown_table_listing_every_flag_of_the_seed():
    seed = seed_text(GUIDES["e1000-compile-hbm-oom"][1])
    seed_lines = seed.split("\n")
    header_index = next(i for i, line in enumerate(seed_lines) if line.startswith("标志 说明"))
    seed_flags = []
    for line in seed_lines[header_index + 1 :]:
        if not line.startswith("--xla_"):
            break
        seed_flags.append(line.split()[0])
    assert len(seed_flags) == 5

    _, body = split_front_matter(read_guide("e1000-compile-hbm-oom"))
    rows = table_rows(body)
    assert rows[0] == ["标志", "说明", "影响 / 权衡"]
    assert all(len(row) == 3 for row in rows)
    table_flags = [row[0].strip("`") for row in rows[1:]]
    assert table_flags == seed_flags


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_every_seed_line_survives_in_the_markdown(doc_id):
    _, body = split_front_matter(read_guide(doc_id))
    markdown_text = " ".join(markdown_to_text_lines(body))
    missing = [
        line for line in normalized_seed_lines(GUIDES[doc_id][1]) if line not in markdown_text
    ]
    assert not missing, f"seed wording lost or changed: {missing}"


@pytest.mark.parametrize("doc_id", sorted(GUIDES))
def test_markdown_adds_no_wording_beyond_the_seed(doc_id):
    _, body = split_front_matter(read_guide(doc_id))
    seed_joined = " ".join(normalized_seed_lines(GUIDES[doc_id][1]))
    allowed = ADDED_LINES.get(doc_id, set())
    invented = [
        line
        for line in markdown_to_text_lines(body)
        if line not in seed_joined and line not in allowed
    ]
    assert not invented, f"wording that is not in the seed: {invented}"


def test_seed_repairs_still_match_their_seeds():
    for seed_name, old, _ in SEED_REPAIRS:
        assert old in html.unescape(seed_text(seed_name)), (seed_name, old)
