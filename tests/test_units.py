"""Byte sizes: reading XLA's short forms and writing human binary units."""

from __future__ import annotations

import pytest

from oomkb.errors import UserInputError
from oomkb.units import SizeFormatError
from oomkb.units import format_bytes, parse_size

K, M, G, T = 2**10, 2**20, 2**30, 2**40


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.00M", 8 * M),
        ("6.43M", round(6.43 * M)),
        ("49.34G", round(49.34 * G)),
        ("17.34G", round(17.34 * G)),
        ("512B", 512),
        ("0B", 0),
        ("1.5K", 1536),
        ("4.0K", 4096),
        ("12.00MiB", 12 * M),
        ("3 GiB", 3 * G),
        ("214748364800", 214748364800),
        ("214748364800 bytes", 214748364800),
        ("1 byte", 1),
        ("2.00T", 2 * T),
        ("3.84T", round(3.84 * T)),
        ("48.5KiB", round(48.5 * K)),
        ("530.00M", 530 * M),
        ("7 kB", 7 * K),
        ("  95.74G  ", round(95.74 * G)),
        ("1,024 bytes", 1024),
    ],
)
def test_parse_size_reads_xla_and_binary_unit_forms_as_integer_bytes(text, expected):
    assert parse_size(text) == expected
    assert isinstance(parse_size(text), int)


def test_parse_size_treats_decimal_looking_units_as_binary():
    assert parse_size("1MB") == parse_size("1MiB") == parse_size("1M") == M
    assert parse_size("1GB") == G


def test_parse_size_rounds_to_the_nearest_byte():
    assert parse_size("0.4B") == 0
    assert parse_size("0.5B") == 1  # half rounds up, not to even
    assert parse_size("2.5B") == 3
    assert parse_size("1.001K") == 1025  # 1025.024


def test_parse_size_is_exact_for_large_values():
    assert parse_size("1.5E") == 3 * 2**59
    assert parse_size("123456789012.5G") == 123456789012 * G + G // 2


@pytest.mark.parametrize("bad", ["", "   ", "G", "lots", "12 parsecs", "1.2.3M", "--5M", "8.00 X"])
def test_parse_size_rejects_text_that_is_not_a_size_with_a_clear_message(bad):
    with pytest.raises(SizeFormatError) as caught:
        parse_size(bad)
    assert "byte size" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, UserInputError)


def test_parse_size_rejects_non_text():
    with pytest.raises(SizeFormatError):
        parse_size(12)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (1536, "1.50 KiB"),
        (8 * M, "8.00 MiB"),
        (round(17.34 * G), "17.34 GiB"),
        (round(49.34 * G), "49.34 GiB"),
        (2 * T, "2.00 TiB"),
        (-1536 * M, "-1.50 GiB"),
        (-512, "-512 B"),
        (M - 1, "1.00 MiB"),  # 1023.999 KiB shows as the next unit, not "1024.00 KiB"
    ],
)
def test_format_bytes_writes_human_binary_units(n, expected):
    assert format_bytes(n) == expected


@pytest.mark.parametrize("text", ["8.00M", "49.34G", "17.34G", "95.74G", "174.10G", "3.12M", "1.46G"])
def test_format_bytes_gives_back_the_figure_xla_printed(text):
    number, unit = text[:-1], text[-1]
    assert format_bytes(parse_size(text)) == f"{number} {unit}iB"
