"""The --vary search as an algorithm: deterministic memory and refusal patterns of real factories.

Each pattern is a small function of the value, shaped like what the compiler measures: a fixed
cost plus bytes per row rounded to the TPU's tiles, a factory that accepts only multiples of 128,
powers of two or divisors of a size, an out-of-memory compile that states a rounded figure.
"""

from __future__ import annotations

import math

import pytest

from oomkb.diagnostics.vary_search import Probe, Values, bisection_compiles, search, search_ahead

GIB = 1 << 30
CAPACITY = int(15.75 * GIB)


def hbm_probe(bytes_of, accepts=lambda v: True, *, capacity=CAPACITY, state_figure=True):
    """A probe over a memory model: fits when bytes <= capacity; an over-capacity compile states
    its need rounded to 0.01 GiB, as XLA's "Used 31.37G of 15.48G" does."""
    calls: list[int] = []

    def probe(value: int) -> Probe:
        calls.append(value)
        if not accepts(value):
            return Probe("refused")
        need = bytes_of(value)
        if need <= capacity:
            return Probe("fits", need, capacity, compiled=True)
        stated = round(need / GIB, 2) * GIB if state_figure else None
        return Probe("over", int(stated) if stated else None, capacity, compiled=True, exact=False)

    probe.calls = calls  # type: ignore[attr-defined]
    return probe


def truth(bytes_of, accepts, values):
    return max(v for v in values if accepts(v) and bytes_of(v) <= CAPACITY)


def tiled(fixed, per_row, tile=8):
    return lambda v: fixed + per_row * (math.ceil(v / tile) * tile)


PATTERNS = {
    "linear batch": (tiled(600 << 20, 64 << 10, tile=1), lambda v: True, Values(1, 1 << 18)),
    "batch padded to 8 rows": (tiled(2 << 30, 64 << 10), lambda v: True, Values(1, 1 << 18)),
    "seq, multiples of 128": (tiled(300 << 20, 52 << 10, tile=128), lambda v: v % 128 == 0,
                              Values(128, 1 << 20)),
    "block, powers of two": (lambda v: v * v * 16384, lambda v: v & (v - 1) == 0, Values(128, 2048)),
    "divisors of 6000": (lambda v: 1 << 30 + 0 if v <= 1500 else 20 * GIB,
                         lambda v: 6000 % v == 0, Values(1, 6000)),
    "step form": (tiled(1 << 30, 40 << 10, tile=128), lambda v: True, Values(128, 1 << 20, 128)),
    "listed values": (lambda v: v << 24, lambda v: True, Values.of([64, 128, 256, 512, 1024, 2048])),
}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_the_search_finds_the_true_boundary_within_bisections_count(name):
    bytes_of, accepts, values = PATTERNS[name]
    probe = hbm_probe(bytes_of, accepts)
    result = search(probe, values)
    domain = [values.at(i) for i in range(len(values))]
    expected = truth(bytes_of, accepts, domain)
    assert result.searched and result.largest == expected
    # verified: the answer fits and the next accepted value probed does not
    assert result.probes[expected].state == "fits"
    above = min(v for v in domain if v > expected and accepts(v))
    assert result.above == above and result.probes[above].state == "over"
    assert result.compiles <= result.bisection_compiles == bisection_compiles(len(values))


@pytest.mark.parametrize("name", list(PATTERNS))
def test_the_model_never_needs_more_compiles_than_plain_bisection(name):
    bytes_of, accepts, values = PATTERNS[name]
    model = search(hbm_probe(bytes_of, accepts), values)
    plain = search(hbm_probe(bytes_of, accepts), values, strategy="bisect")
    assert model.largest == plain.largest and model.above == plain.above
    assert model.compiles <= plain.compiles


def test_a_linear_batch_takes_a_handful_of_compiles_from_the_stated_figure_at_hi():
    bytes_of, accepts, values = PATTERNS["linear batch"]
    result = search(hbm_probe(bytes_of, accepts), values)
    assert result.compiles <= 8 < bisection_compiles(len(values)) // 2 + 1 == 11
    assert result.guesses >= 1


def test_without_a_stated_figure_the_model_falls_back_and_stays_within_the_count():
    bytes_of, accepts, values = PATTERNS["batch padded to 8 rows"]
    result = search(hbm_probe(bytes_of, accepts, state_figure=False), values)
    assert result.largest == truth(bytes_of, accepts, range(1, (1 << 18) + 1))
    assert result.compiles <= result.bisection_compiles


def test_a_known_fitting_value_is_reused_instead_of_compiling_lo():
    bytes_of, accepts, values = PATTERNS["seq, multiples of 128"]
    probe = hbm_probe(bytes_of, accepts)
    known = {4096: Probe("fits", bytes_of(4096), CAPACITY, compiled=True)}
    result = search(probe, values, known=known)
    assert 128 not in probe.calls and 4096 not in probe.calls
    assert result.largest == truth(bytes_of, accepts, range(128, (1 << 20) + 1, 128))
    assert result.largest != 4096


def test_refused_values_cost_no_compile_and_are_counted():
    bytes_of, accepts, values = PATTERNS["block, powers of two"]
    result = search(hbm_probe(bytes_of, accepts), values)
    assert result.largest == 512 and result.above == 1024
    assert result.compiles == sum(p.compiled for p in result.probes.values())
    assert result.refused_between > 0


def test_a_factory_that_refuses_everything_is_not_searched():
    result = search(hbm_probe(lambda v: 0, lambda v: False), Values(1, 1000))
    assert not result.searched and result.largest is None
    assert "refused every value" in result.reason and result.compiles == 0


def test_nothing_fits_is_an_answer_not_a_failure_to_search():
    result = search(hbm_probe(lambda v: 20 * GIB, lambda v: True), Values(1, 1000))
    assert result.searched and result.largest is None and result.above == 1


def test_everything_fits_takes_one_compile():
    result = search(hbm_probe(lambda v: 1 << 20, lambda v: True), Values(1, 1 << 30))
    assert result.largest == 1 << 30 and result.compiles == 1


def test_bisection_count_matches_its_definition():
    assert [bisection_compiles(n) for n in (1, 2, 3, 5, 262144)] == [1, 2, 3, 4, 20]


# --- several values per round (parallel plans: --workers, --ray) ------------------------------


def rounds_of(probe):
    """``probe`` as a round's callback: every value of the round, in order."""
    return lambda values: [probe(v) for v in values]


@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("name", list(PATTERNS))
def test_rounds_read_exactly_what_the_serial_search_reads(name, width):
    bytes_of, accepts, values = PATTERNS[name]
    serial = search(hbm_probe(bytes_of, accepts), values)
    parallel = search_ahead(rounds_of(hbm_probe(bytes_of, accepts)), values, width)
    assert (parallel.largest, parallel.above) == (serial.largest, serial.above)
    assert parallel.probes == serial.probes and parallel.compiles == serial.compiles
    assert parallel.rounds <= serial.compiles + parallel.refused_between


@pytest.mark.parametrize("width, most", [(3, 0.6), (7, 0.45)])
def test_bisection_s_rounds_fall_to_about_log_width_plus_one_of_the_range(width, most):
    # No figure to build a line from (no stated need): the search bisects; measured ahead,
    # each round covers about log2(width+1) of its steps.
    bytes_of, accepts, values = PATTERNS["batch padded to 8 rows"]
    serial = search(hbm_probe(bytes_of, accepts, state_figure=False), values)
    parallel = search_ahead(rounds_of(hbm_probe(bytes_of, accepts, state_figure=False)), values,
                            width)
    assert parallel.largest == serial.largest
    assert parallel.rounds <= math.ceil(most * serial.compiles)


def test_two_workers_measure_the_likelier_next_value_ahead():
    # The line through the measured figures says which way the current value goes; the value
    # the search would ask next on that side is measured with it.
    bytes_of, accepts, values = PATTERNS["batch padded to 8 rows"]
    serial = search(hbm_probe(bytes_of, accepts), values)
    parallel = search_ahead(rounds_of(hbm_probe(bytes_of, accepts)), values, 2)
    assert parallel.probes == serial.probes
    assert parallel.rounds <= math.ceil(0.6 * serial.compiles)


def test_a_round_of_one_is_the_serial_search():
    bytes_of, accepts, values = PATTERNS["linear batch"]
    serial = search(hbm_probe(bytes_of, accepts), values)
    one = search_ahead(rounds_of(hbm_probe(bytes_of, accepts)), values, 1)
    assert one.rounds == serial.compiles and one.ahead_unused == 0


def test_rounds_reuse_known_values():
    bytes_of, accepts, values = PATTERNS["seq, multiples of 128"]
    probe = hbm_probe(bytes_of, accepts)
    known = {4096: Probe("fits", bytes_of(4096), CAPACITY, compiled=True)}
    search_ahead(rounds_of(probe), values, 3, known=known)
    assert 4096 not in probe.calls
