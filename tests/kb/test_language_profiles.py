"""langdetect's profiles from the compact cache (kb/language_profiles.py): the same numbers and
the same detections as stock langdetect, a damaged cache rebuilt, an unwritable models folder
tolerated."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import langdetect
import pytest
import yaml
from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

from oomkb.kb import language_profiles as lp
from oomkb.kb.language import strip_code

DATA = Path(__file__).resolve().parents[1] / "data"

# Latin-script sentences in supported and unsupported languages, plus a few other scripts.
SENTENCES = [
    "The compiler ran out of memory while it was allocating the buffers for the second layer.",
    "O compilador ficou sem memória ao alocar os buffers da segunda camada do modelo.",
    "El compilador se quedó sin memoria al reservar los búferes de la segunda capa.",
    "Der Compiler hatte keinen Speicher mehr, als er die Puffer der zweiten Schicht anlegte.",
    "Le compilateur a manqué de mémoire en allouant les tampons de la deuxième couche.",
    "Il compilatore ha esaurito la memoria mentre allocava i buffer del secondo strato.",
    "De compiler had geen geheugen meer toen hij de buffers van de tweede laag toewees.",
    "Kompilatorowi zabrakło pamięci podczas przydzielania buforów drugiej warstwy modelu.",
    "Kompilátoru došla paměť při přidělování vyrovnávacích pamětí druhé vrstvy.",
    "Kompilatorn fick slut på minne när den allokerade buffertarna för det andra lagret.",
    "Compilatorul a rămas fără memorie în timp ce aloca bufferele celui de-al doilea strat.",
    "Derleyici ikinci katmanın arabelleklerini ayırırken belleği tükendi.",
    "Trình biên dịch đã hết bộ nhớ khi cấp phát bộ đệm cho lớp thứ hai.",
    "Kompiler kehabisan memori saat mengalokasikan buffer untuk lapisan kedua.",
    "Kääntäjältä loppui muisti, kun se varasi puskureita toiselle kerrokselle.",
    "A fordítónak elfogyott a memóriája a második réteg puffereinek lefoglalása közben.",
    "Ο μεταγλωττιστής έμεινε χωρίς μνήμη κατά την κατανομή των buffer.",
    "המהדר נגמר לו הזיכרון בזמן הקצאת המאגרים של השכבה השנייה.",
    "คอมไพเลอร์หน่วยความจำไม่พอขณะจัดสรรบัฟเฟอร์ของชั้นที่สอง",
    "see https://example.com/a?b=c or mail someone@example.com about it, por favor",
    "xyz qqq zzz",
]


def _questions() -> list[str]:
    out: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("q"), str):
                out.append(node["q"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(DATA.glob("*.yaml")):
        walk(yaml.safe_load(path.read_text(encoding="utf-8")))
    return out


def _probabilities(factory, text: str):
    detector = factory.create()
    detector.append(text)
    try:
        return [(g.lang, g.prob) for g in detector.get_probabilities()]
    except langdetect.lang_detect_exception.LangDetectException as exc:
        return f"error {exc.code}"


def _stock(text: str):
    try:
        return [(g.lang, g.prob) for g in langdetect.detect_langs(text)]
    except langdetect.lang_detect_exception.LangDetectException as exc:
        return f"error {exc.code}"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("OOMKB_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(DetectorFactory, "seed", 0)  # stock langdetect, as kb.language uses it
    return tmp_path / "home"


@pytest.fixture(scope="module")
def stock_factory():
    f = DetectorFactory()
    f.load_profile(PROFILES_DIRECTORY)
    return f


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory) -> bytes:
    """The bytes of a cache file written by kb.language_profiles (built once for the module)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OOMKB_HOME", str(tmp_path_factory.mktemp("built")))
        lp._load_factory()
        return lp.cache_path().read_bytes()


def _install(data: bytes) -> Path:
    path = lp.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _cached_factory():
    """A factory read from an existing cache; fails the test if the cache was not used."""
    f = lp._load_factory()
    assert isinstance(f.word_lang_prob_map, lp.ProfileTable), "the cache was not used"
    return f


def _is_stock(f) -> bool:
    return type(f.word_lang_prob_map) is dict


def test_the_cache_holds_langdetects_own_table(home, stock_factory):
    built = lp._load_factory()  # no cache yet: langdetect's loading, then the cache is written
    assert _is_stock(built)
    assert lp.cache_path().parent == home / "models"
    assert [p.name for p in (home / "models").iterdir()] == [lp.cache_path().name]  # no temp file
    fast = _cached_factory()
    assert fast.langlist == stock_factory.langlist and fast.seed == 0
    table, stock = fast.word_lang_prob_map, stock_factory.word_lang_prob_map
    assert len(table) == len(stock) and set(table) == set(stock)
    for word, row in stock.items():
        assert word in table
        assert table[word] == row  # every float64 exactly
    for word in ("", "qqqq", "ẞ", "\U0001f600", 3, None):
        assert word not in table
    with pytest.raises(KeyError):
        table["qqqq"]
    with pytest.raises(TypeError):
        table["a"] = [0.0]


def _assert_same_detections(texts):
    fast = _cached_factory()
    texts = texts + [strip_code(t).lower() for t in texts[::3]]  # the prose kb.language hands over
    mismatches = [t for t in texts if _probabilities(fast, t) != _stock(t)]
    assert mismatches == []


def test_cached_profiles_detect_like_stock_langdetect(home, good_cache):
    _install(good_cache)
    _assert_same_detections(_questions()[::8] + SENTENCES)


@pytest.mark.slow
def test_cached_profiles_detect_like_stock_langdetect_on_every_question(home, good_cache):
    _install(good_cache)
    texts = _questions() + SENTENCES
    assert len(texts) > 1000
    _assert_same_detections(texts)


def test_reading_the_cache_does_not_load_the_json_profiles(home, good_cache, monkeypatch):
    _install(good_cache)

    def forbidden(*args, **kwargs):
        raise AssertionError("langdetect's JSON profiles were loaded")

    with monkeypatch.context() as patched:
        patched.setattr(DetectorFactory, "load_profile", forbidden)
        fast = _cached_factory()
    text = "Come posso risolvere un errore di memoria esaurita sulla TPU?"
    assert _probabilities(fast, text) == _stock(text)


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_payload_byte(data: bytes) -> bytes:
    i = len(data) - 1000  # inside the probabilities
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]


def _flip_header_byte(data: bytes) -> bytes:
    i = data.index(b'"langlist"') + 14
    return data[:i] + b"x" + data[i + 1:]


def _resigned(data: bytes) -> bytes:
    """A checksum made anew over damaged bytes, as only a deliberate edit would."""
    return data + hashlib.sha256(data).digest()


def _bad_header_length(data: bytes) -> bytes:
    i = len(lp._MAGIC)
    return data[:i] + b"\xff\xff\xff\x7f" + data[i + 4:]


@pytest.mark.parametrize("damage", [
    _truncate, _flip_payload_byte, _flip_header_byte, _bad_header_length,
    lambda d: b"", lambda d: d[:10], lambda d: b"\x00" * len(d), lambda d: d + b"extra",
    lambda d: lp._MAGIC + b"\x05\x00\x00\x00[1,2]" + d[200:],
    lambda d: d[:-32] + bytes(32),  # the checksum itself
    lambda d: _resigned(_bad_header_length(d[:-32])),
    lambda d: _resigned(d[:-32].replace(b'"width": 55', b'"width": 3')),
    lambda d: _resigned(d[:-32].replace(b'"keys": ', b'"keys": 1')),
    lambda d: _resigned(d[:-32].replace(b'"format": ', b'"format": 9')),
    lambda d: _resigned(d[:-32].replace(b'"langlist": [', b'"langlist": [1, ')),
    lambda d: _resigned(d[:-32].replace(b'"langlist": [', b'"langlist": {"a": [')),
    lambda d: _resigned(d[:-32].replace(b'"sizes": [', b'"sizes": ["x", ')),
])
def test_a_damaged_cache_is_refused(home, good_cache, damage):
    assert lp._read_cache(_install(good_cache), lp._source_fingerprint()) is not None
    damaged = damage(good_cache)
    assert damaged != good_cache
    assert lp._read_cache(_install(damaged), lp._source_fingerprint()) is None


@pytest.mark.slow  # rebuilds the cache from the JSON profiles (~1 s each)
@pytest.mark.parametrize("damage", [_truncate, _flip_payload_byte])
def test_a_damaged_cache_is_rebuilt_and_results_stay_right(home, good_cache, damage):
    path = _install(damage(good_cache))
    rebuilt = lp._load_factory()  # the damaged file is not used: langdetect's loading instead
    assert _is_stock(rebuilt)
    assert path.read_bytes() == good_cache
    fast = _cached_factory()
    for text in SENTENCES[:8]:
        assert _probabilities(rebuilt, text) == _probabilities(fast, text) == _stock(text)


@pytest.mark.slow  # rebuilds the cache from the JSON profiles (~1 s each)
def test_a_cache_from_other_profiles_is_ignored_and_replaced(home, good_cache, monkeypatch):
    path = _install(good_cache)
    monkeypatch.setattr(lp, "_source_fingerprint", lambda: "another langdetect")
    assert _is_stock(lp._load_factory())
    assert path.read_bytes() != good_cache
    _cached_factory()  # the file written for the other profiles


def _assert_works_without_cache():
    for _ in range(2):
        f = lp._load_factory()
        assert _is_stock(f)
        for text in SENTENCES[:6]:
            assert _probabilities(f, text) == _stock(text)


@pytest.mark.slow  # rebuilds the cache from the JSON profiles (~1 s each)
def test_a_models_path_that_is_not_a_folder_still_detects(home):
    home.mkdir(parents=True)
    (home / "models").write_text("not a folder")
    _assert_works_without_cache()
    assert (home / "models").read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_a_read_only_models_folder_still_detects(home):
    models = home / "models"
    models.mkdir(parents=True)
    models.chmod(0o555)
    try:
        _assert_works_without_cache()
        assert list(models.iterdir()) == []
    finally:
        models.chmod(0o755)


def test_the_process_factory_is_made_once_and_detects_with_seed_zero(home):
    first = lp.factory()
    assert lp.factory() is first and first.seed == 0
    text = "Wie behebe ich den Speicherfehler bei der Kompilierung?"
    assert [(g.lang, g.prob) for g in lp.detect_langs(text)] == _stock(text)
