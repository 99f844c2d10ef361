"""`oomkb diff`: two real estimates of two revisions of one program, compared (deviceless compiles)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import oomkb
from oomkb.diagnostics.diff import DiffError, diff_reports, load_estimate_report

pytestmark = pytest.mark.slow  # real compiles in a child process: `make test-quick` skips it

REVISION = textwrap.dedent('''
    import jax
    import jax.numpy as jnp

    def make():
        def step(w, x):
            h = jnp.tanh(x @ w)          # the hidden activations
            return (h * {scale}) @ w.T
        return jax.jit(step), (jax.ShapeDtypeStruct((1024, {hidden}), jnp.float32),
                               jax.ShapeDtypeStruct((2048, 1024), jnp.float32))
''')


def _oomkb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomkb", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Estimates of revision A (hidden 512), a second run of A, and revision B (hidden 2048)."""
    root = tmp_path_factory.mktemp("revisions")
    out = {}
    for name, hidden in (("a", 512), ("a_again", 512), ("b", 2048)):
        (root / f"{name}.py").write_text(REVISION.format(hidden=hidden, scale=2.0))
        done = _oomkb("estimate", f"{name}.py:make", "--tpu", "v5e", "--json", "--top", "20", cwd=root)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        data["function"] = "make"  # the same factory in two files, as two checkouts of one repo
        out[name] = root / f"{name}.json"
        out[name].write_text(json.dumps(data))
    return out


def test_the_same_program_twice_changed_nothing(reports):
    diff = oomkb.diff(reports["a"], reports["a_again"])
    assert diff.changed is False and diff.total_delta_bytes == 0 and diff.buffers == []
    assert diff.unchanged_buffers > 0
    done = _oomkb("diff", str(reports["a"]), str(reports["a_again"]), cwd=reports["a"].parent)
    assert done.returncode == 0, done.stderr
    assert "nothing changed" in done.stdout


def test_a_wider_layer_shows_its_growth_buffer_by_buffer_largest_first(reports):
    a, b = load_estimate_report(reports["a"]), load_estimate_report(reports["b"])
    diff = diff_reports(a, b)
    assert diff.changed and diff.total_delta_bytes == b.total_bytes - a.total_bytes > 0
    figures = {f.name: f for f in diff.figures}
    # the weight grew from 1024x512 to 1024x2048 f32 (per device, one device)
    assert figures["argument_bytes"].delta_bytes == 1024 * (2048 - 512) * 4
    deltas = [d.delta_bytes for d in diff.buffers]
    # the weight is one argument that grew, not one gone and one new
    (w,) = [d for d in diff.buffers if d.op_name == "w"]
    assert (w.status, w.delta_bytes, w.matched_by) == ("grown", 1024 * (2048 - 512) * 4, "argument name")
    assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0
    # every changed buffer either pairs two buffers of A and B, or is new/gone with its size
    for d in diff.buffers:
        assert d.delta_bytes == d.bytes_after - d.bytes_before
    # the buffers' changes account for the listed buffers exactly
    listed = sum(x.bytes for x in b.top_buffers) - sum(x.bytes for x in a.top_buffers)
    assert sum(deltas) == listed
    done = _oomkb("diff", str(reports["a"]), str(reports["b"]), "--json", cwd=reports["a"].parent)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["total_delta_bytes"] == diff.total_delta_bytes and data["buffers"][0]["delta_bytes"] == deltas[0]


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such report file"),
    ("not json", "is not JSON"),
    ('{"fits": true}', "is not an estimate report"),
    ('{"target": {}, "total_bytes": 1}', "is not a valid estimate report"),
])
def test_bad_reports_are_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    with pytest.raises(DiffError, match=message):
        load_estimate_report(bad)
    done = _oomkb("diff", str(bad), str(bad), cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
