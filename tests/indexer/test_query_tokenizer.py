"""The query tokenizer that reads only the pieces a query uses gives the full tokenizer's ids.

Reference: ``tokenizers`` loading the generation's whole ``query_tokenizer.json`` (the model's own
tokenizer); under test: `SubsetTokenizer` over the generation's ``query_vocab.npz``. Texts: every
guide chunk and card of the real index (five scripts, eleven card languages), questions in every
supported language, and strings built to hit the edges (special tokens typed by a user, unknown
characters, whitespace runs, compatibility characters, text over the model's window).
"""

from __future__ import annotations

import numpy as np
import pytest

from oomkb.indexer.errors import IndexCorruptError
from oomkb.indexer.query_model import load_query_encoder
from oomkb.indexer.query_tokenizer import FullTokenizer, SubsetTokenizer, write_vocab
from oomkb.indexer.store import CURRENT, QUERY_TOKENIZER, QUERY_VOCAB, load_index

EDGE_TEXTS = [
    "",
    "   ",
    "a",
    "hello <s> world</s><mask>x <pad><unk>",
    "<s><s></s>",
    "😀🤖 ∑∫ \u200b zero\u00a0width\u3000ideographic space",
    "ℌ𝔢𝔩𝔩𝔬 ﬁ ① Ⅻ ｆｕｌｌｗｉｄｔｈ ㍿",
    "\x00\x01\x7f control \t\n\r characters",
    "ấ稣 ꙮ 𓀀 unknown-ish pieces",
    "x" * 3000,
    "E1000 " * 400,
    "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 16.91G of 15.48G hbm.",
    "--xla_tpu_scoped_vmem_limit_kib=65536 jax.jit(f, donate_argnums=(0,))",
]


@pytest.fixture(scope="module")
def generation(loaded_index):
    return loaded_index.index.path


@pytest.fixture(scope="module")
def tokenizers(generation, loaded_index):
    max_length = loaded_index.index.manifest.query_model.max_length
    return (SubsetTokenizer(generation / QUERY_VOCAB, max_length=max_length),
            FullTokenizer(generation / QUERY_TOKENIZER, max_length=max_length))


def _texts(loaded_index) -> list[str]:
    from tests.indexer.test_query_model import QUERIES

    texts = [item.text for item in loaded_index.index.items]
    texts += [item.embed_text for item in loaded_index.index.items if item.kind == "card"]
    texts += list(QUERIES.values()) + EDGE_TEXTS
    prompt = loaded_index.index.manifest.query_model.prompt
    return [prompt + t for t in texts]


def test_the_generation_lists_the_sorted_pieces_with_a_checksum(loaded_index, generation):
    files = loaded_index.index.manifest.files
    assert QUERY_VOCAB in files and files[QUERY_VOCAB].bytes == (generation / QUERY_VOCAB).stat().st_size


def test_subset_ids_equal_the_full_tokenizers_on_questions_and_edge_cases(loaded_index, tokenizers):
    from tests.indexer.test_query_model import QUERIES

    subset, full = tokenizers
    prompt = loaded_index.index.manifest.query_model.prompt
    for text in [prompt + t for t in [*QUERIES.values(), *EDGE_TEXTS]]:
        assert np.array_equal(subset.encode_ids([text])[0], full.encode_ids([text])[0]), text[:60]


@pytest.mark.slow
def test_subset_ids_equal_the_full_tokenizers_one_text_at_a_time(loaded_index, tokenizers):
    subset, full = tokenizers
    texts = _texts(loaded_index)
    assert len(texts) > 500
    wrong = [t[:60] for t in texts
             if not np.array_equal(subset.encode_ids([t])[0], full.encode_ids([t])[0])]
    assert not wrong, f"{len(wrong)} texts tokenised differently, e.g. {wrong[:3]}"


@pytest.mark.slow
def test_subset_ids_equal_the_full_tokenizers_in_batches(loaded_index, tokenizers):
    subset, full = tokenizers
    texts = _texts(loaded_index)
    for start in range(0, len(texts), 37):
        batch = texts[start:start + 37]
        for text, ours, theirs in zip(batch, subset.encode_ids(batch), full.encode_ids(batch)):
            assert np.array_equal(ours, theirs), text[:80]


def test_a_text_over_the_window_is_truncated_like_the_full_tokenizer(loaded_index, tokenizers):
    subset, full = tokenizers
    max_length = loaded_index.index.manifest.query_model.max_length
    ids = subset.encode_ids(["memory " * 2000])[0]
    assert len(ids) == max_length
    assert np.array_equal(ids, full.encode_ids(["memory " * 2000])[0])


def test_a_tokenizer_of_another_kind_is_not_split_and_loads_in_full(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"[UNK]": 0, "memory": 1, "hbm": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    assert write_vocab(tmp_path / "tokenizer.json", tmp_path / QUERY_VOCAB) is False
    assert not (tmp_path / QUERY_VOCAB).exists()
    ids = FullTokenizer(tmp_path / "tokenizer.json").encode_ids(["hbm memory vmem"])[0]
    assert ids.tolist() == [2, 1, 0]


def test_a_damaged_piece_file_is_a_clear_error(index_copy):
    gen = index_copy / (index_copy / CURRENT).read_text().strip()
    vocab = gen / QUERY_VOCAB
    data = vocab.read_bytes()
    vocab.unlink()
    vocab.write_bytes(data[: len(data) // 2])
    with pytest.raises(IndexCorruptError, match=f"{QUERY_VOCAB}.*oomkb index"):
        load_index(index_copy)


def test_an_unreadable_piece_file_with_a_matching_checksum_is_a_clear_error(loaded_index, tmp_path):
    """Checksums vouch for what was written; a file written wrong still fails with a message."""
    from oomkb.indexer.query_model import QueryEncoder

    gen = loaded_index.index.path
    bad = tmp_path / QUERY_VOCAB
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    encoder = QueryEncoder(gen / "query_model.onnx", gen / QUERY_TOKENIZER,
                           loaded_index.index.manifest.query_model, vocab_path=bad, background=True)
    with pytest.raises(IndexCorruptError, match="cannot be loaded.*oomkb index"):
        encoder.wait()


def test_the_encoder_of_a_generation_uses_the_subset_tokenizer(loaded_index):
    encoder = load_query_encoder(loaded_index.index, threads=1)
    assert isinstance(encoder._tokenizer, SubsetTokenizer)
