"""The one place that knows the supported languages and detects the language of a question.

A script-first rule decides for non-Latin scripts (langdetect is unreliable on short technical
questions such as `什么是 Vmem？`); Latin-script text goes to langdetect after pasted error lines,
code and identifiers are removed, since those are English whatever the asker writes.
"""

from __future__ import annotations

import re
import unicodedata

from pydantic import BaseModel

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
_SHORT_WORDS = 8  # below this, langdetect is unreliable and function words decide when they can

# Frequent function words of the supported Latin-script languages; words shared by several
# languages (a, de, la, que, ...) are left out so every hit is evidence for one language.
_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("what does do how is are the why can my to of with this that when which "
                    "should i it does not doesn't where there".split()),
    "pt": frozenset("o os uma como é não está por isso quando qual meu minha você "
                    "são também muito devo posso".split()),
    "es": frozenset("el los las cómo es qué por cuál mi está están cuando puedo debo "
                    "también muy hay".split()),
    "de": frozenset("der die das und ist wie was ich mein meine nicht mit warum wann kann "
                    "soll beim ein eine".split()),
    "fr": frozenset("le les et est comment quoi je mon ma pourquoi quand dans avec pas "
                    "puis dois une".split()),
}

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
    r"^\s*(?:Traceback|File \"|[A-Z]\d{4} \d\d:\d\d|\w+(?:\.\w+)*(?:Error|Exception)\b|"
    r"RESOURCE_EXHAUSTED|at |\$ |>>> |%|#\s*include|import |from \S+ import|def |\w+\[\d).*$",
    re.MULTILINE,
)
_TOKEN = re.compile(
    r"\S*[_/\\=<>{}\[\]()@#$]\S*"  # identifiers, paths, flags, shapes
    r"|--?\S+"  # command-line flags
    r"|\S*\d\S*"  # numbers, sizes, versions
    r"|\b[A-Z][A-Z0-9]+\b"  # acronyms: HBM, TPU, OOM
    r"|\b\w+[a-z][A-Z]\w*\b"  # camelCase / CamelCase names
    r"|\b\w+\.\w+(?:\.\w+)*\b"  # dotted names: jax.jit
)


class Detection(BaseModel):
    """The detected language; `language` is always a supported one, `detected` is what was seen."""

    language: str
    detected: str | None
    supported: bool
    method: str


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


def strip_code(text: str) -> str:
    """The prose of `text`: without code spans, pasted log lines and technical tokens."""
    text = _CODE_SPAN.sub(" ", text)
    text = _LOG_LINE.sub(" ", text)
    text = _TOKEN.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


def detect_language(text: str) -> Detection:
    """Detect the language of a question; unsupported or undecidable → English, flagged."""
    text = unicodedata.normalize("NFC", text or "")
    prose = strip_code(text)
    for code, pattern in _SCRIPTS:
        if len(pattern.findall(prose)) >= _MIN_SCRIPT_CHARS:
            return Detection(language=code, detected=code, supported=True, method="script")
    for code, pattern in _SCRIPTS:  # a question that is all code but one non-Latin word
        if len(pattern.findall(text)) >= _MIN_SCRIPT_CHARS:
            return Detection(language=code, detected=code, supported=True, method="script")
    letters = sum(ch.isalpha() for ch in prose)
    if letters < 3:
        return Detection(language=FALLBACK, detected=None, supported=True, method="default")
    guesses = _langdetect(prose)
    words = re.findall(r"[^\W\d_]+", prose.lower())
    if len(words) < _SHORT_WORDS:
        votes = {c: sum(w in fw for w in words) for c, fw in _FUNCTION_WORDS.items()}
        ranked = sorted(votes.items(), key=lambda kv: -kv[1])
        (code, hits), (_, second) = ranked[0], ranked[1]
        confident_other = bool(guesses) and guesses[0][0] not in LANGUAGES and guesses[0][1] >= 0.9
        if hits > second and not (confident_other and hits < 2):
            return Detection(language=code, detected=code, supported=True, method="words")
    if not guesses or len(words) <= 2 and guesses[0][0] not in LANGUAGES:
        # One or two words ("help", "vmem limit") carry too little to call a language unsupported.
        return Detection(language=FALLBACK, detected=None, supported=True, method="default")
    top_code, _ = guesses[0]
    if top_code in LANGUAGES:
        return Detection(language=top_code, detected=top_code, supported=True, method="langdetect")
    # Short Latin text often scores a near language first (pt vs gl, es vs ca): take a supported
    # Latin language when langdetect gives it real weight, otherwise say we fell back.
    for code, prob in guesses[1:]:
        if code in _LATIN_SUPPORTED and prob >= 0.2:
            return Detection(language=code, detected=top_code, supported=True, method="langdetect")
    return Detection(language=FALLBACK, detected=top_code, supported=False, method="langdetect")


def _langdetect(text: str) -> list[tuple[str, float]]:
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0
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
