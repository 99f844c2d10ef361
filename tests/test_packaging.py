"""A wheel holds one top-level import name, `oomkb`, with the guides, cards, catalogue, signatures
and web page inside it; installed on its own (no checkout beside it), it runs."""

import pytest
import subprocess
import sys
import zipfile

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it


def test_the_wheel_ships_every_data_file_the_code_reads(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = tmp_path.glob("oomkb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = ["oomkb/" + p.relative_to(ROOT).as_posix() for pattern in (
        "docs_src/*.md", "kb/cards/*.yaml", "kb/catalogue/*.yaml", "diagnostics/*.yaml",
        "api/http/static/*",
    ) for p in ROOT.glob(pattern)]
    assert len(expected) >= 5 + 5 + 4 + 2 + 3
    assert not [e for e in expected if e not in names]
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "oomkb = oomkb.api.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    # exactly one top-level name: nothing of the user's (`diagnostics/`, `api/`, `kb/`) is shadowed
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"oomkb"}
    code = {n for n in names if n.endswith(".py")}
    assert {"oomkb/kb/search.py", "oomkb/diagnostics/estimate/__init__.py", "oomkb/api/http/app.py",
            "oomkb/indexer/store.py", "oomkb/layout.py"} <= code
    assert not [n for n in code if n.startswith(("oomkb/tests/", "oomkb/benchmarks/"))]


def test_the_installed_wheel_runs_from_its_own_folder_without_the_checkout(tmp_path):
    """Unpacked into a bare folder (as pip lays it out), `oomkb` imports its floors from inside the
    package and the command line diagnoses a log; the checkout is not on the path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = tmp_path.glob("oomkb-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys, oomkb, oomkb.kb, oomkb.diagnostics.parse as p; "
            "from oomkb import layout; "
            "assert layout.SOURCE_ROOT is None, layout.SOURCE_ROOT; "
            "print(oomkb.kb.__file__); print(p.parse_error('Ran out of memory in memory space hbm. "
            "Used 17.50G of 15.75G hbm.').category)")
    # -I: the checkout (and its editable install's finder) stays out; the venv's packages come back
    # through PYTHONPATH after the unpacked wheel
    import sysconfig

    env = {"PYTHONPATH": f"{site}:{sysconfig.get_paths()['purelib']}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(site / "oomkb" / "kb" / "__init__.py"), "compile_hbm_oom"]
