"""A user's repository with packages named like oomkb's floors (`diagnostics/`, `api/`, `kb/`,
`indexer/`) works with every command that loads the user's code: oomkb claims only `oomkb`.

The project is laid out as a real one is: a `pyproject.toml` at the top, the user's packages beside
it, the training code in `scripts/` importing them by their top-level names. Each command runs as
a user runs it, from the command line in the project folder; `--python` runs the job in the user's
own interpreter (a virtualenv that has jax but neither pydantic nor oomkb).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.diagnostics.test_user_env import _venv

pytestmark = pytest.mark.slow  # real compiles and subprocesses: `make test-quick` skips it

#: The user's own packages, each with a module the training code imports.
USER_PACKAGES = {
    "diagnostics": ("metrics.py", "def report(x):\n    return x * 0.5\n"),
    "api": ("client.py", "ENDPOINT = 'users-own-api'\n"),
    "kb": ("facts.py", "HIDDEN = 256\n"),
    "indexer": ("shards.py", "def rows():\n    return 128\n"),
}

TRAIN = textwrap.dedent('''
    import jax
    import jax.numpy as jnp

    from api.client import ENDPOINT
    from diagnostics.metrics import report
    from indexer.shards import rows
    from kb.facts import HIDDEN

    assert ENDPOINT == "users-own-api"


    def make_step(batch: int = 8):
        def step(w, x):
            return report(jnp.tanh(x @ w))
        return jax.jit(step), (jax.ShapeDtypeStruct((HIDDEN, HIDDEN), jnp.float32),
                               jax.ShapeDtypeStruct((batch * rows(), HIDDEN), jnp.float32))


    def profiled():
        return report(jnp.ones((rows(), HIDDEN))).sum()


    if __name__ == "__main__":
        import oomkb

        with oomkb.capture("capture.json"):
            kept = [jnp.ones((rows(), HIDDEN)) for _ in range(2)]
            print("users-own-run", float(report(kept[0]).sum()))
''')


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("myproj")
    (root / "pyproject.toml").write_text('[project]\nname = "myproj"\nversion = "0"\n')
    for package, (module, source) in USER_PACKAGES.items():
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
        (root / package / module).write_text(source)
    (root / "scripts").mkdir()
    (root / "scripts" / "train.py").write_text(TRAIN)
    return root


def _oomkb(project: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run([sys.executable, "-m", "oomkb", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=project, env=env)


@pytest.fixture(scope="module")
def user_python(tmp_path_factory) -> Path:
    return _venv(tmp_path_factory.mktemp("venv-user") / "env", with_jax=True)


@pytest.mark.parametrize("python", [False, True], ids=["oomkb-python", "users-python"])
def test_estimate_loads_the_users_own_diagnostics_api_kb_and_indexer(project, user_python, python):
    extra = ["--python", str(user_python)] if python else []
    done = _oomkb(project, "estimate", "scripts/train.py:make_step", "--tpu", "v5e", "--json", *extra)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["argument_bytes"] == (256 * 256 + 8 * 128 * 256) * 4


def test_plan_loads_the_users_own_packages(project):
    done = _oomkb(project, "plan", "scripts/train.py:make_step", "--tpu", "v5e", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout[done.stdout.index("{"):])
    assert report["baseline"]["fits"] is True


def test_profile_loads_the_users_own_packages(project):
    done = _oomkb(project, "profile", "scripts/train.py:profiled", "--repeat", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout[done.stdout.index("{"):])["calls"]


@pytest.mark.parametrize("python", [False, True], ids=["oomkb-python", "users-python"])
def test_run_and_capture_use_the_users_own_packages(project, user_python, python):
    extra = ["--python", str(user_python)] if python else []
    done = _oomkb(project, "run", *extra, "--no-answer", "scripts/train.py")
    assert done.returncode == 0, done.stderr
    assert "users-own-run 16384.0" in done.stdout
    # oomkb.capture inside the user's script: imported from oomkb, while `diagnostics` is theirs
    assert "oomkb.diagnostics" not in done.stderr
