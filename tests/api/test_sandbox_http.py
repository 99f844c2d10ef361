"""POST /v1/estimate runs a stranger's program: whatever it does, the answer is a clear 4xx naming
what happened, the server keeps serving, and no secret of the server reaches the program.

400: the program's own fault (import error, sys.exit, an exception). 422: the sandbox stopped it
(wall-clock timeout, CPU-time limit, memory limit, a crash by a signal). Each case is followed by
/healthz and a /v1/ask on the same app. The last test does the same against a live `oomkb serve`
that holds fake Slack secrets in its own environment.
"""

from __future__ import annotations

import os
import secrets
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from tests.conftest import LOCAL

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from live_server import LiveServer  # noqa: E402

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

GIB = 1 << 30
FAKE_SECRET = "fake-signing-secret-7f3a91c0"
FAKE_TOKEN = "fake-api-token-5be20d4c"

TINY = """
import jax
import jax.numpy as jnp

def tiny():
    return jax.jit(lambda x: jnp.sin(x) @ x), (jax.ShapeDtypeStruct((128, 128), jnp.float32),)
"""


def program(body: str) -> str:
    return textwrap.dedent(body).strip() + "\n"


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


def estimating_client(assistant, **settings) -> TestClient:
    defaults = {"enable_estimate": True, "estimate_timeout_s": 60.0, "estimate_cpu_seconds": 60,
                "estimate_memory_bytes": 4 * GIB}
    return TestClient(create_app(Settings(**{**defaults, **settings}), assistant), base_url=LOCAL)


@pytest.fixture(scope="module")
def client(assistant):
    with estimating_client(assistant) as c:
        yield c


def estimate(client: TestClient, source: str, factory: str = "make") -> httpx.Response:
    return client.post("/v1/estimate", json={"source": source, "factory": factory, "tpu": "v5e",
                                             "donation_check": False})


def assert_still_serving(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ask = client.post("/v1/ask", json={"question": "How do I fix an HBM out-of-memory error?"})
    assert ask.status_code == 200 and ask.json()["answer"]


def detail_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert "Traceback" not in detail
    return detail


# ------------------------------------------------------------------ stopped by the sandbox: 422


def test_an_infinite_loop_is_stopped_at_the_wall_clock_timeout_with_422(assistant):
    with estimating_client(assistant, estimate_timeout_s=4) as c:
        r = estimate(c, program("""
            def make():
                while True:
                    pass
        """))
        detail = detail_of(r, 422)
        assert "ran longer than 4 s and was stopped" in detail
        assert_still_serving(c)


def test_a_busy_loop_is_stopped_at_the_cpu_time_limit_with_422(assistant):
    with estimating_client(assistant, estimate_cpu_seconds=4, estimate_timeout_s=60) as c:
        r = estimate(c, program("""
            def make():
                n = 0
                while True:
                    n += 1
        """))
        detail = detail_of(r, 422)
        assert "more than its limit of 4 s of CPU time" in detail and "SIGXCPU" in detail
        assert_still_serving(c)


@pytest.mark.parametrize("allocation", [
    "bytearray(50 * 2**30)",
    "__import__('numpy').ones(50 * 2**30, dtype='uint8')",
])
def test_a_50_gigabyte_allocation_is_refused_by_the_address_space_limit(client, allocation):
    r = estimate(client, program(f"""
        def make():
            block = {allocation}
            return block
    """))
    detail = detail_of(r, 422)
    # a MemoryError in the program (the limit), not a SIGKILL from the kernel's OOM killer
    assert "ran out of host memory (MemoryError" in detail and "program.py:2" in detail
    assert "limits it to 4.00 GiB of address space" in detail
    assert "SIGKILL" not in detail
    assert_still_serving(client)


def test_a_segfault_in_native_code_is_a_422_naming_sigsegv(client):
    r = estimate(client, program("""
        import ctypes

        def make():
            ctypes.string_at(0)
    """))
    detail = detail_of(r, 422)
    assert "crashed: SIGSEGV (segmentation fault in native code)" in detail
    assert_still_serving(client)


def test_os_abort_is_a_422_naming_sigabrt(client):
    r = estimate(client, program("""
        import os

        def make():
            os.abort()
    """))
    detail = detail_of(r, 422)
    assert "crashed: SIGABRT" in detail
    assert_still_serving(client)


def test_a_hard_exit_is_a_422_with_its_exit_status(client):
    r = estimate(client, program("""
        import os

        def make():
            os._exit(4)
    """))
    assert "exited with status 4 before finishing" in detail_of(r, 422)
    assert_still_serving(client)


# ------------------------------------------------------------------ the program's own fault: 400


def test_sys_exit_is_a_400_naming_the_call_and_line(client):
    r = estimate(client, program("""
        import sys

        def make():
            sys.exit(3)
    """))
    assert "called sys.exit(3) at program.py:4 instead of returning" in detail_of(r, 400)
    assert_still_serving(client)


def test_an_import_error_is_a_400_naming_the_module_and_line(client):
    r = estimate(client, program("""
        import json
        import no_such_module_oomkb_http

        def make():
            pass
    """))
    detail = detail_of(r, 400)
    assert "importing program.py failed at program.py:2" in detail
    assert "No module named 'no_such_module_oomkb_http'" in detail
    assert_still_serving(client)


def test_a_program_printing_100_megabytes_still_gets_its_estimate(client):
    r = estimate(client, TINY + program("""
        import sys

        def make():
            line = "y" * 1023 + "\\n"
            for _ in range(100 * 1024):
                sys.stdout.write(line)
            return tiny()
    """))
    assert r.status_code == 200, r.text
    assert r.json()["fits"] is True
    assert len(r.content) < 1 << 20 and "yyyy" not in r.text  # the output is not in the answer
    assert_still_serving(client)


def test_a_forged_result_file_is_a_clear_error_not_a_500(client):
    """The program runs in the job's process, so it can write the result itself (to the memory
    file whose descriptor is on the child's command line)."""
    r = estimate(client, program("""
        import json, os, sys

        def make():
            os.write(int(sys.argv[3]), json.dumps({"ok": True, "value": {"fits": "maybe"}}).encode())
            os._exit(0)
    """))
    assert "returned a malformed EstimateReport" in detail_of(r, 400)
    assert_still_serving(client)


def _running_with_argument(marker: str) -> list[str]:
    """Host processes (not zombies) whose command line holds `marker`: the sandbox has a PID
    namespace of its own, so a pid the program reports means nothing out here."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                state = (proc / "status").read_text().split("State:")[1].split()[0]
                if state != "Z":
                    found.append(f"{proc.name} ({state})")
        except (OSError, IndexError):
            continue
    return found


def test_processes_left_behind_by_the_program_are_killed(client):
    marker = f"600.{secrets.randbelow(10**9):09d}"  # a sleep no other process runs
    r = estimate(client, program(f"""
        import subprocess

        def make():
            child = subprocess.Popen(["sleep", "{marker}"])
            raise RuntimeError(f"started pid={{child.pid}}")
    """))
    assert "started pid=" in detail_of(r, 400)
    assert _running_with_argument(marker) == [], "the program's child still runs"
    assert_still_serving(client)


# ------------------------------------------------------------------ secrets


READ_SECRETS = program("""
    import os

    def make():
        seen = [f"{name}={os.environ.get(name)}" for name in
                ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "OOMKB_TEST_API_TOKEN",
                 "AWS_SECRET_ACCESS_KEY")]
        try:
            with open(f"/proc/{os.getppid()}/environ", "rb") as f:
                parent = f.read().decode(errors="replace").replace("\\0", " ")
        except OSError as exc:
            parent = f"unreadable ({type(exc).__name__})"
        raise RuntimeError("env: " + ", ".join(seen) + f" | ppid={os.getppid()} | parent environ: "
                           + parent)
""")


def test_the_program_sees_none_of_the_servers_secrets(client, monkeypatch):
    """In the sandbox the program's parent is the sandbox's own init (pid 1 of its PID namespace):
    the server's process is not even addressable."""
    monkeypatch.setenv("SLACK_SIGNING_SECRET", FAKE_SECRET)
    monkeypatch.setenv("OOMKB_TEST_API_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_TOKEN)
    detail = detail_of(estimate(client, READ_SECRETS), 400)
    assert "SLACK_SIGNING_SECRET=None" in detail and "OOMKB_TEST_API_TOKEN=None" in detail
    assert "AWS_SECRET_ACCESS_KEY=None" in detail
    assert "| ppid=1 |" in detail
    assert FAKE_SECRET not in detail and FAKE_TOKEN not in detail


def test_without_the_sandbox_the_program_still_cannot_read_the_servers_environ(assistant, monkeypatch):
    """OOMKB_ESTIMATE_SANDBOX=none: the server is the parent, non-dumpable, so its environ is closed."""
    monkeypatch.setenv("SLACK_SIGNING_SECRET", FAKE_SECRET)
    monkeypatch.setenv("OOMKB_TEST_API_TOKEN", FAKE_TOKEN)
    with estimating_client(assistant, estimate_sandbox="none") as c:
        detail = detail_of(estimate(c, READ_SECRETS), 400)
    assert "SLACK_SIGNING_SECRET=None" in detail and "OOMKB_TEST_API_TOKEN=None" in detail
    assert f"| ppid={os.getpid()} |" in detail
    assert "parent environ: unreadable (PermissionError)" in detail
    assert FAKE_SECRET not in detail and FAKE_TOKEN not in detail


def test_a_server_that_ran_a_program_is_not_dumpable(client):
    """A non-dumpable process's /proc/<pid>/environ and memory are closed to other processes of the
    same (non-root) user: what keeps the program out of the server's environment there."""
    import ctypes

    estimate(client, program("def make():\n    raise ValueError('x')\n"))
    pr_get_dumpable = 3
    assert ctypes.CDLL(None).prctl(pr_get_dumpable, 0, 0, 0, 0) == 0


def test_the_program_has_no_capabilities_and_no_new_privileges(client):
    """A program started by a root server runs without capabilities (so it cannot trace or read the
    server either) and cannot regain any by running a setuid or any other program."""
    r = estimate(client, program("""
        def make():
            status = open("/proc/self/status").read().splitlines()
            raise ValueError(" ".join(ln.replace(":\\t", "=") for ln in status
                                      if ln.startswith(("Cap", "NoNewPrivs"))))
    """))
    fields = dict(item.split("=") for item in detail_of(r, 400).split("ValueError: ")[1].split()
                  if "=" in item)
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapPrm"], 16) == 0
    assert fields["NoNewPrivs"] == "1"
    if os.geteuid() == 0:
        assert int(fields["CapBnd"], 16) == 0


@pytest.mark.timeout(300)
def test_a_live_server_keeps_its_secrets_and_survives_a_crashing_program():
    """Over real HTTP: the secrets are in the server process's own start-up environment (what
    /proc/<pid>/environ shows), a crashing program gets 422, and the server still answers."""
    env = {"OOMKB_ENABLE_ESTIMATE": "1", "OOMKB_ESTIMATE_TIMEOUT_S": "60",
           "OOMKB_ESTIMATE_MEMORY_BYTES": str(4 * GIB), "SLACK_SIGNING_SECRET": FAKE_SECRET,
           "OOMKB_TEST_API_TOKEN": FAKE_TOKEN}
    with LiveServer(env=env) as server, httpx.Client(base_url=server.base_url, timeout=120) as http:
        server.wait_healthy(timeout_s=120)
        body = {"factory": "make", "tpu": "v5e", "donation_check": False}
        r = http.post("/v1/estimate", json={**body, "source": READ_SECRETS})
        assert r.status_code == 400, r.text
        assert FAKE_SECRET not in r.text and FAKE_TOKEN not in r.text
        assert "SLACK_SIGNING_SECRET=None" in r.json()["detail"]
        assert "| ppid=1 |" in r.json()["detail"]  # the sandbox's init, not the server

        crash = http.post("/v1/estimate", json={**body, "source": program("""
            import ctypes

            def make():
                ctypes.string_at(0)
        """)})
        assert crash.status_code == 422 and "SIGSEGV" in crash.json()["detail"], crash.text
        assert http.get("/healthz").status_code == 200
        server.wait_ready(timeout_s=240)
        ask = http.post("/v1/ask", json={"question": "Как исправить нехватку памяти HBM на TPU?"})
        assert ask.status_code == 200 and ask.json()["answer"]
        assert server.proc.poll() is None
        assert os.path.exists(f"/proc/{server.pid}")
