"""What makes a program fit: remedies tried by compiling them, without a TPU.

:func:`plan_factory` estimates the program once (the baseline, a full
:class:`~diagnostics.estimate.EstimateReport`), then compiles it again with each remedy that
applies and reports what each compile measured:

* ``donate_arguments``: the arguments whose buffers can alias outputs, donated;
* ``raise_scoped_vmem_limit``: the smallest scoped VMEM limit that compiles a kernel that ran
  into the limit (never above the core's physical VMEM; when even that is too small, it says so);
* ``larger_topology``: the smallest bigger topology of the same generation that fits (factories
  that take ``devices``/``mesh``);
* ``other_generation``: the next TPU generations with more memory;
* ``bf16_arguments``: floating-point arguments as bfloat16, a what-if that changes numerics.

``vary=parse_vary("batch=1..4096")`` finds the largest value of the factory's keyword argument
that fits (also ``NAME=LO..HI:STEP`` and ``NAME=a,b,c``): :mod:`diagnostics.vary_search` guesses
from every figure measured or stated (the compiler's "Used X of Y" at HI included), skips the
values the factory refuses by galloping on their pattern (multiples of 128, powers of two,
divisors), and never compiles more than plain bisection would on the same values. Memory need not
grow monotonically (XLA rematerialises when memory is tight), so the answer is a boundary: NAME
fits and the next value the factory accepts does not.

``choose="remat=none,full"`` compiles each value of a categorical keyword of the factory
(:mod:`diagnostics.choose` reads the text and converts the values) and, with ``vary``, runs the
search under each choice: the report's ``choices``, one row per value.

Everything runs in one process, sharing the topology, the HBM sizes and every compile (a value
compiled once is never compiled again). :func:`plan_program` runs it in the sandbox, as the CLI
and the HTTP service do.
"""

from __future__ import annotations

import json
import os
import functools
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from oomkb.diagnostics import tpu
from oomkb.diagnostics.choose import (
    ChooseSpec,
    check_choose,
    choice_values,
    keyword_default,
    same_value,
)
from oomkb.diagnostics.estimate import estimate_factory
from oomkb.diagnostics.estimate.arguments import argument_names, as_spec, leaf_path
from oomkb.diagnostics.estimate.compiling import (
    compile_traced,
    is_jitted,
    memory_totals,
    total_of,
    trace,
)
from oomkb.diagnostics.estimate.donation import donation_plan
from oomkb.diagnostics.estimate.report import EstimateReport, TargetInfo
from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.parse import parse_error
from oomkb.diagnostics.program import (
    FactoryError,
    call_factory,
    callable_name,
    factory_label,
    factory_accepts,
    load_factory,
    project_root,
    resolve_program,
    unpack_program,
    wants_devices,
)
from oomkb.diagnostics.measure import MeasureRequest
from oomkb.diagnostics.sandbox import Limits, job_value, run_job
from oomkb.diagnostics.vary_search import Probe, Values, search, search_ahead
from oomkb.units import MIB, format_bytes

__all__ = [
    "ChoiceReport",
    "ExecutionReport",
    "FixReport",
    "PlanError",
    "PlanReport",
    "VaryPoint",
    "VaryReport",
    "VarySpec",
    "parse_vary",
    "plan_factory",
    "plan_program",
]

#: Guide section each fix comes from (cited by the assistant).
FIX_CITES = {
    "donate_arguments": "e1000-compile-hbm-oom#debugging",
    "raise_scoped_vmem_limit": "scoped-vmem-oom#debugging",
    "larger_topology": "e1000-compile-hbm-oom#debugging",
    "other_generation": "e1000-compile-hbm-oom#intro",
    "bf16_arguments": "e1000-compile-hbm-oom#debugging",
}
MAX_TOPOLOGY_STEPS = 4
MAX_VMEM_STEPS = 4
#: The step of the smallest-scoped-VMEM-limit search (the flag takes KiB; "28.25M" and "28.50M"
#: are limits users set).
VMEM_GRANULE = 256 * 1024
#: The most values a ``NAME=a,b,c`` list may name.
MAX_LISTED_VALUES = 4096


class PlanError(DiagnosticsError, ValueError):
    """The plan's own input is wrong (a --vary name the factory does not take, LO > HI, ...)."""


# ---------------------------------------------------------------------------------------------
# The report


class FixReport(BaseModel):
    """One remedy, compiled with the change applied; its figures are measured, never inferred."""

    id: str
    title: str
    verified: bool = Field(description="a compile with the change applied ran to the end")
    fits: bool
    total_bytes: int | None = Field(None, description="per device, as compiled with the change")
    saving_bytes: int | None = Field(None, description="baseline total - total_bytes")
    capacity_bytes: int | None = Field(None, description="the HBM per device it was checked against")
    setting: dict[str, Any] = Field(default_factory=dict)
    snippet: str = ""
    note: str | None = None
    cite: str | None = None
    compiles: int = 0


class VaryPoint(BaseModel):
    """One value of the varied argument, as compiled (or why it could not be)."""

    value: int
    total_bytes: int | None = None
    fits: bool
    status: str = Field(description="fits, does_not_fit, oom (the compile ran out of memory), "
                                    "factory_error, error")
    error: str | None = None
    reported_bytes: int | None = Field(
        None, description="for an out-of-memory compile: the need its message states (rounded)")


class VaryReport(BaseModel):
    """The largest value of a factory's integer argument that fits, and every value compiled."""

    name: str
    low: int
    high: int
    step: int = Field(1, description="NAME=LO..HI:STEP searches every STEP-th value")
    values: list[int] | None = Field(None, description="NAME=a,b,c: the values searched")
    largest_fitting: int | None
    next_value: int | None = Field(
        None, description="the next value above largest_fitting that the factory accepts and that "
                          "was compiled: it does not fit (values between were refused)")
    boundary: bool = Field(False, description="largest_fitting fits and next_value was compiled and "
                                              "does not fit")
    searched: bool = Field(True, description="false: no value the factory accepts was found, so "
                                             "there is no answer (see note)")
    monotonic: bool = Field(True, description="the totals compiled grow with the value")
    curve: list[VaryPoint] = Field(default_factory=list)
    compiles: int = 0
    rounds: int | None = Field(None, description="rounds of compiles made at once (parallel "
                                                 "plans); a serial search makes one per compile")
    bisection_compiles: int = Field(
        0, description="the most compiles plain bisection needs on the same values (HI, LO, then "
                       "halving); `compiles` never exceeds it")
    refused: int = Field(0, description="values the factory (or its trace) refused; no compile")
    note: str | None = None


class VarySpec(BaseModel):
    """What --vary searches: ``NAME=LO..HI``, ``NAME=LO..HI:STEP`` or ``NAME=a,b,c``."""

    name: str
    low: int
    high: int
    step: int = 1
    values: list[int] | None = None

    def domain(self) -> Values:
        if self.values is not None:
            return Values.of(self.values)
        return Values(self.low, self.high, self.step)

    def describe(self) -> str:
        return f"{self.name}={self.domain().describe()}"


class ChoiceReport(BaseModel):
    """One value of a categorical keyword (--choose), compiled; with --vary, the largest value of
    the varied argument that fits under this choice (CONTRACT "Round 3 additions")."""

    name: str
    value: str = Field(description="the choice as given on the command line or in the request")
    fits: bool = Field(description="without --vary: the program fits with this choice; with "
                                   "--vary: some value of the varied argument fits")
    total_bytes: int | None = Field(
        None, description="per device, as compiled: at the factory's defaults, or with --vary at "
                          "the largest fitting value (at_value)")
    at_value: int | None = Field(None, description="with --vary: the varied value total_bytes was "
                                                   "compiled at (the largest that fits)")
    status: str = Field(description="fits, does_not_fit, oom, factory_error or error (without "
                                    "--vary); with --vary: searched or not_searched")
    error: str | None = None
    vary: VaryReport | None = None
    compiles: int = Field(0, description="compiles this choice took (0: the value the plan's "
                                         "baseline and its --vary search were compiled with)")
    note: str | None = None


class ExecutionReport(BaseModel):
    """Where a plan's compiles ran (``--workers``/``--ray``) and what running them at once gave."""

    executor: str = Field(description="processes (local workers) or ray (a cluster)")
    workers: int
    rounds: int = Field(description="batches of compiles sent to the workers at once")
    round_sizes: list[int] = Field(default_factory=list,
                                   description="the measurements each round asked for, in order")
    compiles: int = Field(description="compiles the workers made (speculative ones included)")
    cached: int = Field(0, description="measurements answered from the compile cache, no compile")
    speculative: int = Field(0, description="compiles made at once ahead of need whose result the "
                                            "serial plan would not have needed")
    seconds: float = 0.0
    note: str | None = None


class PlanReport(BaseModel):
    """The `oomkb plan --json` object (CONTRACT "Added in round 2")."""

    kind: str = "plan"
    function: str
    target: TargetInfo
    baseline: EstimateReport
    fixes: list[FixReport] = Field(default_factory=list)
    no_saving: list[FixReport] = Field(
        default_factory=list,
        description="remedies compiled whose measured saving is zero or negative: shown as "
                    "'no saving', never listed as fixes")
    vary: VaryReport | None = None
    choices: list[ChoiceReport] = Field(
        default_factory=list, description="--choose: each value of the categorical keyword, "
                                          "compiled (with --vary: its largest fitting value)")
    compiles: int
    seconds: float
    warnings: list[str] = Field(default_factory=list)
    execution: ExecutionReport | None = Field(
        None, description="set when the compiles ran on workers (--workers, --ray)")


# ---------------------------------------------------------------------------------------------
# Measuring one variant


class _Measured(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    status: str  # fits, does_not_fit, oom, factory_error, error
    total_bytes: int | None = None
    capacity_bytes: int = 0
    error: str | None = None
    oom_space: str | None = None
    vmem_needed: int | None = None
    vmem_kind: str | None = None
    compiled: bool = False

    @property
    def fits(self) -> bool:
        return self.status == "fits"


class _Remote:
    """The plan child's line to its caller's workers (:mod:`diagnostics.executors`), through an
    exchange folder: batches of :class:`MeasureRequest` out, results (or cache hits) back."""

    def __init__(self, folder: Path, slots: int) -> None:
        self.folder = folder
        self.slots = max(1, slots)

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        from oomkb.diagnostics.exchange import ask

        reply = ask(self.folder, message)
        if not isinstance(reply, dict) or "error" in reply:
            raise PlanError(f"the workers could not measure: {reply.get('error') if isinstance(reply, dict) else reply}")
        return reply


class _Session:
    """One plan's compiles: counts them, reports progress, caches topologies and HBM sizes.

    With a :class:`_Remote`, every compile is a :class:`MeasureRequest` sent to the caller's
    workers (:meth:`request`, :meth:`prefetch` for several at once); without one, each runs here.
    """

    def __init__(self, progress: Callable[[str], None] | None, program: str | None = None,
                 remote: _Remote | None = None) -> None:
        self.compiles = 0
        self.progress = progress or (lambda _message: None)
        #: The user's ``FILE.py:FACTORY`` as given, for commands in snippets.
        self.program = program
        self.remote = remote
        #: The factory arguments the baseline program is built with (set by the plan).
        self.extra: dict[str, Any] = {}
        self.rounds = 0
        self.round_sizes: list[int] = []
        self.cached = 0
        self._ready: dict[str, tuple[_Measured, int]] = {}

    @property
    def slots(self) -> int:
        """How many compiles run at once (the workers free)."""
        return self.remote.slots if self.remote is not None else 1

    def request(self, req: MeasureRequest, local: Callable[[], _Measured]) -> _Measured:
        """The measurement ``req`` asks for: by ``local()`` here, or from the workers (a result
        fetched ahead by :meth:`prefetch` is used once and counted when used)."""
        if self.remote is None:
            return local()
        key = req.model_dump_json(exclude={"what"})
        if key not in self._ready:
            self.prefetch([req])
        measured, compiles = self._ready.pop(key)
        self.compiles += compiles
        return measured

    def prefetch(self, requests: Sequence[MeasureRequest]) -> None:
        """Send ``requests`` to the workers in one round (nothing without workers)."""
        if self.remote is None:
            return
        todo: dict[str, MeasureRequest] = {}
        for req in requests:
            key = req.model_dump_json(exclude={"what"})
            if key not in self._ready:
                todo.setdefault(key, req)
        if not todo:
            return
        self.progress(f"round {self.rounds + 1}: {len(todo)} compile(s) on "
                      f"{self.remote.slots} worker(s)")
        reply = self.remote.ask({"op": "measure",
                                 "requests": [r.model_dump() for r in todo.values()]})
        results = reply.get("results") or []
        if len(results) != len(todo):
            raise PlanError("the workers answered a different number of measurements")
        self.rounds += 1
        self.round_sizes.append(len(todo))
        for key, result in zip(todo, results):
            self._ready[key] = (_Measured.model_validate(result["measured"]),
                                int(result.get("compiles") or 0))
            self.cached += bool(result.get("cached"))

    def peek(self, req: MeasureRequest) -> tuple[_Measured, bool]:
        """A fetched measurement and whether it cost a compile, left for :meth:`request`."""
        measured, compiles = self._ready[req.model_dump_json(exclude={"what"})]
        return measured, compiles > 0

    def unused_compiles(self) -> int:
        """Compiles fetched ahead that the plan did not need (counted in its total)."""
        return sum(compiles for _measured, compiles in self._ready.values())

    def baseline(self, spec: tpu.TargetSpec, compute: Callable[[], EstimateReport],
                 top_n: int) -> EstimateReport:
        """The baseline estimate: from the compile cache when the caller has one, else computed
        (and then given to the caller to keep)."""
        if self.remote is None:
            self.compiles += 1
            return compute()
        key = {"generation": spec.generation, "topology": spec.topology, "kwargs": self.extra,
               "top_n": top_n}
        found = self.remote.ask({"op": "baseline_get", "request": key}).get("report")
        if found:
            self.cached += 1
            return EstimateReport.model_validate(found)
        self.compiles += 1
        report = compute()
        self.remote.ask({"op": "baseline_put", "request": key,
                         "report": report.model_dump(mode="json")})
        return report

    def devices(self, spec: tpu.TargetSpec) -> list[Any]:
        return tpu.topology_devices(spec)

    def hbm(self, spec: tpu.TargetSpec) -> int:
        return tpu.hbm_capacity_bytes(spec, self.devices(spec)[0])

    def measure(
        self, fn: Any, args: tuple, kwargs: dict, spec: tpu.TargetSpec, mesh: Any, *,
        jit_kwargs: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
        cast_bf16: bool = False, what: str = "",
    ) -> _Measured:
        import jax
        from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

        devices = self.devices(spec)
        device = devices[0]
        capacity = self.hbm(spec)
        default = (NamedSharding(mesh, PartitionSpec()) if mesh is not None
                   else SingleDeviceSharding(device))
        specs = jax.tree_util.tree_map(lambda leaf: as_spec(leaf, default), (args, kwargs))
        if cast_bf16:
            specs = jax.tree_util.tree_map(_to_bf16, specs)
        name = callable_name(fn)
        if jit_kwargs:
            jitted = jax.jit(fn, **jit_kwargs)
        else:
            jitted = fn if is_jitted(fn) else jax.jit(fn)
        self.progress(f"compiling {what or name} for {spec.topology}")
        try:
            traced = trace(jitted, specs[0], specs[1], name, device)
            self.compiles += 1
            outcome = compile_traced(traced, device, None, name, options)
        except DiagnosticsError as err:
            return _Measured(status="error", error=str(err), capacity_bytes=capacity)
        if outcome.compiled is None:
            parsed = parse_error(outcome.error_text or "")
            space = (parsed.memory_space or "hbm").lower()
            text = outcome.error_text or ""
            kind = None
            if space == "vmem":
                kind = "scoped_limit" if "Scoped allocation with size" in text else "capacity"
            used = parsed.used_bytes or parsed.requested_bytes
            return _Measured(
                status="oom", capacity_bytes=capacity, oom_space=space,
                total_bytes=used if space == "hbm" else None,
                error=(parsed.message or text.strip().split("\n", 1)[0])[:600],
                vmem_needed=used if space == "vmem" else None, vmem_kind=kind,
            )
        total = total_of(memory_totals(outcome.compiled))
        return _Measured(status="fits" if total <= capacity else "does_not_fit",
                         total_bytes=total, capacity_bytes=capacity, compiled=True)


def _to_bf16(leaf: Any) -> Any:
    import jax
    import jax.numpy as jnp

    if isinstance(leaf, jax.ShapeDtypeStruct) and jnp.issubdtype(leaf.dtype, jnp.floating) \
            and jnp.dtype(leaf.dtype).itemsize > 2:
        return jax.ShapeDtypeStruct(leaf.shape, jnp.bfloat16, sharding=leaf.sharding,
                                    weak_type=leaf.weak_type)
    return leaf


# ---------------------------------------------------------------------------------------------
# The plan


def parse_vary(text: str) -> VarySpec:
    """``"batch=1..4096"``, ``"seq=128..1048576:128"`` or ``"block=128,256,512"`` -> a
    :class:`VarySpec`, or a :class:`PlanError` saying what is wrong."""
    form = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*", text or "", re.S)
    usage = ("--vary takes NAME=LO..HI, NAME=LO..HI:STEP or NAME=a,b,c with whole numbers "
             f"(batch=1..4096, seq=128..65536:128, block=128,256,512), got {text!r}")
    if not form:
        raise PlanError(usage)
    name, rest = form.group(1), form.group(2)
    if match := re.fullmatch(r"(-?\d+)\s*\.\.\s*(-?\d+)(?:\s*:\s*(-?\d+))?", rest):
        spec = VarySpec(name=name, low=int(match.group(1)), high=int(match.group(2)),
                        step=int(match.group(3) or 1))
    elif re.fullmatch(r"-?\d+(?:\s*,\s*-?\d+)*\s*,?", rest):
        listed = [int(v) for v in re.split(r"\s*,\s*", rest.strip().rstrip(",")) if v]
        spec = VarySpec(name=name, low=min(listed), high=max(listed), values=listed)
    else:
        raise PlanError(usage)
    return check_vary(spec)


def check_vary(spec: VarySpec | tuple) -> VarySpec:
    """``spec`` checked (LO <= HI, STEP >= 1, a range under 2^40, a list of at most 4096 values);
    a ``(name, low, high)`` tuple is taken as ``NAME=LO..HI``."""
    if isinstance(spec, (tuple, list)):
        spec = VarySpec(name=spec[0], low=spec[1], high=spec[2])
    if spec.values is not None:
        if not spec.values:
            raise PlanError(f"--vary {spec.name}=: the list of values is empty")
        if len(spec.values) > MAX_LISTED_VALUES:
            raise PlanError(f"--vary {spec.name}: at most {MAX_LISTED_VALUES} values, "
                            f"got {len(spec.values)}")
        return spec.model_copy(update={"low": min(spec.values), "high": max(spec.values)})
    _check_range(spec.name, spec.low, spec.high)
    if spec.step < 1:
        raise PlanError(f"--vary {spec.name}={spec.low}..{spec.high}:{spec.step}: STEP must be "
                        "a positive whole number")
    return spec


def _check_range(name: str, low: int, high: int) -> None:
    if low > high:
        raise PlanError(f"--vary {name}={low}..{high}: LO is greater than HI")
    if high - low > 1 << 40:
        raise PlanError(f"--vary {name}={low}..{high}: the range is larger than 2^40")


def plan_factory(
    factory: Callable[..., Any],
    *,
    target: str = "v5e",
    topology: str | None = None,
    vary: VarySpec | tuple[str, int, int] | None = None,
    progress: Callable[[str], None] | None = None,
    top_n: int = 10,
    program: str | None = None,
    choose: ChooseSpec | str | tuple | None = None,
    remote: _Remote | None = None,
) -> PlanReport:
    """Plan ``factory``'s program on ``target`` in this process (see the module docstring).

    ``program`` is the ``FILE.py:FACTORY`` text the factory came from, used in the commands
    that snippets suggest. ``choose`` (``"remat=none,full"``) compiles each value of a
    categorical keyword, with ``vary`` searching under each (:mod:`diagnostics.choose`).
    ``remote`` (set by :func:`plan_job` for ``--workers``/``--ray``) sends the compiles to the
    caller's workers, several at once.
    """
    started = time.perf_counter()
    tpu.prepare_in_process()
    spec = tpu.resolve_target(target, topology)
    session = _Session(progress, program, remote)
    extra: dict[str, Any] = {}
    if vary is not None:
        vary = check_vary(vary)
    choices_given = None
    if choose is not None:
        choose = check_choose(choose)
        choices_given = choice_values(factory, choose, vary)  # checked before any compile
    if vary is not None:
        name, low, high = vary.name, vary.low, vary.high
        if not factory_accepts(factory, name):
            raise PlanError(
                f"--vary {name}: the {factory_label(factory)} takes no argument {name!r}"
                + _takes(factory)
            )
        default = _default_of(factory, name)
        base_value = default if isinstance(default, int) and low <= default <= high else None
        if base_value is not None:
            try:
                call_factory(factory, devices=session.devices(spec), kwargs={name: base_value})
            except FactoryError:
                base_value = None
    label = factory_label(factory)
    vary_report = None
    if vary is not None and base_value is None:
        # No usable default in range: search first, then estimate at the answer.
        vary_report = _vary(session, factory, vary, spec, label, {})
        usable = [p.value for p in vary_report.curve if p.status in ("fits", "does_not_fit", "oom")]
        base_value = vary_report.largest_fitting if vary_report.largest_fitting is not None else (
            usable[0] if usable else None)
        if base_value is None:
            example = next((p for p in vary_report.curve if p.error), None)
            raise PlanError(
                f"--vary {vary.describe()}: no value tried could be compiled"
                + (f"; {vary_report.note}" if vary_report.note else "")
                + (f" (e.g. {name}={example.value}: {example.error})" if example else "")
            )
    if vary is not None:
        extra = {name: base_value}
    session.extra = dict(extra)

    session.progress(f"compiling the baseline for {spec.topology}")
    baseline = session.baseline(spec, lambda: estimate_factory(
        _bound(factory, extra), target=spec.generation, topology=spec.topology,
        donation_check=False, top_n=top_n), top_n)
    devices = session.devices(spec)
    produced, mesh = call_factory(factory, devices=devices, kwargs=extra, label=label)
    program = unpack_program(produced, label, mesh)

    fixes: list[FixReport] = []
    warnings: list[str] = []
    session.prefetch(_independent_requests(session, factory, program, extra, spec, baseline))
    # An HBM OOM's total comes from the compiler's buffer assignment at the failure (measured,
    # code size excluded); a failure in another memory space says nothing about the HBM total.
    base_total = baseline.total_bytes if (
        baseline.compile_error is None or (baseline.oom_space == "hbm" and baseline.total_bytes)
    ) else None
    fixes += _donation_fix(session, program, spec, baseline, base_total)
    if baseline.vmem is not None:
        fixes.append(_vmem_fix(session, program, spec, baseline))
    hbm_short = not baseline.fits and baseline.oom_space in (None, "hbm")
    if hbm_short:
        if wants_devices(factory):
            fixes += _topology_fix(session, factory, extra, spec, base_total, label)
        fixes += _generation_fix(session, factory, extra, spec, base_total, label, baseline)
        fixes += _bf16_fix(session, program, spec, base_total)
    elif baseline.vmem is not None and baseline.vmem.kind == "capacity":
        fixes += _generation_fix(session, factory, extra, spec, None, label, baseline)

    if vary is not None and vary_report is None:
        seed = {extra[name]: _Measured(
            status="fits" if baseline.fits else ("oom" if baseline.compile_error else "does_not_fit"),
            # an HBM OOM's stated need is a figure the search uses too (rounded, not exact)
            total_bytes=baseline.total_bytes if (
                baseline.compile_error is None or baseline.oom_space == "hbm") else None,
            capacity_bytes=baseline.target.hbm_bytes, compiled=baseline.compile_error is None,
        )}
        vary_report = _vary(session, factory, vary, spec, label, seed)
    choices = []
    if choose is not None:
        choices = _choices(session, factory, choices_given, choose.name, spec, baseline=baseline,
                           measured=keyword_default(factory, choose.name), vary=vary,
                           vary_report=vary_report)
    fixes, no_saving = _split_no_saving(fixes)
    session.compiles += session.unused_compiles()
    return PlanReport(
        function=baseline.function, target=baseline.target, baseline=baseline, fixes=fixes,
        no_saving=no_saving,
        vary=vary_report, choices=choices, compiles=session.compiles,
        seconds=round(time.perf_counter() - started, 3), warnings=warnings,
        execution=None if remote is None else ExecutionReport(
            executor="workers", workers=remote.slots, rounds=session.rounds,
            round_sizes=session.round_sizes,
            compiles=session.compiles, cached=session.cached,
            speculative=session.unused_compiles()),
    )


def _split_no_saving(fixes: list[FixReport]) -> tuple[list[FixReport], list[FixReport]]:
    """A remedy whose compile measured no saving (or a loss) is not a fix: it goes to the
    ``no_saving`` list with both totals in its note, and never into ``fixes``."""
    kept, none = [], []
    for fix in fixes:
        if fix.saving_bytes is not None and fix.saving_bytes <= 0 and fix.total_bytes is not None:
            before = fix.total_bytes + fix.saving_bytes
            fix = fix.model_copy(update={
                "note": (f"no saving: {fix.total_bytes:,} bytes per device with the change vs "
                         f"{before:,} without" + (f" ({fix.note})" if fix.note else "")),
            })
            none.append(fix)
        else:
            kept.append(fix)
    return kept, none


def _takes(factory: Callable[..., Any]) -> str:
    import inspect

    try:
        names = [p for p in inspect.signature(factory).parameters if p not in ("devices", "mesh")]
    except (TypeError, ValueError):
        return ""
    return f" (it takes: {', '.join(names)})" if names else " (it takes none)"


def _default_of(factory: Callable[..., Any], name: str) -> Any:
    import inspect

    try:
        param = inspect.signature(factory).parameters.get(name)
    except (TypeError, ValueError):
        return None
    if param is None or param.default is inspect.Parameter.empty:
        return None
    return param.default


def _bound(factory: Callable[..., Any], extra: Mapping[str, Any]) -> Callable[..., Any]:
    """``factory`` with ``extra`` keyword arguments bound, keeping its devices/mesh parameters."""
    if not extra:
        return factory
    import functools
    import inspect

    bound = functools.partial(factory, **extra)
    try:
        params = [p for n, p in inspect.signature(factory).parameters.items() if n not in extra]
        bound.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    return bound


def _saving(base_total: int | None, measured: _Measured) -> int | None:
    if base_total is None or measured.total_bytes is None or not measured.compiled:
        return None
    return base_total - measured.total_bytes


# -- donation ---------------------------------------------------------------------------------


def _call_source(fn: Any) -> str:
    """Python text naming ``fn`` in a snippet: a ``functools.partial`` keeps its bound arguments
    (``jax.jit(matmul, ...)`` would drop them); arguments without a literal form are elided."""
    if not isinstance(fn, functools.partial):
        return callable_name(fn)

    def literal(value: Any) -> str:
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        return "..."

    parts = [_call_source(fn.func)]
    parts += [literal(a) for a in fn.args]
    parts += [f"{k}={literal(v)}" for k, v in fn.keywords.items()]
    return f"functools.partial({', '.join(parts)})"



def _donation_setting(session: _Session, program: Any, spec: tpu.TargetSpec
                      ) -> tuple[dict[str, tuple], list[Any]] | None:
    """jax.jit's donation arguments for the arguments whose buffers can hold outputs, and those
    candidates; None when there are none (or the program does not trace)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    fn, args, kwargs, mesh = program
    device = session.devices(spec)[0]
    default = (NamedSharding(mesh, PartitionSpec()) if mesh is not None
               else SingleDeviceSharding(device))
    specs = jax.tree_util.tree_map(lambda leaf: as_spec(leaf, default), (args, kwargs))
    jitted = fn if is_jitted(fn) else jax.jit(fn)
    try:
        traced = trace(jitted, specs[0], specs[1], callable_name(fn), device)
    except DiagnosticsError:
        return None
    donated, candidates, _ = donation_plan(traced, argument_names(fn, len(args)))
    if not candidates:
        return None
    positions = sorted({k[1] for k in donated if k[0] == "pos"}
                       | {c.argnum for c in candidates if c.argnum is not None})
    names = sorted({k[1] for k in donated if k[0] == "kw"}
                   | {c.argname for c in candidates if c.argname is not None})
    return {"donate_argnums": tuple(positions), "donate_argnames": tuple(names)}, candidates


def _donation_fix(session: _Session, program: Any, spec: tpu.TargetSpec,
                  baseline: EstimateReport, base_total: int | None) -> list[FixReport]:
    fn, args, kwargs, mesh = program
    name = callable_name(fn)
    setting = _donation_setting(session, program, spec)
    if setting is None:
        return []
    jit_kwargs, candidates = setting
    positions, names = list(jit_kwargs["donate_argnums"]), list(jit_kwargs["donate_argnames"])
    before = session.compiles
    what = f"{name} with donated arguments"
    measured = session.request(
        _request(spec, session.extra, what=what,
                 donate={k: list(v) for k, v in jit_kwargs.items()}),
        lambda: session.measure(fn, args, kwargs, spec, mesh, jit_kwargs=jit_kwargs, what=what))
    parts = []
    if positions:
        parts.append(f"donate_argnums={tuple(positions)!r}")
    if names:
        parts.append(f"donate_argnames={tuple(names)!r}")
    setting: dict[str, Any] = {"donate_argnums": positions,
                               "arguments": [c.argument for c in candidates]}
    if names:
        setting["donate_argnames"] = names
    arguments = ", ".join(c.argument for c in candidates)
    note = None
    if measured.status == "error":
        note = f"the compile with donation failed: {measured.error}"
    elif measured.status == "oom":
        note = f"with donation the compile still runs out of {(measured.oom_space or 'hbm').upper()}"
    elif base_total is not None and measured.compiled and measured.total_bytes == base_total:
        note = "donation compiles but saves nothing here (XLA already reuses those buffers)"
    return [FixReport(
        id="donate_arguments",
        title=f"donate {arguments} (their buffers can hold outputs of the same shape)",
        verified=measured.compiled or measured.status == "oom", fits=measured.fits,
        total_bytes=measured.total_bytes if measured.compiled else None,
        saving_bytes=_saving(base_total, measured), capacity_bytes=measured.capacity_bytes,
        setting=setting, snippet=f"step = jax.jit({_call_source(fn)}, {', '.join(parts)})",
        note=note, cite=FIX_CITES["donate_arguments"], compiles=session.compiles - before,
    )]


# -- scoped VMEM ------------------------------------------------------------------------------


def _vmem_fix(session: _Session, program: Any, spec: tpu.TargetSpec,
              baseline: EstimateReport) -> FixReport:
    fn, args, kwargs, mesh = program
    vmem = baseline.vmem
    capacity = vmem.capacity_bytes
    before = session.compiles
    base = FixReport(id="raise_scoped_vmem_limit", title="raise the scoped VMEM limit",
                     verified=False, fits=False, cite=FIX_CITES["raise_scoped_vmem_limit"])
    if vmem.kind == "capacity":
        base.verified = True  # the compiler itself measured the need against the whole VMEM
        base.note = (f"the kernel needs {format_bytes(vmem.used_bytes)} of VMEM, more than the "
                     f"core's physical {format_bytes(capacity)}: no limit can help; use smaller "
                     "blocks (fewer rows or columns per window) or fewer buffers")
        base.note += _hardware_caveat(spec)
        return base
    def at(limit: int) -> _Measured:
        options = {"xla_tpu_scoped_vmem_limit_kib": limit // 1024}
        what = f"the kernel under a {format_bytes(limit)} scoped VMEM limit"
        return session.request(
            _request(spec, session.extra, options=options, what=what),
            lambda: session.measure(fn, args, kwargs, spec, mesh, options=options, what=what))

    def short_of_scoped(m: _Measured) -> bool:
        return m.oom_space == "vmem" and m.vmem_kind == "scoped_limit"

    # Step up from the kernel's stated need (the compiler rounds it, and other scoped buffers may
    # come next), then bisect between the last limit that failed and the first that compiled:
    # the smallest limit that compiles, to VMEM_GRANULE (a stated "28.00M" may need 28.50M),
    # never above the physical VMEM.
    limit = min(_ceil_granule(vmem.used_bytes), capacity)
    # Below the kernel's stated need nothing compiles (the compiler said so): no bisecting there.
    failed = max(vmem.limit_bytes or 0, limit - VMEM_GRANULE)
    last: _Measured | None = None
    ok: tuple[int, _Measured] | None = None
    for _ in range(MAX_VMEM_STEPS):
        last = at(limit)
        if not short_of_scoped(last):
            if last.compiled or last.oom_space != "vmem":
                ok = (limit, last)
            break
        failed = limit
        if limit >= capacity:
            break
        limit = min(max(_ceil_granule(last.vmem_needed or 0), limit + VMEM_GRANULE), capacity)
    while ok is not None and ok[0] - failed > VMEM_GRANULE and ok[1].compiled:
        middle = _ceil_granule((failed + ok[0]) // 2)
        if middle >= ok[0]:
            break
        trial = at(middle)
        if trial.compiled:
            ok = (middle, trial)
        else:
            failed = middle
    if ok is not None:
        limit, last = ok
    base.compiles = session.compiles - before
    base.setting = {"vmem_limit_bytes": limit, "flag": f"--xla_tpu_scoped_vmem_limit_kib={limit // 1024}"}
    base.snippet = (
        f"pl.pallas_call(..., compiler_params=pltpu.CompilerParams(vmem_limit_bytes={limit}))"
        f"  # or: LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib={limit // 1024}"
    )
    base.capacity_bytes = last.capacity_bytes if last else None
    if last is None:
        return base
    base.verified = last.compiled or last.status == "oom"
    base.fits = last.fits
    base.total_bytes = last.total_bytes if last.compiled else None
    if last.compiled:
        base.title = f"raise the scoped VMEM limit to {format_bytes(limit)}"
        if base.compiles == 1:
            base.note = (f"found by 1 compile: the kernel's stated need ({format_bytes(vmem.used_bytes)}), "
                         f"rounded up to {format_bytes(VMEM_GRANULE)}, compiled; a lower limit is below "
                         "the need the compiler stated")
        else:
            base.note = (f"the smallest limit that compiled, found by {base.compiles} compiles: stepped "
                         f"up from the kernel's stated need ({format_bytes(vmem.used_bytes)}), then "
                         f"bisected to {format_bytes(VMEM_GRANULE)}; the largest limit that failed was "
                         f"{format_bytes(failed)}")
        if not last.fits:
            base.note += "; the kernel compiles with this limit, but the program's HBM does not fit"
    elif last.oom_space == "vmem" and limit >= capacity:
        base.note = (f"even the core's whole VMEM ({format_bytes(capacity)}) as the limit does not "
                     "compile: only smaller blocks can help") + _hardware_caveat(spec)
    elif last.oom_space == "vmem":
        base.note = (f"{MAX_VMEM_STEPS} raised limits up to {format_bytes(limit)} did not compile; "
                     "the kernel's VMEM need grows with the limit")
    else:
        base.note = f"with this limit the compile fails differently: {last.error}"
    return base




def _hardware_caveat(spec: tpu.TargetSpec) -> str:
    """The catalogue's word on where this generation's hardware VMEM may differ from the
    deviceless compiler's (TPU7x), so a user is not capped at a limit that may be wrong."""
    note = tpu.generations()[spec.generation].vmem_hardware_note
    return f". Caveat: {note}" if note else ""


def _ceil_mib(nbytes: int) -> int:
    return -(-int(nbytes) // MIB) * MIB


def _ceil_granule(nbytes: int) -> int:
    """``nbytes`` rounded up to VMEM_GRANULE, the step of the scoped-VMEM limit search."""
    return -(-int(nbytes) // VMEM_GRANULE) * VMEM_GRANULE


# -- more devices, other generations, bf16 ----------------------------------------------------


def _bigger_grids(spec: tpu.TargetSpec) -> list[str]:
    grid = list(spec.chip_grid)
    grids = []
    for _ in range(MAX_TOPOLOGY_STEPS):
        axis = min(range(len(grid)), key=lambda i: (grid[i], -i))
        grid[axis] *= 2
        grids.append("x".join(str(n) for n in grid))
    return grids


def measure_request(session: _Session, factory: Callable[..., Any], label: str,
                    req: MeasureRequest) -> _Measured:
    """``req`` measured in this process: the factory called with its arguments, then compiled."""
    spec = tpu.resolve_target(req.generation, req.topology)
    devices = session.devices(spec)
    try:
        produced, mesh = call_factory(factory, devices=devices, kwargs=req.kwargs, label=label)
        fn, args, kwargs, mesh = unpack_program(produced, label, mesh)
    except FactoryError as err:
        return _Measured(status="factory_error", error=str(err), capacity_bytes=session.hbm(spec))
    jit_kwargs = None if req.donate is None else {k: tuple(v) for k, v in req.donate.items()}
    return session.measure(fn, args, kwargs, spec, mesh, jit_kwargs=jit_kwargs,
                           options=req.options, cast_bf16=req.cast_bf16,
                           what=req.what or f"{callable_name(fn)}")


def _remeasure(session: _Session, factory: Callable[..., Any], extra: Mapping[str, Any],
               spec: tpu.TargetSpec, label: str,
               options: Mapping[str, Any] | None = None) -> _Measured:
    req = _request(spec, extra, options=options)
    return session.request(req, lambda: measure_request(session, factory, label, req))


def _request(spec: tpu.TargetSpec, extra: Mapping[str, Any], **settings: Any) -> MeasureRequest:
    """The request for the factory with ``extra`` on ``spec`` with ``settings``."""
    if settings.get("options") is not None:
        settings["options"] = dict(settings["options"])
    return MeasureRequest(generation=spec.generation, topology=spec.topology,
                          kwargs=dict(extra), **settings)


def _topology_fix(session: _Session, factory: Callable[..., Any], extra: Mapping[str, Any],
                  spec: tpu.TargetSpec, base_total: int | None, label: str) -> list[FixReport]:
    before = session.compiles
    tried = []
    for grid in _bigger_grids(spec):
        try:
            bigger = tpu.resolve_target(spec.generation, grid)
            devices = session.devices(bigger)
        except DiagnosticsError as err:
            tried.append(f"{grid}: {err}")
            break
        measured = _remeasure(session, factory, extra, bigger, label)
        tried.append(f"{bigger.topology}: {measured.status}")
        if measured.fits:
            return [FixReport(
                id="larger_topology",
                title=f"run on {bigger.topology} ({len(devices)} devices)",
                verified=True, fits=True, total_bytes=measured.total_bytes,
                saving_bytes=_saving(base_total, measured), capacity_bytes=measured.capacity_bytes,
                setting={"topology": bigger.topology, "devices": len(devices)},
                snippet=(f"mesh = jax.make_mesh(({len(devices)},), ('data',))  "
                         f"# on {bigger.topology}: {len(devices)} devices"),
                note=f"tried {', '.join(tried)}", cite=FIX_CITES["larger_topology"],
                compiles=session.compiles - before,
            )]
        if measured.status in ("factory_error", "error"):
            break
    return [FixReport(
        id="larger_topology", title="run on a larger topology", verified=bool(tried), fits=False,
        setting={}, note=f"none of the larger topologies tried fits: {'; '.join(tried)}",
        cite=FIX_CITES["larger_topology"], compiles=session.compiles - before,
    )]


def _hbm_of(generation: tpu.Generation) -> float:
    from oomkb.units import parse_size

    try:
        return float(parse_size(generation.hbm_reported))
    except DiagnosticsError:
        return 0.0


def _generation_fix(session: _Session, factory: Callable[..., Any], extra: Mapping[str, Any],
                    spec: tpu.TargetSpec, base_total: int | None, label: str,
                    baseline: EstimateReport) -> list[FixReport]:
    """Every generation with more memory per device (HBM, or VMEM for a kernel over the physical
    VMEM), each compiled, smallest memory first: one fix per generation that fits."""
    better, options = _better_generations(spec, baseline)
    before = session.compiles
    tried: list[str] = []
    fitting: list[FixReport] = []
    for gen in better:
        other = tpu.resolve_target(gen.name)
        start = session.compiles
        try:
            measured = _remeasure(session, factory, extra, other, label, options)
        except DiagnosticsError as err:
            tried.append(f"{gen.name}: {err}")
            continue
        tried.append(f"{other.topology}: {measured.status}")
        if measured.fits:
            fitting.append(FixReport(
                id="other_generation", title=f"use {gen.name} ({gen.device_kind})",
                verified=True, fits=True, total_bytes=measured.total_bytes,
                saving_bytes=None, capacity_bytes=measured.capacity_bytes,
                setting={"generation": gen.name, "topology": other.topology},
                snippet=f"oomkb estimate {shlex.quote(session.program or 'FILE.py:FACTORY')} "
                        f"--tpu {gen.name}" + (
                    f"  # with LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib="
                    f"{options['xla_tpu_scoped_vmem_limit_kib']}" if options else ""),
                note=(f"per device on {gen.name}: {format_bytes(measured.total_bytes or 0)} of "
                      f"{format_bytes(measured.capacity_bytes)}" + _vmem_caveat(gen, baseline)),
                cite=FIX_CITES["other_generation"], compiles=session.compiles - start,
            ))
    if fitting:
        # Each fitting generation says what else was tried, so the list reads on its own.
        for fix in fitting:
            fix.note = f"{fix.note}; tried {', '.join(tried)}"
        return fitting
    if not tried:
        return []
    return [FixReport(
        id="other_generation", title="use another TPU generation", verified=True, fits=False,
        note=f"none of the generations tried fits: {'; '.join(tried)}",
        cite=FIX_CITES["other_generation"], compiles=session.compiles - before,
    )]


def _better_generations(spec: tpu.TargetSpec, baseline: EstimateReport
                        ) -> tuple[list[tpu.Generation], dict[str, Any] | None]:
    """The generations with more memory per device than ``spec``'s, smallest first, and the
    compiler options to compile a kernel short of VMEM with on them."""
    gens = tpu.generations()
    current = gens[spec.generation]
    if baseline.vmem is not None:
        key = lambda g: g.vmem_bytes or 0  # noqa: E731
    else:
        key = _hbm_of
    better = sorted((g for g in gens.values() if key(g) > key(current)), key=key)
    options = None
    if baseline.vmem is not None:
        # The kernel needs more VMEM than the default scoped limit anywhere: give it its need.
        options = {"xla_tpu_scoped_vmem_limit_kib": _ceil_mib(baseline.vmem.used_bytes) // 1024}
    return better, options


def _independent_requests(session: _Session, factory: Callable[..., Any], program: Any,
                          extra: Mapping[str, Any], spec: tpu.TargetSpec,
                          baseline: EstimateReport) -> list[MeasureRequest]:
    """The fixes' compiles that do not wait on one another, for the workers to run at once: the
    donation, the first scoped-VMEM limit, every larger topology and other generation, bfloat16.
    The fixes then read their results (the same compiles the serial plan makes, plus the larger
    topologies past the first that fits). Nothing without workers."""
    if session.remote is None or session.slots < 2:
        return []
    wanted: list[MeasureRequest] = []
    donation = _donation_setting(session, program, spec)
    if donation is not None:
        jit_kwargs = donation[0]
        wanted.append(_request(spec, extra, donate={k: list(v) for k, v in jit_kwargs.items()}))
    vmem = baseline.vmem
    if vmem is not None and vmem.kind != "capacity":
        limit = min(_ceil_granule(vmem.used_bytes), vmem.capacity_bytes)
        wanted.append(_request(spec, extra,
                               options={"xla_tpu_scoped_vmem_limit_kib": limit // 1024}))
    hbm_short = not baseline.fits and baseline.oom_space in (None, "hbm")
    if hbm_short and wants_devices(factory):
        for grid in _bigger_grids(spec):
            try:
                wanted.append(_request(tpu.resolve_target(spec.generation, grid), extra))
            except DiagnosticsError:
                break
    if hbm_short or (vmem is not None and vmem.kind == "capacity"):
        better, options = _better_generations(spec, baseline)
        for gen in better:
            try:
                wanted.append(_request(tpu.resolve_target(gen.name), extra, options=options))
            except DiagnosticsError:
                continue
    if hbm_short and _bf16_paths(program):
        wanted.append(_request(spec, extra, cast_bf16=True))
    return wanted


def _vmem_caveat(gen: tpu.Generation, baseline: EstimateReport) -> str:
    """For a kernel short of VMEM: where the deviceless target's VMEM may differ from hardware."""
    if baseline.vmem is None or not gen.vmem_hardware_note:
        return ""
    return f" ({gen.vmem_hardware_note})"


def _bf16_paths(program: Any) -> list[str]:
    """The floating-point arguments wider than 16 bits, by the estimate's labels."""
    import jax
    import jax.numpy as jnp

    fn, args, kwargs, _mesh = program
    # The estimate's argument labels ("params['w1']", not "args[0][0]['w1']").
    arg_names = argument_names(fn, len(args))
    paths = []
    for path, leaf in jax.tree_util.tree_flatten_with_path((args, kwargs))[0]:
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jnp.issubdtype(dtype, jnp.floating) and jnp.dtype(dtype).itemsize > 2:
            paths.append(leaf_path(path, arg_names))
    return paths


def _bf16_fix(session: _Session, program: Any, spec: tpu.TargetSpec,
              base_total: int | None) -> list[FixReport]:
    fn, args, kwargs, mesh = program
    paths = _bf16_paths(program)
    if not paths:
        return []
    before = session.compiles
    what = f"{callable_name(fn)} with bfloat16 arguments"
    measured = session.request(
        _request(spec, session.extra, cast_bf16=True, what=what),
        lambda: session.measure(fn, args, kwargs, spec, mesh, cast_bf16=True, what=what))
    shown = paths
    return [FixReport(
        id="bf16_arguments",
        title="what if: floating-point arguments as bfloat16 (changes the numerics)",
        verified=measured.compiled or measured.status == "oom", fits=measured.fits,
        total_bytes=measured.total_bytes if measured.compiled else None,
        saving_bytes=_saving(base_total, measured), capacity_bytes=measured.capacity_bytes,
        setting={"arguments": shown[:50]},
        snippet="args = jax.tree.map(lambda a: a.astype(jnp.bfloat16), args)  # a what-if: check accuracy",
        note="a what-if: bfloat16 halves those arguments but changes the results; "
             "check the accuracy before adopting it",
        cite=FIX_CITES["bf16_arguments"], compiles=session.compiles - before,
    )]


# -- --vary -----------------------------------------------------------------------------------


def _as_probe(measured: _Measured, compiled: bool) -> Probe:
    """A measurement as the search sees it: an exact compiled total, the need an HBM OOM states
    (rounded), or a refusal (the factory or its trace rejected the value)."""
    if measured.status == "fits":
        return Probe("fits", measured.total_bytes, measured.capacity_bytes, compiled)
    if measured.status == "does_not_fit":
        return Probe("over", measured.total_bytes, measured.capacity_bytes, compiled)
    if measured.status == "oom":
        return Probe("over", measured.total_bytes, measured.capacity_bytes, compiled, exact=False)
    return Probe("refused", compiled=compiled)


def _vary(session: _Session, factory: Callable[..., Any], vary: VarySpec, spec: tpu.TargetSpec,
          label: str, seed: dict[int, _Measured], strategy: str = "model",
          fixed: Mapping[str, Any] | None = None) -> VaryReport:
    """Search ``vary`` (:func:`diagnostics.vary_search.search`) with real compiles; ``fixed``
    keyword arguments (a --choose value) go with every value."""
    name = vary.name
    memo: dict[int, _Measured] = dict(seed)
    before = session.compiles

    def kwargs(value: int) -> dict[str, Any]:
        return {**(fixed or {}), name: value}

    def probe(value: int) -> Probe:
        session.progress(f"{name}={value}")
        start = session.compiles
        memo[value] = _remeasure(session, factory, kwargs(value), spec, label)
        return _as_probe(memo[value], session.compiles > start)

    def probe_many(values: list[int]) -> list[Probe]:
        # One round: the value the search asks for and those it may ask next, compiled at once
        # on the workers; only those it reads are taken (and counted) below.
        requests = [_request(spec, kwargs(v)) for v in values]
        session.prefetch(requests)
        return [_as_probe(*session.peek(r)) for r in requests]

    known = {v: _as_probe(m, False) for v, m in seed.items()}
    if session.slots > 1:
        found = search_ahead(probe_many, vary.domain(), session.slots, known=known,
                             strategy=strategy)  # type: ignore[arg-type]
        for value in found.probes:
            if value not in memo:
                memo[value] = _remeasure(session, factory, kwargs(value), spec, label)
    else:
        found = search(probe, vary.domain(), known=known, strategy=strategy)  # type: ignore[arg-type]
    largest = found.largest
    curve = [
        VaryPoint(value=v, total_bytes=m.total_bytes if m.compiled else None, fits=m.fits,
                  status=m.status, error=m.error,
                  reported_bytes=m.total_bytes if not m.compiled else None)
        for v, m in sorted(memo.items())
    ]
    compiled = [p for p in curve if p.status in ("fits", "does_not_fit") and p.total_bytes]
    monotonic = all(a.total_bytes <= b.total_bytes for a, b in zip(compiled, compiled[1:]))
    fit_flags = [p.fits for p in curve if p.status not in ("factory_error", "error")]
    if any(not a and b for a, b in zip(fit_flags, fit_flags[1:])):
        monotonic = False
    notes = []
    if not found.searched:
        notes.append(f"could not search {vary.describe()}: {found.reason}")
    elif found.reason:
        notes.append(found.reason)
    if largest is not None and not monotonic:
        notes.append(f"memory does not grow monotonically with {name} (XLA rematerialises when "
                     f"memory is tight): {name}={largest} fits and the next value compiled does "
                     "not, but larger values may fit again")
    if largest is not None and found.above is not None and found.above - largest > vary.step \
            and vary.values is None:
        notes.append(f"the values between {largest} and {found.above} that were tried were refused "
                     f"by the factory, so {found.above} is the next value it accepts")
    failed = [p for p in curve if p.status in ("factory_error", "error")]
    if failed:
        notes.append(f"{len(failed)} value(s) were refused or did not compile "
                     f"(e.g. {failed[0].value}: {failed[0].error})")
    return VaryReport(
        name=name, low=vary.low, high=vary.high, step=vary.step, values=vary.values,
        largest_fitting=largest, next_value=found.above,
        boundary=largest is not None and found.above is not None,
        searched=found.searched, monotonic=monotonic, curve=curve,
        compiles=session.compiles - before, bisection_compiles=found.bisection_compiles,
        rounds=found.rounds if session.remote is not None else None,
        refused=len(failed), note="; ".join(notes) or None,
    )


# -- --choose ---------------------------------------------------------------------------------


def _baseline_row(name: str, text: str, baseline: EstimateReport) -> ChoiceReport:
    compiled = baseline.compile_error is None
    status = "fits" if baseline.fits else ("does_not_fit" if compiled else (
        "oom" if baseline.oom_space else "error"))
    return ChoiceReport(
        name=name, value=text, fits=baseline.fits,
        total_bytes=baseline.total_bytes if compiled else None, status=status,
        error=None if compiled else (baseline.compile_error.message or None),
        note="measured by the plan's baseline compile",
    )


def _vary_row(name: str, text: str, report: VaryReport, compiles: int,
              note: str | None = None) -> ChoiceReport:
    at = report.largest_fitting
    point = next((p for p in report.curve if p.value == at), None) if at is not None else None
    return ChoiceReport(
        name=name, value=text, fits=at is not None,
        total_bytes=point.total_bytes if point is not None else None, at_value=at,
        status="searched" if report.searched else "not_searched", vary=report,
        compiles=compiles, note=note or report.note,
    )


def _choices(
    session: _Session,
    factory: Callable[..., Any],
    values: Sequence[tuple[str, Any]],
    name: str,
    spec: tpu.TargetSpec,
    *,
    baseline: EstimateReport,
    measured: Any,
    vary: VarySpec | None = None,
    vary_report: VaryReport | None = None,
) -> list[ChoiceReport]:
    """One row per --choose value, in the order given (:mod:`diagnostics.choose`). ``baseline`` and
    ``vary_report`` are the plan's own, measured with the keyword at ``measured`` (its default):
    that choice reuses them instead of compiling again. Each choice reaches the factory as a
    keyword argument of the measurement (``extra``, as --vary's value does), never bound into it."""
    label = factory_label(factory)
    rows: list[ChoiceReport] = []
    if vary is None:  # on workers: every choice's compile at once (nothing without workers)
        session.prefetch([_request(spec, {name: value}) for _text, value in values
                          if not same_value(value, measured)])
    for text, value in values:
        before = session.compiles
        session.progress(f"choice {name}={text}")
        default = same_value(value, measured)
        where = f"{label} with {name}={text!r}"
        if vary is None:
            if default:
                rows.append(_baseline_row(name, text, baseline))
                continue
            result = _remeasure(session, factory, {name: value}, spec, where)
            rows.append(ChoiceReport(
                name=name, value=text, fits=result.fits,
                total_bytes=result.total_bytes if result.compiled else None,
                status=result.status, error=result.error,
                compiles=session.compiles - before,
            ))
        elif default and vary_report is not None:
            rows.append(_vary_row(name, text, vary_report, 0,
                                  f"the plan's own --vary search ({vary_report.compiles} compiles)"))
        else:
            found = _vary(session, factory, vary, spec, where, {}, fixed={name: value})
            rows.append(_vary_row(name, text, found, session.compiles - before))
    return rows


# ---------------------------------------------------------------------------------------------
# The sandboxed route


def plan_program(
    program: str,
    *,
    target: str = "v5e",
    topology: str | None = None,
    vary: str | VarySpec | tuple[str, int, int] | None = None,
    choose: str | ChooseSpec | tuple | None = None,
    timeout_s: float = 900.0,
    limits: Limits | None = None,
    progress_file: Path | None = None,
    python: str | None = None,
    paths: Sequence[str] = (),
    isolate: bool = False,
    executor: Any = None,
) -> PlanReport:
    """Plan ``FILE.py:FACTORY`` in a sandboxed child process (the CLI/HTTP route).

    The target, the file and the --vary and --choose texts are checked here first; the child writes one line
    per step to ``progress_file`` when given (the CLI shows them as they come). ``isolate=True``
    runs the child in the bubblewrap sandbox (:func:`diagnostics.sandbox.run_job`): it sees the
    program's folder read-only, the progress file's folder read-write, and no other files.

    ``executor`` (:func:`diagnostics.executors.connect_executor`: local worker processes or a
    Ray cluster) runs the plan's independent compiles at once, each in a worker sandboxed the
    same way, and answers those measured before from the compile cache; the report's
    ``execution`` says how many rounds, compiles and cache hits it took. The caller closes it.
    """
    spec = tpu.resolve_target(target, topology)
    program_spec = resolve_program(program)
    if isinstance(vary, str):
        vary = parse_vary(vary)
    elif vary is not None:
        vary = check_vary(vary)
    if choose is not None:
        choose = check_choose(choose, vary)
    what = f"the plan of {program_spec.label}"
    payload: dict[str, Any] = {
        "program": str(program_spec), "generation": spec.generation,
        "topology": spec.topology, "vary": vary.model_dump() if vary else None,
        "choose": choose.model_dump() if choose else None,
        "progress_file": str(progress_file) if progress_file else None,
    }
    read_only = [program_spec.path.parent, *filter(None, [project_root(program_spec.path)])]
    writable = [progress_file.parent] if progress_file else []
    if executor is None:
        result = run_job(
            "plan", payload, timeout_s=timeout_s, limits=limits, what=what, python=python,
            sys_path=paths, isolate=isolate, read_only=read_only, writable=writable,
            home_files=[tpu.hbm_cache_path()],
        )
        return job_value(result, PlanReport, what)
    return _plan_on_workers(executor, program_spec, payload, what, timeout_s=timeout_s,
                            limits=limits, python=python, paths=paths, isolate=isolate,
                            read_only=read_only, writable=writable)


def _plan_on_workers(executor: Any, program_spec: Any, payload: dict[str, Any], what: str, *,
                     timeout_s: float, limits: Limits | None, python: str | None,
                     paths: Sequence[str], isolate: bool, read_only: list[Path],
                     writable: list[Path]) -> PlanReport:
    """:func:`plan_program` with its compiles on ``executor``'s workers (see there)."""
    import shutil
    import tempfile
    import threading

    from oomkb.diagnostics.executors import MeasureBroker, WorkerSpec

    started = time.perf_counter()
    executor.start(WorkerSpec(
        program=str(program_spec), isolate=isolate, limits=limits or Limits(),
        timeout_s=timeout_s, python=python, paths=[str(p) for p in paths],
        read_only=[str(p) for p in read_only], home_files=[str(tpu.hbm_cache_path())]))
    exchange = Path(tempfile.mkdtemp(prefix="oomkb-exchange-"))
    broker = MeasureBroker(executor, str(program_spec), program_spec.path)
    stop = threading.Event()
    serving = threading.Thread(target=broker.serve, args=(exchange, stop), daemon=True)
    serving.start()
    try:
        result = run_job(
            "plan", {**payload, "exchange": str(exchange), "slots": executor.slots},
            timeout_s=timeout_s, limits=limits, what=what, python=python, sys_path=paths,
            isolate=isolate, read_only=read_only, writable=[*writable, exchange],
            home_files=[tpu.hbm_cache_path()],
        )
        report = job_value(result, PlanReport, what)
    except Exception:
        if broker.failure is not None:
            raise broker.failure from None  # the workers' own error (a lost worker, a timeout)
        raise
    finally:
        stop.set()
        serving.join(timeout=10)
        executor.stop()
        shutil.rmtree(exchange, ignore_errors=True)
    execution = report.execution or ExecutionReport(executor=executor.kind, workers=executor.slots,
                                                    rounds=0, compiles=report.compiles)
    report.execution = execution.model_copy(update={
        "executor": executor.kind, "workers": executor.slots,
        "seconds": round(time.perf_counter() - started, 3),
        "note": f"compiled on {executor.describe()}; {broker.cached} measurement(s) and the "
                "baseline when unchanged come from the compile cache"
        if broker.cached else f"compiled on {executor.describe()}",
    })
    return report


def plan_job(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Sandbox job: libtpu's environment, the factory, the plan (child side)."""
    os.environ.update(tpu.child_environment(Path(payload["workdir"]) / "tpu_logs"))
    import jax  # noqa: F401 - only now, with libtpu's variables in place

    factory = load_factory(str(payload["program"]))
    vary = payload.get("vary")
    progress = _file_progress(Path(payload["progress_file"])) if payload.get("progress_file") else None
    remote = (_Remote(Path(payload["exchange"]), int(payload.get("slots") or 1))
              if payload.get("exchange") else None)
    report = plan_factory(
        factory, target=str(payload["generation"]), topology=str(payload["topology"]),
        vary=VarySpec.model_validate(vary) if vary else None, progress=progress,
        program=str(payload["program"]), remote=remote,
        choose=ChooseSpec.model_validate(payload["choose"]) if payload.get("choose") else None,
    )
    return report.model_dump(mode="json")


def _file_progress(path: Path) -> Callable[[str], None]:
    """A progress callback appending one JSON line per step to ``path``."""

    def progress(message: str) -> None:
        try:
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"message": message}) + "\n")
        except OSError:
            pass  # progress is a courtesy; the plan goes on without it

    return progress
