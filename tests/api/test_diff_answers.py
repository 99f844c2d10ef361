"""`oomkb ask --report diff.json` (and `/v1/ask`'s `report`, Slack): a diff of two estimates
explained in the asker's language, from real deviceless compiles of two revisions of a program.

Revisions: `roles_programs.scan_grad_remat` → `scan_grad` (the `jax.checkpoint` dropped: the
scan's residuals become activations kept for the backward pass), `diff_programs.narrow` → `wide`
(a wider hidden layer: the weights grow), and one report against itself (nothing changed). The
figures the answers must state are computed here from the two estimate reports, not from the diff.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from slack_sdk import WebClient
from typer.testing import CliRunner

from oomkb.api.cli.main import app as cli_app
from oomkb.api.http.app import create_app
from oomkb.api.schemas import AskResponse
from oomkb.settings import Settings
from oomkb.units import format_bytes
from tests.api.test_slack import SECRET, TOKEN, block_text, mention, post_event
from tests.api.test_slack_threads import SlackWithThreads
from tests.conftest import LOCAL

pytestmark = pytest.mark.slow  # four deviceless compiles in child processes

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
runner = CliRunner()


def _oomkb(*args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "oomkb", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Estimates of the four revisions, and the diffs `oomkb diff --json` makes of them."""
    root = tmp_path_factory.mktemp("diff-answers")
    out = {}
    for program, factory in (("roles_programs", "scan_grad_remat"), ("roles_programs", "scan_grad"),
                             ("diff_programs", "narrow"), ("diff_programs", "wide")):
        out[factory] = root / f"{factory}.json"
        out[factory].write_text(_oomkb("estimate", f"{PROGRAMS / program}.py:{factory}", "--tpu", "v5e",
                                       "--json", "--top", "20", cwd=root))
    for name, a, b in (("activations", "scan_grad_remat", "scan_grad"), ("weights", "narrow", "wide"),
                       ("same", "scan_grad", "scan_grad")):
        out[name] = root / f"diff-{name}.json"
        out[name].write_text(_oomkb("diff", str(out[a]), str(out[b]), "--json", cwd=root))
    return out


def _estimate(reports, name) -> dict:
    return json.loads(reports[name].read_text())


def _growth(reports, a: str, b: str, role: str | None = None) -> int:
    """B - A of the total, or of one role's bytes at the peak, from the estimates themselves."""
    ea, eb = _estimate(reports, a), _estimate(reports, b)
    if role is None:
        return eb["total_bytes"] - ea["total_bytes"]
    return eb["peak_by_role"][role] - ea["peak_by_role"][role]


def _first_line(answer: str) -> str:
    return answer.split("\n")[0]


@pytest.fixture(scope="module")
def client(searcher):
    from oomkb.api.core.assistant import Assistant

    with TestClient(create_app(Settings(), Assistant(searcher)), base_url=LOCAL) as c:
        yield c


def _rest(client, question: str, report: Path, **kw) -> AskResponse:
    r = client.post("/v1/ask", json={"question": question, "report": json.loads(report.read_text()), **kw})
    assert r.status_code == 200, r.text
    return AskResponse.model_validate(r.json())


def _cli(question: str, report: Path, *more: str) -> AskResponse:
    res = runner.invoke(cli_app, ["ask", question, "--report", str(report), "--json", *more])
    assert res.exit_code == 0, res.output
    return AskResponse.model_validate_json(res.stdout)


# ------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize(("question", "language", "words"), [
    ("Почему после изменения выросла память?", "ru", ["Память выросла на", "в основном в активациях"]),
    ("新しい版でメモリが増えたのはなぜですか？", "ja", ["メモリがデバイスあたり", "大半は逆伝播のために保持された活性化"]),
])
def test_cli_explains_dropped_remat_as_grown_activations_with_remat_as_the_fix(reports, loaded_index,
                                                                                question, language, words):
    r = _cli(question, reports["activations"])
    first = _first_line(r.answer)
    assert r.language == language and r.grounded
    assert first == f"**{r.verdict}**"
    for w in words:
        assert w in first, first
    assert format_bytes(_growth(reports, "scan_grad_remat", "scan_grad")) in first
    assert "+" + format_bytes(_growth(reports, "scan_grad_remat", "scan_grad", "activation")) in first
    assert "`jax.checkpoint`" in first
    # the buffers that grew most: the scan's stacked residuals, their shape as compiled in B
    stacked = max((b for b in _estimate(reports, "scan_grad")["top_buffers"] if b["role"] == "activation"),
                  key=lambda b: b["bytes"])
    assert f"`{stacked['shape']}`" in r.answer and "+" + format_bytes(stacked["bytes"]) in r.answer
    assert r.citations[0].citation == "e1000-compile-hbm-oom#scenario-3e-rematerialization"


def test_cli_says_nothing_changed_for_two_identical_reports(reports, loaded_index):
    r = _cli("Qu'est-ce qui a changé entre les deux ?", reports["same"])
    assert r.language == "fr"
    total = format_bytes(_estimate(reports, "scan_grad")["total_bytes"])
    assert _first_line(r.answer) == (f"**Rien n'a changé entre les deux estimations : le total est de {total} "
                                     "par appareil dans les deux, et chaque tampon comparé au pic est le même.**")
    assert "###" not in r.answer.split("\n\n")[1]  # no list of changed buffers follows


def test_cli_refuses_a_file_that_is_no_report_naming_the_diff(tmp_path, loaded_index):
    bad = tmp_path / "diff.json"
    bad.write_text('{"report_kind": "diff", "total_delta_bytes": 5}')
    res = runner.invoke(cli_app, ["ask", "why?", "--report", str(bad)])
    assert res.exit_code == 2 and "`oomkb diff --json`" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------------------- REST


@pytest.mark.parametrize(("question", "language", "words"), [
    ("¿Por qué la nueva versión usa más memoria?", "es", "casi todo en los pesos"),
    ("Warum braucht die neue Version mehr Speicher?", "de", "größtenteils in den Gewichten"),
    ("为什么新版本占用更多内存？", "zh", "大部分在权重"),
])
def test_rest_explains_a_wider_layer_as_grown_weights_buffer_by_buffer(client, reports, question, language,
                                                                       words):
    r = _rest(client, question, reports["weights"])
    first = _first_line(r.answer)
    assert r.language == language and words in first, first
    weights = _growth(reports, "narrow", "wide", "parameter")
    assert weights == 2 * 256 * (4096 - 512) * 4  # the two matrices, f32, as the program declares them
    assert format_bytes(_growth(reports, "narrow", "wide")) in first and "+" + format_bytes(weights) in first
    assert "bfloat16" in first
    # each grown weight: its argument path, its shape before and after, its growth
    for name, before, after in (("w_in", "[256,512]", "[256,4096]"), ("w_out", "[512,256]", "[4096,256]")):
        line = next(x for x in r.answer.splitlines() if f"`params['{name}']`" in x)
        assert f"f32{before}" in line and f"f32{after}" in line and "+" + format_bytes(256 * 3584 * 4) in line
    assert r.facts["diff_grown_role"] == "parameter"


def test_rest_says_nothing_changed_in_korean_and_keeps_no_remedies(client, reports):
    r = _rest(client, "무엇이 바뀌었나요?", reports["same"])
    assert r.language == "ko" and _first_line(r.answer).startswith("**두 추정 사이에 바뀐 것이 없습니다.")
    assert r.remedies == [] and r.facts["diff_changed"] is False


def test_the_answer_names_the_versions_when_they_differ(client, reports):
    data = json.loads(reports["activations"].read_text())
    data.update(jax_before="0.10.0", libtpu_before="0.0.42")  # as if A came from the floor venv
    r = client.post("/v1/ask", json={"question": "what changed?", "report": data})
    assert r.status_code == 200, r.text
    answer = r.json()["answer"]
    assert "The first was compiled with `jax 0.10.0, libtpu 0.0.42`, the second with `jax 0.10.2" in answer


def test_a_temporary_growth_after_an_upgrade_says_compare_the_dumps_and_pin(client, reports):
    """The rule on the figures: temporaries that grew between two libtpu versions."""
    data = json.loads(reports["activations"].read_text())
    data["by_role_delta"] = {**data["by_role_delta"], "temporary": data["by_role_delta"]["activation"] + 1}
    data.update(libtpu_before="0.0.40")
    r = client.post("/v1/ask", json={"question": "Pourquoi la mémoire a-t-elle augmenté ?", "report": data})
    first = _first_line(r.json()["answer"])
    assert "surtout dans les temporaires" in first and "`XLA_FLAGS=--xla_dump_to=DIR`" in first
    assert "fixez la version" in first and "libtpu 0.0.40`" in first


# ------------------------------------------------------------------------------- Slack


@pytest.fixture(scope="module")
def slack(searcher):
    from oomkb.api.core.assistant import Assistant

    stand_in = SlackWithThreads()
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET, slack_bot_user_id="U0BOT")
    app = create_app(settings, Assistant(searcher), slack_client=WebClient(base_url=stand_in.url))
    with TestClient(app, base_url=LOCAL) as c:
        yield c, stand_in
    stand_in.server.shutdown()


def test_slack_reads_an_attached_diff_and_answers_in_the_question_language(slack, reports):
    client, api = slack
    api.add_file("F0DIFF", reports["weights"].read_bytes(), "diff.json")
    post_event(client, mention("Por que a nova versão usa mais memória?", files=[{"id": "F0DIFF"}]))
    text = block_text(api.wait_for_post()["blocks"])
    assert "quase tudo nos pesos" in text and "params['w_in']" in text, text


# ------------------------------------------------------------------------------- MCP


def test_mcp_reads_a_diff_report_and_answers_from_it(reports, searcher):
    pytest.importorskip("mcp", reason="the `mcp` extra is not installed")
    import threading

    import anyio
    from mcp import Client

    from oomkb.api.core.assistant import Assistant
    from oomkb.api.http.holder import AssistantHolder
    from oomkb.api.mcp.server import build_server

    settings = Settings()
    server = build_server(settings, AssistantHolder(settings, Assistant(searcher)), threading.Semaphore(1),
                          remote=False)
    grown = _growth(reports, "scan_grad_remat", "scan_grad", "activation")

    async def go():
        async with Client(server) as client:
            r = await client.call_tool("read_report", {"path": str(reports["activations"])})
            assert not r.is_error and r.structured_content["report_kind"] == "diff"
            summary = r.content[0].text
            assert f"activation {grown:+,} bytes" in summary and "f32[8,4096,512]" in summary, summary
            r = await client.call_tool("read_report", {"path": str(reports["same"])})
            assert "nothing changed" in r.content[0].text
            r = await client.call_tool("ask", {"question": "为什么内存变大了？",
                                               "report": json.loads(reports["activations"].read_text())})
            assert not r.is_error, r.content[0].text
            assert r.structured_content["answer"].startswith("**每个设备的内存增加了 ")
            assert "大部分在为反向传播保留的激活值" in r.structured_content["answer"].split("\n")[0]

    anyio.run(go)
