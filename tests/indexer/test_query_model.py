"""The exported query model: what the torch-free query path embeds with.

The reference is the sentence-transformers model that built the index (the real one); the query
encoder under test is the ONNX export stored in the real index generation.
"""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest

from oomkb.indexer.errors import IndexCorruptError
from oomkb.indexer.model import embed_queries
from oomkb.indexer.query_model import (
    QueryEncoder,
    _cache_dir,
    _read_cached,
    load_query_encoder,
)
from oomkb.indexer.store import (CURRENT, MANIFEST, QUERY_ONNX, QUERY_TABLE, QUERY_TABLE_SCALES,
                           QUERY_TOKENIZER, load_index)

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

# A question per supported language (kb/language.py), short and long, with technical tokens.
QUERIES = {
    "en": "How do I fix RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm on a v5e?",
    "pt": "Como aumentar --xla_tpu_scoped_vmem_limit_kib quando o kernel dá erro de VMEM?",
    "es": "¿Cómo encuentro qué búfer ocupa más memoria HBM en la TPU?",
    "de": "Wie finde ich Tensor-Lecks mit dem Speicherprofil von XProf?",
    "fr": "Comment réduire la mémoire utilisée par les activations pendant la compilation ?",
    "ru": "Как отследить утечки тензоров с помощью Memory Profile и Trace Viewer?",
    "zh": "如何解决 E1000 编译时 HBM 内存不足？",
    "ja": "TPU でメモリ不足エラーが出たとき、どうやって原因のバッファを見つけますか？",
    "ko": "TPU에서 메모리 부족 오류가 나면 어떻게 해결하나요?",
    "hi": "TPU पर रनटाइम बफर आवंटन त्रुटि (fragmentation) को कैसे ठीक करें?",
    "ar": "كيف أستخدم XProf وعارض الذاكرة لتصحيح أخطاء نفاد الذاكرة على TPU؟",
}


@pytest.fixture(scope="module")
def encoder(loaded_index):
    return load_query_encoder(loaded_index.index, threads=1)


def test_queries_cover_every_supported_language():
    from oomkb.kb.language import SUPPORTED

    assert set(QUERIES) == set(SUPPORTED)


def test_onnx_query_embedding_matches_sentence_transformers_in_every_language(encoder, embedder):
    texts = list(QUERIES.values())
    ours = np.stack([encoder.embed_queries([t])[0] for t in texts])
    reference = embed_queries(embedder, texts)
    cosines = (ours * reference).sum(axis=1)
    worst = {lang: round(float(c), 4) for lang, c in zip(QUERIES, cosines) if c < 0.99}
    assert not worst, f"cosine below 0.99: {worst}"
    assert ours.dtype == np.float32 and np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-4)


def test_a_padded_batch_embeds_like_single_queries(encoder):
    texts = ["vmem", QUERIES["en"] * 3, QUERIES["zh"], QUERIES["ar"]]
    batch = encoder.embed_queries(texts)
    single = np.stack([encoder.embed_queries([t])[0] for t in texts])
    assert batch.shape == (4, encoder.dims)
    assert (batch * single).sum(axis=1).min() > 0.99


def test_a_query_longer_than_the_model_window_is_truncated_not_refused(encoder):
    vec = encoder.embed_queries(["HBM " * 2000])
    assert vec.shape == (1, encoder.dims) and np.isfinite(vec).all()


def test_concurrent_queries_are_batched_into_fewer_calls(loaded_index):
    batched = load_query_encoder(loaded_index.index, threads=1, batch=True)
    texts = list(QUERIES.values()) * 2
    results: dict[int, np.ndarray] = {}
    start = threading.Barrier(len(texts))

    def ask(i: int) -> None:
        start.wait()
        results[i] = batched.embed_queries([texts[i]])[0]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == len(texts)
    assert batched.calls < len(texts)
    alone = batched.embed_queries(texts)
    for i, text in enumerate(texts):
        assert float(results[i] @ alone[i]) > 0.99, text


def test_the_generation_carries_its_query_model_with_checksums(loaded_index):
    manifest = loaded_index.index.manifest
    info = manifest.query_model
    assert info is not None and info.precision in ("fp32", "mixed", "int8")
    assert info.dims == manifest.model.dims
    assert info.model_version == manifest.model.version and info.model_name == manifest.model.name
    for name in (QUERY_ONNX, QUERY_TOKENIZER, *info.extra_sha256):
        assert manifest.files[name].bytes == (loaded_index.index.path / name).stat().st_size
    assert manifest.files[QUERY_ONNX].sha256 == info.sha256
    # The token-embedding table lives beside the graph, int8 rows with one scale each.
    assert "inputs_embeds" in info.inputs and set(info.extra_sha256) == {QUERY_TABLE, QUERY_TABLE_SCALES}
    for name, digest in info.extra_sha256.items():
        assert manifest.files[name].sha256 == digest
    table = np.load(loaded_index.index.path / QUERY_TABLE, mmap_mode="r")
    assert table.shape[1] == info.dims and table.dtype == (np.float32 if info.precision == "fp32" else np.int8)


def test_a_damaged_embedding_table_is_a_clear_error(index_copy):
    gen = index_copy / (index_copy / CURRENT).read_text().strip()
    table = gen / QUERY_TABLE
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0x01  # one weight off by a little: still a valid array
    table.unlink()
    table.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match=f"{QUERY_TABLE} does not match its checksum"):
        load_query_encoder(load_index(index_copy))


def test_a_damaged_query_model_is_a_clear_error(index_copy):
    gen = index_copy / (index_copy / CURRENT).read_text().strip()
    onnx = gen / QUERY_ONNX
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0xFF
    onnx.unlink()  # never write into the file in place: it may be a hard link to the cache
    onnx.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match="checksum.*oomkb index"):
        load_query_encoder(load_index(index_copy))


def test_an_unloadable_query_model_is_a_clear_error(loaded_index, tmp_path):
    info = loaded_index.index.manifest.query_model
    bad = tmp_path / QUERY_ONNX
    bad.write_bytes(b"not an onnx model")
    shutil.copyfile(loaded_index.index.path / QUERY_TOKENIZER, tmp_path / QUERY_TOKENIZER)
    with pytest.raises(IndexCorruptError, match="cannot be loaded.*oomkb index"):
        QueryEncoder(bad, tmp_path / QUERY_TOKENIZER, info)


def test_a_changed_model_is_exported_again_not_taken_from_the_cache(loaded_index):
    model = loaded_index.index.manifest.model
    precision = loaded_index.index.manifest.query_model.precision
    assert _read_cached(_cache_dir(model, precision), model, precision) is not None
    changed = model.model_copy(update={"version": model.version + "-retrained"})
    assert _cache_dir(changed, precision) != _cache_dir(model, precision)
    assert _read_cached(_cache_dir(changed, precision), changed, precision) is None
    other = "fp32" if precision != "fp32" else "mixed"
    assert _cache_dir(model, other) != _cache_dir(model, precision)


def test_an_index_without_a_query_model_asks_for_a_rebuild(index_copy):
    import json

    gen = index_copy / (index_copy / CURRENT).read_text().strip()
    manifest = json.loads((gen / MANIFEST).read_text())
    manifest.pop("query_model")
    (gen / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IndexCorruptError, match="no query model.*oomkb index"):
        load_index(index_copy)
