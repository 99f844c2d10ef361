"""Coverage gaps: what oomkb failed to answer, grouped by meaning across languages.

The questions answered ``grounded: false`` or marked unhelpful are embedded with the same model as
the search (multilingual, so a Russian and a Hindi question about the same thing land together),
grouped greedily around their most central member, and reported biggest group first, with
examples, their languages and the guide section nearest to each group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, Field

from oomkb.api.feedback import AnswerRecord

#: Cosine above which two questions are taken as asking the same thing. Measured with the built-in
#: model on 3 questions in 3–4 languages each plus 6 others: translations of one question scored
#: 0.93–0.97, different questions at most 0.87 (median 0.80).
SAME_QUESTION_COSINE = 0.90
MAX_EXAMPLES = 5


class GapGroup(BaseModel):
    size: int
    languages: list[str]
    examples: list[str]
    nearest_section: str | None = Field(description="doc_id#section the group's central question is nearest to")
    unhelpful: int = Field(default=0, description="how many were marked unhelpful")
    ungrounded: int = Field(default=0, description="how many were answered grounded: false")
    comments: list[str] = []


class GapsReport(BaseModel):
    since_days: float | None
    questions: int
    groups: list[GapGroup]


def group_questions(records: Sequence[AnswerRecord], embed: Callable[[list[str]], np.ndarray],
                    nearest: Callable[[str], str | None] | None = None,
                    since_days: float | None = None,
                    threshold: float = SAME_QUESTION_COSINE) -> GapsReport:
    """Group `records` by meaning; `embed` returns L2-normalised rows, `nearest` a section id."""
    records = [r for r in records if r.question.strip()]
    if not records:
        return GapsReport(since_days=since_days, questions=0, groups=[])
    vectors = np.asarray(embed([r.question for r in records]), dtype=np.float32)
    sims = vectors @ vectors.T
    unassigned = set(range(len(records)))
    clusters: list[list[int]] = []
    while unassigned:
        # the question with the most unassigned neighbours founds the next group
        members = sorted(unassigned)
        sub = sims[np.ix_(members, members)] >= threshold
        centre = members[int(sub.sum(axis=1).argmax())]
        group = [i for i in members if sims[centre, i] >= threshold]
        group.sort(key=lambda i: -float(sims[centre, i]))
        clusters.append(group)
        unassigned.difference_update(group)
    clusters.sort(key=lambda g: (-len(g), -max(records[i].created for i in g)))
    groups = []
    for members in clusters:
        rows = [records[i] for i in members]
        examples: list[str] = []
        for r in rows:
            text = " ".join(r.question.split())[:300]
            if text not in examples:
                examples.append(text)
            if len(examples) == MAX_EXAMPLES:
                break
        groups.append(GapGroup(
            size=len(rows),
            languages=sorted({r.language for r in rows}),
            examples=examples,
            nearest_section=nearest(rows[0].question) if nearest else None,
            unhelpful=sum(1 for r in rows if r.helpful is False),
            ungrounded=sum(1 for r in rows if not r.grounded),
            comments=[c[:300] for r in rows for c in r.comments][:MAX_EXAMPLES],
        ))
    return GapsReport(since_days=since_days, questions=len(records), groups=groups)


def searcher_functions(searcher) -> tuple[Callable[[list[str]], np.ndarray], Callable[[str], str | None]]:
    """(embed, nearest) backed by the knowledge base's own searcher."""
    from oomkb.errors import OomkbError

    def embed(texts: list[str]) -> np.ndarray:
        return searcher.embed_queries(texts)

    def nearest(text: str) -> str | None:
        try:
            found = searcher.search(text[:2000], k=1)
        except OomkbError:
            return None
        return f"{found.results[0].doc_id}#{found.results[0].section}" if found.results else None

    return embed, nearest


__all__ = ["GapGroup", "GapsReport", "SAME_QUESTION_COSINE", "group_questions", "searcher_functions"]
