"""Running the user's program where it runs: `--python` (another interpreter), `--path` and the
project's top folder on the import path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from oomkb.diagnostics.interpreter import InterpreterError, check_interpreter

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

JAX_ONLY = ("jax", "jaxlib", "libtpu", "numpy", "numpy.libs", "ml_dtypes", "opt_einsum", "scipy", "scipy.libs")

PROGRAM = textwrap.dedent('''
    import jax
    import jax.numpy as jnp
    import optaxlike  # only the user's environment has it

    def make():
        def step(w, x):
            return optaxlike.scale(jnp.tanh(x @ w))
        return step, (jax.ShapeDtypeStruct((512, 512), jnp.float32), jax.ShapeDtypeStruct((256, 512), jnp.float32))
''')


def _venv(root: Path, *, with_jax: bool) -> Path:
    """A virtualenv whose only packages are jax and what jax needs (linked from oomkb's own
    environment) plus `optaxlike`, which oomkb's environment does not have."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    site = Path(subprocess.run([str(root / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "optaxlike").mkdir()
    (site / "optaxlike" / "__init__.py").write_text("def scale(x):\n    return 0.5 * x\n")
    if with_jax:
        ours = Path(sysconfig.get_paths()["purelib"])
        for entry in ours.iterdir():
            base = re.split(r"-\d", entry.name, maxsplit=1)[0]
            if base in JAX_ONLY:
                (site / entry.name).symlink_to(entry)
    return root / "bin" / "python"


def _oomkb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomkb.api.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def user_python(tmp_path_factory) -> Path:
    return _venv(tmp_path_factory.mktemp("venv-jax") / "env", with_jax=True)


def test_a_program_importing_a_package_only_the_users_env_has_estimates_with_python(user_python, tmp_path):
    program = tmp_path / "train.py"
    program.write_text(PROGRAM)
    without = _oomkb("estimate", f"{program}:make", "--tpu", "v5e", "--json")
    assert without.returncode == 2 and "optaxlike" in without.stderr
    done = _oomkb("estimate", f"{program}:make", "--tpu", "v5e", "--json", "--python", str(user_python))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # the same arrays as the program's: 512x512 and 256x512 f32 arguments, a 256x512 f32 result
    assert report["argument_bytes"] == (512 * 512 + 256 * 512) * 4
    assert report["output_bytes"] == 256 * 512 * 4


def test_the_users_interpreter_needs_only_jax_oomkb_lends_its_helpers(user_python):
    interp = check_interpreter(user_python, need_tpu=True)
    assert interp.modules["jax"] and not interp.modules["pydantic"]
    assert interp.support_path  # oomkb's pydantic and PyYAML are appended after the user's folders


def test_an_interpreter_without_jax_gets_one_line_saying_what_to_install(tmp_path):
    bare = _venv(tmp_path / "bare", with_jax=False)
    with pytest.raises(InterpreterError, match=r"has no jax; install it there with: .* -m pip install 'jax\[tpu\]'"):
        check_interpreter(bare, need_tpu=True)
    program = tmp_path / "p.py"
    program.write_text(PROGRAM)
    done = _oomkb("estimate", f"{program}:make", "--python", str(bare))
    assert done.returncode == 2 and "pip install 'jax[tpu]'" in done.stderr and "Traceback" not in done.stderr


def test_a_python_that_is_not_an_interpreter_is_a_clear_error(tmp_path):
    not_python = tmp_path / "tool"
    not_python.write_text("#!/bin/sh\necho hello\n")
    not_python.chmod(0o755)
    for path, words in ((not_python, "not a Python interpreter"), (tmp_path / "missing", "no such file")):
        with pytest.raises(InterpreterError, match=words):
            check_interpreter(path, need_tpu=False)


def test_imports_resolve_from_the_projects_top_folder_and_from_path(tmp_path):
    project = tmp_path / "repo"
    (project / "mymodel").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'mymodel'\n")
    (project / "mymodel" / "__init__.py").write_text("def width():\n    return 384\n")
    (project / "scripts").mkdir()
    script = project / "scripts" / "train.py"
    script.write_text(textwrap.dedent('''
        import jax, jax.numpy as jnp
        from mymodel import width
        import extra_lib

        def make():
            return (lambda x: x * extra_lib.FACTOR), (jax.ShapeDtypeStruct((width(), 128), jnp.float32),)
    '''))
    elsewhere = tmp_path / "libs"
    elsewhere.mkdir()
    (elsewhere / "extra_lib.py").write_text("FACTOR = 2\n")
    missing = _oomkb("estimate", f"{script}:make", "--json")
    assert missing.returncode == 2 and "extra_lib" in missing.stderr  # mymodel resolved; extra_lib not yet
    done = _oomkb("estimate", f"{script}:make", "--json", "--path", str(elsewhere))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["argument_bytes"] == 384 * 128 * 4
    assert _oomkb("estimate", f"{script}:make", "--path", str(tmp_path / "nope")).returncode == 2


def test_oomkb_run_with_python_runs_the_script_in_the_users_environment_and_catches_its_oom(user_python, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''
        import sys
        import jax.numpy as jnp
        import optaxlike  # only the user's environment has it

        KEEP = [jnp.ones((256, 256)) for _ in range(3)]
        print("args:", sys.argv[1:])
        jnp.zeros((1 << 40,)).block_until_ready()  # 4 TiB: the CPU backend refuses it
    '''))
    report = tmp_path / "oom.json"
    done = _oomkb("run", "--python", str(user_python), "--no-answer", "--report", str(report),
                  str(script), "--lr", "3e-4")
    assert done.returncode == 1, done.stderr
    assert "args: ['--lr', '3e-4']" in done.stdout
    data = json.loads(report.read_text())
    assert data["error"]["category"] == "host_oom"
    groups = [g for g in data["live_buffers"] if g["shape"] == "(256, 256)"]
    assert groups and groups[0]["count"] == 3 and "train.py:6" in (groups[0]["source"] or "")
