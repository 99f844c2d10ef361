"""The `--vary` search: the largest value of a factory's argument that fits, as a pure algorithm.

The search knows nothing about JAX: it asks a ``probe(value)`` callback, which answers
:class:`Probe` (fits / over / refused, the bytes measured or stated, whether it cost a compile),
so it can be tested on deterministic refusal and memory patterns as well as on real compiles.

* **The values** (:class:`Values`): every integer of ``LO..HI``, every STEP-th (``LO..HI:STEP``), or
  a list (``a,b,c``). Factories often accept only sparse values (multiples of 128, powers of two,
  divisors of a size): a refused value does not end the search; the nearest accepted value is
  looked for by *galloping on the refusal pattern*: the value itself, then the nearest multiples
  of 2, 3, 4, 5, 6, 8, 10, ... (2^i, 3*2^i, 5*2^i and 10^i), finer first.
* **The guesses**: a line through the measured points nearest the bracket (an exact compiled total
  where there is one, else the figure an out-of-memory compile states, e.g. "Used 31.37G of
  15.48G" at HI) says where memory reaches the capacity; a guess that keeps landing on the same
  side gallops away from it in doubling steps. Every guess is *safeguarded*: it is taken only when
  plain bisection could still finish within its own worst-case count from there, else the
  midpoint is probed. So the search never needs more compiles than plain bisection on the same
  values (:func:`bisection_compiles`), and usually far fewer.
* **The answer**: ``largest`` fits and ``above`` (the next accepted value probed) does not; or
  ``searched=False`` with the reason when no accepted value could be found to search at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Probe", "SearchResult", "Values", "bisection_compiles", "search", "search_ahead"]

#: Refused values tried while looking for one accepted value near a target, before giving up.
MAX_REFUSED_PER_LOOKUP = 96


@dataclass(frozen=True)
class Probe:
    """What one value measured: ``bytes`` is the figure compared with ``capacity`` (an exact
    compiled total, or the need an out-of-memory message states); ``compiled``: it cost a compile."""

    state: Literal["fits", "over", "refused"]
    bytes: int | None = None
    capacity: int | None = None
    compiled: bool = False
    exact: bool = True


@dataclass(frozen=True)
class Values:
    """The values searched, in increasing order: ``low..high`` every ``step``, or ``listed``."""

    low: int
    high: int
    step: int = 1
    listed: tuple[int, ...] | None = None

    @classmethod
    def of(cls, values: list[int] | tuple[int, ...]) -> Values:
        ordered = tuple(sorted(set(values)))
        return cls(low=ordered[0], high=ordered[-1], listed=ordered)

    def __len__(self) -> int:
        if self.listed is not None:
            return len(self.listed)
        return (self.high - self.low) // self.step + 1

    def at(self, index: int) -> int:
        return self.listed[index] if self.listed is not None else self.low + index * self.step

    def index(self, value: int) -> int | None:
        """The index of ``value``, or None when it is not one of the values."""
        if self.listed is not None:
            import bisect

            i = bisect.bisect_left(self.listed, value)
            return i if i < len(self.listed) and self.listed[i] == value else None
        if value < self.low or value > self.high or (value - self.low) % self.step:
            return None
        return (value - self.low) // self.step

    def floor_index(self, value: float) -> int:
        """The index of the largest value <= ``value`` (clamped to the values)."""
        if self.listed is not None:
            import bisect

            return max(0, bisect.bisect_right(self.listed, value) - 1)
        return max(0, min(len(self) - 1, math.floor((value - self.low) / self.step)))

    def describe(self) -> str:
        if self.listed is not None:
            return ",".join(str(v) for v in self.listed)
        return f"{self.low}..{self.high}" + (f":{self.step}" if self.step != 1 else "")


@dataclass
class SearchResult:
    """The search's answer and everything it measured (``probes``, keyed by value)."""

    largest: int | None
    above: int | None
    searched: bool
    reason: str | None
    compiles: int
    bisection_compiles: int
    probes: dict[int, Probe] = field(default_factory=dict)
    refused_between: int = 0
    guesses: int = 0
    #: Rounds of probes made at once (:func:`search_ahead`; :func:`search` makes one per probe).
    rounds: int = 0
    #: Compiles measured ahead that the search did not need (:func:`search_ahead`).
    ahead_unused: int = 0


def bisection_compiles(count: int) -> int:
    """Compiles plain bisection needs at most over ``count`` values: HI, LO, then halving the
    values strictly between a fitting and a failing one (ceil(log2(n - 1)))."""
    if count <= 1:
        return count
    return 2 + math.ceil(math.log2(count - 1))


def _alignments(span: int) -> list[int]:
    found = {1}
    for i in range(64):
        for base in (1, 3, 5):
            a = base << i
            if a <= span:
                found.add(a)
        if 10 ** i <= span:
            found.add(10 ** i)
    return sorted(found)


def _candidates(values: Values, alignments: list[int], target: int, lo: int, hi: int):
    """Indices strictly between ``lo`` and ``hi``, nearest ``target`` on the refusal pattern."""
    count = len(values)
    seen: set[int] = set()
    if values.listed is not None or values.step != 1:
        # The user named the values: the nearest ones first, outwards.
        yield from sorted(range(lo + 1, hi), key=lambda i: (abs(i - target), i))
        return
    t_value = values.at(target)
    lo_v, hi_v = values.at(lo) if lo >= 0 else values.low - 1, (
        values.at(hi) if hi < count else values.high + 1)
    for a in alignments:
        if a > hi_v - lo_v:
            break
        down = (t_value // a) * a
        up = down if down == t_value else down + a
        for v in sorted({down, up}, key=lambda v: (abs(v - t_value), v)):
            if lo_v < v < hi_v and v not in seen:
                seen.add(v)
                yield values.index(v)


def search(
    probe: Callable[[int], Probe],
    values: Values,
    *,
    known: dict[int, Probe] | None = None,
    strategy: Literal["model", "bisect"] = "model",
) -> SearchResult:
    """The largest of ``values`` whose probe fits (see the module docstring).

    ``known``: values measured before (e.g. the factory's default, compiled as the baseline);
    they are reused, never probed again, and cost no compile here. ``strategy="bisect"`` is plain
    bisection (midpoints only, the same refusal handling), kept to compare against.
    """
    memo: dict[int, Probe] = dict(known or {})
    fresh: set[int] = set()
    count = len(values)
    budget = bisection_compiles(count)
    state = {"compiles": 0, "guesses": 0, "rounds": 0}
    alignments = _alignments(max(1, values.high - values.low))

    def measure(value: int) -> Probe:
        if value not in memo:
            result = probe(value)
            memo[value] = result
            fresh.add(value)
            state["compiles"] += int(result.compiled)
            state["rounds"] += 1
        return memo[value]

    def candidates(target: int, lo: int, hi: int):
        return _candidates(values, alignments, target, lo, hi)

    def accepted_near(target: int, lo: int, hi: int) -> int | None:
        """The index nearest ``target`` (strictly inside (lo, hi)) whose value the factory takes."""
        refused = 0
        for i in candidates(target, lo, hi):
            if measure(values.at(i)).state != "refused":
                return i
            refused += 1
            if refused >= MAX_REFUSED_PER_LOOKUP:
                return None
        return None

    def result(largest: int | None, above: int | None, searched: bool, reason: str | None,
               refused_between: int = 0) -> SearchResult:
        return SearchResult(largest=largest, above=above, searched=searched, reason=reason,
                            compiles=state["compiles"], bisection_compiles=budget,
                            probes=memo, refused_between=refused_between,
                            guesses=state["guesses"], rounds=state["rounds"])

    # 1. HI, or the accepted value nearest it.
    top = accepted_near(count - 1, -1, count)
    if top is None:
        return result(None, None, False,
                      f"the factory refused every value tried in {values.describe()} "
                      f"({len(memo)} tried)")
    if memo[values.at(top)].state == "fits":
        return result(values.at(top), None, True, None)
    # 2. The bracket's low end: the largest known fitting value (no compile). Plain bisection
    #    compiles LO; the model search leaves it open (index -1, "below every value") and only
    #    reaches it if everything above is over, which keeps its count within bisection's.
    known_fits = [i for i in (values.index(v) for v, p in memo.items() if p.state == "fits")
                  if i is not None and i < top]
    lo = -1
    if strategy == "model" and known_fits:
        lo = max(known_fits)
    elif strategy == "bisect":
        found = accepted_near(0, -1, top)
        if found is None:
            return result(None, values.at(top), False,
                          f"below {values.at(top)} (which does not fit) the factory refused every "
                          f"value tried; give the values it accepts (NAME=LO..HI:STEP or NAME=a,b,c)")
        if memo[values.at(found)].state != "fits":
            return result(None, values.at(found), True, None)
        lo = found
    hi = top

    def tighten() -> None:
        nonlocal lo, hi
        for v, p in memo.items():
            i = values.index(v)
            if i is None or p.state == "refused":
                continue
            if p.state == "fits" and lo < i < hi:
                lo = i
        for v, p in memo.items():
            i = values.index(v)
            if i is not None and p.state == "over" and lo < i < hi:
                hi = i

    # 3. Narrow [lo, hi] until no accepted value lies between.
    run_side: str | None = None
    run = 0
    last = None
    refused_between = 0
    tighten()
    while hi - lo > 1:
        guess = _model_guess(values, memo, lo, hi) if strategy == "model" else None
        if guess is not None and run >= 2 and last is not None:
            stride = 1 << (run - 1)
            guess = min(guess, last - stride) if run_side == "over" else max(guess, last + stride)
        if guess is not None:
            guess = min(max(guess, lo + 1), hi - 1)
            worst = max(guess - lo - 1, hi - guess - 1)
            if state["compiles"] + 1 + math.ceil(math.log2(worst + 1)) > budget:
                guess = None  # not safe: bisection could no longer finish within its count
        if guess is None:
            target = lo + (hi - lo) // 2
        else:
            target = guess
            state["guesses"] += 1
        before = len(memo)
        found = accepted_near(target, lo, hi)
        refused_between += sum(1 for v in list(memo)[before:] if memo[v].state == "refused")
        if found is None:
            break  # no accepted value between: lo is the boundary on the values the factory takes
        side = "fits" if memo[values.at(found)].state == "fits" else "over"
        run = run + 1 if side == run_side else 1
        run_side, last = side, found
        if side == "fits":
            lo = found
        else:
            hi = found
        tighten()
    if lo < 0:
        reason = None if hi == 0 else (
            f"every value below {values.at(hi)} that was tried was refused by the factory")
        return result(None, values.at(hi), True, reason, refused_between)
    return result(values.at(lo), values.at(hi) if hi < count else None, True, None,
                  refused_between)


def _next_probe(values: Values, known: dict[int, Probe] | None, answers: dict[int, Probe],
                strategy: str) -> int | None:
    """The value :func:`search` would probe next after reading ``answers``; None when it would
    stop. The search is replayed from the start on the same answers, so it is in exactly the
    state the real one is in (it is deterministic)."""

    asked: list[int] = []
    stop = LookupError("the search asked for a value not answered yet")  # this one instance

    def ask(value: int) -> Probe:
        if value in answers:
            return answers[value]
        asked.append(value)
        raise stop

    try:
        search(ask, values, known=known, strategy=strategy)  # type: ignore[arg-type]
    except LookupError as err:
        if err is not stop:
            raise
        return asked[0]
    return None


def _supposed(known: dict[int, Probe], value: int, state: str) -> Probe:
    """A stand-in for ``value``'s probe, had it come out ``state``: its bytes on the line through
    the nearest measured figures (so the search can plan its next step from it)."""
    points = sorted((v, p) for v, p in known.items() if p.bytes is not None)
    capacity = next((p.capacity for _v, p in points if p.capacity), None)
    below = [(v, p.bytes) for v, p in points if v < value]
    above = [(v, p.bytes) for v, p in points if v > value]
    pair = (below[-1], above[0]) if below and above else (
        tuple(below[-2:]) if len(below) >= 2 else tuple(above[:2]) if len(above) >= 2 else None)
    figure = None
    if pair is not None and pair[1][0] != pair[0][0]:
        (v0, b0), (v1, b1) = pair
        figure = int(b0 + (b1 - b0) * (value - v0) / (v1 - v0))
    if figure is not None and capacity:
        figure = min(figure, capacity) if state == "fits" else max(figure, capacity + 1)
    if state == "refused":
        return Probe("refused")
    return Probe(state, figure, capacity, compiled=True)  # type: ignore[arg-type]


def _likely(known: dict[int, Probe], value: int) -> str:
    """``"fits"`` or ``"over"``: what the line through the nearest measured figures says of
    ``value`` (``"fits"`` when there is no line)."""
    supposed = _supposed(known, value, "fits")
    if supposed.bytes is not None and supposed.capacity and supposed.bytes >= supposed.capacity:
        return "over"
    return "fits"


def search_ahead(
    probe_many: Callable[[list[int]], list[Probe]],
    values: Values,
    width: int,
    *,
    known: dict[int, Probe] | None = None,
    strategy: Literal["model", "bisect"] = "model",
) -> SearchResult:
    """:func:`search`, with up to ``width`` values probed per round (on ``width`` workers).

    The search itself decides, exactly as :func:`search` does, so the answer and every value it
    reads are the serial search's. Each time it asks for a value not measured yet, the round
    measures that value together with the values the search would ask for next, for either
    outcome, breadth first (the search run ahead on supposed outcomes, :func:`_supposed`): a
    round covers about log2(width+1) of the search's steps, so the rounds fall from one per step
    to about log(width+1) of them. ``rounds`` counts them; ``probes`` holds only what the search
    read (the values measured ahead and not needed are ``ahead_unused``).
    """
    width = max(1, int(width))
    base = dict(known or {})
    read: dict[int, Probe] = {}
    fetched: dict[int, Probe] = {}
    rounds = 0

    def ahead(value: int) -> list[int]:
        chosen: list[int] = []
        frontier = [(dict(read), value)]
        # Where the factory has refused values, the next one is likely refused too.
        refusing = any(p.state == "refused" for p in read.values())
        while frontier and len(chosen) < width - 1:
            answers, at = frontier.pop(0)
            # The likelier outcome first: where the line through the measured figures puts it.
            likely = _likely({**base, **answers}, at)
            states = (("refused",) if refusing else ()) + (
                ("fits", "over") if likely == "fits" else ("over", "fits"))
            for state in states:
                supposed = {**answers, at: _supposed({**base, **answers}, at, state)}
                nxt = _next_probe(values, known, supposed, strategy)
                if nxt is not None and nxt != value and nxt not in chosen \
                        and nxt not in fetched and nxt not in supposed:
                    chosen.append(nxt)
                    frontier.append((supposed, nxt))
                if len(chosen) >= width - 1:
                    break
        return chosen

    def probe(value: int) -> Probe:
        nonlocal rounds
        if value not in fetched:
            batch = [value, *ahead(value)] if width > 1 else [value]
            for v, result in zip(batch, probe_many(batch)):
                fetched[v] = result
            rounds += 1
        read[value] = fetched[value]
        return fetched[value]

    result = search(probe, values, known=known, strategy=strategy)
    result.rounds = rounds
    result.ahead_unused = sum(p.compiled for v, p in fetched.items() if v not in read)
    return result


def _stated_error(probe: Probe) -> float:
    """How far a figure may be from the truth: 0 for an exact compiled total; half the last digit
    for a stated one (XLA prints two decimals of the unit it picks: "31.37G", "512.00M")."""
    if probe.exact or probe.bytes is None:
        return 0.0
    unit = next(u for u in (1 << 30, 1 << 20, 1 << 10, 1) if probe.bytes >= u or u == 1)
    return 0.005 * unit


def _model_guess(values: Values, memo: dict[int, Probe], lo: int, hi: int) -> int | None:
    """Where a line through the measured points nearest the bracket reaches the capacity: the
    low end of what the rounding of stated figures leaves uncertain (a guess that fits brings an
    exact total next to the boundary), or, once the bracket's low end is there, just past the
    high end (a guess that does not fit closes the bracket from above).

    The points, in order of preference: the two nearest exact fitting totals (an exact local
    slope) when both lie in the upper half below ``lo``; else the nearest fitting value at or
    below ``lo`` and the nearest value at or above ``hi`` that does not fit (exact totals preferred
    over stated figures); else the two nearest on one side. Never a line through far-away small
    values where fixed costs dominate, unless nothing nearer was measured.
    """
    lo_v = values.at(lo) if lo >= 0 else values.low - 1
    hi_v = values.at(hi)
    below = sorted((v, p) for v, p in memo.items()
                   if p.state == "fits" and p.bytes is not None and v <= lo_v)
    over = sorted(((v, p) for v, p in memo.items()
                   if p.state == "over" and p.bytes is not None and v >= hi_v),
                  key=lambda vp: (not vp[1].exact, vp[0]))
    exact_below = [(v, p) for v, p in below if p.exact]
    pairs = []
    if len(exact_below) >= 2 and exact_below[-2][0] * 2 >= lo_v \
            and exact_below[-2][1].bytes < exact_below[-1][1].bytes:
        pairs.append((exact_below[-2], exact_below[-1]))
    if below and over:
        pairs.append((below[-1], over[0]))
    if len(below) >= 2:
        pairs.append((below[-2], below[-1]))
    if len(over) >= 2:
        pairs.append(tuple(sorted(over[:2], key=lambda vp: vp[0])))
    estimates = []  # (low end, high end) of where each line says the boundary is
    for (v0, p0), (v1, p1) in pairs:
        capacity = p0.capacity or p1.capacity
        if v1 == v0 or p1.bytes <= p0.bytes or not capacity:
            continue
        slope = (p1.bytes - p0.bytes) / (v1 - v0)
        boundary = v0 + (capacity - p0.bytes) / slope
        e0, e1 = _stated_error(p0), _stated_error(p1)
        margin = (e0 + abs(capacity - p0.bytes) * (e0 + e1) / (p1.bytes - p0.bytes)) / slope
        estimates.append((boundary - margin, boundary + margin))
        if len(estimates) == 2:
            break
    if not estimates:
        return None
    # The window: the preferred line's, widened to where the next line disagrees (totals padded
    # to tiles are a staircase, and the compiler may refuse a little below the capacity).
    low_end = estimates[0][0] if estimates[0][0] == estimates[0][1] else min(
        e[0] for e in estimates)
    high_end = max(e[1] for e in estimates)
    centre = sum(estimates[0]) / 2
    low_guess = values.floor_index(low_end)
    high_guess = values.floor_index(high_end) + 1 if high_end < hi_v else hi
    # Aim at the end of the window whose likely outcome leaves the smaller bracket.
    if low_guess > lo and (hi_v - centre <= centre - lo_v or high_guess >= hi):
        return low_guess
    if high_guess < hi:
        return high_guess
    return low_guess if low_guess > lo else None
