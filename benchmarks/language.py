"""Language detection benchmark: accuracy of kb.language.detect_language on short questions
(3-12 words) in the 11 supported languages, per language, on the set the word lists were settled
on (tests/data/language_short.yaml) and on the held-out set written afterwards
(tests/data/language_short_heldout.yaml). Prints one JSON object.

    .venv/bin/python benchmarks/language.py
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from oomkb.kb.language import detect_language  # noqa: E402

SETS = {"tuning": "language_short.yaml", "heldout": "language_short_heldout.yaml"}


def load(name: str) -> list[dict]:
    path = ROOT / "tests" / "data" / name
    return yaml.safe_load(path.read_text(encoding="utf-8"))["questions"]


def evaluate(items: list[dict]) -> dict:
    right: Counter = Counter()
    total: Counter = Counter()
    mistakes = []
    t0 = time.perf_counter()
    for it in items:
        d = detect_language(it["q"])
        total[it["lang"]] += 1
        if d.language == it["lang"]:
            right[it["lang"]] += 1
        else:
            mistakes.append({"q": it["q"], "lang": it["lang"], "detected": d.language,
                             "method": d.method})
    n = sum(total.values())
    return {
        "questions": n,
        "accuracy": round(sum(right.values()) / n, 4),
        "per_language": {k: f"{right[k]}/{total[k]}" for k in total},
        "mistakes": mistakes,
        "ms_per_question": round((time.perf_counter() - t0) * 1000 / n, 2),
    }


def main() -> None:
    print(json.dumps({name: evaluate(load(f)) for name, f in SETS.items()},
                     ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
