"""Live memory profile of a JAX function on the local backend.

`profile_callable` runs a function a few times under `jax.profiler.trace`, samples the bytes held
by live JAX arrays after every call, and reports the peak, the growth per call and the arrays
that pile up from call to call (leak suspects, with the line that created them where JAX recorded
it). The trace opens in XProf (`xprof --logdir DIR`); a pprof snapshot of device memory taken
after the last call is saved beside it as `memory.prof`.
"""

from __future__ import annotations

import gc
import math
import os
import tempfile
import time
import weakref
from collections import Counter
from fractions import Fraction
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, Field

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.holders import Holder, held_by
from oomkb.diagnostics.program import array_creation_site
from oomkb.units import ByteCount

if TYPE_CHECKING:
    from oomkb.diagnostics.program import ProgramSpec

PPROF_FILE_NAME = "memory.prof"
MAX_LEAK_SUSPECTS = 10


class ProfileError(DiagnosticsError):
    """The profile could not be taken (bad arguments, a trace already running, the function raised)."""


class LeakSuspect(BaseModel):
    """A group of arrays of one shape and dtype, created during the run, that grew from call to call."""

    shape: str = Field(description="array shape, e.g. '(256, 128)'")
    dtype: str
    count: int = Field(description="arrays of this group alive after the last call")
    bytes: ByteCount = Field(description="device bytes held by those arrays after the last call")
    count_per_call: list[int] = Field(description="arrays of this group alive after each call")
    source: str | None = Field(
        default=None,
        description="'file:line (function)' that created most of these arrays; null when unknown",
    )
    held_by: list[Holder] = Field(
        default_factory=list,
        description="what keeps them alive when Python does (a module global, an attribute, a closure)",
    )


class ProfileReport(BaseModel):
    """Live memory profile of repeated calls of one function (the `profile --json` object)."""

    backend: str
    device: str | None = None
    target: str | None = Field(default=None, description="FILE.py:FUNC when run from the CLI")
    target_kind: Literal["callable", "factory", "step"] = "callable"
    calls: int
    baseline_bytes: ByteCount = Field(description="bytes of live arrays before the first call")
    live_bytes_per_call: list[ByteCount] = Field(
        description="bytes of live arrays right after each call, its outputs still held"
    )
    peak_bytes: ByteCount = Field(description="largest of baseline_bytes and live_bytes_per_call")
    peak_call: int = Field(description="1-based call of the peak; 0 when the baseline is largest")
    growth_bytes_per_call: ByteCount = Field(
        description="least-squares slope of live_bytes_per_call over the call number, rounded"
    )
    leak_suspects: list[LeakSuspect]
    call_seconds: list[float]
    memory_stats_peak_bytes: ByteCount | None = Field(
        default=None,
        description="largest peak_bytes_in_use of device.memory_stats() (GPU/TPU); null on CPU",
    )
    trace_dir: str = Field(description="the log directory to open with xprof --logdir")
    xplane_path: str | None = None
    pprof_path: str | None = Field(
        default=None, description="gzipped pprof of device memory after the last call"
    )
    xprof_command: str


def profile_callable(
    fn: Callable[..., Any],
    args: tuple | list = (),
    kwargs: dict[str, Any] | None = None,
    repeat: int = 5,
    logdir: str | os.PathLike | None = None,
) -> ProfileReport:
    """Call `fn(*args, **kwargs)` `repeat` times on the default backend and report its memory.

    Every call runs under `jax.profiler.trace(logdir)` (a new temporary directory when `logdir`
    is None) and its outputs are blocked on. After each call the bytes of all live arrays are
    summed, with the call's outputs still held. `growth_bytes_per_call` is the least-squares
    slope of those samples over the call number (robust to a one-off allocation in the first
    call, exact for a steady leak). Leak suspects are arrays created during the run, other than
    the current call's outputs, whose (shape, dtype) group is never smaller than after the
    previous call and ends larger than after the first. An exception raised by `fn` becomes a
    `ProfileError` naming the call, with the original exception chained.
    """
    import jax

    if not callable(fn):
        raise ProfileError(f"expected a function to profile, got {type(fn).__name__}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ProfileError(f"repeat must be a positive whole number, got {repeat!r}")
    kwargs = dict(kwargs or {})
    args = tuple(args)
    logdir_path = Path(logdir) if logdir is not None else Path(tempfile.mkdtemp(prefix="oomkb-profile-"))
    try:
        logdir_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfileError(f"cannot create the log directory {logdir_path}: {exc.strerror}") from exc
    logdir_path = logdir_path.resolve()
    runs_before = set(_xplane_files(logdir_path))

    jax.block_until_ready((args, kwargs))
    gc.collect()
    before = {id(a): weakref.ref(a) for a in jax.live_arrays()}
    baseline_bytes = _live_bytes()

    live_bytes: list[int] = []
    seconds: list[float] = []
    groups_per_call: list[Counter] = []
    try:
        trace = jax.profiler.trace(str(logdir_path))
        trace.__enter__()
    except Exception as exc:  # a profiler session already running, unwritable dir, ...
        raise ProfileError(f"cannot start the JAX profiler trace in {logdir_path}: {exc}") from exc
    try:
        for call in range(1, repeat + 1):
            started = time.perf_counter()
            try:
                with jax.profiler.TraceAnnotation(f"oomkb call {call}"):
                    out = fn(*args, **kwargs)
                    jax.block_until_ready(out)
            except Exception as exc:
                name = getattr(fn, "__qualname__", None) or repr(fn)
                detail = str(exc) if isinstance(exc, DiagnosticsError) else _describe(exc)
                if call > 1 and ("deleted or donated" in detail or "has been deleted" in detail):
                    detail += (
                        "; the same arguments go to every call, so a function that donates them"
                        " fails from the second call on: profile a step function that carries"
                        " its state from call to call instead"
                    )
                raise ProfileError(f"{name} failed on call {call}: {detail}") from exc
            seconds.append(time.perf_counter() - started)
            out_ids = {id(leaf) for leaf in jax.tree_util.tree_leaves(out) if isinstance(leaf, jax.Array)}
            gc.collect()
            arrays = jax.live_arrays()
            live_bytes.append(sum(_device_bytes(a) for a in arrays))
            groups_per_call.append(
                Counter(
                    _group_key(a)
                    for a in arrays
                    if id(a) not in out_ids and not _existed_before(a, before)
                )
            )
            del arrays, out
    finally:
        trace.__exit__(None, None, None)

    gc.collect()
    final_arrays = [a for a in jax.live_arrays() if not _existed_before(a, before)]
    suspects = _leak_suspects(groups_per_call, final_arrays)
    del final_arrays

    xplane_path = _newest(set(_xplane_files(logdir_path)) - runs_before)
    pprof_dir = xplane_path.parent if xplane_path is not None else logdir_path
    pprof_path = pprof_dir / PPROF_FILE_NAME
    pprof_path.write_bytes(jax.profiler.device_memory_profile())

    samples = [baseline_bytes, *live_bytes]
    peak_bytes = max(samples)
    device = jax.local_devices()[0]
    return ProfileReport(
        backend=jax.default_backend(),
        device=getattr(device, "device_kind", None),
        calls=repeat,
        baseline_bytes=baseline_bytes,
        live_bytes_per_call=live_bytes,
        peak_bytes=peak_bytes,
        peak_call=samples.index(peak_bytes),
        growth_bytes_per_call=growth_per_call(live_bytes),
        leak_suspects=suspects,
        call_seconds=[round(s, 6) for s in seconds],
        memory_stats_peak_bytes=_memory_stats_peak(),
        trace_dir=str(logdir_path),
        xplane_path=str(xplane_path) if xplane_path is not None else None,
        pprof_path=str(pprof_path),
        xprof_command=f"xprof --logdir {logdir_path}",
    )


def growth_per_call(samples: list[int]) -> int:
    """Least-squares slope of `samples` against their index, rounded to whole bytes; 0 for < 2."""
    n = len(samples)
    if n < 2:
        return 0
    mean_x = Fraction(n - 1, 2)
    mean_y = Fraction(sum(samples), n)
    numerator = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(samples))
    denominator = sum((x - mean_x) ** 2 for x in range(n))
    return round(numerator / denominator)


def _live_bytes() -> int:
    import jax

    return sum(_device_bytes(a) for a in jax.live_arrays())


def _device_bytes(array: Any) -> int:
    """Bytes the array occupies on this process's devices (every shard, replicas included)."""
    try:
        sharding = array.sharding
        shard_shape = sharding.shard_shape(array.shape)
        return math.prod(shard_shape) * array.dtype.itemsize * len(sharding.addressable_devices)
    except Exception:
        return int(array.nbytes)


def _existed_before(array: Any, before: dict[int, weakref.ref]) -> bool:
    ref = before.get(id(array))
    return ref is not None and ref() is array


def _group_key(array: Any) -> tuple[tuple[int, ...], str]:
    return tuple(array.shape), str(array.dtype)


def _leak_suspects(groups_per_call: list[Counter], final_arrays: list[Any]) -> list[LeakSuspect]:
    """Groups whose count never fell between calls and rose from the first call to the last."""
    if len(groups_per_call) < 2:
        return []
    keys = set().union(*groups_per_call)
    growing = []
    for key in keys:
        counts = [groups[key] for groups in groups_per_call]
        if counts[-1] > counts[0] and all(b >= a for a, b in zip(counts, counts[1:])):
            growing.append((key, counts))
    suspects = []
    for (shape, dtype), counts in growing:
        members = [a for a in final_arrays if _group_key(a) == (shape, dtype)]
        if not members:  # freed after the last call (for example with the last output)
            continue
        sources = Counter(source for a in members if (source := array_creation_site(a)) is not None)
        suspects.append(
            LeakSuspect(
                shape=str(shape),
                dtype=dtype,
                count=len(members),
                bytes=sum(_device_bytes(a) for a in members),
                count_per_call=counts,
                source=sources.most_common(1)[0][0] if sources else None,
                held_by=held_by(members[0], ignore=[members, final_arrays]),
            )
        )
    suspects.sort(key=lambda s: (-s.bytes, s.shape, s.dtype))
    return suspects[:MAX_LEAK_SUSPECTS]


def _memory_stats_peak() -> int | None:
    import jax

    peaks = []
    for device in jax.local_devices():
        try:
            stats = device.memory_stats()
        except Exception:
            stats = None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(int(stats["peak_bytes_in_use"]))
    return max(peaks) if peaks else None


def _xplane_files(logdir: Path) -> list[Path]:
    return list(logdir.glob("plugins/profile/*/*.xplane.pb"))


def _newest(paths: set[Path]) -> Path | None:
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


# ---------------------------------------------------------------------------------------------
# A user's FILE.py:FUNC, profiled in a child process

DEFAULT_TIMEOUT_S = 300.0


def profile_program(
    spec: str,
    repeat: int = 5,
    logdir: str | os.PathLike | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    isolate: bool = False,
    python: str | None = None,
    paths: Sequence[str] = (),
) -> ProfileReport:
    """Profile the user's ``FILE.py:FUNC`` in a child process on the local backend.

    ``isolate=True`` runs the child in the bubblewrap sandbox (:func:`diagnostics.sandbox.run_job`):
    it sees the program's folder read-only and the trace folder read-write, and no other files.

    FUNC is called once with no arguments (or with ``devices=``/``mesh=`` set to the local
    devices when its signature asks for them). If it returns ``(fn, args)`` or
    ``(fn, args, kwargs)`` with a callable ``fn``, it was a *factory* and ``fn(*args, **kwargs)``
    is profiled ``repeat`` times. Otherwise FUNC is a *step* function: that first call served as
    the warm-up (compilation), and FUNC() is profiled ``repeat`` more times. The trace goes to
    ``logdir`` (a new temporary directory when None). A missing file or name, an import error,
    a raising function, a crash or a timeout raise a ``DiagnosticsError`` with a clear message.
    """
    from oomkb.diagnostics.program import resolve_program
    from oomkb.diagnostics.sandbox import job_value, run_job

    program = resolve_program(spec)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ProfileError(f"--repeat must be a positive whole number, got {repeat!r}")
    if timeout_s <= 0:
        raise ProfileError(f"the timeout must be positive, got {timeout_s!r} s")
    created = logdir is None or not Path(logdir).expanduser().exists()
    logdir_path = _make_logdir(logdir)
    try:
        result = run_job(
            "profile",
            {"path": str(program.path), "name": program.name, "repeat": repeat,
             "logdir": str(logdir_path)},
            timeout_s=timeout_s,
            what=f"the profile of {program.path.name}:{program.name}",
            isolate=isolate,
            read_only=[program.path.parent],
            writable=[logdir_path],
            python=python,
            need_tpu=False,
            sys_path=paths,
        )
    except BaseException:
        if created and logdir_path.is_dir() and not any(logdir_path.iterdir()):
            logdir_path.rmdir()  # leave no empty directory behind a failed run
        raise
    return job_value(result, ProfileReport)


def _make_logdir(logdir: str | os.PathLike | None) -> Path:
    if logdir is None:
        return Path(tempfile.mkdtemp(prefix="oomkb-profile-")).resolve()
    path = Path(logdir).expanduser()
    if path.exists() and not path.is_dir():
        raise ProfileError(f"the log directory {logdir} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfileError(f"cannot create the log directory {logdir}: {exc.strerror}") from exc
    return path.resolve()


def profile_job(payload: dict[str, Any]) -> dict[str, Any]:
    """Child-process side of :func:`profile_program` (run by ``diagnostics.sandbox.run_job``)."""
    from oomkb.diagnostics.program import ProgramSpec, load_program_object

    program = ProgramSpec(path=Path(payload["path"]), name=payload["name"])
    target = load_program_object(program)
    kind, fn, args, kwargs = resolve_target(target, program)
    report = profile_callable(fn, args, kwargs, repeat=payload["repeat"], logdir=payload["logdir"])
    report.target = f"{program.path}:{program.name}"
    report.target_kind = kind
    return report.model_dump(mode="json")


def resolve_target(
    target: Any, program: ProgramSpec | None = None
) -> tuple[str, Callable[..., Any], tuple, dict]:
    """Decide whether ``target`` is a factory or a step function and return what to profile.

    Calls ``target`` once (see :func:`profile_program`), as :mod:`diagnostics.program` calls a
    factory, with the local devices; returns ``(kind, fn, args, kwargs)`` with kind
    ``"factory"`` or ``"step"``.
    """
    import jax

    from oomkb.diagnostics.program import as_program, call_factory, unpack_program

    if program is not None:
        label = f"{Path(program.path).name}:{program.name}"
    else:
        label = getattr(target, "__qualname__", None) or type(target).__name__
    if not callable(target) or isinstance(target, type):
        raise ProfileError(
            f"{label} is of type {type(target).__name__}, not a function; give a step function that "
            "takes no arguments or a factory returning (fn, args) or (fn, args, kwargs)"
        )
    result, mesh = call_factory(target, devices=list(jax.devices()), label=label,
                                raised="raised on its first call:")
    try:
        jax.block_until_ready(result)
    except Exception as exc:
        raise ProfileError(f"{label} raised on its first call: {_describe(exc)}") from exc
    if as_program(result) is not None:
        fn, args, kwargs, _ = unpack_program(result, label, mesh)
        return "factory", _reporting_errors(fn), args, kwargs
    del result
    bound = {}
    if mesh is not None:
        bound["mesh"] = mesh
    if "devices" in _parameter_names(target):
        bound["devices"] = list(jax.devices())
    return "step", _reporting_errors(target, **bound), (), {}


def _parameter_names(fn: Callable[..., Any]) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _reporting_errors(fn: Callable[..., Any], **bound: Any) -> Callable[..., Any]:
    """``fn`` with ``bound`` keyword arguments, its errors naming the user's line."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **bound, **kwargs)
        except Exception as exc:
            raise ProfileError(_describe(exc)) from exc

    call.__qualname__ = getattr(fn, "__qualname__", "the function")
    return call


def _describe(exc: BaseException) -> str:
    """``ValueError: message at train.py:12``, the location being the user's innermost line."""
    from oomkb.diagnostics.program import describe_exception

    return describe_exception(exc)
