"""What a question asks, what it is about and what the asker already tried, read from the
catalogue kb/catalogue/intents.yaml in every supported language (no per-language code).

`analyse(text)` returns a `QuestionAnalysis`; the assistant leads its answer with it (the remedy
that answers the topic asked about, its snippet when a snippet is asked for) and shows why a
tried remedy was not enough instead of offering it again. Cue phrases decide first; when none
names a topic, the question's embedding (the one the search already computed) is compared with
the topics' embedded descriptions, so no model call is added to a request.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from oomkb.kb.catalogue_file import read_model
from oomkb.kb.errors import CatalogueError
from oomkb.kb.remedies.schema import Catalogue, Texts
from oomkb.kb.translations import check_texts
from oomkb.units import parse_size

__all__ = ["Intents", "Library", "QuestionAnalysis", "analyse", "library_argument_asked", "load_intents",
           "names_library", "INTENTS_FILE"]

INTENTS_FILE = Path(__file__).with_name("catalogue") / "intents.yaml"
Ask = Literal["snippet", "figure", "flag", "why", "next", "yes_no", "how", "error"]
# A question whose embedding is at least this close to a topic's description is about it when no
# cue names a topic (e5 cosines; calibrated on tests/data/questions_train.yaml).
TOPIC_COSINE = 0.86


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AskKind(_Strict):
    id: Ask
    cues: list[str] = Field(min_length=1)
    #: words that contain a cue and mean something else ("examples per core", "por exemplo"): blanked
    #: out before the cues are looked for
    unless: list[str] = Field(default_factory=list)


class Topic(_Strict):
    id: str
    remedy: str | None = None
    #: with no log, to someone who tried something and asks what next: the untried ones of these
    #: remedies, in this order (the conversation's topic decides which list)
    next: list[str] = Field(default_factory=list)
    fill: str | None = None
    description: str = Field(min_length=10)
    cues: list[str] = Field(min_length=1)
    unless: list[str] = Field(default_factory=list, description="cues that mean another thing of the same name")


class ThenAnswer(_Strict):
    answer: str  # a short answer (figures.yaml) id
    when: list[str] = []  # words one of which the question has (none: any question)


class Tried(_Strict):
    id: str
    remedies: list[str] = []  # empty: something outside the guides' remedies (a GPU allocator flag)
    subject: list[str] = Field(min_length=1)
    done: list[str] = Field(min_length=1)
    why: Texts
    #: said instead of `why` when each device holds one sample (nothing left to split or halve)
    why_one_per_device: Texts | None = None
    #: a constraint the user states rather than something done ("without reducing the batch"):
    #: read from its own `done` cues only, whose negation words are part of them
    constraint: bool = False
    #: to someone who did this and asks what next: the short answer whose code is the next step,
    #: the first whose `when` words the question has ("flax": nn.remat in a scan)
    then: list[ThenAnswer] = []


class Library(_Strict):
    name: str = Field(description="as its project writes it")
    names: list[str] = Field(min_length=1, description="how questions write it (lower case; a word of its own)")


class Intents(_Strict):
    clause_breaks: list[str] = Field(min_length=1)
    negation: dict[str, list[str]] = Field(min_length=1)
    already: list[str] = Field(min_length=1)
    already_except: dict[str, list[str]] = Field(default_factory=dict, description=(
        "per language, `already` words that are another word there (Spanish \"ya\" is Hinglish \"or\")"))
    asks: list[AskKind] = Field(min_length=1)
    topics: list[Topic] = Field(min_length=1)
    tried: list[Tried] = Field(min_length=1)
    unnamed_oom_next: list[str] = Field(default_factory=list, description=(
        "the steps for an OOM said without a log, a topic or anything tried, in order"))
    no_effect: list[str] = Field(default_factory=list, description=(
        "words that say what was done made no difference (\"null Effekt\", \"didn't help\"): the "
        "clause with them, or the one just before it in the same sentence, names something tried, "
        "whatever negation the phrase itself holds"))
    libraries: list[Library] = Field(default_factory=list, description=(
        "libraries built on JAX whose own arguments a question may ask for (\"is there an argument of "
        "blackjax's window_adaptation to ...?\"): an answer that does not name the library says it cannot "
        "name the argument"))
    argument_words: list[str] = Field(default_factory=list, description=(
        "words for an argument, option or config key of a library's API"))
    question_words: list[str] = Field(default_factory=list, description=(
        "words that make a sentence a question where it has no question mark (\"gibt es\", \"есть ли\")"))
    requests: list[str] = Field(default_factory=list, description=(
        "words that ask for something (\"give me the code ... with donation\"): a clause with one "
        "describes what is wanted, not what was done"))

    @field_validator("clause_breaks")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        for pattern in v:
            re.compile(pattern)
        return v


class QuestionAnalysis(BaseModel):
    """The parsed question: what kind of answer (`asks`, most specific first, `how` when
    nothing else is asked), the topics it is about (best first) and the tried items (ids of
    intents.yaml `tried`) with the remedy ids they cover."""

    asks: list[Ask] = ["how"]
    topics: list[str] = []
    tried: list[str] = []
    tried_remedies: list[str] = []
    #: the tried items this turn's own question states (None: all of `tried`); those inherited from
    #: earlier turns stay tried without their explanation being shown again
    stated: list[str] | None = None
    sizes: list[int] = []  # byte sizes the question names ("48 MiB", "100 Mo"), in order
    #: whether a cue phrase named the topics (not only a resemblance by meaning)
    topics_named: bool = False
    #: each device holds one sample (set by the assistant from the figures stated): nothing to halve
    one_per_device: bool = False

    @property
    def topic(self) -> str | None:
        return self.topics[0] if self.topics else None


# Not preceded by a letter of a space-separated script (a Han or kana neighbour does not count).
_WORD_START = r"(?<![0-9A-Za-z_\u00c0-\u024f\u0370-\u04ff])"


# A size typed in prose: a number and a unit, binary as XLA reports them (French Mo/Go too).
_SIZE_IN_TEXT = re.compile(r"(?<![\w.])(\d{1,6}(?:[.,]\d{1,3})?)\s?([kmgt])(?:i?b|o)?(?![a-z])", re.IGNORECASE)


#: The words of a limit being set ("vmem_limit_bytes を 120MB に", "raise the limit to 96 MiB").
_LIMIT_NAMED = re.compile(r"vmem_limit_bytes|scoped_vmem_limit\w*|limit|上限|リミット|лимит\w*|限制|한도|limite|límite|"
                          r"grenze|limit\w*|सीमा|الحد", re.IGNORECASE)


def limit_asked(text: str) -> int | None:
    """The size the text asks a limit to be set to: the first size within a few words after the
    limit's name (not the sizes said of the data before it)."""
    for m in _LIMIT_NAMED.finditer(text or ""):
        after = _SIZE_IN_TEXT.search(text, m.end(), m.end() + 24)
        if after is not None:
            return parse_size(f"{after.group(1).replace(',', '.')}{after.group(2).upper()}")
    return None


def sizes_in(text: str) -> list[int]:
    """The byte sizes named in `text`."""
    return [parse_size(f"{n.replace(',', '.')}{unit.upper()}") for n, unit in _SIZE_IN_TEXT.findall(text)]


def _boundary(part: str) -> str:
    """A cue part as a regex: it must start a word unless its script attaches words (Han, kana,
    Arabic) or it starts with a non-letter."""
    first = part[0]
    attached = ("\u3040" <= first <= "\u30ff" or "\u4e00" <= first <= "\u9fff"
                or "\u0600" <= first <= "\u06ff")
    return re.escape(part) if attached or not first.isalnum() else _WORD_START + re.escape(part)


# A Japanese past-tense cue ("減らした") is not a wish or a condition ("減らしたい", "減らしたら"); a
# Korean connective ("쓰고") is not a wish ("쓰고 싶은데": "I want to use").
_NOT_WISH_OR_IF = {"た": "(?![いくら])", "고": "(?!\\s?싶)"}


_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")


def _lowered(text: str) -> str:
    """`text` in lower case, a comma inside code ("donate_argnums=(0,)", "f32[8,128]") made a space
    so that it does not end a clause."""
    return _BRACKETED.sub(lambda m: m.group(0).replace(",", " "), text.lower())
# what may stand between two clauses of one list: a comma or semicolon (any script), or nothing
_LIST_SEPARATOR = re.compile(r"[,、，;；]|")


def _pattern(words: list[str], whole: bool = False) -> re.Pattern[str]:
    """One regex for `words`; `whole`: a word of a space-separated script must also end there
    ("pas" is not "pasé")."""
    parts = [_boundary(w.lower()) + (r"(?!\w)" if whole and _boundary(w.lower()) != re.escape(w.lower())
                                     else "") + _NOT_WISH_OR_IF.get(w[-1:], "")
             for w in sorted(words, key=len, reverse=True)]
    return re.compile("|".join(parts))


class _Matcher:
    """The catalogue's cue lists compiled once."""

    def __init__(self, intents: Intents):
        self.intents = intents
        self.breaks = re.compile("|".join(intents.clause_breaks), re.IGNORECASE)
        self.negation = {lang: _pattern(words, whole=True) for lang, words in intents.negation.items()}
        self.any_negation = _pattern([w for words in intents.negation.values() for w in words], whole=True)
        self.asks = [(a.id, _pattern(a.cues), _pattern(a.unless, whole=True) if a.unless else None)
                     for a in intents.asks]
        self.topics = [(t.id, _pattern(t.cues), _pattern(t.unless) if t.unless else None)
                       for t in intents.topics]
        self.already = already = _pattern(intents.already)
        self.already_in = {lang: _pattern([w for w in intents.already if w not in words])
                           for lang, words in intents.already_except.items()}
        self.tried = [(t, _pattern(t.subject), _pattern(t.done), already) for t in intents.tried]
        self.requests = _pattern(intents.requests) if intents.requests else None
        self.libraries = [(lib, re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, lib.names)) + r")(?![\w-])"))
                          for lib in intents.libraries]
        self.argument_words = _pattern(intents.argument_words) if intents.argument_words else None
        self.question_words = _pattern(intents.question_words) if intents.question_words else None
        self.no_effect = _pattern(intents.no_effect) if intents.no_effect else None

    def clauses(self, text: str) -> list[str]:
        return [c for c in self.breaks.split(" " + _lowered(text) + " ") if c.strip()]

    def already_of(self, language: str | None) -> re.Pattern[str]:
        """The "already" words of `language` (all of them, less those that are another word there)."""
        return self.already_in.get(language or "", self.already)

    def without_effect(self, text: str) -> list[tuple[bool, bool]]:
        """Per clause of `text`: whether it says what was done made no difference ("null Effekt"),
        and whether the clause after it, joined by a list separator only, says so."""
        clauses = self.clauses(text)
        if self.no_effect is None:
            return [(False, False)] * len(clauses)
        said = [bool(self.no_effect.search(c)) for c in clauses]
        joined = self._joined(text)
        return [(said[n], n + 1 < len(clauses) and said[n + 1] and joined[n + 1]) for n in range(len(clauses))]

    def _joined(self, text: str) -> list[bool]:
        """Per clause of `text` (as `clauses` splits it): whether it follows the one before it within
        one sentence, separated by a list separator only (not a sentence end, "but" or "still")."""
        out: list[bool] = []
        low = _lowered(text)
        pos = 0
        for piece in self.clauses(text):
            at = low.find(piece.strip(), pos)
            out.append(bool(_LIST_SEPARATOR.fullmatch((low[pos:at] if at >= 0 else "").strip() or ",")))
            pos = at + len(piece.strip()) if at >= 0 else pos
        return out

    def listed_after_already(self, text: str, language: str | None = None) -> list[bool]:
        """Per clause of `text` (as `clauses` splits it): whether an earlier clause of the same
        sentence, joined to it by list separators only, holds an "already" word."""
        already = self.already_of(language)
        out: list[bool] = []
        opened = False
        for piece, joined in zip(self.clauses(text), self._joined(text)):
            opened = opened and joined  # a sentence end, "but", "still": the list is over
            out.append(opened)
            opened = opened or bool(already.search(piece))
        return out


@lru_cache(maxsize=4)
def load_intents(path: str = str(INTENTS_FILE)) -> _Matcher:
    intents = read_model(path, Intents)
    for t in intents.tried:
        check_texts(path, f"tried.{t.id}.why", t.why, set())
        if t.why_one_per_device is not None:
            check_texts(path, f"tried.{t.id}.why_one_per_device", t.why_one_per_device, set())
    return _Matcher(intents)


def check_against(catalogue: Catalogue, path: str = str(INTENTS_FILE)) -> None:
    """Every remedy id named in intents.yaml exists in the remedy catalogue."""
    intents = load_intents(path).intents
    known = {r.id for r in catalogue.remedies}
    named = ([t.remedy for t in intents.topics if t.remedy] + [r for t in intents.topics for r in t.next]
             + [r for t in intents.tried for r in t.remedies])
    missing = sorted(set(named) - known)
    if missing:
        raise CatalogueError(f"{path}: unknown remedy ids: {', '.join(missing)}")


_VECTORS: dict[int, np.ndarray] = {}


def _topic_vectors(searcher, intents: Intents) -> np.ndarray:
    """The topics' descriptions, embedded once per embedding model and process."""
    key = id(searcher.embedder)
    if key not in _VECTORS:
        _VECTORS[key] = searcher.embed_queries([t.description for t in intents.topics])
    return _VECTORS[key]


#: a parenthesised code annotation: arguments or assignments ("(0=state, 1=batch)")
_ANNOTATION = re.compile(r"\([^()]*=[^()]*\)")


def analyse(text: str, language: str | None = None, *, query_vector: np.ndarray | None = None,
            searcher=None, path: str = str(INTENTS_FILE)) -> QuestionAnalysis:
    """The parsed question. Cues of every language are tried (mixed-language chat is common, and
    technical cue phrases rarely collide); negation words only of `language` when it is given
    (Spanish "no" is Portuguese "in the").
    `query_vector` and `searcher`: the question's embedding and the searcher that made it, for
    matching a topic by meaning when no cue names one."""
    m = load_intents(path)
    clauses = m.clauses(text or "")
    whole = " " + (text or "").lower() + " "
    negation = m.negation.get(language or "", m.any_negation)

    # "ya probé bajar el batch, activar donate_argnums y pasar a bf16": an "already" opens a list
    # whose comma-separated items are all tried, up to the end of its sentence
    listed = m.listed_after_already(text or "", language)
    # "PREALLOCATE=false gesetzt, null Effekt": a clause said to have made no difference was done
    no_effect = m.without_effect(text or "")
    already = m.already_of(language)
    tried: list[str] = []
    tried_remedies: list[str] = []
    for item, subject, done, _ in m.tried:
        for n, clause in enumerate(clauses):
            # an argument's annotation ("(0=state, 1=batch)") names code, not something done to it
            clause = _ANNOTATION.sub(" ", clause)
            if item.constraint:
                hit = subject.search(clause) and done.search(clause)
            elif m.requests is not None and m.requests.search(clause) and not already.search(clause):
                hit = False  # "give me a train step with donation": what is wanted, not what was done
            else:
                said_here, said_next = no_effect[n]
                hit = (subject.search(clause)
                       and (done.search(clause) or already.search(clause) or listed[n] or said_here or said_next)
                       and (said_here or not negation.search(clause)))
            if hit:
                tried.append(item.id)
                tried_remedies += [r for r in item.remedies if r not in tried_remedies]
                break

    asks: list[Ask] = [kind for kind, pattern, unless in m.asks
                       if pattern.search(whole if unless is None else unless.sub(" ", whole))]
    if tried and "next" not in asks:
        asks.append("next")  # "I did X" is asking what else to do
    asks.append("how")

    topics = [tid for tid, pattern, unless in m.topics
              if pattern.search(whole) and not (unless is not None and unless.search(whole))]
    # A topic named only as something tried is not what is asked about.
    by_id = {t.id: t for t in m.intents.topics}
    asked = [t for t in topics if by_id[t].remedy is None or by_id[t].remedy not in tried_remedies]
    named = bool(asked)
    if not asked and query_vector is not None and searcher is not None:
        sims = _topic_vectors(searcher, m.intents) @ np.asarray(query_vector)
        best = int(np.argmax(sims))
        if sims[best] >= TOPIC_COSINE and m.intents.topics[best].id not in topics:
            asked = [m.intents.topics[best].id]
    return QuestionAnalysis(asks=asks, topics=asked, tried=tried, tried_remedies=tried_remedies,
                            sizes=sizes_in(text or ""), topics_named=named)


#: a sentence of a question, its end included ("...? ", "。")
_ASKED_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")


def library_argument_asked(text: str, named_in: str = "", path: str = str(INTENTS_FILE)) -> list[Library]:
    """The libraries built on JAX whose argument, option or config key `text` asks for ("Gibt es ein
    Argument, mit dem ich das abschalte?" after "blackjax.window_adaptation"): those named anywhere in
    `text` or in `named_in` (the conversation's earlier questions), when a sentence of `text` asks
    for an argument."""
    m = load_intents(path)
    if m.argument_words is None or not m.libraries:
        return []
    low = (text or "").lower()
    asked = any(m.argument_words.search(sentence) and (
                    "?" in sentence or "？" in sentence or (m.question_words and m.question_words.search(sentence)))
                for sentence in _ASKED_SENTENCE.findall(low))
    both = f"{low}\n{(named_in or '').lower()}"
    return [lib for lib, pattern in m.libraries if pattern.search(both)] if asked else []


def names_library(text: str, library: Library) -> bool:
    """Whether `text` names `library` (an answer that speaks of it)."""
    low = (text or "").lower()
    return any(re.search(r"(?<![\w-])" + re.escape(n) + r"(?![\w-])", low) for n in library.names)


def tried_covers(tried_ids: list[str], name: str, path: str = str(INTENTS_FILE)) -> bool:
    """Whether `name` (a setting's) is the subject of one of the tried items `tried_ids`."""
    low = _lowered(name)
    return any(subject.search(low) for item, subject, _, _ in load_intents(path).tried if item.id in tried_ids)


def unnamed_oom_next(path: str = str(INTENTS_FILE)) -> list[str]:
    return list(load_intents(path).intents.unnamed_oom_next)


def topic(topic_id: str, path: str = str(INTENTS_FILE)) -> Topic:
    return next(t for t in load_intents(path).intents.topics if t.id == topic_id)


def tried_item(tried_id: str, path: str = str(INTENTS_FILE)) -> Tried:
    return next(t for t in load_intents(path).intents.tried if t.id == tried_id)
