"""QA on inputs nobody on the team wrote: real error texts from public trackers, user programs."""

from pathlib import Path

import pytest

from diagnostics.parse import parse_error

DATA = Path(__file__).parent / "data" / "qa"
G, M = 1 << 30, 1 << 20


def test_runtime_reservation_report_takes_every_figure_and_exact_bytes():
    # The runtime's report under a failed program reservation (pytorch/xla#1735): the exact byte
    # counts in parentheses win over the rounded ones, and the "Program hbm requirement" report
    # that follows belongs to this error (it is not a second, compile-time error).
    result = parse_error((DATA / "tpu_reserve_report.txt").read_text())
    assert (result.category, result.backend, result.memory_space) == ("runtime_allocation", "tpu", "hbm")
    assert result.requested_bytes == 4_237_689_856
    assert result.available_bytes == 8 * G
    assert result.exceeded_by_bytes == 2_735_391_744
    assert result.free_bytes == result.reservable_bytes == round(1.92 * G)
    assert result.total_hbm_usage_bytes == round(10.94 * G)
    assert result.program_requirement_bytes == round(4.34 * G)
    assert result.argument_bytes == round(478.07 * M)
    assert result.scoped_bytes == round(17.43 * M)
    assert result.hlo_temp_bytes == round(3.93 * G)
    assert result.hlo_temp_unpadded_bytes == round(3.81 * G)
    assert result.fragmentation_bytes == round(14.68 * M)


def test_reservation_without_report_keeps_the_rounded_request():
    result = parse_error(
        "RESOURCE_EXHAUSTED: Attempting to reserve 12.50G at the bottom of memory. That was not "
        "possible. There are 11.21G free, 0B reserved, and 11.21G reservable.\n"
    )
    assert result.requested_bytes == round(12.50 * G)
    assert result.available_bytes is None and result.hlo_temp_bytes is None
