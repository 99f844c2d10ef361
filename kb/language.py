"""The one place that knows the supported languages and detects the language of a question.

A script-first rule decides for non-Latin scripts (langdetect is unreliable on short technical
questions such as `什么是 Vmem？`); Latin-script text goes to langdetect after pasted error lines,
code and identifiers are removed, since those are English whatever the asker writes.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from oomkb.kb.catalogue_file import read_yaml

# Answer languages, with their names in English and in themselves.
LANGUAGES: dict[str, tuple[str, str]] = {
    "en": ("English", "English"),
    "ar": ("Arabic", "العربية"),
    "hi": ("Hindi", "हिन्दी"),
    "ru": ("Russian", "Русский"),
    "zh": ("Chinese", "中文"),
    "pt": ("Portuguese", "Português"),
    "es": ("Spanish", "Español"),
    "ja": ("Japanese", "日本語"),
    "de": ("German", "Deutsch"),
    "fr": ("French", "Français"),
    "ko": ("Korean", "한국어"),
}
SUPPORTED = tuple(LANGUAGES)
FALLBACK = "en"
_LATIN_SUPPORTED = ("en", "pt", "es", "de", "fr")
_WORDS_FILE = Path(__file__).resolve().parent / "catalogue" / "language_words.yaml"
# How much langdetect's probability for a language counts beside the word and letter evidence:
# little on a few words (where it guesses), more on longer prose (where it is reliable).
_LANGDETECT_WEIGHT_SHORT = 1.0
_LANGDETECT_WEIGHT_LONG = 3.0
_SHORT_WORDS = 8
# An unsupported language that langdetect is sure of wins over this much word evidence or less.
_UNSUPPORTED_MIN_PROB = 0.9
_UNSUPPORTED_MAX_EVIDENCE = 2.0


class _Evidence:
    """The word lists of kb/catalogue/language_words.yaml as per-word, per-letter weights."""

    def __init__(self, data: dict):
        self.words: dict[str, dict[str, float]] = {}
        owners: dict[str, set[str]] = {}
        for code, words in data["function_words"].items():
            for w in words:
                owners.setdefault(unicodedata.normalize("NFC", str(w)).lower(), set()).add(code)
        for w, codes in owners.items():
            self.words[w] = {c: 1.0 / len(codes) for c in codes}
        self.letters = {ch: {c: 1.0 / len(codes) for c in codes}
                        for ch, codes in data["letters"].items()}
        self.loanwords = frozenset(str(w).lower() for w in data["loanwords"])
        self.romanized = {code: frozenset(str(w).lower() for w in ws)
                          for code, ws in (data.get("romanized") or {}).items()}
        self.romanized_min = int(data.get("romanized_min_words", 3))


@lru_cache(maxsize=1)
def _evidence() -> _Evidence:
    return _Evidence(read_yaml(_WORDS_FILE))  # libyaml where PyYAML has it: ~10x faster


# Ordered: Kana before Han (Japanese mixes both), Hangul before Han.
_SCRIPTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ja", re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]")),
    ("ko", re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")),
    ("zh", re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
    ("ar", re.compile(r"[\u0600-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufeff]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
)
_MIN_SCRIPT_CHARS = 2

# Things a user pastes that say nothing about the language they write in.
_CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
_LOG_LINE = re.compile(
    r"^[ \t]*(?:Traceback|File \"|[A-Z]\d{4} \d\d:\d\d|\w+(?:\.\w+)*(?:Error|Exception)\b|"
    r"RESOURCE_EXHAUSTED|at |\$ |>>> |%|#\s*include|import |from \S+ import|def |\w+\[\d).*$",
    re.MULTILINE,
)
# Every pattern here reads user text, so each is linear in its length: a token is cut out whole
# (`\S+`) and judged by itself, never found by `\S*X\S*`, which rescans a long run of letters from
# every position (quadratic: 40k letters took 15 s). Tests time them on hostile inputs.
# an error message pasted inside a sentence ("mais maintenant : ValueError: One of ... (50257, 4096)). je
# fais quoi ?"): up to the end of its own sentence, or of the line
_INLINE_ERROR = re.compile(
    r"\b(?:[A-Za-z_.]*(?:Error|Exception)|RESOURCE_EXHAUSTED|INTERNAL|UNKNOWN):\s.*?(?:\.(?=\s)|$)", re.MULTILINE)
_WORD = re.compile(r"\S+")
_TECHNICAL = re.compile(r"[_/\\=<>{}\[\]()@#$\d]")  # identifiers, paths, shapes, numbers, versions
_NAME = re.compile(
    r"\b[A-Z][A-Z0-9]+\b"  # acronyms: HBM, TPU, OOM
    r"|\b\w+[a-z][A-Z]\w*\b"  # camelCase / CamelCase names
    r"|\b\w+\.\w+(?:\.\w+)*\b"  # dotted names: jax.jit
)
#: Language detection reads this much of a question (a pasted log in front of the prose fits); the
#: prose it scores is cut to _MAX_PROSE_CHARS, which is plenty to tell a language.
MAX_DETECT_CHARS = 8_000
_MAX_PROSE_CHARS = 2_000


#: Scripts written without spaces: a "token" there is a whole clause ("cacheのサイズを…28層、KV").
_UNSPACED = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\u4e00-\u9fff\u3400-\u4dbf\uac00-\ud7af]")
_ASCII_RUN = re.compile(r"[\x00-\x7f]+")


def _prose_token(m: re.Match[str]) -> str:
    token = m.group()
    if _UNSPACED.search(token):  # keep the clause's own letters, drop the code and numbers in it
        return _ASCII_RUN.sub(" ", token)
    if token.startswith("-") or _TECHNICAL.search(token):  # flags, identifiers, numbers: all of it
        return " "
    return _NAME.sub(" ", token)


class Detection(BaseModel):
    """The detected language; `language` is always a supported one, `detected` is what was seen."""

    language: str
    detected: str | None
    supported: bool
    method: str
    scores: dict[str, float] = {}  # per Latin-script language, when they were weighed


def base_language(code: str) -> str:
    """The primary language subtag of a code, lower-cased: `ZH`, `zh_CN` and `zh-Hant-TW` are `zh`."""
    return code.strip().lower().replace("_", "-").split("-")[0]


def is_supported(code: str) -> bool:
    return code in LANGUAGES


def language_name(code: str, in_language: str = "en") -> str:
    """The name of language `code` written in `in_language` (Babel's CLDR data), e.g.
    language_name("it") == "Italian", language_name("it", "ja") == "イタリア語"; the code itself
    when CLDR does not know it."""
    from babel import Locale, UnknownLocaleError

    try:
        name = Locale.parse(code.replace("-", "_")).get_display_name(in_language)
    except (UnknownLocaleError, ValueError, TypeError):
        return code
    return name or code


def join_sentences(parts, language: str) -> str:
    """Sentences of `language` one after another: no space between them in Chinese and Japanese."""
    return ("" if base_language(language) in ("zh", "ja") else " ").join(parts)


def strip_code(text: str) -> str:
    """The prose of `text`: without code spans, pasted log lines and technical tokens."""
    text = _CODE_SPAN.sub(" ", text)
    text = _LOG_LINE.sub(" ", text)
    text = _INLINE_ERROR.sub(" ", text)
    text = _WORD.sub(_prose_token, text)
    return " ".join(text.split())


def detect_language(text: str) -> Detection:
    """Detect the language of a question; unsupported or undecidable → English, flagged."""
    text = unicodedata.normalize("NFC", (text or "")[:MAX_DETECT_CHARS])
    prose = strip_code(text)[:_MAX_PROSE_CHARS]
    for code, pattern in _SCRIPTS:
        if len(pattern.findall(prose)) >= _MIN_SCRIPT_CHARS:
            return Detection(language=code, detected=code, supported=True, method="script")
    for code, pattern in _SCRIPTS:  # a question that is all code but one non-Latin word
        if len(pattern.findall(text)) >= _MIN_SCRIPT_CHARS:
            return Detection(language=code, detected=code, supported=True, method="script")
    letters = sum(ch.isalpha() for ch in prose)
    if letters < 3:
        return Detection(language=FALLBACK, detected=None, supported=True, method="default")
    return _latin(prose)


def _latin(prose: str, exhaustive: bool = False) -> Detection:
    """English, Portuguese, Spanish, French or German (or an unsupported Latin-script language):
    function words, telling letters and langdetect's probabilities, added up per language.
    `exhaustive` asks langdetect even where it cannot change the result (the tests compare)."""
    ev = _evidence()
    words = [w for w in re.findall(r"[^\W\d_]+", prose.lower()) if w not in ev.loanwords]
    content = " ".join(words)
    scores = dict.fromkeys(_LATIN_SUPPORTED, 0.0)
    for w in words:
        for code, weight in ev.words.get(w, {}).items():
            scores[code] += weight
    for ch in prose.lower():
        for code, weight in ev.letters.get(ch, {}).items():
            scores[code] += weight
    # How strongly the words speak for one supported language, each distinct word once (an
    # Italian "il ... il" is not twice the French evidence).
    distinct = dict.fromkeys(_LATIN_SUPPORTED, 0.0)
    for w in set(words):
        for code, weight in ev.words.get(w, {}).items():
            distinct[code] += weight
    evidence = max(distinct.values())
    # Hindi typed in Latin letters ("fir bhi OOM aa raha hai"): answered in Hindi
    for code, listed in ev.romanized.items():
        hits = len(listed.intersection(words))
        if hits >= ev.romanized_min and hits > evidence:
            return Detection(language=code, detected=code, supported=True, method="words",
                             scores={**scores, code: float(hits)})
    ld_weight = _LANGDETECT_WEIGHT_SHORT if len(words) < _SHORT_WORDS else _LANGDETECT_WEIGHT_LONG
    # langdetect adds at most `ld_weight` to any one language (its probabilities sum to 1 or
    # less) and can only call the text unsupported below _UNSUPPORTED_MAX_EVIDENCE: when the
    # words already lead by more than that, it cannot change the result and is not asked.
    lead, runner_up = sorted(scores.values(), reverse=True)[:2]
    decided = (not exhaustive and evidence >= _UNSUPPORTED_MAX_EVIDENCE
               and lead - runner_up > ld_weight * (1 + 1e-9))
    guesses = (_langdetect(content) if sum(ch.isalpha() for ch in content) >= 3 and not decided
               else [])
    for code, prob in guesses:
        if code in scores:
            scores[code] += ld_weight * prob
    top_other = next(((c, p) for c, p in guesses if c not in LANGUAGES), None)
    if (top_other and guesses[0][0] == top_other[0] and top_other[1] >= _UNSUPPORTED_MIN_PROB
            and evidence < _UNSUPPORTED_MAX_EVIDENCE and len(words) > 2):
        return Detection(language=FALLBACK, detected=top_other[0], supported=False,
                         method="langdetect")
    code = max(_LATIN_SUPPORTED, key=lambda c: scores[c])
    if scores[code] <= 0:
        # Nothing to go on ("help", "vmem limit"): too little to call a language.
        return Detection(language=FALLBACK, detected=None, supported=True, method="default")
    return Detection(language=code, detected=code, supported=True,
                     method="words" if evidence > 0 else "langdetect", scores=scores)


def _langdetect(text: str) -> list[tuple[str, float]]:
    from langdetect.lang_detect_exception import LangDetectException

    from oomkb.kb.language_profiles import detect_langs  # stock results, profiles from a fast cache

    try:
        found = detect_langs(text[:2000])
    except LangDetectException:
        return []
    out = []
    for g in found:
        code = g.lang.split("-")[0]
        if g.lang in ("zh-cn", "zh-tw"):
            code = "zh"
        out.append((code, g.prob))
    return out
