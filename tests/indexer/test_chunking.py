"""Chunking keeps section titles with their text, splits every script sensibly and records offsets."""

from oomkb.indexer.chunking import chunk_guide
from oomkb.indexer.guides import load_guides, parse_guide


def test_every_chunk_points_back_at_its_exact_text_in_the_guide():
    for guide in load_guides():
        for chunk in chunk_guide(guide):
            assert guide.text[chunk.start_char : chunk.end_char] == chunk.text


def test_chunks_stay_within_one_section_and_carry_its_title_path():
    for guide in load_guides():
        sections = {s.id: s for s in guide.sections}
        for chunk in chunk_guide(guide):
            s = sections[chunk.section]
            assert s.start_char <= chunk.start_char < chunk.end_char <= s.end_char
            assert chunk.embed_text.startswith(" › ".join(s.path))
            assert chunk.language == guide.language


def test_chunks_respect_the_size_limit_in_every_script():
    for guide in load_guides():
        for chunk in chunk_guide(guide, max_chars=200):
            assert len(chunk.text) <= 200, (guide.doc_id, chunk.id)


def test_text_without_spaces_is_split_at_cjk_and_devanagari_sentence_ends(tmp_path):
    zh = "这是第一句话。" * 30 + "这是最后一句！"
    hi = "यह पहला वाक्य है। " * 20
    doc = tmp_path / "mixed.md"
    doc.write_text(
        "---\ndoc_id: mixed\ntitle: Mixed\nlanguage: zh\n---\n# Mixed\n\n## 中文 {#zh}\n\n"
        f"{zh}\n\n## हिन्दी {{#hi}}\n\n{hi}\n",
        encoding="utf-8",
    )
    guide = parse_guide(doc)
    chunks = chunk_guide(guide, max_chars=100)
    zh_chunks = [c for c in chunks if c.section == "zh"]
    assert len(zh_chunks) > 1
    assert all(c.text.endswith(("。", "！")) for c in zh_chunks)  # cut at sentence ends only
    hi_chunks = [c for c in chunks if c.section == "hi"]
    assert len(hi_chunks) > 1 and all(c.text.endswith("।") for c in hi_chunks)


def test_code_blocks_with_blank_lines_stay_in_one_chunk(tmp_path):
    doc = tmp_path / "code.md"
    doc.write_text(
        "---\ndoc_id: code\ntitle: Code\nlanguage: en\n---\n# Code\n\n## Program {#program}\n\n"
        "Intro line.\n\n```python\nimport jax\n\n\ndef f():\n    return 1\n```\n",
        encoding="utf-8",
    )
    chunks = chunk_guide(parse_guide(doc))
    program = [c for c in chunks if c.section == "program"]
    assert len(program) == 1 and "import jax\n\n\ndef f():" in program[0].text


def test_a_heading_without_anchor_is_reported_with_the_file_name(tmp_path):
    import pytest

    from oomkb.indexer.errors import GuideError

    doc = tmp_path / "bad.md"
    doc.write_text("---\ndoc_id: bad\ntitle: Bad\nlanguage: en\n---\n# Bad\n\n## No anchor\n\ntext\n")
    with pytest.raises(GuideError, match="bad.md.*no \\{#anchor\\}"):
        parse_guide(doc)
