"""The isolation boundary around submitted programs (issue 16) and the job's life (issue 17).

A probe program tries every escape at once (connect to a listener on the host's loopback, read a
secret under a fake HOME, the server's working directory and OOMKB_HOME, write outside its
folder, look for the server's process) and reports what it managed. Run in the bubblewrap
sandbox, each escape is refused; run with `OOMKB_ESTIMATE_SANDBOX=none`, the same probe gets
through (so the probe can tell). Then: processes a job leaves behind die with it, the result file
is read within bounds and as known fields only, and without bubblewrap the service fails closed.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from oomkb.diagnostics.isolation import IsolationUnavailable, isolation_status
from oomkb.diagnostics.sandbox import JobCrashed, JobFailed, Limits, run_job

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from live_server import LiveServer  # noqa: E402

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parents[1] / "programs" / "escape_cases.py"
JOB = "call_program"
GIB = 1 << 30
SECRET = "fake-netrc-password-0c9e4b"

TINY = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    def make():
        return jax.jit(lambda x: jnp.sin(x) @ x), (jax.ShapeDtypeStruct((128, 128), jnp.float32),)
""")

PROBE = textwrap.dedent('''
    import json, os, socket

    PORT = {port}
    SECRET_PATH = {secret!r}
    SERVER_CWD = {cwd!r}
    OOMKB_HOME = {home!r}
    OUTSIDE = {outside!r}
    SERVER_PID = {pid}
    TMP_NAME = {tmp_name!r}

    def attempt(action):
        try:
            return action()
        except Exception as exc:
            return "refused: " + type(exc).__name__

    def connect():
        with socket.create_connection(("127.0.0.1", PORT), timeout=3):
            return "connected"

    def write(path):
        with open(path, "w") as f:
            f.write("pwned")
        return "written"

    def make():
        report = {{
            "connect": attempt(connect),
            "secret": attempt(lambda: open(SECRET_PATH).read()),
            "server_cwd": attempt(lambda: open(os.path.join(SERVER_CWD, "pyproject.toml")).readline()),
            "oomkb_home": attempt(lambda: sorted(os.listdir(OOMKB_HOME))),
            "write_outside": attempt(lambda: write(os.path.join(OUTSIDE, "pwned"))),
            "write_own_folder": attempt(lambda: write(os.path.join(os.path.dirname(__file__), "pwned"))),
            "write_tmp": attempt(lambda: write("/tmp/" + TMP_NAME)),
            "write_here": attempt(lambda: write("scratch.txt")),
            "server_pid_visible": os.path.exists(f"/proc/{{SERVER_PID}}"),
            "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        }}
        raise RuntimeError("probe " + json.dumps(report))
''')


def require_bwrap() -> None:
    status = isolation_status()
    if status.available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"bubblewrap is needed ({status.problem}); CI must install it")
    pytest.skip(f"bubblewrap is not usable here ({status.problem}); apt-get install bubblewrap")


@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    """A PATH on which bubblewrap cannot be found (the real lookup, not a stand-in)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    isolation_status(refresh=True)
    yield
    monkeypatch.undo()
    isolation_status(refresh=True)


def probe_report(detail: str) -> dict:
    assert "RuntimeError: probe " in detail, detail
    return json.loads(detail.split("RuntimeError: probe ", 1)[1].rsplit(" at program.py", 1)[0])


@pytest.fixture(scope="module")
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


@pytest.fixture(scope="module")
def fake_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("fake-home")
    (home / ".netrc").write_text(f"machine example.com login me password {SECRET}\n")
    return home


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


def estimating_app(assistant, **settings) -> TestClient:
    defaults = {"enable_estimate": True, "estimate_timeout_s": 60.0, "estimate_cpu_seconds": 60,
                "estimate_memory_bytes": 4 * GIB}
    return TestClient(create_app(Settings(**{**defaults, **settings}), assistant), base_url="http://127.0.0.1")


def run_probe(client, listener, fake_home, outside: Path) -> tuple[dict, str]:
    from oomkb.settings import oomkb_home

    tmp_name = f"oomkb-escape-{uuid.uuid4().hex}"
    source = PROBE.format(port=listener.getsockname()[1], secret=str(fake_home / ".netrc"),
                          cwd=os.getcwd(), home=str(oomkb_home()), outside=str(outside),
                          pid=os.getpid(), tmp_name=tmp_name)
    r = client.post("/v1/estimate", json={"source": source, "tpu": "v5e", "donation_check": False})
    assert r.status_code == 400, r.text
    return probe_report(r.json()["detail"]), tmp_name


@pytest.fixture(scope="module")
def sandboxed(assistant, listener, fake_home, tmp_path_factory):
    """What the probe managed inside the bubblewrap sandbox (the default)."""
    require_bwrap()
    outside = tmp_path_factory.mktemp("outside")
    with estimating_app(assistant) as client:
        report, tmp_name = run_probe(client, listener, fake_home, outside)
    return report, outside, tmp_name


@pytest.fixture(scope="module")
def unisolated(assistant, listener, fake_home, tmp_path_factory):
    """The same probe with OOMKB_ESTIMATE_SANDBOX=none: the control that shows it can tell."""
    outside = tmp_path_factory.mktemp("outside-none")
    with estimating_app(assistant, estimate_sandbox="none") as client:
        report, tmp_name = run_probe(client, listener, fake_home, outside)
    Path("/tmp", tmp_name).unlink(missing_ok=True)
    return report, outside


# ------------------------------------------------------------------ each escape, refused


def test_the_program_cannot_connect_to_a_listener_on_the_hosts_loopback(sandboxed, unisolated, listener):
    assert sandboxed[0]["connect"].startswith("refused: ")
    assert unisolated[0]["connect"] == "connected"
    control, _ = listener.accept()  # the only connection that arrived is the control's
    control.close()
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_the_program_cannot_read_a_secret_under_home_nor_the_servers_files(sandboxed, unisolated):
    report = sandboxed[0]
    for key in ("secret", "server_cwd", "oomkb_home"):
        assert report[key] == "refused: FileNotFoundError", (key, report[key])
    assert SECRET not in json.dumps(report)
    assert SECRET in unisolated[0]["secret"] and "[build-system]" in unisolated[0]["server_cwd"]
    assert isinstance(unisolated[0]["oomkb_home"], list)


def test_the_program_cannot_write_outside_its_working_folder(sandboxed, unisolated):
    report, outside, tmp_name = sandboxed
    assert report["write_outside"].startswith("refused: ")
    assert report["write_own_folder"] == "refused: OSError"  # read-only: EROFS
    assert not (outside / "pwned").exists()
    assert report["write_tmp"] == "written" and not Path("/tmp", tmp_name).exists()  # private /tmp
    assert report["write_here"] == "written"  # its working folder stays writable
    assert unisolated[0]["write_outside"] == "written" and (unisolated[1] / "pwned").exists()


def test_the_program_sees_only_its_own_processes(sandboxed, unisolated):
    report = sandboxed[0]
    assert report["server_pid_visible"] is False
    assert len(report["pids"]) <= 4 and max(report["pids"]) < 10, report["pids"]
    assert unisolated[0]["server_pid_visible"] is True


def test_a_normal_estimate_still_works_in_the_sandbox(assistant):
    require_bwrap()
    with estimating_app(assistant) as client:
        r = client.post("/v1/estimate", json={"source": TINY, "tpu": "v5e", "donation_check": False})
        assert r.status_code == 200, r.text
        assert r.json()["fits"] is True and r.json()["total_bytes"] > 128 * 128 * 4
        ready = client.get("/readyz").json()
        estimate = ready["estimate"]
        assert {k: estimate[k] for k in ("enabled", "sandbox", "isolated")} == {
            "enabled": True, "sandbox": "bwrap", "isolated": True}
        assert set(estimate) == {"enabled", "sandbox", "isolated", "limits"}


def test_a_crash_message_never_quotes_what_the_program_printed(assistant):
    """A program that reads a file, prints it and crashes: the 422 names the signal, not the text."""
    require_bwrap()
    with estimating_app(assistant) as client:
        r = client.post("/v1/estimate", json={"tpu": "v5e", "source": textwrap.dedent("""
            import ctypes, sys

            def make():
                print("leaked: " + open("/etc/ld.so.cache", "rb").read(64).hex(), file=sys.stderr)
                sys.stderr.flush()
                ctypes.string_at(0)
        """)})
    assert r.status_code == 422 and "SIGSEGV" in r.json()["detail"], r.text
    assert "leaked" not in r.text


# ------------------------------------------------------------------ fail closed


def test_without_bubblewrap_estimates_answer_503_and_the_log_says_what_to_install(
        assistant, no_bwrap, caplog):
    with caplog.at_level(logging.ERROR, logger="oomkb.api"), estimating_app(assistant) as client:
        r = client.post("/v1/estimate", json={"source": TINY, "tpu": "v5e"})
        assert r.status_code == 503, r.text
        assert "isolation sandbox" in r.json()["detail"] and "install bubblewrap" in r.json()["detail"]
        ready = client.get("/readyz").json()
        assert ready["estimate"]["isolated"] is False and ready["estimate"]["sandbox"] == "bwrap"
    assert any("apt-get install bubblewrap" in rec.getMessage() for rec in caplog.records)
    assert any("OOMKB_ESTIMATE_SANDBOX=none" in rec.getMessage() for rec in caplog.records)


def test_sandbox_none_is_the_operators_explicit_choice_and_readyz_shows_it(assistant, no_bwrap):
    with estimating_app(assistant, estimate_sandbox="none") as client:
        r = client.post("/v1/estimate", json={"source": TINY, "tpu": "v5e", "donation_check": False})
        assert r.status_code == 200, r.text
        ready = client.get("/readyz").json()["estimate"]
        assert ready["sandbox"] == "none" and ready["isolated"] is False
        assert "without isolation" in ready["detail"]


def test_the_sandbox_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("OOMKB_ESTIMATE_SANDBOX", raising=False)
    assert Settings.from_env().estimate_sandbox == "bwrap"
    monkeypatch.setenv("OOMKB_ESTIMATE_SANDBOX", "None")
    assert Settings.from_env().estimate_sandbox == "none"
    from oomkb.settings import SettingsError

    monkeypatch.setenv("OOMKB_ESTIMATE_SANDBOX", "docker")
    with pytest.raises(SettingsError, match="OOMKB_ESTIMATE_SANDBOX"):
        Settings.from_env()


def test_run_job_with_isolate_and_no_bubblewrap_raises_before_starting_anything(no_bwrap):
    with pytest.raises(IsolationUnavailable, match="apt-get install bubblewrap"):
        run_job(JOB, {"program": f"{CASES}:sleep_then_return"}, timeout_s=10, isolate=True)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "oomkb.api.cli", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


@pytest.mark.slow
def test_cli_estimate_isolate_runs_in_the_sandbox_and_fails_closed_without_it(tmp_path):
    require_bwrap()
    program = tmp_path / "tiny.py"
    program.write_text(TINY)
    done = cli("estimate", f"{program}:make", "--isolate", "--no-donation-check", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fits"] is True
    empty = tmp_path / "bin"
    empty.mkdir()
    refused = cli("estimate", f"{program}:make", "--isolate", env={"PATH": str(empty)})
    assert refused.returncode == 1
    assert "bubblewrap" in refused.stderr and "Traceback" not in refused.stderr


# ------------------------------------------------------------------ every process dies with the job


def running_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline.split(b"\0") and state != "Z":
                found.append(int(name))
    return found


@pytest.mark.parametrize("isolate", [False, True], ids=["unisolated", "bwrap"])
def test_a_double_forked_setsid_grandchild_dies_with_the_job(isolate):
    if isolate:
        require_bwrap()
    marker = f"oomkb-escapee-{uuid.uuid4().hex}"
    started = time.monotonic()
    result = run_job(JOB, {"program": f"{CASES}:double_fork_setsid", "kwargs": {"marker": marker}},
                     timeout_s=60, isolate=isolate, read_only=[CASES.parent])
    assert result.value["result"] == {"grandchild_started": True}
    assert time.monotonic() - started < 30
    assert running_with(marker) == [], "the grandchild outlived its job"


@pytest.mark.parametrize("isolate", [False, True], ids=["unisolated", "bwrap"])
def test_the_job_runs_under_a_process_limit(isolate):
    if isolate:
        require_bwrap()
    result = run_job(JOB, {"program": f"{CASES}:process_limit"}, timeout_s=60, isolate=isolate,
                     read_only=[CASES.parent], limits=Limits(processes=300))
    soft = result.value["result"]["soft"]
    assert soft != "unlimited" and int(soft) >= 300


# ------------------------------------------------------------------ the result file


def forge(**kwargs):
    return run_job(JOB, {"program": f"{CASES}:write_result_file", "kwargs": kwargs},
                   timeout_s=60, what="forger")


def test_a_result_file_over_the_cap_is_not_read():
    with pytest.raises(JobFailed, match=r"forger left a result larger than 4\.00 MiB"):
        forge(size_bytes=5 << 20)


def test_a_deeply_nested_result_file_is_a_clear_error():
    with pytest.raises(JobFailed, match="not a result"):
        forge(nesting=200_000)


def test_a_forged_error_record_sets_only_the_fields_its_class_declares():
    record = {"ok": False, "error": {
        "class": "oomkb.diagnostics.sandbox:JobCrashed", "diagnostics": True, "message": "forged",
        "attributes": {"exit_status": 3, "signal_name": "SIGFAKE", "evil": "x", "args": "y",
                       "__class__": "z", "with_traceback": "w"}}}
    with pytest.raises(JobCrashed, match="^forged$") as info:
        forge(record=record)
    exc = info.value
    assert exc.exit_status == 3 and exc.signal_name == "SIGFAKE"
    assert not hasattr(exc, "evil") and exc.args == ("forged",) and callable(exc.with_traceback)


@pytest.mark.parametrize("record", [
    {"ok": False, "error": {"class": "subprocess:Popen", "diagnostics": True, "message": "m"}},
    {"ok": False, "error": {"class": "oomkb.diagnostics.sandbox:Path", "diagnostics": True, "message": "m"}},
    {"ok": False, "error": {"class": "oomkb.diagnostics.sandbox:JobFailed", "diagnostics": True,
                            "message": "m", "attributes": {"detail": ["not", "a", "string"]}}},
    {"ok": "yes", "value": []},
    ["not", "an", "object"],
])
def test_a_forged_record_of_a_foreign_class_or_shape_is_a_plain_job_failure(record):
    with pytest.raises(JobFailed) as info:
        forge(record=record)
    assert type(info.value) is JobFailed


@pytest.mark.parametrize("module", ["trusted-prefix", "oomkb.api.cli.__main__", "api.cli.__main__"])
def test_an_error_record_never_makes_the_caller_import_a_module(module):
    """Issue 24 #1: a record naming `api.cli.__main__:X` made the caller import that module (a second
    app, a reloaded assistant on every request). The class is looked up in a table of classes
    already defined, never imported: not even a module of the trusted package gets imported
    (one of them is taken out of `sys.modules` for the test, so that an import would show)."""
    saved = {}
    if module == "trusted-prefix":
        module = "oomkb.diagnostics.plot"
        saved = {module: sys.modules.pop(module)} if module in sys.modules else {}
    try:
        before = set(sys.modules)
        record = {"ok": False, "error": {"class": f"{module}:X", "diagnostics": True, "message": "m"}}
        with pytest.raises(JobFailed) as info:
            forge(record=record)
        assert type(info.value) is JobFailed and str(info.value) == "m"
        assert module not in set(sys.modules) - before
    finally:
        sys.modules.update(saved)


@pytest.mark.parametrize("isolate", [False, True], ids=["unisolated", "bwrap"])
@pytest.mark.parametrize("kind", ["fifo", "link-existing", "link-missing"])
def test_a_fifo_or_link_named_result_json_neither_blocks_nor_answers(kind, isolate):
    """Issue 24 #2: the caller opened result.json and blocked forever on a FIFO; through a link it
    told whether a server file exists. The result now comes back through an inherited memory file:
    whatever the job leaves at that name is never opened, and both links read the same."""
    if isolate:
        require_bwrap()
    started = time.monotonic()
    with pytest.raises(JobCrashed) as info:
        run_job(JOB, {"program": f"{CASES}:plant_result_path", "kwargs": {"kind": kind}},
                timeout_s=60, isolate=isolate, read_only=[CASES.parent], what="planter")
    assert time.monotonic() - started < 30
    assert str(info.value) == "planter exited with status 0 before finishing"
    # the next job runs as usual
    assert run_job(JOB, {"program": f"{CASES}:sleep_then_return", "kwargs": {"seconds": 0}},
                   timeout_s=60).value == {"result": {"slept": 0}}


def test_a_job_holds_no_descriptor_of_the_servers_files(tmp_path):
    """Home files reach the sandbox as in-memory copies: a descriptor of the server's own file
    could be reopened for writing through /proc/self/fd."""
    require_bwrap()
    cache = tmp_path / "tpu_hbm.json"
    cache.write_text("{}")
    links = run_job(JOB, {"program": f"{CASES}:open_descriptors"}, timeout_s=60, isolate=True,
                    read_only=[CASES.parent], home_files=[cache]).value["result"]
    assert links and not [v for v in links.values() if str(tmp_path) in v], links
    assert any("memfd:oomkb-job-result" in v for v in links.values())


def test_a_long_error_message_is_bounded():
    record = {"ok": False, "error": {"class": "x:y", "diagnostics": False, "message": "m" * 100_000}}
    with pytest.raises(JobFailed) as info:
        forge(record=record)
    assert len(str(info.value)) < 5000


# ------------------------------------------------------------------ a live server


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_live_server_refuses_every_escape_and_still_estimates(listener, fake_home, tmp_path):
    """Over real HTTP, against `oomkb serve` with estimates on and the default sandbox."""
    require_bwrap()
    from oomkb.settings import oomkb_home

    outside = tmp_path / "outside"
    outside.mkdir()
    env = {"OOMKB_ENABLE_ESTIMATE": "1", "OOMKB_ESTIMATE_TIMEOUT_S": "60",
           "OOMKB_ESTIMATE_MEMORY_BYTES": str(4 * GIB), "HOME": str(fake_home),
           "OOMKB_HOME": str(oomkb_home())}
    with LiveServer(env=env) as server, httpx.Client(base_url=server.base_url, timeout=120) as http:
        server.wait_healthy(timeout_s=120)
        tmp_name = f"oomkb-escape-{uuid.uuid4().hex}"
        source = PROBE.format(port=listener.getsockname()[1], secret=str(fake_home / ".netrc"),
                              cwd=str(ROOT), home=str(oomkb_home()), outside=str(outside),
                              pid=server.pid, tmp_name=tmp_name)
        r = http.post("/v1/estimate", json={"source": source, "tpu": "v5e", "donation_check": False})
        assert r.status_code == 400, r.text
        report = probe_report(r.json()["detail"])
        assert report["connect"].startswith("refused")
        assert all(report[k] == "refused: FileNotFoundError" for k in ("secret", "server_cwd", "oomkb_home"))
        assert report["write_outside"].startswith("refused") and not (outside / "pwned").exists()
        assert report["write_own_folder"].startswith("refused")
        assert not Path("/tmp", tmp_name).exists()
        assert report["server_pid_visible"] is False and max(report["pids"]) < 10
        assert SECRET not in r.text

        fine = http.post("/v1/estimate", json={"source": TINY, "tpu": "v5e", "donation_check": False})
        assert fine.status_code == 200 and fine.json()["fits"] is True, fine.text
        assert server.proc.poll() is None


@pytest.mark.slow
def test_cli_profile_isolate_writes_its_trace_to_the_log_folder(tmp_path):
    require_bwrap()
    program = tmp_path / "step.py"
    program.write_text("import jax.numpy as jnp\n\ndef step():\n    return jnp.ones((64, 64)).sum()\n")
    logdir = tmp_path / "trace"
    done = cli("profile", f"{program}:step", "--isolate", "-n", "2", "--logdir", str(logdir), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["calls"] == 2 and Path(report["trace_dir"]).is_relative_to(logdir)
    assert list(logdir.rglob("*.xplane.pb")), "no trace written through the read-write bind"


@pytest.mark.slow
def test_cli_plan_isolate_runs_in_the_sandbox(tmp_path):
    require_bwrap()
    program = tmp_path / "tiny.py"
    program.write_text(TINY)
    done = cli("plan", f"{program}:make", "--isolate", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["baseline"]["fits"] is True and report["compiles"] >= 1
