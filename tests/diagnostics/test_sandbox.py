"""The sandbox runs a user's FILE.py:NAME in a child process and survives whatever it does."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomkb.diagnostics.exceptions import DiagnosticsError
from oomkb.diagnostics.program import (
    ProgramExited,
    ProgramLoadError,
    ProgramNameError,
    ProgramSpecError,
    load_program_object,
    resolve_program,
)
from oomkb.diagnostics.sandbox import JobCrashed, JobFailed, JobTimeout, Limits, clean_environment, run_job

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

CASES = Path(__file__).parents[1] / "programs" / "sandbox_cases.py"
JOB = "call_program"


def call(name: str, timeout_s: float = 30, limits: Limits | None = None, **kwargs):
    return run_job(
        JOB, {"program": f"{CASES}:{name}", "kwargs": kwargs},
        timeout_s=timeout_s, limits=limits, what=name,
    )


def test_a_well_behaved_function_returns_its_value():
    result = call("add", a=40, b=2)
    assert result.value == {"result": {"sum": 42}}
    assert result.wall_seconds > 0


def test_an_infinite_loop_is_stopped_at_the_timeout():
    with pytest.raises(JobTimeout, match="longer than 1 s"):
        call("loop_forever", timeout_s=1)


def test_a_cpu_limit_stops_a_busy_loop_with_a_named_signal():
    with pytest.raises(JobCrashed, match="SIGXCPU") as info:
        call("loop_forever", timeout_s=30, limits=Limits(cpu_seconds=1))
    assert info.value.signal_name == "SIGXCPU"


def test_os_abort_becomes_a_crash_error_naming_sigabrt():
    with pytest.raises(JobCrashed, match="SIGABRT") as info:
        call("abort")
    assert info.value.exit_status == -6


def test_a_segfault_becomes_a_crash_error_naming_sigsegv():
    with pytest.raises(JobCrashed, match="SIGSEGV"):
        call("segfault")


def test_sys_exit_is_reported_with_its_code_and_line():
    with pytest.raises(ProgramExited, match=r"sys\.exit\(3\) at sandbox_cases\.py:\d+"):
        call("exit_three")


def test_a_hard_exit_reports_the_exit_status():
    with pytest.raises(JobCrashed, match="exited with status 4") as info:
        call("hard_exit_four")
    assert info.value.exit_status == 4


def test_a_user_exception_names_its_type_message_and_line():
    with pytest.raises(JobFailed, match=r"ValueError: the user's own bug at sandbox_cases\.py:\d+"):
        call("raise_value_error")


def test_a_memory_limit_turns_a_big_allocation_into_a_clear_error():
    with pytest.raises(JobFailed, match="out of host memory"):
        call("allocate_gigabytes", limits=Limits(memory_bytes=1 << 30), n=4)


def test_a_100_megabyte_print_is_truncated_not_buffered():
    result = call("print_huge", limits=Limits(output_bytes=32 * 1024), megabytes=100)
    assert result.value == {"result": {"printed_megabytes": 100}}
    assert len(result.stdout) < 40 * 1024
    assert result.stdout_truncated_bytes > 99 * 1024 * 1024
    assert result.stdout.rstrip().endswith("the end")
    assert "bytes of output omitted" in result.stdout


def test_secrets_are_not_visible_in_the_child(monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s3cret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("MY_SERVICE_API_KEY", "k")
    monkeypatch.setenv("OOMKB_SANDBOX_HARMLESS", "1")
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
    names = call("environment_names").value["result"]["names"]
    assert "XLA_FLAGS" in names and "PATH" in names
    # an allowlist: a variable the jobs do not need is not passed, however harmless its name
    for secret in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "AWS_ACCESS_KEY_ID",
                   "MY_SERVICE_API_KEY", "OOMKB_SANDBOX_HARMLESS"):
        assert secret not in names


def test_clean_environment_keeps_xla_and_tpu_settings():
    env = clean_environment(
        {"XLA_FLAGS": "--x", "TPU_LOG_DIR": "/t", "GITHUB_TOKEN": "t", "DB_PASSWORD": "p",
         "PGPASSWORD": "p", "DATABASE_URL": "postgres://u:p@h/db", "OOMKB_ADMINPASS": "p",
         "HTTPS_PROXY": "http://u:p@proxy:3128", "XLA_SECRET_KEY": "k"},
        extra={"JAX_PLATFORMS": "cpu"},
    )
    assert env == {"XLA_FLAGS": "--x", "TPU_LOG_DIR": "/t", "JAX_PLATFORMS": "cpu"}


def test_an_import_error_in_the_users_module_comes_back_clearly(tmp_path):
    program = tmp_path / "needs_missing.py"
    program.write_text("import numpy\nimport no_such_module_oomkb\n\ndef make():\n    pass\n")
    with pytest.raises(ProgramLoadError) as info:
        run_job(JOB, {"program": f"{program}:make"}, timeout_s=30)
    message = str(info.value)
    assert "needs_missing.py:2" in message and "no_such_module_oomkb" in message
    assert "Traceback" not in message


def test_a_syntax_error_names_file_and_line(tmp_path):
    program = tmp_path / "broken.py"
    program.write_text("def make(:\n    return 1\n")
    with pytest.raises(ProgramLoadError, match=r"syntax error in broken\.py:1"):
        load_program_object(f"{program}:make")


def test_sys_exit_at_import_time_is_a_clear_error(tmp_path):
    program = tmp_path / "exits.py"
    program.write_text("import sys\nsys.exit(2)\n")
    with pytest.raises(ProgramExited, match=r"exits\.py called sys\.exit\(2\)"):
        load_program_object(f"{program}:make")


def test_the_main_block_of_the_users_file_does_not_run(tmp_path):
    program = tmp_path / "script.py"
    program.write_text("def make():\n    return 7\n\nif __name__ == '__main__':\n    raise SystemExit(9)\n")
    assert load_program_object(f"{program}:make")() == 7


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon.py", "expected FILE.py:NAME"),
        ("/nonexistent/train.py:make", "no such file: /nonexistent/train.py"),
        (f"{CASES}:not-a-name", "is not a Python name"),
        (f"{CASES.parent}:make", "is a directory"),
        (f"{Path(__file__).parents[2] / 'pyproject.toml'}:make", "not a Python file"),
    ],
)
def test_bad_program_specs_are_rejected_before_any_process_starts(spec, message):
    with pytest.raises(ProgramSpecError, match=message):
        resolve_program(spec)


def test_a_missing_name_lists_the_functions_that_exist():
    with pytest.raises(ProgramNameError, match="has no 'nope'.*abort, add"):
        load_program_object(f"{CASES}:nope")


def test_every_sandbox_error_is_a_diagnostics_error():
    for cls in (JobCrashed, JobFailed, JobTimeout, ProgramExited, ProgramLoadError,
                ProgramNameError, ProgramSpecError):
        assert issubclass(cls, DiagnosticsError)
