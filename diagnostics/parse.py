"""Read an out-of-memory error out of a whole log.

``parse_error(text)`` finds the OOM message in a log (timestamps, Python tracebacks, libtpu
log prefixes, ANSI colours and Windows line endings included), classifies it into one of
the documented categories (README) and returns every size it states as integer bytes. The wordings it
knows are data, in ``signatures.yaml``; this module only applies them.

How a log is read:

1. The text is normalised: line endings, ANSI escape codes, control characters and log-line
   prefixes (``E1129 20:43:12.123456  1234 tpu_compiler.cc:123]``) are removed, so that a
   message split over several prefixed lines reads as one text.
2. Every *primary* signature is searched over the whole log. The primary match is the one
   with the highest priority (the most specific wording); ties go to the first in the log.
3. The *error block* around it runs up to the next repeat of the same message or the next
   message of another category. Matches inside it of the same category (other primary
   wordings and *detail* lines such as ``Scoped allocation with size ...`` or the ``Total hbm
   usage`` report) fill in fields the primary match left empty; an allocation report
   (``Largest program allocations in hbm``, ``Peak buffers``) becomes ``allocations``.
4. Missing figures are derived (``used = TensorCore + SparseCore``, ``exceeded_by = used -
   available``) and the backend is inferred from the wording or from cues in the log.

Every regular expression has bounded quantifiers, so the work is linear in the log size.
"""

from __future__ import annotations

import math
import re
import typing
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oomkb.diagnostics.exceptions import LogReadError, SignatureCatalogueError
from oomkb.units import SIZE_PATTERN, SizeFormatError, parse_size

__all__ = [
    "CATEGORIES",
    "Allocation",
    "ParsedError",
    "SignatureCatalogue",
    "decode_log",
    "load_signatures",
    "parse_error",
    "read_log",
]

Category = Literal[
    "compile_hbm_oom", "runtime_allocation", "scoped_vmem_oom", "gpu_oom", "host_oom", "unknown",
    "compile_smem_oom", "other_framework_oom",
]
Backend = Literal["tpu", "gpu", "cpu"]
CATEGORIES: tuple[str, ...] = typing.get_args(Category)
BACKENDS: tuple[str, ...] = typing.get_args(Backend)

SIGNATURES_PATH = Path(__file__).with_name("signatures.yaml")

# Limits that keep a pathological log from costing more than a linear scan.
_MAX_HITS_PER_SIGNATURE = 2000
_LOOKBACK_CHARS = 2000  # how far before the primary message its block may start
_HEADER_CHARS = 300  # how far before it a header line still belongs to the message
_MAX_BLOCK_CHARS = 400_000  # how far after it the block may run
_MAX_ALLOCATIONS = 1000
_MAX_MESSAGE_LINE_CHARS = 2000
_MAX_MESSAGE_CHARS = 4000
_MAX_CUE_HITS = 50


# --------------------------------------------------------------------------- result models


class Allocation(BaseModel):
    """One buffer from an allocation report printed with an OOM error."""

    model_config = ConfigDict(extra="forbid")

    rank: int | None = Field(None, description="position in the report (1 = largest)")
    size_bytes: int | None = Field(None, description="size as allocated, padding included")
    shape: str | None = None
    unpadded_size_bytes: int | None = None
    padded_size_bytes: int | None = Field(
        None, description="size with padding; equals size_bytes when an unpadded size is given"
    )
    padding_bytes: int | None = Field(None, description="extra memory due to padding")
    expansion_factor: float | None = Field(None, description="padding expansion, e.g. 32.0")
    op_type: str | None = None
    op_name: str | None = Field(None, description="JAX/TF op name from the operator metadata")
    source_file: str | None = None
    source_line: int | None = None
    source: str | None = Field(None, description="'file:line' when the report gives both")
    instruction: str | None = Field(None, description="HLO instruction from the XLA label")
    xla_label: str | None = None
    allocation_type: str | None = Field(None, description="e.g. 'HLO temp', 'entry parameter'")


class ParsedError(BaseModel):
    """An out-of-memory error read from a log: its category and every figure, in bytes.

    The first thirteen fields are the documented ``diagnose --json`` shape; the rest are
    extras that the message or its reports state.
    """

    model_config = ConfigDict(extra="forbid")

    category: Category = "unknown"
    backend: Backend | None = None
    memory_space: str | None = None
    requested_bytes: int | None = None
    available_bytes: int | None = None
    used_bytes: int | None = None
    exceeded_by_bytes: int | None = None
    free_bytes: int | None = None
    tensorcore_bytes: int | None = None
    sparsecore_bytes: int | None = None
    shape: str | None = None
    instruction: str | None = None
    custom_call_target: str | None = None

    message: str | None = Field(None, description="the matched error line(s), trimmed")
    error_code: str | None = Field(None, description="XLA error code such as 'E1000'")
    signature: str | None = Field(None, description="id of the signature that matched")
    line: int | None = Field(None, description="1-based line of the log where it was found")
    allocations: list[Allocation] = Field(default_factory=list)

    # Runtime allocator.
    reserved_bytes: int | None = None
    reservable_bytes: int | None = None
    largest_free_block_bytes: int | None = None
    program_name: str | None = None
    device: str | None = None
    device_ordinal: int | None = None
    # XLA:TPU compile-time HBM report.
    total_hbm_usage_bytes: int | None = None
    program_bytes: int | None = None
    argument_bytes: int | None = None
    output_bytes: int | None = None
    output_aliased_bytes: int | None = None
    program_requirement_bytes: int | None = None
    global_bytes: int | None = None
    scoped_bytes: int | None = None
    hlo_temp_bytes: int | None = None
    hlo_temp_unpadded_bytes: int | None = None
    hlo_temp_padded_bytes: int | None = None
    hlo_temp_utilization_percent: float | None = None
    fragmentation_bytes: int | None = None
    fragmentation_percent: float | None = None
    allocation_name: str | None = None
    allocation_tag: str | None = None
    opcode: str | None = None
    # XLA:GPU buffer assignment and rematerialization.
    parameter_allocation_bytes: int | None = None
    constant_allocation_bytes: int | None = None
    maybe_live_out_allocation_bytes: int | None = None
    preallocated_temp_allocation_bytes: int | None = None
    total_allocation_bytes: int | None = None
    remat_limit_bytes: int | None = None
    schedule_arguments_bytes: int | None = Field(
        None, description="XLA:GPU's scheduler: the jitted function's inputs and outputs (\"exceeds the base limit\")")
    schedule_limit_bytes: int | None = Field(None, description="XLA:GPU's scheduler: the memory it schedules for")
    pool_limit_bytes: int | None = Field(None, description="the GPU allocator pool's limit (BFC stats)")
    pool_in_use_bytes: int | None = Field(None, description="what the GPU allocator pool had in use (BFC stats)")
    remat_reduced_to_bytes: int | None = None
    # Another framework's allocator (PyTorch's caching allocator).
    allocated_bytes: int | None = Field(None, description="held by the framework's live tensors")
    reserved_unallocated_bytes: int | None = Field(
        None, description="reserved by the framework's allocator but not in use"
    )
    process_used_bytes: int | None = Field(None, description="device memory the process uses")
    # TensorFlow-style allocator messages.
    allocator: str | None = None
    dtype: str | None = None
    # Host.
    process_name: str | None = None
    pid: int | None = None
    total_vm_bytes: int | None = None
    anon_rss_bytes: int | None = None


def _field_kinds(model: type[BaseModel]) -> dict[str, type]:
    """Map each scalar field of ``model`` to int, float or str (lists are left out)."""
    kinds: dict[str, type] = {}
    for name, info in model.model_fields.items():
        args = [a for a in typing.get_args(info.annotation) if a is not type(None)]
        annotation = args[0] if args else info.annotation
        if typing.get_origin(annotation) is Literal:
            kinds[name] = str
        elif annotation in (int, float, str):
            kinds[name] = annotation
    return kinds


_ERROR_FIELDS = _field_kinds(ParsedError)
_ALLOCATION_FIELDS = _field_kinds(Allocation)
# Fields a signature may not set: they describe the match, not the message.
_RESERVED_FIELDS = {"category", "backend", "message", "error_code", "signature", "line"}


# ----------------------------------------------------------------------- the catalogue


class CategoryRule(BaseModel):
    """Change category/backend/memory space when a captured value matches ``pattern``."""

    model_config = ConfigDict(extra="forbid")

    field: str
    pattern: str
    category: Category | None = None
    backend: Backend | None = None
    memory_space: str | None = None


class SignatureSpec(BaseModel):
    """One error wording, as written in ``signatures.yaml``."""

    model_config = ConfigDict(extra="forbid")

    id: str
    category: Category
    role: Literal["primary", "detail"] = "primary"
    priority: int = 30
    needle: str
    regex: str
    memory_space: str | None = None
    backend: Backend | None = None
    applies_to: list[Category] = Field(default_factory=list)
    category_when: list[CategoryRule] = Field(default_factory=list)
    derive: list[Literal["tensor_bytes", "instruction_from_tag"]] = Field(default_factory=list)
    latest: bool = Field(default=False, description=(
        "a wording quoted in prose: the last of several is the current state (\"before X, now Y\")"))
    default_unit: dict[str, str] = Field(default_factory=dict)
    decimal_units: bool = Field(
        False, description="the wording's K/M/G are powers of 1000 (Mosaic: '268.96MB')"
    )


class AllocationReportSpec(BaseModel):
    """Where an allocation report starts and how each of its items starts."""

    model_config = ConfigDict(extra="forbid")

    id: str
    start: str
    item: str
    end: str | None = None


class CatalogueFile(BaseModel):
    """The whole of ``signatures.yaml``."""

    model_config = ConfigDict(extra="forbid")

    signatures: list[SignatureSpec]
    allocation_reports: list[AllocationReportSpec] = Field(default_factory=list)
    allocation_fields: list[str] = Field(default_factory=list)
    error_code_patterns: list[str] = Field(default_factory=list)
    dtype_bytes: dict[str, int] = Field(default_factory=dict)
    backend_cues: dict[Backend, list[str]] = Field(default_factory=dict)
    backend_cue_ignore: list[str] = Field(default_factory=list)
    line_prefixes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class _Signature:
    spec: SignatureSpec
    regex: re.Pattern[str]
    rules: tuple[tuple[CategoryRule, re.Pattern[str]], ...]

    @property
    def categories(self) -> set[str]:
        """Every category a match of this signature may count towards."""
        found = {self.spec.category, *self.spec.applies_to}
        found.update(rule.category for rule, _ in self.rules if rule.category)
        return found


@dataclass(frozen=True)
class _AllocationReport:
    spec: AllocationReportSpec
    start: re.Pattern[str]
    item: re.Pattern[str]
    end: re.Pattern[str] | None


@dataclass(frozen=True)
class SignatureCatalogue:
    """The compiled contents of ``signatures.yaml``."""

    signatures: tuple[_Signature, ...]
    reports: tuple[_AllocationReport, ...]
    allocation_fields: tuple[re.Pattern[str], ...]
    error_codes: tuple[re.Pattern[str], ...]
    dtype_bytes: dict[str, int]
    backend_cues: dict[str, tuple[str, ...]]
    cue_ignore: tuple[str, ...]
    line_prefix: re.Pattern[str] | None


def _flexible_spaces(pattern: str) -> str:
    r"""Let each literal space of a signature also match a line break with indentation.

    Pasted and wrapped logs break long messages anywhere ("Ran out of memory in memory
    space\n  hbm."), so a space outside character classes becomes ``(?:\s{1,8})``.
    """
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            if char == "]" and not (out and out[-1] in ("[", "[^")):
                in_class = False
            out.append(char)
        elif char == "[":
            in_class = True
            if pattern.startswith("[^", index):
                out.append("[^")
                index += 2
                continue
            out.append(char)
        elif char == " ":
            out.append(r"(?:\s{1,8})")
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _compile(pattern: str, where: str, flags: int = 0, flexible: bool = False) -> re.Pattern[str]:
    if flexible:
        pattern = _flexible_spaces(pattern)
    try:
        return re.compile(pattern.replace("{SIZE}", SIZE_PATTERN), flags)
    except re.error as err:
        raise SignatureCatalogueError(f"{where}: invalid regular expression: {err}") from err


def _check_groups(regex: re.Pattern[str], allowed: dict[str, type], where: str) -> None:
    for name in regex.groupindex:
        base = name.split("__", 1)[0]
        if base.startswith("_"):
            continue
        if base not in allowed or base in _RESERVED_FIELDS:
            raise SignatureCatalogueError(
                f"{where}: group {name!r} names no field; use one of {sorted(allowed)} "
                "or start scratch groups with '_'"
            )


def _build_catalogue(raw: Any, source: str) -> SignatureCatalogue:
    try:
        data = CatalogueFile.model_validate(raw)
    except ValidationError as err:
        raise SignatureCatalogueError(f"{source} does not have the expected shape:\n{err}") from err
    seen: set[str] = set()
    signatures = []
    for spec in data.signatures:
        where = f"{source}: signature {spec.id!r}"
        if spec.id in seen:
            raise SignatureCatalogueError(f"{where}: duplicate id")
        seen.add(spec.id)
        if spec.needle != spec.needle.lower() or not spec.needle:
            raise SignatureCatalogueError(f"{where}: needle must be non-empty lower-case text")
        regex = _compile(spec.regex, where, flexible=True)
        _check_groups(regex, _ERROR_FIELDS, where)
        rules = tuple(
            (rule, _compile(rule.pattern, f"{where} category_when", re.IGNORECASE))
            for rule in spec.category_when
        )
        signatures.append(_Signature(spec, regex, rules))
    reports = []
    for report in data.allocation_reports:
        where = f"{source}: allocation report {report.id!r}"
        item = _compile(report.item, where, re.MULTILINE)
        _check_groups(item, _ALLOCATION_FIELDS, where)
        end = _compile(report.end, where, re.MULTILINE) if report.end else None
        reports.append(_AllocationReport(report, _compile(report.start, where), item, end))
    fields = []
    for pattern in data.allocation_fields:
        compiled = _compile(pattern, f"{source}: allocation field", re.MULTILINE)
        _check_groups(compiled, _ALLOCATION_FIELDS, f"{source}: allocation field {pattern!r}")
        fields.append(compiled)
    codes = tuple(_compile(p, f"{source}: error code pattern") for p in data.error_code_patterns)
    cues = {backend: tuple(c for c in cues if c) for backend, cues in data.backend_cues.items()}
    ignore = tuple(p for p in data.backend_cue_ignore if p)
    prefix = (
        _compile(
            "^(?:" + "|".join(f"(?:{p})" for p in data.line_prefixes) + "){1,3}",
            f"{source}: line prefixes",
            re.MULTILINE,
        )
        if data.line_prefixes
        else None
    )
    return SignatureCatalogue(
        signatures=tuple(signatures),
        reports=tuple(reports),
        allocation_fields=tuple(fields),
        error_codes=codes,
        dtype_bytes={k.lower(): v for k, v in data.dtype_bytes.items()},
        backend_cues=cues,
        cue_ignore=ignore,
        line_prefix=prefix,
    )


@lru_cache(maxsize=4)
def load_signatures(path: str | Path | None = None) -> SignatureCatalogue:
    """Read and compile the signature catalogue (``signatures.yaml`` by default), once.

    Raises :class:`SignatureCatalogueError` when the file is missing or malformed.
    """
    source = Path(path) if path is not None else SIGNATURES_PATH
    try:
        raw = yaml.load(source.read_text(encoding="utf-8"),
                        Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: ~10x faster
    except OSError as err:
        raise SignatureCatalogueError(f"cannot read the signature catalogue {source}: {err}") from err
    except yaml.YAMLError as err:
        raise SignatureCatalogueError(f"{source} is not valid YAML: {err}") from err
    return _build_catalogue(raw, str(source))


# ---------------------------------------------------------------------------- reading logs


def decode_log(data: bytes) -> str:
    """Decode log bytes: UTF-16 when it starts with a UTF-16 byte-order mark, else UTF-8
    with undecodable bytes replaced (never an error)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def read_log(path: str | Path) -> str:
    """Return the text of the log file at ``path``.

    Raises :class:`LogReadError` with a message for the user when the path is missing, is a
    directory or cannot be read.
    """
    target = Path(path)
    try:
        if target.is_dir():
            raise LogReadError(f"{target} is a directory; give the path of a log file (or - for stdin)")
        data = target.read_bytes()
    except FileNotFoundError as err:
        raise LogReadError(f"no such file: {target}; check the path of the log file") from err
    except PermissionError as err:
        raise LogReadError(f"cannot read {target}: permission denied") from err
    except OSError as err:
        raise LogReadError(f"cannot read {target}: {err.strerror or err}") from err
    return decode_log(data)


# --------------------------------------------------------------------------------- parsing

_ANSI = re.compile(
    r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b\n]{0,500}(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_OPERATOR_PARTS = {
    "op_type": re.compile(r'op_type=\\?"((?:[^"\\\n]|\\.){0,2000})\\?"'),
    "op_name": re.compile(r'op_name=\\?"((?:[^"\\\n]|\\.){0,20000})\\?"'),
    "source_file": re.compile(r'source_file=\\?"((?:[^"\\\n]|\\.){0,2000})\\?"'),
    "source_line": re.compile(r"source_line=(\d{1,9})"),
}
_LABEL_INSTRUCTION = re.compile(r"\s{0,8}(%?[\w.\-]{1,500}) = ")
_SHAPE_INDEX = re.compile(r"@\{[^}]{0,100}\}$")


def _normalise(text: str, catalogue: SignatureCatalogue) -> str:
    """Unify line endings and remove ANSI codes, control characters and log-line prefixes.

    Lone surrogates (from text decoded with ``surrogateescape``) become '?', so that the
    result can always be written as JSON.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    if catalogue.line_prefix is not None:
        text = catalogue.line_prefix.sub("", text)
    return text


@dataclass
class _Hit:
    signature: _Signature
    start: int
    end: int
    values: dict[str, Any]
    scratch: dict[str, str]
    category: str
    backend: str | None
    memory_space: str | None

    @property
    def priority(self) -> int:
        return self.signature.spec.priority

    @property
    def primary(self) -> bool:
        return self.signature.spec.role == "primary"


#: A byte count written with thousands separators, as TPU runtime reports and kernel logs print
#: them ("4,237,689,856"); digits with separators in other places ("153,700,88") are not read.
_GROUPED_DIGITS = re.compile(r"\d{1,3}(?:,\d{3}){1,6}")
_HEX = re.compile(r"0x[0-9a-fA-F]{1,12}")
_DECIMAL_SIZE = re.compile(r"(\d{1,20}(?:\.\d{1,12})?)\s?([KMGTkmgt]?)[Bb]?")
_DECIMAL_EXPONENT = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def _decimal_bytes(raw: str) -> int | None:
    """Bytes of a size in decimal units ("268.96MB" = 268,960,000), or None."""
    match = _DECIMAL_SIZE.fullmatch(raw)
    if match is None:
        return None
    number = Decimal(match.group(1)) * 1000 ** _DECIMAL_EXPONENT[match.group(2).upper()]
    return int(number.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _convert(name: str, raw: str, kind: type, default_unit: str | None, decimal: bool = False) -> Any:
    """Turn a captured string into the field's type; None when it cannot be read."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        if kind is int:
            if name.endswith("_bytes"):
                if decimal:
                    return _decimal_bytes(raw)
                if _HEX.fullmatch(raw):  # ptxas's "(0xc600 bytes, 0xc000 max)"
                    return int(raw, 16)
                if _GROUPED_DIGITS.fullmatch(raw):  # "4,237,689,856 bytes"
                    raw = raw.replace(",", "")
                elif "," in raw:
                    return None
                if default_unit and raw.isdigit():
                    raw += default_unit
                return parse_size(raw)
            return int(raw)
        if kind is float:
            value = float(raw)
            return value if math.isfinite(value) else None
    except (SizeFormatError, ValueError):
        return None
    if name == "memory_space":
        return raw.lower()
    return raw


def _captures(
    match: re.Match[str], kinds: dict[str, type], default_units: dict[str, str] | None = None,
    decimal: bool = False,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Split a match's named groups into converted field values and raw scratch values."""
    values: dict[str, Any] = {}
    scratch: dict[str, str] = {}
    for name, raw in match.groupdict().items():
        if raw is None:
            continue
        base, _, suffix = name.partition("__")
        if base.startswith("_"):
            scratch[base] = raw
            continue
        value = _convert(base, raw, kinds[base], (default_units or {}).get(base), decimal)
        if value is None:
            continue
        if suffix == "exact" or base not in values:
            values[base] = value
        if suffix == "exact":
            scratch["_exact"] = f"{scratch.get('_exact', '')} {base}".strip()
    return values, scratch


def _make_hit(signature: _Signature, match: re.Match[str]) -> _Hit:
    spec = signature.spec
    values, scratch = _captures(match, _ERROR_FIELDS, spec.default_unit, spec.decimal_units)
    category, backend, memory_space = spec.category, spec.backend, spec.memory_space
    decided: set[str] = set()
    for rule, pattern in signature.rules:
        value = values.get(rule.field, scratch.get(rule.field))
        if value is None or not pattern.search(str(value)):
            continue
        if rule.category and "category" not in decided:
            category = rule.category
            decided.add("category")
        if rule.backend and "backend" not in decided:
            backend = rule.backend
            decided.add("backend")
        if rule.memory_space and "memory_space" not in decided:
            memory_space = rule.memory_space
            decided.add("memory_space")
    if "memory_space" not in decided:
        memory_space = values.get("memory_space") or memory_space
    values.pop("memory_space", None)  # decided here, once: a rule, the text, or the signature
    return _Hit(signature, match.start(), match.end(), values, scratch, category, backend, memory_space)


class _Needles:
    """Cheap 'can this signature match at all?' checks on the lower-cased log.

    A needle with spaces is also looked for with the log's whitespace collapsed, because
    wrapped logs break messages across lines; that copy is made only when needed.
    """

    def __init__(self, text: str) -> None:
        self.lowered = text.lower()
        self._collapsed: str | None = None

    def present(self, needle: str) -> bool:
        if needle in self.lowered:
            return True
        if " " not in needle:
            return False
        if self._collapsed is None:
            self._collapsed = " ".join(self.lowered.split())
        return needle in self._collapsed


def _scan(
    text: str, needles: _Needles, signatures: list[_Signature], start: int = 0, end: int | None = None
) -> list[_Hit]:
    """All matches of ``signatures`` in ``text[start:end]``, at most a bounded number each."""
    end = len(text) if end is None else end
    hits = []
    for signature in signatures:
        if not needles.present(signature.spec.needle):
            continue
        for count, match in enumerate(signature.regex.finditer(text, start, end)):
            if count >= _MAX_HITS_PER_SIGNATURE:
                break
            hits.append(_make_hit(signature, match))
    return hits


def _derive_figures(values: dict[str, Any]) -> None:
    """Fill used = TensorCore + SparseCore and exceeded_by = used - available when unstated, and
    the free memory of a GPU allocator's pool from its stats (limit - in use)."""
    if (values.get("free_bytes") is None and values.get("pool_limit_bytes") is not None
            and values.get("pool_in_use_bytes") is not None):
        values["free_bytes"] = max(values["pool_limit_bytes"] - values["pool_in_use_bytes"], 0)
    if values.get("used_bytes") is None:
        if values.get("tensorcore_bytes") is not None and values.get("sparsecore_bytes") is not None:
            values["used_bytes"] = values["tensorcore_bytes"] + values["sparsecore_bytes"]
    if (
        values.get("exceeded_by_bytes") is None
        and values.get("used_bytes") is not None
        and values.get("available_bytes") is not None
    ):
        values["exceeded_by_bytes"] = values["used_bytes"] - values["available_bytes"]


def _conflicts(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """True when two matches state different values for a field: two different errors."""
    return any(name in second and second[name] != value for name, value in first.items())


def _derive(hit: _Hit, dtype_bytes: dict[str, int]) -> None:
    """Apply the signature's named computations and the figure derivations to a hit's values."""
    values, scratch = hit.values, hit.scratch
    _derive_figures(values)
    for name in hit.signature.spec.derive:
        if name == "tensor_bytes" and "_dims" in scratch:
            dims = [d.strip() for d in scratch["_dims"].split(",") if d.strip()]
            dtype = values.get("dtype")
            if dtype and all(d.isdigit() for d in dims):
                values.setdefault("shape", f"{dtype}[{','.join(dims)}]")
                size = dtype_bytes.get(dtype.lower())
                if size is not None:
                    values.setdefault("requested_bytes", math.prod(int(d) for d in dims) * size)
        elif name == "instruction_from_tag":
            named = scratch.get("_hlo_instruction", "")
            if named and not named.startswith("<"):
                values.setdefault("instruction", named)
            elif values.get("allocation_tag"):
                last = values["allocation_tag"].split()[-1]
                instruction = _SHAPE_INDEX.sub("", last)
                if instruction:
                    values.setdefault("instruction", instruction)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end == -1 else end


def _choose_primary(hits: list[_Hit]) -> _Hit | None:
    candidates = [h for h in hits if h.primary]
    if not candidates:
        return None
    return min(candidates, key=lambda h: (-h.priority, -h.start if h.signature.spec.latest else h.start,
                                          -(h.end - h.start)))


def _block(text: str, primary: _Hit, hits: list[_Hit]) -> tuple[int, int]:
    """The span of the log that belongs to the primary message's error."""
    start = max(0, _line_start(text, primary.start) - _LOOKBACK_CHARS)
    end = min(len(text), primary.start + _MAX_BLOCK_CHARS)
    for hit in hits:
        if not hit.primary:
            continue
        other_error = primary.category not in hit.signature.categories and hit.priority >= 20
        repeat = hit.signature is primary.signature
        if not (other_error or repeat):
            continue
        if hit.start >= primary.end:
            end = min(end, hit.start)
        elif hit.end <= primary.start and not (repeat and hit.start == primary.start):
            start = max(start, hit.end)
    return start, end


def _same_rounded(rounded: Any, exact: Any) -> bool:
    """Whether ``rounded`` ("3.95G") is the same quantity as the exact byte count ``exact``."""
    if not isinstance(rounded, int) or not isinstance(exact, int) or exact <= 0:
        return False
    return abs(rounded - exact) <= exact * 0.01


def _merge(text: str, primary: _Hit, others: list[_Hit]) -> tuple[dict[str, Any], list[_Hit]]:
    """Values of the primary match, with gaps filled from complementary matches.

    Also returns the matches whose lines make up the message: the primary one, and the
    specific same-category wordings that added a value or stand just before it as a header
    ("E1001: CompileTimeScopedVmemOom:"); generic wordings (priority 10) add values only.
    """
    header_start = _line_start(text, primary.start) - _HEADER_CHARS
    values = dict(primary.values)
    contributors = [primary]
    ordered = sorted(
        (h for h in others if h is not primary),
        key=lambda h: (not h.primary, -h.priority, h.start),
    )
    for hit in ordered:
        if hit.primary:
            if primary.category not in hit.signature.categories or _conflicts(values, hit.values):
                continue
        elif primary.category not in {hit.category, *hit.signature.spec.applies_to}:
            continue
        added = False
        exact = set(hit.scratch.get("_exact", "").split())
        for name, value in hit.values.items():
            if values.get(name) is None or (name in exact and _same_rounded(values[name], value)):
                added = added or values.get(name) != value
                values[name] = value
        if hit.primary and hit.priority >= 20 and (added or hit.start >= header_start):
            contributors.append(hit)
    return values, contributors


def _message(text: str, contributors: list[_Hit]) -> str:
    """The log lines that the contributing matches cover, trimmed, in log order."""
    lines: dict[int, str] = {}
    for hit in contributors:
        position = _line_start(text, hit.start)
        stop = _line_end(text, max(hit.start, hit.end - 1))
        while position <= stop and position not in lines:
            line_end = _line_end(text, position)
            stripped = text[position:line_end].strip()
            if len(stripped) > _MAX_MESSAGE_LINE_CHARS:
                stripped = stripped[: _MAX_MESSAGE_LINE_CHARS - 3] + "..."
            lines[position] = stripped
            position = line_end + 1
    joined = "\n".join(line for _, line in sorted(lines.items()) if line)
    if len(joined) > _MAX_MESSAGE_CHARS:
        joined = joined[: _MAX_MESSAGE_CHARS - 3] + "..."
    return joined


def _error_code(text: str, catalogue: SignatureCatalogue, message: str, start: int, end: int) -> str | None:
    for source, lo, hi in ((message, 0, len(message)), (text, start, end)):
        for pattern in catalogue.error_codes:
            match = pattern.search(source, lo, hi)
            if match is None:
                continue
            groups = match.groupdict()
            if groups.get("code"):
                return groups["code"]
            if groups.get("digits"):
                return "E" + groups["digits"]
    return None


def _cue_backend(text: str, catalogue: SignatureCatalogue, start: int, end: int) -> str | None:
    """The backend whose cues ``text[start:end]`` names most often; None on a tie or no cue.

    Cues are literal strings, counted with ``str.count`` (fast on any log); occurrences on
    lines that mention a backend only in passing (``backend_cue_ignore``) are not counted.
    """
    ignored: list[str] = []
    for phrase in catalogue.cue_ignore:
        position = text.find(phrase, start, end)
        while position != -1 and len(ignored) < _MAX_CUE_HITS:
            line_start, line_end = _line_start(text, position), _line_end(text, position)
            ignored.append(text[line_start:line_end])
            position = text.find(phrase, line_end, end)
    counts: dict[str, int] = {}
    for backend, cues in catalogue.backend_cues.items():
        count = sum(text.count(cue, start, end) for cue in cues)
        count -= sum(line.count(cue) for line in ignored for cue in cues)
        if count > 0:
            counts[backend] = count
    if not counts:
        return None
    best = max(counts.values())
    winners = [b for b, c in counts.items() if c == best]
    return winners[0] if len(winners) == 1 else None


def _parse_operator(operator: str, allocation: dict[str, Any]) -> None:
    for name, pattern in _OPERATOR_PARTS.items():
        match = pattern.search(operator)
        if match is None:
            continue
        if name == "source_line":
            allocation[name] = int(match.group(1))
        else:
            allocation[name] = match.group(1)


def _finish_allocation(item: dict[str, Any]) -> Allocation:
    operator = item.pop("_operator", None)
    if operator:
        _parse_operator(operator, item)
    label = item.get("xla_label")
    if label:
        named = _LABEL_INSTRUCTION.match(label)
        if named:
            item["instruction"] = named.group(1)
    if item.get("unpadded_size_bytes") is not None and item.get("size_bytes") is not None:
        item["padded_size_bytes"] = item["size_bytes"]
    if item.get("source_file") and item.get("source_line") is not None:
        item["source"] = f"{item['source_file']}:{item['source_line']}"
    if item.get("allocation_type") is None and item.pop("_entry_parameter", False):
        item["allocation_type"] = "entry parameter"
    item.pop("_entry_parameter", None)
    return Allocation(**{k: v for k, v in item.items() if not k.startswith("_")})


# A TPU buffer shape with its tiled layout, as a question quotes it without the report around it:
# "f32[1048576,3,16]{2,1,0:T(8,128)}". A second tile ("(2,1)", packed narrow types) is left alone.
_TILED_SHAPE = re.compile(r"([a-z]{1,4}\d{0,3})\[(\d{1,9}(?:,\d{1,9}){0,7})\]\{(\d(?:,\d){0,7}):T\((\d{1,4}),(\d{1,4})\)"
                          r"(\()?[^}\n]{0,40}\}")
_MAX_QUOTED_SHAPES = 8
_QUOTED_SHAPE_CHARS = 20_000  # a quoted shape is in the question, not deep in a pasted log


def _tiled_allocations(text: str, dtype_bytes: dict[str, int]) -> list[Allocation]:
    """Buffers a question quotes by their tiled shape, sized as the layout stores them: the tile
    pads the most minor dimension to a multiple of its second number and the next one to a
    multiple of its first (f32[1048576,3,16] under T(8,128): 192 MiB of data stored in 4 GiB).
    Only shapes that the layout pads at least twice over are returned."""
    out: list[Allocation] = []
    for m in _TILED_SHAPE.finditer(text[:_QUOTED_SHAPE_CHARS]):
        if len(out) >= _MAX_QUOTED_SHAPES or m.group(6):
            continue
        size = dtype_bytes.get(m.group(1).lower())
        dims = [int(d) for d in m.group(2).split(",")]
        layout = [int(d) for d in m.group(3).split(",")]  # minor to major
        if size is None or sorted(layout) != list(range(len(dims))) or 0 in dims:
            continue
        padded = list(dims)
        padded[layout[0]] = -(-dims[layout[0]] // int(m.group(5))) * int(m.group(5))
        if len(layout) > 1:
            padded[layout[1]] = -(-dims[layout[1]] // int(m.group(4))) * int(m.group(4))
        data, stored = math.prod(dims) * size, math.prod(padded) * size
        if stored < 2 * data:
            continue
        out.append(Allocation(rank=len(out) + 1, shape=m.group(0), size_bytes=stored, unpadded_size_bytes=data,
                              padded_size_bytes=stored, padding_bytes=stored - data,
                              expansion_factor=round(stored / data, 1)))
    return out


# One HLO instruction as a dump prints it: "multiply.131 = f32[1,3540,71,75,71,3]{5,4,3,2,1,0} multiply(a, b),
# metadata={op_name="jit(run)/mul" source_file="/x.py" source_line=49}"
_HLO_INSTRUCTION = re.compile(r"(?:^|\n)[ \t]{0,16}(?:ROOT[ \t]{1,4})?(%?[A-Za-z_][\w.\-]{0,80})[ \t]{0,4}=[ \t]{0,4}"
                              r"([a-z]{1,4}\d{0,3})\[(\d{1,12}(?:,\d{1,12}){0,9})\](?:\{[^}\n]{0,80}\})?[ \t]{1,4}"
                              r"([a-z][\w\-]{0,40})\(([^\n]{0,2000})")
_HLO_SOURCE = re.compile(r'source_file="([^"\n]{1,300})"[ \t]{0,4}source_line=(\d{1,7})')
_HLO_OP_NAME = re.compile(r'op_name="([^"\n]{1,300})"')
_MAX_HLO_INSTRUCTIONS = 20_000


def hlo_buffers(text: str) -> list[Allocation]:
    """The buffers an HLO dump pasted in ``text`` defines, one per instruction, largest first: each
    with its shape as the dump writes it (``f32[1,3540,71,75,71,3]``), its bytes (the product of
    its dimensions × its element type's), the instruction's name and opcode (``op_type``), and the
    JAX op and source line its metadata names. Instructions whose element type is unknown, tuples
    and scalars are left out; a text without HLO gives []."""
    if not isinstance(text, str) or "=" not in text:
        return []
    dtype_bytes = load_signatures().dtype_bytes
    out: list[Allocation] = []
    for n, m in enumerate(_HLO_INSTRUCTION.finditer(text)):
        if n >= _MAX_HLO_INSTRUCTIONS:
            break
        size = dtype_bytes.get(m.group(2).lower())
        dims = [int(d) for d in m.group(3).split(",")]
        if size is None or not dims:
            continue
        rest = m.group(5)
        source = _HLO_SOURCE.search(rest)
        op_name = _HLO_OP_NAME.search(rest)
        out.append(Allocation(size_bytes=math.prod(dims) * size, shape=f"{m.group(2)}[{m.group(3)}]",
                              instruction=m.group(1).lstrip("%"), op_type=m.group(4),
                              op_name=op_name.group(1) if op_name else None,
                              source_file=source.group(1) if source else None,
                              source_line=int(source.group(2)) if source else None,
                              source=f"{source.group(1)}:{source.group(2)}" if source else None))
    out.sort(key=lambda a: -(a.size_bytes or 0))
    return [a.model_copy(update={"rank": i + 1}) for i, a in enumerate(out)]


#: How many of a block's first lines may stand before a heading-less allocation report's first item.
_HEADLESS_LINES = 4


def _headless_report(text: str, catalogue: SignatureCatalogue, start: int, end: int):
    """(report, where its first item's line starts) for a report whose heading was not pasted: its
    first item within the block's first few lines; (None, -1) when there is none."""
    line_start = text.rfind("\n", 0, start) + 1
    for _ in range(_HEADLESS_LINES):
        for report in catalogue.reports:
            if report.item.match(text, line_start, end):
                return report, line_start
        nxt = text.find("\n", line_start, end)
        if nxt == -1:
            break
        line_start = nxt + 1
    return None, -1


def _parse_allocations(text: str, catalogue: SignatureCatalogue, start: int, end: int) -> list[Allocation]:
    """Read the first allocation report in ``text[start:end]`` into Allocation models."""
    found = None
    for report in catalogue.reports:
        match = report.start.search(text, start, end)
        if match and (found is None or match.start() < found[1].start()):
            found = (report, match)
    if found is not None:  # the body starts on the line after the heading
        report, match = found
        heading_end = text.find("\n", match.end(), end)
        body = heading_end + 1 if heading_end != -1 else -1
    else:  # the report's items pasted without its heading ("Buffer 8: / Size: 1.00GiB ...")
        report, body = _headless_report(text, catalogue, start, end)
    if report is None or body == -1:
        return []
    items: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    closed = False
    unrecognised = 0
    for line in text[body:end].split("\n"):
        if report.end is not None and report.end.match(line):
            break
        item_match = report.item.match(line)
        if item_match:
            if len(items) >= _MAX_ALLOCATIONS:
                break
            values, _ = _captures(item_match, _ALLOCATION_FIELDS)
            current = {"rank": len(items) + 1, **values}
            items.append(current)
            closed, unrecognised = False, 0
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if set(stripped) == {"="}:
            closed = True
            continue
        if closed:
            break
        if current is None:  # a preamble such as table headings, before the first item
            unrecognised += 1
            if unrecognised > 30:
                break
            continue
        for pattern in catalogue.allocation_fields:
            field_match = pattern.match(line)
            if field_match is None:
                continue
            values, scratch = _captures(field_match, _ALLOCATION_FIELDS)
            for name, value in values.items():
                current.setdefault(name, value)
            for name, value in scratch.items():
                current.setdefault(name, value)
            if "Entry Parameter Subshape" in line:
                current["_entry_parameter"] = True
            unrecognised = 0
            break
        else:
            unrecognised += 1
            if unrecognised > 30:
                break
    return [_finish_allocation(item) for item in items]


def parse_error(text: str | bytes) -> ParsedError:
    """Find the out-of-memory error in ``text`` (a whole log) and return it with its figures.

    Never raises for any string (bytes are decoded as UTF-8 with replacement): a log
    without a recognised OOM message gives category ``"unknown"`` with every size None.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = decode_log(bytes(text))
    if not isinstance(text, str):
        raise TypeError(f"parse_error expects the log as str or bytes, not {type(text).__name__}")
    catalogue = load_signatures()
    text = _normalise(text, catalogue)
    needles = _Needles(text)

    primaries = [s for s in catalogue.signatures if s.spec.role == "primary"]
    hits = _scan(text, needles, primaries)
    primary = _choose_primary(hits)
    if primary is None:
        backend = _cue_backend(text, catalogue, 0, len(text))
        return ParsedError(category="unknown", backend=backend)  # type: ignore[arg-type]

    start, end = _block(text, primary, hits)
    related = [
        s
        for s in catalogue.signatures
        if primary.category in s.categories and s is not primary.signature
    ]
    block_hits = [primary] + _scan(text, needles, related, start, end)
    block_hits += [
        h for h in hits if h.signature is primary.signature and start <= h.start < end and h is not primary
    ]
    for hit in block_hits:
        _derive(hit, catalogue.dtype_bytes)
    # A later wording of the same category that contradicts the primary one is another error.
    for hit in sorted(block_hits, key=lambda h: h.start):
        if (
            hit.primary
            and hit.start >= primary.end
            and hit.category == primary.category
            and _conflicts(primary.values, hit.values)
        ):
            end = hit.start
            block_hits = [h for h in block_hits if h.start < end]
            break
    values, contributors = _merge(text, primary, block_hits)

    # Derived figures: the report's total stands in for "Used X" when the header is missing.
    if values.get("used_bytes") is None and values.get("total_hbm_usage_bytes") is not None:
        values["used_bytes"] = values["total_hbm_usage_bytes"]
    _derive_figures(values)
    values["memory_space"] = primary.memory_space or next(
        (h.memory_space for h in contributors if h.memory_space), None
    )
    if primary.category == "scoped_vmem_oom" and isinstance(values.get("instruction"), str):
        values["instruction"] = values["instruction"].rstrip(".") or None
    if values.get("custom_call_target") == "":
        values["custom_call_target"] = None

    backend = (
        primary.backend
        or next((h.backend for h in contributors if h.backend), None)
        or _cue_backend(text, catalogue, start, end)
        or _cue_backend(text, catalogue, 0, len(text))
    )
    message = _message(text, contributors)
    return ParsedError(
        category=primary.category,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        message=message or None,
        error_code=_error_code(text, catalogue, message, start, min(end, primary.end + 5000)),
        signature=primary.signature.spec.id,
        line=text.count("\n", 0, primary.start) + 1,
        allocations=(_parse_allocations(text, catalogue, primary.start, end)
                     or (_tiled_allocations(text, catalogue.dtype_bytes) if primary.category == "compile_hbm_oom"
                         else [])),
        **{k: v for k, v in values.items() if k not in _RESERVED_FIELDS},
    )
