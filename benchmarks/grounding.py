"""Grounding benchmark: how often the assistant says "covered" for on-topic questions and "not
covered" for off-topic ones, on the training set and on the held-out set (written after the fit).

Prints one JSON object. Each question goes through the real assistant (`Assistant.ask`: language
detection, hybrid search, the pasted-error override, kb.grounding's model). `--fit` first refits
the model on the training questions (tests/data/grounding_train.yaml, the earlier rounds'
held-out parts grounding_heldout_r1.yaml, _r2.yaml and _r3.yaml, the retrieval sets, offtopic.yaml and
the review rounds' first turns, grounding_review_rounds.yaml), weighing both classes equally and
choosing the L2 strength by 5-fold cross-validation on them, and writes
kb/catalogue/grounding_model.yaml; the held-out file (grounding_heldout.yaml) is never used to fit
or choose anything.

    .venv/bin/python benchmarks/grounding.py [--fit] [--heldout-only]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import oomkb.api  # noqa: E402,F401  (libtpu process defaults)
import numpy as np  # noqa: E402
import yaml  # noqa: E402

DATA = ROOT / "tests" / "data"
L2_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)


def load_labelled(name: str) -> list[dict]:
    """Questions with `covered` (true or false), `lang` and `kind`, from one of the data files."""
    data = yaml.safe_load((DATA / name).read_text(encoding="utf-8"))
    if "questions" in data and name.startswith("grounding"):
        return [dict(q, source=name) for q in data["questions"]]
    if "questions" in data:  # offtopic.yaml
        return [dict(q, covered=False, kind="far", source=name) for q in data["questions"]]
    return [dict(q=q["q"], lang=q["lang"], covered=True, kind=q["doc"], source=name)
            for q in data["queries"]]


def training_set() -> list[dict]:
    return [*load_labelled("grounding_train.yaml"), *load_labelled("grounding_heldout_r1.yaml"),
            *load_labelled("grounding_heldout_r2.yaml"), *load_labelled("grounding_heldout_r3.yaml"),
            *load_labelled("queries.yaml"),
            *load_labelled("queries_heldout.yaml"), *load_labelled("offtopic.yaml"),
            *load_labelled("grounding_review_rounds.yaml")]


def heldout_set() -> list[dict]:
    path = DATA / "grounding_heldout.yaml"
    return load_labelled(path.name) if path.exists() else []


def feature_rows(searcher, items: list[dict]) -> list[dict[str, float]]:
    """Features as the assistant computes them (language, then search, then kb.grounding)."""
    from oomkb.api.core.assistant import Assistant
    from oomkb.kb.grounding import features
    from oomkb.kb.language import detect_language

    rows = []
    for it in items:
        language, _, _ = Assistant._language(None, detect_language(it["q"]))
        results = searcher.search(it["q"], k=5, query_language=language).results
        rows.append(features(it["q"], results, searcher))
    return rows


def cross_validate(rows, labels, l2: float, folds: int = 5) -> float:
    from oomkb.kb.grounding import fit

    order = np.random.default_rng(0).permutation(len(rows))
    wrong = {True: 0, False: 0}
    for k in range(folds):
        test = set(order[k::folds].tolist())
        model = fit([r for i, r in enumerate(rows) if i not in test],
                    [y for i, y in enumerate(labels) if i not in test], l2=l2)
        for i in test:
            wrong[labels[i]] += (model.probability(rows[i]) >= 0.5) != labels[i]
    # the balanced error: the mean of the two classes' error rates (there are more on-topic rows)
    return sum(wrong[c] / max(1, sum(1 for y in labels if y == c)) for c in (True, False)) / 2


def write_model(model, path: Path, cv: dict) -> None:
    header = (
        "# Fitted by `benchmarks/grounding.py --fit` (kb/grounding.py: logistic regression on\n"
        "# standardised features). Generated: do not edit by hand; refit after changing the\n"
        "# training questions or grounding_terms.yaml.\n"
        f"# 5-fold cross-validated balanced error (the mean of the two classes' error rates) on the\n"
        f"# training questions, per L2 strength: {cv}\n"
    )
    # The thresholds are chosen, not fitted: the file's own lines for them (and their comments) stay.
    kept = ""
    if path.exists():
        old = path.read_text(encoding="utf-8")
        start, end = old.find("\nthreshold:"), old.find("\ntrained_on:")
        if 0 <= start < end:
            kept = old[start + 1:end + 1]
    fitted = model.model_dump(exclude={"threshold", "named_topic_threshold"} if kept else set())
    trained_on = {"trained_on": fitted.pop("trained_on")}
    dump = lambda d: yaml.safe_dump(d, sort_keys=False, allow_unicode=True)  # noqa: E731
    path.write_text(header + dump(fitted) + kept + dump(trained_on), encoding="utf-8")


def evaluate(assistant, items: list[dict]) -> dict:
    from oomkb.api.schemas import AskRequest

    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    on = [0, 0]
    off = [0, 0]
    mistakes = []
    for it in items:
        r = assistant.ask(AskRequest(question=it["q"]))
        right = r.grounded == it["covered"]
        counter = on if it["covered"] else off
        counter[0] += right
        counter[1] += 1
        by_kind[it.get("kind", "?")][0] += right
        by_kind[it.get("kind", "?")][1] += 1
        if not right:
            mistakes.append({"q": it["q"], "lang": it["lang"], "on_topic": it["covered"],
                             "kind": it.get("kind"), "answered_grounded": r.grounded})
    return {
        "questions": len(items),
        "on_topic": on[1],
        "off_topic": off[1],
        "on_topic_accepted": round(on[0] / on[1], 4) if on[1] else None,
        "off_topic_rejected": round(off[0] / off[1], 4) if off[1] else None,
        "false_rejections": on[1] - on[0],
        "false_acceptances": off[1] - off[0],
        "languages": sorted({it["lang"] for it in items}),
        "by_kind": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_kind.items())},
        "mistakes": mistakes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="refit kb/catalogue/grounding_model.yaml")
    ap.add_argument("--heldout-only", action="store_true",
                    help="evaluate the held-out part only (the training part takes minutes)")
    args = ap.parse_args()

    from oomkb.api.core.assistant import Assistant
    from oomkb.kb import grounding
    from oomkb.kb.search import open_searcher

    searcher = open_searcher()
    assistant = Assistant(searcher)
    train = training_set()
    out: dict = {}
    if args.fit:
        t0 = time.perf_counter()
        rows = feature_rows(searcher, train)
        labels = [bool(it["covered"]) for it in train]
        cv = {l2: round(cross_validate(rows, labels, l2), 4) for l2 in L2_GRID}
        best = min(L2_GRID, key=lambda l2: (cv[l2], -l2))
        model = grounding.fit(rows, labels, l2=best)
        write_model(model, grounding.MODEL_FILE, cv)
        grounding.load_model.cache_clear()
        out["fit"] = {"l2": best, "cv_error": cv, "seconds": round(time.perf_counter() - t0, 1),
                      "weights": dict(zip(model.features, model.weights)), "bias": model.bias}
    t0 = time.perf_counter()
    out["train"] = None if args.heldout_only else evaluate(assistant, train)
    held = heldout_set()
    out["heldout"] = evaluate(assistant, held) if held else None
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
