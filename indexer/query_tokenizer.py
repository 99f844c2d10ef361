"""The query model's tokenizer, loaded in milliseconds: only the pieces a query can use.

A Unigram tokenizer (the e5/XLM-R kind, 250k pieces) takes most of a second to load: the
``tokenizers`` library parses every piece and builds its trie, holding the GIL, before the first
query. Yet a Unigram segmentation (Viterbi over the pieces that occur in the text) only ever
looks at pieces that are substrings of the normalised text. So the generation stores the pieces
once more, sorted, in a numpy file (``query_vocab.npz``), and each call:

1. normalises and pre-tokenises its texts with the tokenizer's own pipeline (the full
   tokenizer's JSON, minus the pieces);
2. finds every substring of those strings, up to the longest piece, among the sorted pieces
   (``np.searchsorted``);
3. builds a ``tokenizers`` Unigram tokenizer of just those pieces plus the special ones and the
   lowest-scoring piece (unknown characters cost that score minus a constant) and encodes with
   it; its ids are positions in that small vocabulary, mapped back to the full one.

Same pieces, same scores, same pipeline: the ids are the full tokenizer's (a test compares them
on thousands of texts in every supported script). Tokenizers of another kind load in full.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import regex

FORMAT = 1


def write_vocab(tokenizer_json: Path, target: Path) -> bool:
    """Store the pieces of a Unigram ``tokenizer.json`` for `SubsetTokenizer`; False (nothing
    written) for a tokenizer of another kind."""
    spec = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    model = spec.get("model") or {}
    if model.get("type") != "Unigram" or model.get("byte_fallback") or not model.get("vocab"):
        return False
    pieces = np.array([piece for piece, _ in model["vocab"]], dtype=str)
    if len(set(pieces.tolist())) != len(pieces) or any("\x00" in p for p in pieces.tolist()):
        return False  # duplicate pieces, or NULs numpy's strings would drop: load in full
    scores = np.array([score for _, score in model["vocab"]], dtype=np.float64)
    order = np.argsort(pieces, kind="stable")
    shell = dict(spec, model={k: v for k, v in model.items() if k != "vocab"})
    with open(target, "wb") as fh:
        np.savez(fh, format=np.array([FORMAT]), shell=np.array(json.dumps(shell)),
                 pieces=pieces[order], ids=order.astype(np.int32), scores=scores)
    return True


class SubsetTokenizer:
    """Encodes as the full Unigram tokenizer does, reading only the pieces each batch can use."""

    def __init__(self, vocab_path: Path, max_length: int | None = None) -> None:
        with np.load(vocab_path, allow_pickle=False) as z:
            if int(z["format"][0]) != FORMAT:
                raise ValueError(f"{Path(vocab_path).name} has format {int(z['format'][0])}, "
                                 f"this oomkb reads {FORMAT}")
            self._shell = json.loads(str(z["shell"]))
            self._sorted, self._ids, self._scores = z["pieces"], z["ids"], z["scores"]
        if len(self._sorted) != len(self._ids) or len(self._ids) != len(self._scores):
            raise ValueError(f"{Path(vocab_path).name}: the piece arrays differ in length")
        self._rank = np.empty_like(self._ids)
        self._rank[self._ids] = np.arange(len(self._ids), dtype=self._ids.dtype)
        self._longest = self._sorted.dtype.itemsize // 4  # numpy stores str as UCS-4
        model = self._shell["model"]
        added = [t["id"] for t in self._shell.get("added_tokens", [])]
        # Always there: the special pieces, the unknown piece, the lowest score (which sets the
        # cost of an unknown character).
        self._always = {int(i) for i in added} | {int(model.get("unk_id") or 0),
                                                  int(np.argmin(self._scores))}
        contents = sorted((t["content"] for t in self._shell.get("added_tokens", [])), key=len,
                          reverse=True)
        self._added = regex.compile("|".join(map(regex.escape, contents))) if contents else None
        # The post-processor names its special tokens by id; it is shared by every small
        # tokenizer, so those ids must keep their place in any of them: all lower ids always in.
        specials = ((self._shell.get("post_processor") or {}).get("special_tokens") or {}).values()
        if any(not set(range(int(i))) <= self._always for t in specials for i in t["ids"]):
            raise ValueError("the tokenizer's special tokens are not the lowest ids")
        self._max_length = max_length
        self._pipeline = self._tokenizer(np.array(sorted(self._always), dtype=np.int64))

    def _tokenizer(self, keep: np.ndarray):
        """A tokenizers.Tokenizer over the pieces `keep` (full-vocabulary ids, ascending), sharing
        the pipeline's normaliser, pre-tokeniser and post-processor."""
        from tokenizers import AddedToken, Tokenizer
        from tokenizers.models import Unigram

        position = {int(full): small for small, full in enumerate(keep)}
        model = self._shell["model"]
        unk = model.get("unk_id")
        tokenizer = Tokenizer(Unigram(
            [(str(self._sorted[self._rank[i]]), float(self._scores[i])) for i in keep],
            unk_id=None if unk is None else position[int(unk)], byte_fallback=False))
        pipeline = getattr(self, "_pipeline", None)
        if pipeline is None:  # the first one is the pipeline itself, read from the JSON
            spec = copy.deepcopy(self._shell)
            spec["model"]["vocab"] = [[str(self._sorted[self._rank[i]]), float(self._scores[i])]
                                      for i in keep]
            if unk is not None:
                spec["model"]["unk_id"] = position[int(unk)]
            for token in spec.get("added_tokens", []):
                token["id"] = position[int(token["id"])]
            spec["truncation"] = spec["padding"] = None
            tokenizer = Tokenizer.from_str(json.dumps(spec))
        else:
            for part in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
                if getattr(pipeline, part) is not None:
                    setattr(tokenizer, part, getattr(pipeline, part))
            tokenizer.add_special_tokens([
                AddedToken(t["content"], single_word=t.get("single_word", False),
                           lstrip=t.get("lstrip", False), rstrip=t.get("rstrip", False),
                           normalized=t.get("normalized", False), special=t.get("special", True))
                for t in self._shell.get("added_tokens", [])])
        if self._max_length:
            tokenizer.enable_truncation(max_length=self._max_length)
        return tokenizer

    def _strings(self, text: str) -> list[str]:
        """What the model half sees of `text`: its pre-tokenised, normalised pieces, for the text
        as a whole and for each part between special tokens (a superset is harmless)."""
        parts = [text] + (self._added.split(text) if self._added and self._added.search(text) else [])
        normalizer, pre = self._pipeline.normalizer, self._pipeline.pre_tokenizer
        out = []
        for part in parts:
            norm = normalizer.normalize_str(part) if normalizer is not None else part
            if pre is None:
                out.append(norm)
            else:
                out.extend(s for s, _ in pre.pre_tokenize_str(norm))
        return out

    def _used(self, texts: Sequence[str]) -> np.ndarray:
        subs = []
        for text in texts:
            for s in self._strings(text):
                n = len(s)
                for i in range(n):
                    subs.extend(s[i:j] for j in range(i + 1, min(n, i + self._longest) + 1))
        keep = set(self._always)
        if subs:
            wanted = np.array(subs, dtype=self._sorted.dtype)
            at = np.minimum(np.searchsorted(self._sorted, wanted), len(self._sorted) - 1)
            keep.update(self._ids[at[self._sorted[at] == wanted]].tolist())
        return np.array(sorted(keep), dtype=np.int64)

    def encode_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of each text (with the special tokens the tokenizer adds), full vocabulary."""
        keep = self._used(texts)
        return [keep[np.asarray(e.ids, dtype=np.int64)]
                for e in self._tokenizer(keep).encode_batch(list(texts))]


class FullTokenizer:
    """The same interface over a whole ``tokenizer.json`` (any kind of model)."""

    def __init__(self, tokenizer_json: Path, max_length: int | None = None) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        self._tokenizer.no_padding()
        if max_length:
            self._tokenizer.enable_truncation(max_length=max_length)

    def encode_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=np.int64) for e in self._tokenizer.encode_batch(list(texts))]
