"""Are the guides about this question? The "grounded" decision, from several calibrated signals.

One cosine cannot carry the decision: a Java heap leak or a PyTorch CUDA OOM sits as close to the
guides in embedding space as a terse on-topic question. So the decision is a small logistic
regression over features that each say something different:

- `dense_top`: the best cosine of the question with any section's texts (chunks and cards);
- `dense_margin`: how far the best section stands above the next one;
- `lexical_top`: the best BM25 score (log-scaled): exact words of the guides and cards;
- `known_words`: the share of the question's words that occur anywhere in the index;
- `framework`, `domain`, `memory`, `ml`, `foreign`: how many terms of each word list in
  `kb/catalogue/grounding_terms.yaml` the question holds (JAX/XLA/TPU by name; their memory tools,
  flags and errors; memory and running out of it; ML programs; other systems such as the JVM,
  databases, phones, other ML frameworks);
- `error_wording`: whether it holds XLA/JAX error wording;
- `memory_without_context`: memory wording with none of JAX/XLA, ML or XLA error wording;
- `prototype_margin`: the question's best cosine to a short description of what the guides cover
  minus its best cosine to one of what they do not (descriptions in grounding_terms.yaml);
- `unknown_names`: names the guides never use (`React`, `Cassandra`, `Blender`): Latin-script
  words that are capitalised inside a sentence, or written in Latin letters inside a question in
  another script, and that neither the index nor the word lists know.

The weights are data: `kb/catalogue/grounding_model.yaml`, fitted by `benchmarks/grounding.py
--fit` on the labelled training questions (tests/data/grounding_train.yaml, the earlier rounds'
held-out parts grounding_heldout_r*.yaml, the retrieval and off-topic sets) and evaluated on
tests/data/grounding_heldout.yaml, which no fit has read. The features cost one extra query
embedding per question (and, once per process, the embeddings of the descriptions).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import tempfile
import unicodedata
import weakref
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel

from oomkb.kb.catalogue_file import YAML_LOADER
from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import detect_language
from oomkb.indexer.lexical import tokenize

CATALOGUE = Path(__file__).resolve().parent / "catalogue"
TERMS_FILE = CATALOGUE / "grounding_terms.yaml"
MODEL_FILE = CATALOGUE / "grounding_model.yaml"
GROUPS = ("framework", "domain", "memory", "ml", "foreign")
CAPS = {"framework": 2, "domain": 3, "memory": 2, "ml": 2, "foreign": 2}  # a count beyond adds no evidence
FEATURES = ("dense_top", "dense_margin", "lexical_top", "known_words", *GROUPS, "error_wording",
            "memory_without_context", "prototype_margin", "unknown_names")

# Letters that are separated by spaces (a term there must match whole words); other scripts
# (Han, Kana, Hangul, Devanagari, Arabic) match as substrings.
_SPACED = re.compile(r"^[A-Za-z0-9\u00c0-\u024f\u0400-\u04ff][\w\u00c0-\u024f\u0400-\u04ff .+#-]*\*?$")
_SEPARATORS = re.compile(r"[._/\-]+")


class GroundingError(CatalogueError):
    """The grounding data files are missing or malformed (shipped data: the service is at fault)."""


class Decision(BaseModel):
    grounded: bool
    probability: float
    features: dict[str, float]


class GroundingModel(BaseModel):
    """Logistic regression on standardised features: p = sigmoid(b + sum w_i (x_i - mean_i) / scale_i)."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    threshold: float = 0.5
    #: the bar for a question that names one of the guides' topics by a cue phrase
    named_topic_threshold: float = 0.5
    trained_on: dict[str, int] = {}

    def probability(self, x: dict[str, float]) -> float:
        z = self.bias
        for name, m, s, w in zip(self.features, self.mean, self.scale, self.weights):
            z += w * (x[name] - m) / s
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


class _Terms:
    def __init__(self, groups: dict[str, list[str]], error_patterns: list[str],
                 prototypes: dict[str, list[str]], oom_words: list[str] | None = None):
        self.groups = {g: [_compile(t) for t in sorted(set(groups.get(g) or []))] for g in GROUPS}
        self.oom = [_compile(str(t)) for t in oom_words or []]
        self.errors = [re.compile(p, re.IGNORECASE) for p in error_patterns]
        self.covered = [str(t) for t in prototypes["covered"]]
        self.not_covered = [str(t) for t in prototypes["not_covered"]]

    def count(self, group: str, text: str) -> int:
        return sum(1 for p in self.groups[group] if p.search(text))


# A word of a spaced script ends where a letter or digit of the same script stops: `pytorch에서`
# holds `pytorch`, `memória` does not hold `memór`.
_LATIN_WORD = r"a-z0-9\u00c0-\u024f"
_CYRILLIC_WORD = r"\u0400-\u04ff0-9"


def _compile(term: str) -> re.Pattern[str]:
    term = term.strip().lower()
    stem = term.endswith("*")
    inside = term.startswith("*")  # `*speicher*`: also inside a compound (`Gerätespeicher`)
    term = term.lstrip("*")
    bare = term.rstrip("*")
    if not _SPACED.match(term):
        return re.compile(re.escape(bare))
    word = _SEPARATORS.sub(" ", bare)
    body = re.escape(word).replace(r"\ ", r"\s+")
    letters = _CYRILLIC_WORD if re.match(r"[\u0400-\u04ff]", word) else _LATIN_WORD
    return re.compile(("" if inside else f"(?<![{letters}])") + body
                      + ("" if stem else f"(?![{letters}])"))


def _normalise(text: str) -> str:
    """Lower case, NFKC, separators as spaces (so `jax.checkpoint` reads `jax checkpoint`)."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(_SEPARATORS.sub(" ", text).split())


@lru_cache(maxsize=4)
def load_terms(path: str = str(TERMS_FILE)) -> _Terms:
    try:
        data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=YAML_LOADER)
        return _Terms(data["groups"], data.get("error_patterns") or [], data["prototypes"],
                      data.get("oom_words"))
    except (OSError, yaml.YAMLError, KeyError, TypeError, re.error) as exc:
        raise GroundingError(f"grounding terms unreadable ({path}): {exc}") from exc


@lru_cache(maxsize=4)
def load_model(path: str = str(MODEL_FILE)) -> GroundingModel:
    try:
        model = GroundingModel.model_validate(
            yaml.load(Path(path).read_text(encoding="utf-8"), Loader=YAML_LOADER))
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise GroundingError(f"grounding model unreadable ({path}): {exc}") from exc
    if sorted(model.features) != sorted(FEATURES) or not (
            len(model.features) == len(model.mean) == len(model.scale) == len(model.weights)):
        raise GroundingError(f"grounding model {path} does not match the features {FEATURES}")
    return model


_PROTOTYPES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_PROTOTYPE_FORMAT = 1


def prototype_vectors(searcher) -> tuple[np.ndarray, np.ndarray]:
    """The covered and the not-covered descriptions, embedded as the searcher embeds queries.

    Embedding them takes about a second; with the index's query model (which names its own
    checksum) they are kept on disk under the models folder, keyed by that checksum and the
    texts, so a process that starts later reads them instead (each file written whole, then
    renamed into place; anything unreadable is embedded again)."""
    vectors = _PROTOTYPES.get(searcher.embedder)
    if vectors is not None:
        return vectors
    terms = load_terms()
    path = _prototype_file(searcher.embedder, terms)
    if path is not None:
        try:
            with np.load(path, allow_pickle=False) as z:
                vectors = (z["covered"], z["not_covered"])
            if (vectors[0].shape != (len(terms.covered), searcher.embedder.dims)
                    or vectors[1].shape != (len(terms.not_covered), searcher.embedder.dims)):
                vectors = None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            vectors = None
    if vectors is None:
        vectors = (searcher.embed_queries(terms.covered), searcher.embed_queries(terms.not_covered))
        if path is not None:
            _write_atomically(path, vectors)
    _PROTOTYPES[searcher.embedder] = vectors
    return vectors


def _prototype_file(embedder, terms: _Terms) -> Path | None:
    info = getattr(embedder, "info", None)  # a QueryEncoder; a sentence-transformers model: None
    if info is None:
        return None
    from oomkb.settings import models_dir

    key = hashlib.sha256(json.dumps([_PROTOTYPE_FORMAT, info.sha256, info.extra_sha256,
                                     info.prompt, terms.covered, terms.not_covered],
                                    ensure_ascii=False).encode("utf-8")).hexdigest()[:32]
    return models_dir() / "grounding-prototypes" / f"{key}.npz"


def _write_atomically(path: Path, vectors: tuple[np.ndarray, np.ndarray]) -> None:
    """Best effort: a read-only models folder only means embedding again next time."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, covered=vectors[0], not_covered=vectors[1])
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def prototype_margin(question: str, searcher, query_vector: np.ndarray | None = None) -> float:
    """Best cosine of `question` to a covered description minus best to an uncovered one
    (embedded as the `searcher` embeds queries; `query_vector`: the question's, if known)."""
    vectors = prototype_vectors(searcher)
    q = searcher.embed_queries([question])[0] if query_vector is None else query_vector
    return float((vectors[0] @ q).max() - (vectors[1] @ q).max())


def features(question: str, results, searcher=None, query_vector: np.ndarray | None = None,
             language: str | None = None) -> dict[str, float]:
    """The feature vector of `question` given its search `results` (kb.search.SearchResult);
    `searcher` gives the index vocabulary and the embedding model (without it, those features
    are 0). A caller that has embedded the question or detected its language already passes
    them (`query_vector`, `language`) instead of having them computed again."""
    terms = load_terms()
    dense = sorted((r.dense_score for r in results), reverse=True)
    top = dense[0] if dense else 0.0
    second = dense[1] if len(dense) > 1 else top
    lexical = max((r.lexical_score for r in results), default=0.0)
    text = _normalise(question)
    x = {
        "dense_top": float(top),
        "dense_margin": float(top - second),
        "lexical_top": math.log1p(max(0.0, float(lexical))),
        "known_words": known_words(question, searcher) if searcher is not None else 0.0,
        "error_wording": float(any(p.search(question) for p in terms.errors)),
    }
    for g in GROUPS:
        x[g] = min(terms.count(g, text), CAPS[g]) / CAPS[g]
    # Memory talk with no sign of JAX, XLA, an ML program or an XLA error: a game, a phone, a
    # database, a person's memory... (a linear model cannot form this "and not" by itself).
    context = x["framework"] + x["domain"] + x["ml"] + x["error_wording"]
    x["memory_without_context"] = float(x["memory"] > 0 and context == 0)
    x["prototype_margin"] = (prototype_margin(question, searcher, query_vector)
                             if searcher is not None else 0.0)
    x["unknown_names"] = (unknown_names(question, searcher, language)
                          if searcher is not None else 0.0)
    return x


def known_words(question: str, searcher) -> float:
    """The share of the question's BM25 tokens that occur in any text of the searcher's index."""
    vocab = searcher.lexical_terms  # every BM25 token of the index's texts
    tokens = tokenize(question)
    return sum(t in vocab for t in tokens) / len(tokens) if tokens else 0.0


_NAME = re.compile(r"(?<![\w.])[A-Za-z][A-Za-z+#]{2,}(?![\w.])")
_NON_LATIN = re.compile(r"[^\x00-\u024f\u2000-\u206f\u3000-\u303f\uff00-\uffef]")


def unknown_names(question: str, searcher, language: str | None = None) -> float:
    """How many product-like names in `question` the index and the word lists never use
    (`language`: the question's, as `detect_language` finds it, if known)."""
    vocab = searcher.lexical_terms
    terms = load_terms()
    foreign_script = bool(_NON_LATIN.search(question))
    if not foreign_script and (language or detect_language(question).language) == "de":
        return 0.0  # German capitalises every noun: a capital says nothing about a name there
    count = 0
    for m in _NAME.finditer(question):
        word = m.group()
        start_of_sentence = not question[:m.start()].strip() or \
            question[:m.start()].rstrip()[-1] in ".!?¿¡:"
        if not foreign_script and (not word[0].isupper() or start_of_sentence):
            continue
        lowered = word.lower()
        if lowered in vocab or any(p.fullmatch(lowered) for g in GROUPS
                                   for p in terms.groups[g]):
            continue
        count += 1
    return float(min(count, 2)) / 2


def names_jax_oom(question: str) -> bool:
    """Whether `question` names running out of memory and JAX, XLA or a TPU ("OOM au premier step
    avec optax.adamw"): the guides' subject by its own words, whatever the model scores."""
    terms = load_terms()
    text = _normalise(question or "")
    return (any(p.search(text) for p in terms.oom)
            and any(p.search(text) for p in terms.groups.get("framework", [])))


def decide(question: str, results, searcher=None, model: GroundingModel | None = None,
           query_vector: np.ndarray | None = None, language: str | None = None,
           names_topic: bool = False) -> Decision:
    """Whether the guides cover `question`, with the probability and the features behind it
    (`query_vector`, `language`: see `features`; `names_topic`: the question analysis found one of
    the guides' topics named by a cue phrase, which lowers the bar to `named_topic_threshold`)."""
    if not results or not question.strip():
        return Decision(grounded=False, probability=0.0, features={})
    model = model or load_model()
    x = features(question, results, searcher, query_vector=query_vector, language=language)
    p = model.probability(x)
    bar = min(model.threshold, model.named_topic_threshold) if names_topic else model.threshold
    return Decision(grounded=p >= bar, probability=round(p, 4),
                    features={k: round(v, 4) for k, v in x.items()})


def fit(rows: list[dict[str, float]], labels: list[bool], l2: float = 1.0,
        iterations: int = 50, balanced: bool = True) -> GroundingModel:
    """L2-regularised logistic regression by Newton's method (numpy only; a few thousand rows).

    `balanced`: each class weighs as much in total as the other, so that a training set with
    more on-topic questions than off-topic ones (the review rounds) does not move the bar for
    every question: the threshold keeps meaning "as likely covered as not"."""
    X = np.array([[r[f] for f in FEATURES] for r in rows], dtype=float)
    y = np.array(labels, dtype=float)
    s = np.ones(len(y))
    if balanced and 0 < y.sum() < len(y):
        s = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale < 1e-9] = 1.0
    Z = np.hstack([np.ones((len(X), 1)), (X - mean) / scale])
    w = np.zeros(Z.shape[1])
    reg = np.full(Z.shape[1], l2)
    reg[0] = 0.0  # the bias is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ w, -50, 50)))
        grad = Z.T @ (s * (p - y)) + reg * w
        hess = (Z * (s * p * (1 - p))[:, None]).T @ Z + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return GroundingModel(
        features=list(FEATURES), mean=[round(float(v), 6) for v in mean],
        scale=[round(float(v), 6) for v in scale], weights=[round(float(v), 6) for v in w[1:]],
        bias=round(float(w[0]), 6),
        trained_on={"on_topic": int(y.sum()), "off_topic": int(len(y) - y.sum())},
    )
