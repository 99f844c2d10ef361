"""Byte sizes: the one place that reads and writes them.

XLA prints sizes in a short binary form (``8.00M``, ``49.34G``, ``512B``, ``1.0K``); other
tools write ``12.00MiB``, ``3 GiB`` or plain byte counts. All of these are binary units:
K = 2**10, M = 2**20, G = 2**30, T = 2**40 bytes, whether or not the ``i`` is spelled out
(``MB`` is read as MiB, as XLA and TensorFlow mean it).
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import Annotated

from pydantic import Field

from oomkb.errors import UserInputError

__all__ = ["GIB", "KIB", "MAX_BYTE_COUNT", "MIB", "ByteCount", "SIZE_PATTERN", "SizeFormatError", "UNIT_EXPONENTS",
           "format_bytes", "parse_size"]

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30


class SizeFormatError(UserInputError, ValueError):
    """A byte-size text such as ``"49.34G"`` could not be understood."""


#: Bound of a byte count in a measured report (estimate, profile): 2^53 - 1 (8 PiB), beyond any
#: device's memory and the largest integer that every JSON reader holds exactly (JavaScript, and
#: JSON Schema tools that compare bounds as floats). A report that claims more is refused when it
#: is read (422 over HTTP).
MAX_BYTE_COUNT = 2**53 - 1
ByteCount = Annotated[int, Field(ge=-MAX_BYTE_COUNT, le=MAX_BYTE_COUNT)]

# Power of 1024 for each unit letter.
UNIT_EXPONENTS: dict[str, int] = {"": 0, "B": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}

# A size as it appears inside a log line: a number, then an optional unit that is a whole
# token (so "30 Gbps" does not read as 30 G); a number without a unit must end there (not
# be the "49" of "49.34G"). Every quantifier is bounded, so scanning a
# large log with this pattern stays linear. Usable inside bigger regular expressions.
SIZE_PATTERN = (
    r"\d{1,20}(?:\.\d{1,12})?"
    r"(?:\s?(?:[KMGTPEkmgtpe](?:i?[Bb])?|[Bb]|[Bb]ytes?)(?![A-Za-z])|(?!\w|\.\d))"
)

_SIZE_RE = re.compile(
    r"\s*(?P<sign>[-+]?)\s*(?P<number>\d[\d,_]{0,40}(?:\.\d{1,40})?|\.\d{1,40})"
    r"\s*(?P<unit>[KMGTPE](?:I?B)?|B|BYTES?)?\s*",
    re.IGNORECASE,
)


def parse_size(text: str) -> int:
    """Return the number of bytes that ``text`` denotes, rounded to the nearest byte.

    Accepts ``"8.00M"``, ``"49.34G"``, ``"512B"``, ``"1.5K"``, ``"12.00MiB"``, ``"3 GiB"``,
    ``"214748364800"``, ``"214748364800 bytes"``, ``"2.00T"`` (binary units throughout).
    Raises :class:`SizeFormatError` (a ``ValueError``) for anything else.
    """
    if not isinstance(text, str):
        raise SizeFormatError(f"a size must be text such as '8.00M', not {type(text).__name__}")
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise SizeFormatError(
            f"cannot read {shown!r} as a byte size; write a number with an optional binary "
            "unit, e.g. '512B', '8.00M', '49.34G', '3 GiB' or '214748364800 bytes'"
        )
    unit = (match.group("unit") or "").upper()
    letter = "" if unit.startswith("BYTE") else unit[:1]
    with localcontext() as context:
        context.prec = 200  # exact for every number the pattern admits
        try:
            number = Decimal(match.group("number").replace(",", "").replace("_", ""))
        except InvalidOperation as err:  # pragma: no cover - the pattern admits only digits
            raise SizeFormatError(f"cannot read {text!r} as a byte size") from err
        scaled = number * (1024 ** UNIT_EXPONENTS[letter])
        value = scaled.quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return -int(value) if match.group("sign") == "-" else int(value)


_FORMAT_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(n: int) -> str:
    """Return ``n`` bytes in human binary units: ``"17.34 GiB"``, ``"8.00 MiB"``, ``"512 B"``.

    Values below 1 KiB are shown as whole bytes; negative values keep their sign
    (``"-1.50 GiB"``), which suits differences such as headroom.
    """
    n = int(n)
    sign = "-" if n < 0 else ""
    magnitude = abs(n)
    if magnitude < 1024:
        return f"{sign}{magnitude} B"
    exponent = 0
    while exponent < len(_FORMAT_UNITS) - 1 and magnitude >= 1024 ** (exponent + 1):
        exponent += 1
    with localcontext() as context:
        context.prec = max(60, len(str(magnitude)) + 4)  # exact even for absurd sizes (a forged report)
        scaled = Decimal(magnitude) / (1024**exponent)
        text = f"{scaled.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)}"
    if text == "1024.00" and exponent < len(_FORMAT_UNITS) - 1:
        # 1023.999 KiB rounds up to the next unit rather than printing "1024.00 KiB".
        text, exponent = "1.00", exponent + 1
    return f"{sign}{text} {_FORMAT_UNITS[exponent]}"
