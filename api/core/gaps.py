"""Coverage gaps: what oomkb failed to answer, grouped by meaning across languages.

The questions answered ``grounded: false`` or marked unhelpful are embedded with the same model as
the search (multilingual, so a Russian and a Hindi question about the same thing land together),
grouped greedily (each question joins the nearest group founder it is close enough to, or founds a
group: O(questions × groups), no question-by-question matrix), and reported biggest group first,
with examples, their languages and the guide section nearest to each group.

Anyone can add questions through `/v1/ask`, so the cost is bounded: each question is embedded from
its first MAX_EMBED_CHARS characters, in batches of EMBED_BATCH, once — its vector is stored in the
feedback database and reused by every later report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, Field

from oomkb.api.core.feedback import AnswerRecord, FeedbackStore, FeedbackUnavailable

#: Cosine above which two questions are taken as asking the same thing. Measured with the built-in
#: model on 3 questions in 3–4 languages each plus 6 others: translations of one question scored
#: 0.93–0.97, different questions at most 0.87 (median 0.80).
SAME_QUESTION_COSINE = 0.90
MAX_EXAMPLES = 5
#: What of a question is embedded (its start says what it asks) and how many at once:
#: 25 questions of 4,000 characters in one batch took 1.9 GB.
MAX_EMBED_CHARS = 500
EMBED_BATCH = 16
#: The report lists the biggest groups only (each costs a search for its nearest section).
MAX_GROUPS = 100


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
    groups_left_out: int = Field(default=0, description="smaller groups past MAX_GROUPS, not listed")


def question_vectors(records: Sequence[AnswerRecord], embed: Callable[[list[str]], np.ndarray],
                     store: FeedbackStore | None = None) -> np.ndarray:
    """One L2-normalised float32 row per record: stored vectors where they fit the model, the rest
    embedded in bounded batches (and stored, when `store` is given)."""
    rows: list[np.ndarray | None] = [
        np.frombuffer(r.vector, dtype=np.float32) if r.vector else None for r in records]

    def fill(indices: list[int]) -> None:
        for start in range(0, len(indices), EMBED_BATCH):
            batch = indices[start:start + EMBED_BATCH]
            texts = [records[i].question[:MAX_EMBED_CHARS] for i in batch]
            for i, v in zip(batch, np.asarray(embed(texts), dtype=np.float32)):
                rows[i] = v
                fresh[records[i].answer_id] = v.tobytes()

    fresh: dict[str, bytes] = {}
    fill([i for i, v in enumerate(rows) if v is None])
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    # Vectors stored under another model (another dimension) are embedded again.
    dim = len(rows[0]) if not fresh else len(np.frombuffer(next(iter(fresh.values())), dtype=np.float32))
    fill([i for i, v in enumerate(rows) if len(v) != dim])
    if store is not None and fresh:
        try:
            store.store_vectors(fresh)
        except FeedbackUnavailable:  # a read-only database still gets its report
            pass
    return np.vstack(rows)


def group_questions(records: Sequence[AnswerRecord], embed: Callable[[list[str]], np.ndarray],
                    nearest: Callable[[str, np.ndarray | None], str | None] | None = None,
                    since_days: float | None = None,
                    threshold: float = SAME_QUESTION_COSINE,
                    store: FeedbackStore | None = None) -> GapsReport:
    """Group `records` by meaning; `embed` returns L2-normalised rows, `nearest` a section id (given
    the question and its vector);
    `store` keeps the vectors it had to compute."""
    records = [r for r in records if r.question.strip()]
    if not records:
        return GapsReport(since_days=since_days, questions=0, groups=[])
    vectors = question_vectors(records, embed, store)
    founders = np.empty_like(vectors)  # row g: the vector of group g's founder
    clusters: list[list[int]] = []
    for i, v in enumerate(vectors):
        sims = founders[:len(clusters)] @ v
        best = int(sims.argmax()) if len(clusters) else -1
        if best >= 0 and sims[best] >= threshold:
            clusters[best].append(i)
        else:
            founders[len(clusters)] = v
            clusters.append([i])
    for n, group in enumerate(clusters):  # founder first, then by closeness to it
        founder = group[0]
        group.sort(key=lambda i, c=n, f=founder: (i != f, -float(founders[c] @ vectors[i])))
    clusters.sort(key=lambda g: (-len(g), -max(records[i].created for i in g)))
    groups = []
    for members in clusters[:MAX_GROUPS]:
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
            nearest_section=nearest(rows[0].question, vectors[members[0]]) if nearest else None,
            unhelpful=sum(1 for r in rows if r.helpful is False),
            ungrounded=sum(1 for r in rows if not r.grounded),
            comments=[c[:300] for r in rows for c in r.comments][:MAX_EXAMPLES],
        ))
    return GapsReport(since_days=since_days, questions=len(records), groups=groups,
                      groups_left_out=max(0, len(clusters) - MAX_GROUPS))


def searcher_functions(searcher) -> tuple[Callable[[list[str]], np.ndarray],
                                          Callable[[str, np.ndarray | None], str | None]]:
    """(embed, nearest) backed by the knowledge base's own searcher."""
    from oomkb.errors import OomkbError

    def embed(texts: list[str]) -> np.ndarray:
        return searcher.embed_queries(texts)

    def nearest(text: str, vector: np.ndarray | None = None) -> str | None:
        try:  # the vector is the embedded start of the text: the search reads that much
            found = searcher.search(text[:MAX_EMBED_CHARS], k=1, query_vector=vector)
        except OomkbError:
            return None
        return f"{found.results[0].doc_id}#{found.results[0].section}" if found.results else None

    return embed, nearest


__all__ = ["GapGroup", "GapsReport", "SAME_QUESTION_COSINE", "group_questions", "question_vectors",
           "searcher_functions"]
