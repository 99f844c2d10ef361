"""Issue 24, the job half: what a hostile submitted program could still do to the server, each
reproduced through POST /v1/estimate on the real app, and each followed by an ordinary estimate
(a real compile) that must still be served.

#1 an error record naming a module the server then imported; #2 a FIFO or a link named
result.json; #3 memory outside the limit in /dev/shm and a memfd; #6 a project marker above the
temporary folder; #7 the server's secrets in the job's environment; #16 more processes than the cap
(as root), and the server's disk filled from the job's working folder.
"""

from __future__ import annotations

import re
import sys
import tempfile

import pytest

from oomkb.diagnostics.cgroups import cgroup_support
from tests.api.test_sandbox_http import (
    GIB,
    TINY,
    assert_still_serving,
    detail_of,
    estimate,
    estimating_client,
    program,
)

pytestmark = pytest.mark.slow  # real compiles and subprocesses


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant):
    with estimating_client(assistant) as c:
        yield c


def assert_estimate_served(client) -> None:
    """The next user's ordinary program is estimated (the gate is free, the server is whole)."""
    r = estimate(client, TINY, "tiny")
    assert r.status_code == 200, r.text
    assert r.json()["fits"] is True
    assert_still_serving(client)


def test_an_error_record_naming_a_module_imports_nothing(client):
    before = set(sys.modules)
    r = estimate(client, program("""
        import json, os, sys

        def make():
            record = {"ok": False, "error": {"class": "oomkb.api.cli.__main__:X",
                                             "diagnostics": True, "message": "forged class"}}
            os.write(int(sys.argv[3]), json.dumps(record).encode())
            os._exit(0)
    """))
    assert detail_of(r, 400) == "forged class"
    assert not {m for m in set(sys.modules) - before if m.startswith(("oomkb.api.cli", "api."))}
    assert_estimate_served(client)


@pytest.mark.parametrize("plant", [
    "os.mkfifo('result.json')",
    "os.symlink('/etc/passwd', 'result.json')",
    "os.symlink('/no/such/file', 'result.json')",
])
def test_a_fifo_or_link_named_result_json_does_not_hold_the_gate(client, plant):
    r = estimate(client, program(f"""
        import os

        def make():
            {plant}
            os._exit(0)
    """))
    # the same answer for an existing and a missing link target: no oracle on the server's files
    assert detail_of(r, 422) == "the estimate of program.py:make exited with status 0 before finishing"
    assert_estimate_served(client)


def test_dev_shm_is_private_and_small(client):
    r = estimate(client, program("""
        def make():
            written = 0
            try:
                with open("/dev/shm/fill", "wb") as f:
                    for _ in range(1024):
                        f.write(b"x" * (1 << 20))
                        written += 1
            except OSError as exc:
                raise RuntimeError(f"stopped after {written} MiB: {exc.strerror}") from None
            raise RuntimeError(f"wrote {written} MiB")
    """))
    detail = detail_of(r, 400)
    assert "No space left on device" in detail
    assert int(re.search(r"stopped after (\d+) MiB", detail)[1]) <= 64  # its 64 MiB, not the host's
    assert_estimate_served(client)


@pytest.mark.skipif(not cgroup_support().memory, reason="no writable memory cgroup on this machine")
def test_a_memfd_beyond_the_memory_limit_is_stopped(assistant):
    """RLIMIT_AS does not see write() into a memfd; the job's memory cgroup does."""
    with estimating_client(assistant, estimate_memory_bytes=3 * GIB) as c:
        r = estimate(c, program("""
            import os

            def make():
                fd = os.memfd_create("hoard")
                chunk = b"x" * (64 << 20)
                for _ in range(64):  # 4 GiB
                    os.write(fd, chunk)
                raise RuntimeError("kept 4 GiB in a memfd")
        """))
        detail = detail_of(r, 422)
        assert "used more than its limit of 3.00 GiB of memory" in detail
        assert_estimate_served(c)


@pytest.mark.skipif(not cgroup_support().pids, reason="no writable pids cgroup on this machine")
def test_the_process_cap_binds_root_too(client):
    """RLIMIT_NPROC does not bind root; the job's pids cgroup counts every task (threads here:
    small stacks, so the address-space limit is not what stops them)."""
    r = estimate(client, program("""
        import threading, time

        def make():
            threading.stack_size(64 << 10)
            started = 0
            try:
                for _ in range(1100):
                    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
                    started += 1
            except RuntimeError as exc:
                raise RuntimeError(f"started {started}: {exc}") from None
            raise RuntimeError(f"started {started}")
    """))
    detail = detail_of(r, 400)
    assert int(re.search(r"started (\d+)", detail)[1]) < 1024 and "can't start new thread" in detail
    assert_estimate_served(client)


def test_the_working_folder_cannot_fill_the_servers_disk(client):
    r = estimate(client, program("""
        def make():
            written = 0
            try:
                with open("big.bin", "wb") as f:
                    for _ in range(1024):
                        f.write(b"x" * (1 << 20))
                        written += 1
            except OSError as exc:
                raise RuntimeError(f"stopped after {written} MiB: {exc.strerror}") from None
            raise RuntimeError(f"wrote {written} MiB")
    """))
    detail = detail_of(r, 400)
    assert "No space left on device" in detail
    assert int(re.search(r"stopped after (\d+) MiB", detail)[1]) <= 256
    assert_estimate_served(client)


def test_a_project_marker_above_the_temporary_folder_exposes_nothing(client, tmp_path, monkeypatch):
    """A `pyproject.toml` in the folder above TMPDIR made that folder the submitted program's
    project root, mounted into the sandbox (with TMPDIR=/tmp: any user's /tmp/pyproject.toml)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'planted'\n")
    (tmp_path / "feedback-secret.txt").write_text("latest question: how do I ...")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    r = estimate(client, program(f"""
        import os

        def make():
            try:
                seen = open({str(tmp_path / "feedback-secret.txt")!r}).read()
            except OSError as exc:
                seen = f"unreadable ({{type(exc).__name__}})"
            raise RuntimeError("saw: " + seen)
    """))
    assert "saw: unreadable (FileNotFoundError) at program.py" in detail_of(r, 400)
    assert_estimate_served(client)


def test_the_job_environment_is_an_allowlist(client, monkeypatch):
    secrets = {
        "PGPASSWORD": "pg-secret-41", "DATABASE_URL": "postgres://app:db-secret-42@db/prod",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-43", "HTTPS_PROXY": "http://u:proxy-secret-44@p:3128",
        "OOMKB_ADMINPASS": "admin-secret-45", "SOME_HARMLESS_LOOKING_NAME": "odd-secret-46",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    r = estimate(client, program("""
        import os

        def make():
            raise RuntimeError("env: " + " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())))
    """))
    detail = detail_of(r, 400)
    assert "XLA_FLAGS=--xla_cpu_enable_fast_math=false" in detail  # what jax needs still arrives
    for name, value in secrets.items():
        assert name not in detail and value not in detail
    assert_estimate_served(client)


def test_readyz_says_what_holds_a_jobs_memory(client):
    held = cgroup_support()
    limits = client.get("/readyz").json()["estimate"]["limits"]
    assert limits["cgroup"] == held.kind in ("cgroup2", "cgroup1", "none")
    assert limits["memory"] == ("cgroup" if held.memory else "RLIMIT_AS")
    assert limits["processes"] == ("cgroup" if held.pids else "RLIMIT_NPROC")
    assert "/" not in limits["detail"]  # no paths
