"""TPU targets without a TPU: generations, topologies, libtpu's environment and HBM capacity.

libtpu from PyPI compiles for any TPU generation on a CPU machine ("deviceless"). This module
turns a user's ``--tpu v5e --topology 2x4`` into the topology's devices, sets the environment
libtpu needs, measures each target's HBM once (from the compiler's own out-of-memory text) and
caches it on disk, and reads libtpu's driver log, which holds the long OOM report that the Python
exception leaves out.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import tempfile
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from oomkb.diagnostics.exceptions import DiagnosticsError

__all__ = [
    "Generation",
    "TargetError",
    "TargetSpec",
    "LibtpuLog",
    "child_environment",
    "generations",
    "hbm_capacity_bytes",
    "libtpu_version",
    "prepare_in_process",
    "resolve_target",
    "topology_devices",
]


class TargetError(DiagnosticsError, ValueError):
    """The TPU generation or topology asked for does not exist or cannot be compiled for."""


class Generation(BaseModel):
    """One TPU generation as libtpu knows it (see ``tpu_generations.yaml``)."""

    name: str
    topology_prefix: str
    topology_dims: int
    default_topology: str
    devices_per_chip: int
    device_kind: str
    hbm_reported: str
    aliases: list[str] = Field(default_factory=list)
    vmem_bytes: int | None = Field(None, description="physical VMEM per TensorCore")
    vmem_source: str | None = None
    scoped_vmem_default_bytes: int | None = Field(None, description="default scoped VMEM limit")
    scoped_vmem_source: str | None = None
    vmem_hardware_note: str | None = Field(
        None, description="where public reports from hardware disagree with the deviceless "
                          "compiler's VMEM figure; said in every answer that relies on it")


class TargetSpec(BaseModel):
    """A resolved target: generation plus a full libtpu topology name such as ``v5e:2x2``."""

    generation: str
    topology: str
    chip_grid: list[int]


@functools.cache
def generations() -> dict[str, Generation]:
    """The TPU generations this package can compile for, keyed by canonical name."""
    text = resources.files("oomkb.diagnostics").joinpath("tpu_generations.yaml").read_text("utf-8")
    raw = yaml.safe_load(text)
    return {name: Generation(name=name, **fields) for name, fields in raw.items()}


def _generation_named(name: str) -> Generation:
    wanted = name.strip().lower()
    for gen in generations().values():
        if wanted == gen.name.lower() or wanted in (a.lower() for a in gen.aliases):
            return gen
    valid = ", ".join(generations())
    raise TargetError(f"unknown TPU generation {name!r}; choose one of: {valid}")


def resolve_target(generation: str, topology: str | None = None) -> TargetSpec:
    """Check a generation and optional topology (``2x4`` or ``v5e:2x4``) and name the target.

    Raises :class:`TargetError` with the valid choices when either is wrong.
    """
    if not generation or not generation.strip():
        raise TargetError(f"no TPU generation given; choose one of: {', '.join(generations())}")
    gen = _generation_named(generation)
    grid_text = gen.default_topology
    if topology:
        topology = topology.strip()
        if ":" in topology:
            prefix, grid_text = topology.split(":", 1)
            if _generation_named(prefix).name != gen.name:
                raise TargetError(
                    f"topology {topology!r} is for another generation than {gen.name!r}"
                )
        else:
            grid_text = topology
    example = gen.default_topology
    if not re.fullmatch(r"\d{1,4}(x\d{1,4}){1,2}", grid_text):
        raise TargetError(
            f"topology {grid_text!r} is not a chip grid; {gen.name} takes "
            f"{gen.topology_dims} numbers such as {example!r}"
        )
    grid = [int(n) for n in grid_text.split("x")]
    if len(grid) != gen.topology_dims or min(grid) < 1:
        raise TargetError(
            f"{gen.name} topologies have {gen.topology_dims} positive numbers, such as "
            f"{example!r}; got {grid_text!r}"
        )
    if math.prod(grid) > 4096:
        raise TargetError(f"topology {grid_text!r} has more than 4096 chips")
    return TargetSpec(
        generation=gen.name, topology=f"{gen.topology_prefix}:{grid_text}", chip_grid=grid
    )


# ---------------------------------------------------------------------------------------------
# libtpu's environment


def _default_log_dir() -> Path:
    return Path(tempfile.gettempdir()) / "tpu_logs"


def child_environment(log_dir: Path) -> dict[str, str]:
    """Variables for a fresh process that only compiles for TPU (set before jax is imported).

    Several processes may load libtpu at once; start-up warnings about the missing TPU VM are
    silenced without changing any topology; driver logs go to ``log_dir`` so the long OOM report
    can be read back; JAX itself stays on the CPU.
    """
    return {
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
        "TPU_ACCELERATOR_TYPE": "v5litepod-4",
        "TPU_WORKER_HOSTNAMES": "localhost",
        "TPU_LOG_DIR": str(log_dir),
        "JAX_PLATFORMS": "cpu",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


def _on_tpu_vm() -> bool:
    return any(Path("/dev").glob("accel*")) or Path("/dev/vfio/0").exists()


def prepare_in_process() -> None:
    """Set what libtpu needs in the current process without disturbing a real TPU or the user.

    Only defaults are set: a user's own values win, and on a TPU VM the accelerator variables
    are left to the machine.
    """
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if not _on_tpu_vm():
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")


@functools.cache
def libtpu_version() -> str:
    """The installed libtpu version, or raise :class:`TargetError` when libtpu is missing."""
    for dist in ("libtpu", "libtpu-nightly"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    raise TargetError("libtpu is not installed; install it with: pip install 'jax[tpu]'")


_topology_cache: dict[str, list[Any]] = {}


def topology_devices(target: TargetSpec) -> list[Any]:
    """The devices of ``target``'s topology (usable in a Mesh; nothing runs on them)."""
    if target.topology in _topology_cache:
        return _topology_cache[target.topology]
    libtpu_version()
    from jax.experimental import topologies

    grid = list(target.chip_grid) + [1] * (3 - len(target.chip_grid))
    # libtpu's default host is 2x2x1 chips; smaller or odd grids need host bounds that divide them.
    bounds = [math.gcd(grid[0], 2), math.gcd(grid[1], 2), 1]
    try:
        topo = topologies.get_topology_desc(
            target.topology, "tpu", chips_per_host_bounds=bounds
        )
    except Exception as err:  # libtpu reports bad names as JaxRuntimeError
        message = str(err).split("\n", 1)[0]
        raise TargetError(f"libtpu cannot build topology {target.topology!r}: {message}") from err
    devices = list(topo.devices)
    _topology_cache[target.topology] = devices
    return devices


# ---------------------------------------------------------------------------------------------
# HBM capacity, measured once per libtpu version and topology


def hbm_cache_path() -> Path:
    """Where measured HBM capacities are kept (a job in a sandbox gets a read-only copy)."""
    from oomkb.settings import oomkb_home

    return oomkb_home() / "tpu_hbm.json"


def _read_cache(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int) and v > 0}


def _write_cache(path: Path, key: str, value: int) -> None:
    from filelock import FileLock

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=30):
            data = _read_cache(path)
            data[key] = value
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True), "utf-8")
            os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs a re-measurement next time


def measure_hbm_bytes(device: Any) -> int:
    """Compile a deliberately oversized program for ``device`` and read the HBM limit it reports."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    from oomkb.diagnostics.parse import parse_error

    def oversized():
        # 64 outputs of 4 GiB (256 GiB: more than any TPU has); one 4 TiB array would trip a
        # compiler check on the size of a single allocation instead of the HBM check.
        return tuple(jnp.full((1 << 15, 1 << 15), i, jnp.float32) for i in range(64))

    try:
        # placed by its sharding: older jax compiles for the default backend under default_device
        jax.jit(oversized, out_shardings=SingleDeviceSharding(device)).trace().lower().compile()
    except Exception as err:
        available = parse_error(str(err)).available_bytes
        if available:
            return available
        raise TargetError(f"could not read the HBM size from the compiler: {err}") from err
    raise TargetError("a 256 GiB program compiled: the HBM size could not be measured")


def hbm_capacity_bytes(target: TargetSpec, device: Any) -> int:
    """HBM per device of ``target``, as the compiler counts it (measured once, then cached)."""
    key = f"libtpu {libtpu_version()}|{target.topology}"
    path = hbm_cache_path()
    cached = _read_cache(path).get(key)
    if cached:
        return cached
    value = measure_hbm_bytes(device)
    _write_cache(path, key, value)
    return value


# ---------------------------------------------------------------------------------------------
# libtpu's driver log

_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ ", re.MULTILINE)
_OOM_START = re.compile(r"Ran out of memory in memory space \w+")


class LibtpuLog:
    """The part of this process's libtpu log written after :meth:`mark` (for the long OOM report)."""

    def __init__(self, log_dir: Path | None = None) -> None:
        env_dir = os.environ.get("TPU_LOG_DIR")
        self.log_dir = log_dir or (Path(env_dir) if env_dir else _default_log_dir())
        self._offset = 0
        self._file: Path | None = None

    def _current_file(self) -> Path | None:
        pid = os.getpid()
        files = sorted(self.log_dir.glob(f"*.log.INFO.*.{pid}"), key=lambda p: p.stat().st_mtime)
        return files[-1] if files else None

    def mark(self) -> None:
        """Remember where the log ends now."""
        self._file = self._current_file()
        self._offset = self._file.stat().st_size if self._file else 0

    def read_new(self, limit_bytes: int = 4 << 20) -> str:
        """Text written to the log since :meth:`mark` (at most ``limit_bytes``)."""
        current = self._current_file()
        if current is None:
            return ""
        offset = self._offset if current == self._file else 0
        with current.open("rb") as fh:
            fh.seek(offset)
            return fh.read(limit_bytes).decode("utf-8", "replace")

    def oom_report(self, limit_chars: int = 64_000) -> str | None:
        """The compiler's long out-of-memory report written since :meth:`mark`, if any."""
        text = self.read_new()
        match = _OOM_START.search(text)
        if not match:
            return None
        nxt = _LOG_LINE.search(text, match.end())
        report = text[match.start() : nxt.start() if nxt else len(text)].rstrip()
        return report[:limit_chars]
