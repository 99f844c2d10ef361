"""`oomkb diff` on the same programs under two jax versions the ranges admit: the floor
(pyproject.toml's `jax>=`, in `.venv-oldest-jax`, which `make test-oldest-jax` builds) and the
version of this environment (constraints.txt's lock), each estimated with
`oomkb estimate … --python`. The diff must record both versions and either name the buffers
that changed or say, truthfully, that nothing did.

Skipped when `.venv-oldest-jax` is absent or holds another jax (no second version is faked).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import pytest

import oomkb
from oomkb.diagnostics.diff import load_estimate_report

pytestmark = pytest.mark.slow  # four deviceless compiles, two of them in another interpreter

ROOT = Path(__file__).resolve().parents[2]
FLOOR_VENV = ROOT / ".venv-oldest-jax"
PROGRAM = ROOT / "tests" / "programs" / "roles_programs.py"


def _floor() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"jax\s*>=", d)]
    return spec.split(">=")[1].split(",")[0].strip()


def _floor_python() -> Path:
    python = FLOOR_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{FLOOR_VENV.name} is absent: `make test-oldest-jax` builds it (jax {_floor()}, "
                    "from PyPI); without it there is no second jax version to compare")
    found = subprocess.run([str(python), "-c", "import jax; print(jax.__version__)"], capture_output=True,
                           text=True, timeout=120)
    if found.returncode != 0 or found.stdout.strip() != _floor():
        pytest.skip(f"{FLOOR_VENV.name} does not hold jax {_floor()} (it has "
                    f"{found.stdout.strip() or found.stderr.strip()[-200:]}): rebuild it with `make test-oldest-jax`")
    if jax.__version__ == _floor():
        pytest.skip(f"this environment's jax is the floor {_floor()} too: one version, nothing to compare")
    return python


def _oomkb(*args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "oomkb", *args], capture_output=True, text=True,
                          timeout=900, cwd=cwd, env={**os.environ, "COLUMNS": "300"})  # no folded names
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("factory", ["adamw_step", "scan_grad"])
def test_the_floor_and_the_lock_jax_compared_name_what_changed_or_say_nothing_did(tmp_path, factory):
    python = _floor_python()
    paths = {}
    for side, more in (("floor", ["--python", str(python)]), ("lock", [])):
        paths[side] = tmp_path / f"{side}.json"
        paths[side].write_text(_oomkb("estimate", f"{PROGRAM}:{factory}", "--tpu", "v5e", "--json",
                                      "--top", "50", *more, cwd=tmp_path))
    floor, lock = load_estimate_report(paths["floor"]), load_estimate_report(paths["lock"])
    assert (floor.target.jax_version, lock.target.jax_version) == (_floor(), jax.__version__)

    diff = oomkb.diff(paths["floor"], paths["lock"])
    assert (diff.jax_before, diff.jax_after) == (_floor(), jax.__version__)
    assert f"traced by jax {_floor()} (A) and {jax.__version__} (B)" in diff.notes
    assert diff.total_delta_bytes == lock.total_bytes - floor.total_bytes
    text = _oomkb("diff", str(paths["floor"]), str(paths["lock"]), cwd=tmp_path)
    assert f"traced by jax {_floor()} (A) and {jax.__version__} (B)" in text
    if not diff.changed:
        # the same figures, and every listed buffer paired with an identical one
        assert diff.buffers == [] and diff.unchanged_buffers == len(lock.top_buffers) == len(floor.top_buffers)
        assert all(f.delta_bytes == 0 for f in diff.figures if f.delta_bytes is not None)
        assert "nothing changed" in text
        return
    # something changed: every changed buffer is named (op name or HLO instruction, shape) and
    # the changes add up to the listed buffers' difference
    assert diff.buffers and "nothing changed" not in text
    for b in diff.buffers:
        assert (b.op_name or b.instruction) and (b.shape_before or b.shape_after)
        assert (b.op_name or b.instruction) in text
    assert sum(b.delta_bytes for b in diff.buffers) == (sum(b.bytes for b in lock.top_buffers)
                                                        - sum(b.bytes for b in floor.top_buffers))
    data = json.loads(_oomkb("diff", str(paths["floor"]), str(paths["lock"]), "--json", cwd=tmp_path))
    assert data["buffers"][0]["delta_bytes"] == diff.buffers[0].delta_bytes
