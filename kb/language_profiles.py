"""langdetect's language profiles, read from a compact cache instead of 55 JSON files.

langdetect's own loader (``DetectorFactory.load_profile``) parses 55 JSON profiles and divides
every n-gram count in pure Python: about half a second of GIL-holding time in every fresh
process. Here the first process that needs langdetect loads the profiles that way once, and
writes the resulting table (n-gram → one probability per language) to a binary cache file in
the models folder; every later process reads that file (a few milliseconds) and hands langdetect's
own ``Detector`` a read-only table whose rows are built on first use from the cached numbers.
The numbers are the very float64 values langdetect computed, in its own language order, so
every detection result is identical to stock ``langdetect.detect_langs`` with seed 0.

The cache holds only numbers and strings (no pickle: a file in the user's folder cannot run
code). It is keyed by the installed langdetect version, the profile files' names, sizes and
times, and :data:`FORMAT`; it is written atomically (temp file + ``os.replace``) and checked by
size and SHA-256 when read, so a damaged file is rebuilt, never used. Where it cannot be written
(a read-only home) langdetect's normal loading is used, with the same results.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import tempfile
import threading
from array import array
from bisect import bisect_left
from importlib import metadata
from pathlib import Path

#: Bump when the file layout below changes; old files are then ignored (and replaced).
FORMAT = 1
_MAGIC = b"oomkb langdetect profiles\n"
_HEADER_LEN = struct.Struct("<I")
_DIGEST_LEN = 32  # the file ends with the SHA-256 of everything before it
_SEP = "\n"  # between n-grams in the key block (langdetect's n-grams are 1–3 characters, no "\n")
_INDEX_TYPE = "I"  # row offsets into the entry arrays
_COLUMN_TYPE = "H"  # language index of an entry
_VALUE_TYPE = "d"  # float64, langdetect's own Python floats

_lock = threading.Lock()
_factory = None


def detect_langs(text: str) -> list:
    """What ``langdetect.detect_langs(text)`` returns with ``DetectorFactory.seed = 0``."""
    detector = factory().create()
    detector.append(text)
    return detector.get_probabilities()


def factory():
    """The process's langdetect ``DetectorFactory`` (seed 0), filled from the cache if it can be."""
    global _factory
    if _factory is None:
        with _lock:
            if _factory is None:
                _factory = _load_factory()
    return _factory


def cache_path() -> Path:
    """The cache file for the installed langdetect, under the models folder."""
    from oomkb.settings import models_dir

    version = "".join(c if c.isalnum() or c in ".-" else "_" for c in _langdetect_version())
    return models_dir() / f"langdetect-profiles-{version}-f{FORMAT}.bin"


def _langdetect_version() -> str:
    try:
        return metadata.version("langdetect")
    except metadata.PackageNotFoundError:
        return "unknown"


def _profiles_dir() -> str:
    from langdetect.detector_factory import PROFILES_DIRECTORY

    return PROFILES_DIRECTORY


def _source_fingerprint() -> str:
    """langdetect's version and its profile files (in ``os.listdir`` order, the order langdetect
    numbers the languages in), with sizes and modification times."""
    directory = _profiles_dir()
    parts = [_langdetect_version(), sys.byteorder]
    for name in os.listdir(directory):
        try:
            st = os.stat(os.path.join(directory, name))
        except OSError:
            st = None
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}" if st else f"{name}:-")
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _load_factory():
    from langdetect.detector_factory import DetectorFactory

    fingerprint = _source_fingerprint()
    try:
        path = cache_path()
    except Exception:  # an unusable OOMKB_HOME setting: no cache, langdetect's own loading
        path = None
    if path is not None:
        table = _read_cache(path, fingerprint)
        if table is not None:
            f = DetectorFactory()
            f.langlist, f.word_lang_prob_map = table
            f.seed = 0
            return f
    f = DetectorFactory()
    f.load_profile(_profiles_dir())
    f.seed = 0
    if path is not None:
        _write_cache(path, fingerprint, f.langlist, f.word_lang_prob_map)
    return f


class ProfileTable(dict):
    """langdetect's ``word_lang_prob_map`` (n-gram → list of per-language probabilities) over the
    cached arrays. The n-grams are kept sorted and found by bisection; a row is built on first
    access and kept, so langdetect's repeated lookups of one n-gram are plain dict lookups.
    Read-only: langdetect's Detector only tests membership and reads rows."""

    __slots__ = ("_keys", "_offsets", "_columns", "_values", "_width")

    def __init__(self, keys: list[str], offsets: array, columns: array, values: array, width: int):
        super().__init__()
        self._keys, self._offsets, self._columns, self._values = keys, offsets, columns, values
        self._width = width

    def _locate(self, word: object) -> int:
        """The position of `word` among the sorted n-grams; -1 when no profile has it."""
        if not isinstance(word, str):
            return -1
        i = bisect_left(self._keys, word)
        return i if i < len(self._keys) and self._keys[i] == word else -1

    def __contains__(self, word: object) -> bool:
        return dict.__contains__(self, word) or self._locate(word) >= 0

    def __missing__(self, word: str) -> list[float]:
        i = self._locate(word)
        if i < 0:
            raise KeyError(word)
        start, end = self._offsets[i], self._offsets[i + 1]
        row = [0.0] * self._width
        for column, value in zip(self._columns[start:end], self._values[start:end]):
            row[column] = value
        dict.__setitem__(self, word, row)
        return row

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def get(self, word, default=None):
        return self[word] if word in self else default

    def keys(self):
        return list(self._keys)

    def values(self):
        return [self[k] for k in self._keys]

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def _read_only(self, *args, **kwargs):
        raise TypeError("langdetect's cached profile table is read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _read_only


def _encode(fingerprint: str, langlist: list[str], table: dict) -> bytes | None:
    """The cache file's bytes; None when the table does not fit the layout."""
    import numpy as np  # only when the cache is written

    keys = sorted(table)  # found by bisection when read
    width = len(table[keys[0]]) if keys else len(langlist)
    if (any(_SEP in k for k in keys) or any(len(table[k]) != width for k in keys)
            or width >= 1 << (8 * array(_COLUMN_TYPE).itemsize)):
        return None
    flat = array("d")
    for k in keys:
        flat.extend(table[k])  # TypeError on anything but floats
    matrix = np.frombuffer(flat, dtype=np.float64).reshape(len(keys), width)
    kept = (matrix != 0.0) | np.signbit(matrix)  # every entry but +0.0 (a -0.0 keeps its sign)
    rows, columns = np.nonzero(kept)  # row by row, columns ascending
    offsets = np.zeros(len(keys) + 1, dtype=np.dtype(_INDEX_TYPE))
    np.cumsum(kept.sum(axis=1), out=offsets[1:])
    blocks = [_SEP.join(keys).encode("utf-8"), offsets.tobytes(),
              columns.astype(np.dtype(_COLUMN_TYPE)).tobytes(),
              matrix[rows, columns].astype(np.dtype(_VALUE_TYPE)).tobytes()]
    header = json.dumps({
        "format": FORMAT, "source": fingerprint, "langlist": langlist, "width": width,
        "keys": len(keys), "entries": len(rows), "sizes": [len(b) for b in blocks],
        "itemsizes": [array(t).itemsize for t in (_INDEX_TYPE, _COLUMN_TYPE, _VALUE_TYPE)],
    }).encode("utf-8")
    data = b"".join([_MAGIC, _HEADER_LEN.pack(len(header)), header, *blocks])
    return data + hashlib.sha256(data).digest()


def _decode(data: bytes, fingerprint: str) -> tuple[list[str], ProfileTable] | None:
    """The language list and table in a cache file's bytes; None unless every check passes."""
    start = len(_MAGIC) + _HEADER_LEN.size
    if (not data.startswith(_MAGIC) or len(data) < start + _DIGEST_LEN
            or hashlib.sha256(memoryview(data)[:-_DIGEST_LEN]).digest() != data[-_DIGEST_LEN:]):
        return None
    (header_len,) = _HEADER_LEN.unpack_from(data, len(_MAGIC))
    header = json.loads(data[start:start + header_len].decode("utf-8"))
    payload = memoryview(data)[start + header_len:-_DIGEST_LEN]
    itemsizes = [array(t).itemsize for t in (_INDEX_TYPE, _COLUMN_TYPE, _VALUE_TYPE)]
    if (not isinstance(header, dict) or header.get("format") != FORMAT
            or header.get("source") != fingerprint or header.get("itemsizes") != itemsizes):
        return None
    sizes, n_keys, n_entries, width = (header["sizes"], header["keys"], header["entries"],
                                       header["width"])
    langlist = header["langlist"]
    if (len(sizes) != 4 or sum(sizes) != len(payload)
            or sizes[1] != (n_keys + 1) * itemsizes[0] or sizes[2] != n_entries * itemsizes[1]
            or sizes[3] != n_entries * itemsizes[2]
            or not isinstance(langlist, list) or not langlist
            or not all(isinstance(x, str) for x in langlist) or len(langlist) > width):
        return None
    blocks, pos = [], 0
    for size in sizes:
        blocks.append(payload[pos:pos + size])
        pos += size
    keys = str(blocks[0], "utf-8").split(_SEP) if n_keys else []
    offsets, columns, values = array(_INDEX_TYPE), array(_COLUMN_TYPE), array(_VALUE_TYPE)
    offsets.frombytes(blocks[1])
    columns.frombytes(blocks[2])
    values.frombytes(blocks[3])
    if (len(keys) != n_keys or keys != sorted(keys) or offsets[0] != 0 or offsets[-1] != n_entries
            or (n_entries and max(columns) >= width)):
        return None
    return langlist, ProfileTable(keys, offsets, columns, values, width)


def _read_cache(path: Path, fingerprint: str) -> tuple[list[str], ProfileTable] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return _decode(data, fingerprint)
    except Exception:  # a damaged file in any way at all: rebuilt, never used
        return None


def _write_cache(path: Path, fingerprint: str, langlist: list[str], table: dict) -> None:
    """Write the cache atomically; silently nothing where the folder is not writable."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            try:
                data = _encode(fingerprint, list(langlist), table)
            except (TypeError, ValueError, OverflowError):  # a table unlike langdetect's
                data = None
            if data is None:
                return
            fh.write(data)
        os.chmod(tmp, 0o644)  # numbers anyone may read, like the models beside it
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
