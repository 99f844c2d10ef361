"""`oomkb search` and `oomkb index`: the CONTRACT JSON shape and clear errors for bad input."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from oomkb.api.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _index_ready(loaded_index):
    """The default index exists before the CLI is asked to search it."""


def test_search_json_has_the_contract_shape():
    res = runner.invoke(app, ["search", "What does --xla_tpu_scoped_vmem_limit_kib do?", "--json", "-k", "3"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["query"].startswith("What does")
    assert data["query_language"] == "en"
    assert len(data["results"]) == 3
    for i, r in enumerate(data["results"], start=1):
        assert r["rank"] == i
        assert {"doc_id", "section", "language", "score", "text"} <= set(r)
        assert isinstance(r["score"], float) and r["text"]
    assert data["results"][0]["doc_id"] == "scoped-vmem-oom"


def test_search_language_filter_keeps_only_that_guide_language():
    res = runner.invoke(app, ["search", "memory leak", "--lang", "ru", "--json"])
    assert res.exit_code == 0, res.output
    assert {r["language"] for r in json.loads(res.stdout)["results"]} == {"ru"}


def test_human_output_lists_rank_guide_and_score():
    res = runner.invoke(app, ["search", "xprof --logdir --port=6006", "-k", "2"])
    assert res.exit_code == 0, res.output
    assert "xprof-debug-oom" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["search", ""], "empty"),
        (["search", "   \t "], "empty"),
        (["search", "x" * 100_000], "limit"),
        (["search", "?!?! ..."], "no letters"),
        (["search", "vmem", "--lang", "xx"], "no guide is written in language 'xx'"),
        (["search", "vmem", "-k", "0"], "k must be between"),
    ],
)
def test_bad_search_input_gets_a_clear_message_and_nonzero_exit(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


def test_binary_bytes_on_the_real_command_line_are_refused_cleanly(loaded_index):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "oomkb.api.cli", "search", b"\xff\xfe\x80\x81".decode("utf-8", "surrogateescape")],
        capture_output=True, env=env, timeout=300,
    )
    assert proc.returncode == 2
    assert b"not readable text" in proc.stderr
    assert b"Traceback" not in proc.stderr + proc.stdout
