"""The base install (no extras) parses logs; commands that need an extra say which one."""

from __future__ import annotations

import pytest
import subprocess
import sys
from pathlib import Path

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

PROGRAM = Path(__file__).parents[1] / "programs" / "light_install.py"
HBM = "Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G."


def _light(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROGRAM), *args], input=stdin, capture_output=True,
                          text=True, timeout=180)


def test_diagnose_works_without_the_knowledge_base_or_the_service():
    done = _light("diagnose", "-", "--json", stdin=HBM)
    assert done.returncode == 0, done.stderr
    assert '"compile_hbm_oom"' in done.stdout


def test_search_without_the_kb_extra_names_the_extra_to_install():
    done = _light("search", "vmem limit")
    assert done.returncode == 1
    assert "pip install 'oomkb[kb]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_without_the_serve_extra_names_the_extra_to_install():
    done = _light("serve", "--port", "0")
    assert done.returncode == 1
    assert "oomkb[" in done.stderr and "Traceback" not in done.stderr
