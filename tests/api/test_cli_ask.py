"""`oomkb ask`: the CONTRACT JSON, long logs, and clear errors."""

import json

import pytest
from typer.testing import CliRunner

from oomkb.api.cli.main import app

runner = CliRunner()
ERROR = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory "
         "space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.\n")


@pytest.fixture(autouse=True)
def _index_ready(loaded_index):
    """The default index exists before the CLI opens it."""


def test_ask_json_has_the_contract_shape(tmp_path):
    log = tmp_path / "error.log"
    log.write_text("Traceback (most recent call last):\n  ...\n" + ERROR)
    res = runner.invoke(app, ["ask", "Почему не компилируется?", "--log", str(log), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {"language", "diagnosis", "answer", "citations", "grounded"} <= set(data)
    assert data["language"] == "ru" and data["grounded"] is True
    assert data["diagnosis"]["category"] == "compile_hbm_oom"
    assert data["diagnosis"]["exceeded_by_bytes"] == round(17.34 * 2**30)
    assert all({"doc_id", "section", "language", "quote"} <= set(c) for c in data["citations"])


def test_a_log_over_the_request_limit_is_cut_around_its_oom_message(tmp_path):
    noise = "".join(f"I1129 12:00:00.000 step {i} loss=0.{i % 97:02d}\n" for i in range(150_000))
    log = tmp_path / "train.log"
    log.write_text(noise + ERROR + noise)
    assert log.stat().st_size > 5_000_000
    res = runner.invoke(app, ["ask", "why?", "--log", str(log), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["diagnosis"]["used_bytes"] == round(49.34 * 2**30)


def test_a_log_without_a_question_is_answered_in_english(tmp_path):
    log = tmp_path / "error.log"
    log.write_bytes(b"\xff\xfe\x00garbage\x81" * 100 + ERROR.encode())
    res = runner.invoke(app, ["ask", "--log", str(log), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["language"] == "en"


@pytest.mark.parametrize(
    "args, message",
    [
        (["ask", "why?", "--log", "/nonexistent/error.log"], "log file not found"),
        (["ask", ""], "ask a question"),
        (["ask", "why?", "--lang", "klingon"], "not a language code"),
    ],
)
def test_bad_ask_input_gets_a_clear_message_and_nonzero_exit(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_a_report_that_is_not_an_estimate_or_profile_is_refused(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text('{"hello": 1}')
    res = runner.invoke(app, ["ask", "will it fit?", "--report", str(bad)])
    assert res.exit_code == 2 and "is not the JSON of" in res.output
