"""The load benchmark's quick mode in CI: a live `oomkb serve` answers every one of 300 asks at
concurrency 32 (multilingual, a third with error logs), and stays up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(400)
def test_300_concurrent_asks_against_a_live_server_all_succeed():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "load.py"), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=380,
    )
    assert run.stdout.strip(), run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["errors"] == 0, report["first_failures"]
    assert report["status_codes"] == {"200": 300}
    assert report["requests_sent"] == 300 and report["concurrency"] == 32
    assert report["server_alive_after"] is True
    assert report["rss"]["before_bytes"] > 0 and report["rss"]["after_bytes"] > 0
    assert run.returncode == 0, run.stderr[-3000:]
