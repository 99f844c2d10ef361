"""Guide pages, linked citations, feedback in SQLite and the coverage-gaps report, through the real app."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from oomkb.api.core.feedback import MIGRATIONS, SCHEMA_VERSION, FeedbackStore
from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from oomkb.api.core.site import reader_language, render_markdown
from oomkb.indexer.guides import load_guides
from oomkb.kb.cards import load_cards

ROOT = Path(__file__).resolve().parents[2]


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []
        self.attrs_of: dict[str, dict] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
            self.attrs_of[a["id"]] = {"tag": tag, **a}


@pytest.fixture
def client(searcher, tmp_path):
    from oomkb.api.core.assistant import Assistant

    settings = Settings(db=tmp_path / "db" / "oomkb.sqlite", admin_token="op-token-123")
    with TestClient(create_app(settings, Assistant(searcher)), base_url="http://127.0.0.1") as c:
        yield c


# ------------------------------------------------------------------ guide pages


@pytest.mark.parametrize("doc_id", [g.doc_id for g in load_guides()])
def test_every_section_of_every_guide_has_its_anchor_on_the_guide_page(client, doc_id):
    r = client.get(f"/guides/{doc_id}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    parser = _Ids()
    parser.feed(r.text)
    guide = next(g for g in load_guides() if g.doc_id == doc_id)
    assert [s.id for s in guide.sections] == [i for i in parser.ids if i in {s.id for s in guide.sections}]


def test_a_hindi_reader_of_the_chinese_guide_sees_each_sections_card_in_hindi(client):
    page = client.get("/guides/e1000-compile-hbm-oom?lang=hi").text
    cards = [c for c in load_cards() if c.doc_id == "e1000-compile-hbm-oom"]
    assert cards
    for card in cards:
        assert card.texts["hi"].title.split("`")[0][:20] in page
    assert '<aside class="card" lang="hi"' in page
    assert 'lang="zh"' in page  # the guide text keeps its own language


def test_the_card_language_follows_accept_language_when_no_lang_is_given(client):
    page = client.get("/guides/scoped-vmem-oom", headers={"Accept-Language": "fr-CH, de;q=0.8, *;q=0.1"}).text
    assert '<aside class="card" lang="fr"' in page
    assert reader_language(None, "xx, ja;q=0.2") == "ja"
    assert reader_language("KO", "fr") == "ko"
    assert reader_language(None, None) == "en"


def test_the_arabic_guide_reads_right_to_left_and_code_stays_left_to_right(client):
    page = client.get("/guides/xprof-debug-oom?lang=en").text
    assert re.search(r'<div class="guide-text" lang="ar" dir="rtl">', page)
    assert "<pre><code" in page


def test_guide_pages_carry_the_web_pages_content_security_policy_and_no_external_assets(client):
    guide = client.get("/guides/runtime-buffer-allocation")
    assert guide.headers["content-security-policy"] == client.get("/").headers["content-security-policy"]
    assert not re.search(r'(src|href)="(https?:)?//', guide.text)


def test_markdown_tables_and_code_render_and_raw_html_in_a_guide_stays_text():
    out = render_markdown("| a | b |\n| --- | --- |\n| 1 | 2 |\n\n<script>alert(1)</script>\n\n```py\nx = 1\n```")
    assert "<table>" in out and "<pre><code" in out
    assert "<script>" not in out and "&lt;script&gt;" in out


def test_an_unknown_guide_is_404_with_the_known_ids(client):
    r = client.get("/guides/no-such-guide")
    assert r.status_code == 404
    assert "scoped-vmem-oom" in r.json()["detail"]


def test_the_web_page_links_to_the_guides(client):
    assert 'href="/guides"' in client.get("/").text
    index = client.get("/guides").text
    for g in load_guides():
        assert f'href="/guides/{g.doc_id}"' in index


# ------------------------------------------------------------------ citations and feedback


def test_every_citation_carries_the_url_of_its_section(client):
    answer = client.post("/v1/ask", json={"question": "How do I raise vmem_limit_bytes for my Pallas kernel?"}).json()
    assert answer["citations"]
    for c in answer["citations"]:
        assert c["url"] == f"/guides/{c['doc_id']}#{c['section']}"
        page = client.get(c["url"].split("#")[0])
        assert f'id="{c["section"]}"' in page.text


def test_citations_are_absolute_when_the_public_url_is_known(searcher, tmp_path):
    from oomkb.api.core.assistant import Assistant

    settings = Settings(db=tmp_path / "x.sqlite", public_url="https://oomkb.example.org/")
    with TestClient(create_app(settings, Assistant(searcher)), base_url="http://127.0.0.1") as c:
        answer = c.post("/v1/ask", json={"question": "How do I fix the E1000 compile-time HBM out of memory error?"}).json()
    assert answer["citations"][0]["url"].startswith("https://oomkb.example.org/guides/")


def test_feedback_attaches_to_a_recorded_answer_and_an_unknown_id_is_404(client, tmp_path):
    answer = client.post("/v1/ask", json={"question": "Как отследить время жизни тензоров и найти утечку памяти на TPU?"}).json()
    assert re.fullmatch(r"[0-9a-f]{32}", answer["answer_id"])
    r = client.post("/v1/feedback", json={"answer_id": answer["answer_id"], "helpful": False,
                                          "comment": "<b>no</b> [link](javascript:x)"})
    assert r.status_code == 200 and r.json()["recorded"] is True
    assert client.post("/v1/feedback", json={"answer_id": "0" * 32, "helpful": True}).status_code == 404
    db = sqlite3.connect(tmp_path / "db" / "oomkb.sqlite")
    row = db.execute("SELECT question, language, grounded, cited, error_log FROM answers").fetchone()
    assert row[1] == "ru" and json.loads(row[3]) and row[4] is None
    assert db.execute("SELECT helpful, comment FROM feedback").fetchone() == (0, "<b>no</b> [link](javascript:x)")


def test_the_raw_error_log_is_kept_only_when_the_operator_opts_in(searcher, tmp_path):
    from oomkb.api.core.assistant import Assistant

    log = "Error allocating device buffer: Attempting to allocate 8.00M. That was not possible. There are 6.43M free."
    for opt_in in (False, True):
        path = tmp_path / f"{opt_in}.sqlite"
        with TestClient(create_app(Settings(db=path, store_logs=opt_in), Assistant(searcher)), base_url="http://127.0.0.1") as c:
            assert c.post("/v1/ask", json={"question": "why?", "error_log": log}).status_code == 200
        stored = sqlite3.connect(path).execute("SELECT error_log FROM answers").fetchone()[0]
        assert stored == (log if opt_in else None)


def test_a_100_kb_comment_is_refused_with_422_and_nothing_is_stored(client):
    answer = client.post("/v1/ask", json={"question": "What is E1000?"}).json()
    r = client.post("/v1/feedback", json={"answer_id": answer["answer_id"], "helpful": True, "comment": "x" * 100_000})
    assert r.status_code == 422


@pytest.mark.parametrize("damage", ["corrupt", "directory"])
def test_a_broken_database_never_stops_answers_and_feedback_says_503(searcher, tmp_path, damage):
    from oomkb.api.core.assistant import Assistant

    path = tmp_path / "oomkb.sqlite"
    if damage == "corrupt":
        path.write_bytes(b"this is not a database" * 100)
    else:
        path.mkdir()
    with TestClient(create_app(Settings(db=path), Assistant(searcher)), base_url="http://127.0.0.1") as c:
        answer = c.post("/v1/ask", json={"question": "What is E1000?"})
        assert answer.status_code == 200
        r = c.post("/v1/feedback", json={"answer_id": answer.json()["answer_id"], "helpful": True})
    assert r.status_code == 503
    assert str(tmp_path) not in r.json()["detail"]  # no paths in what a client sees


def test_a_read_only_database_file_gives_503_for_feedback(searcher, tmp_path):
    from oomkb.api.core.assistant import Assistant

    path = tmp_path / "ro.sqlite"
    FeedbackStore(path).schema_version()
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this file system (root ignores file modes)")
    try:
        with TestClient(create_app(Settings(db=path), Assistant(searcher)), base_url="http://127.0.0.1") as c:
            answer = c.post("/v1/ask", json={"question": "What is E1000?"})
            assert answer.status_code == 200
            r = c.post("/v1/feedback", json={"answer_id": answer.json()["answer_id"], "helpful": True})
        assert r.status_code in (404, 503)  # the answer could not be recorded, so it is unknown, or the write fails
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_an_old_schema_is_migrated_forward_and_its_rows_kept(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO answers VALUES ('a1', 1e10, 'api', 'q', 'en', NULL, 0, 0.1, '[]', NULL)")
    db.commit()
    db.close()
    store = FeedbackStore(path, retention_days=None)
    assert store.schema_version() == SCHEMA_VERSION
    assert [r.answer_id for r in store.unhelpful_or_unanswered()] == ["a1"]
    indexes = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "answers_created" in indexes


def test_two_processes_write_to_one_database_at_once_without_losing_a_row(tmp_path):
    path = tmp_path / "shared.sqlite"
    code = (
        "import sys; from oomkb.api.core.feedback import FeedbackStore\n"
        "s = FeedbackStore(sys.argv[1])\n"
        "for i in range(150):\n"
        "    aid = f'{sys.argv[2]}-{i}'\n"
        "    s.record_answer(answer_id=aid, question='q', language='en', category=None, grounded=False,\n"
        "                    confidence=0.1, cited=[], source='test')\n"
        "    s.record_feedback(aid, i % 2 == 0, 'c', source='test')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), name], cwd=ROOT) for name in ("p1", "p2")]
    assert [p.wait(timeout=240) for p in procs] == [0, 0]
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM answers").fetchone()[0] == 300
    assert db.execute("SELECT count(*) FROM feedback").fetchone()[0] == 300
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_replayed_verdict_with_the_same_key_is_recorded_once(tmp_path):
    store = FeedbackStore(tmp_path / "r.sqlite")
    store.record_answer(answer_id="a" * 32, question="q", language="en", category=None, grounded=True,
                        confidence=0.9, cited=[], source="slack")
    assert store.record_feedback("a" * 32, False, source="slack", dedupe_key="U1:1712.5") is True
    assert store.record_feedback("a" * 32, False, source="slack", dedupe_key="U1:1712.5") is False


def test_answers_older_than_the_retention_period_are_deleted(tmp_path):
    store = FeedbackStore(tmp_path / "ret.sqlite", retention_days=1)
    store.record_answer(answer_id="old", question="q", language="en", category=None, grounded=False,
                        confidence=0.1, cited=[], source="api")
    sqlite3.connect(tmp_path / "ret.sqlite").execute("UPDATE answers SET created = 0").connection.commit()
    store.record_answer(answer_id="new", question="q2", language="en", category=None, grounded=False,
                        confidence=0.1, cited=[], source="api")
    assert [r.answer_id for r in store.unhelpful_or_unanswered()] == ["new"]


# ------------------------------------------------------------------ coverage gaps


UNANSWERED = [
    ("How do I run a JAX model on a Raspberry Pi?", "en"),
    ("Как запустить модель JAX на Raspberry Pi?", "ru"),
    ("如何在树莓派上运行 JAX 模型？", "zh"),
    ("Raspberry Pi पर JAX मॉडल कैसे चलाएँ?", "hi"),
    ("What is the price of a TPU v5e per hour?", "en"),
    ("Quanto custa uma TPU v5e por hora?", "pt"),
    ("Does oomkb support AMD ROCm GPUs?", "en"),
]


def _record_unanswered(store: FeedbackStore) -> None:
    for n, (question, language) in enumerate(UNANSWERED):
        store.record_answer(answer_id=f"gap{n}", question=question, language=language, category=None,
                            grounded=False, confidence=0.2, cited=[], source="api")
    store.record_answer(answer_id="good", question="What is E1000?", language="en", category=None,
                        grounded=True, confidence=0.9, cited=["e1000-compile-hbm-oom#overview"], source="api")


def test_gaps_group_the_same_question_across_languages_biggest_group_first(searcher, tmp_path):
    from oomkb.api.core.gaps import group_questions, searcher_functions

    store = FeedbackStore(tmp_path / "g.sqlite")
    _record_unanswered(store)
    store.record_feedback("good", False, "did not say how to fix it", source="web")
    embed, nearest = searcher_functions(searcher)
    report = group_questions(store.unhelpful_or_unanswered(), embed, nearest)
    sizes = [g.size for g in report.groups]
    assert sizes[0] == 4 and sizes == sorted(sizes, reverse=True)
    assert report.groups[0].languages == ["en", "hi", "ru", "zh"]
    assert sum(sizes) == len(UNANSWERED) + 1  # the unhelpful grounded answer counts too
    assert all(g.nearest_section and "#" in g.nearest_section for g in report.groups)


def test_oomkb_gaps_json_reads_the_database(searcher, tmp_path):
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    db = tmp_path / "cli.sqlite"
    _record_unanswered(FeedbackStore(db))
    result = CliRunner().invoke(app, ["gaps", "--json", "--db", str(db), "--since", "7"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["groups"][0]["size"] == 4 and set(data["groups"][0]) >= {"size", "languages", "examples",
                                                                           "nearest_section"}
    missing = CliRunner().invoke(app, ["gaps", "--db", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2 and "no feedback database" in missing.output


def test_the_gaps_page_is_off_without_a_token_and_behind_it_otherwise(client, searcher, tmp_path):
    from oomkb.api.core.assistant import Assistant

    with TestClient(create_app(Settings(db=tmp_path / "n.sqlite"), Assistant(searcher)), base_url="http://127.0.0.1") as off:
        assert off.get("/gaps").status_code == 404
    client.post("/v1/ask", json={"question": "<img src=x onerror=alert(1)> who won the 2002 world cup?"})
    assert client.get("/gaps").status_code == 401
    assert client.get("/gaps", headers={"Authorization": "Bearer wrong"}).status_code == 401
    page = client.get("/gaps", headers={"Authorization": "Bearer op-token-123"})
    assert page.status_code == 200 and "Coverage gaps" in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x" in page.text
    import base64

    basic = base64.b64encode(b"operator:op-token-123").decode()
    assert client.get("/gaps", headers={"Authorization": f"Basic {basic}"}).status_code == 200


def test_export_site_writes_pages_that_link_to_each_other(tmp_path):
    from typer.testing import CliRunner

    from oomkb.api.cli.main import app

    result = CliRunner().invoke(app, ["export-site", str(tmp_path / "site"), "--lang", "hi"])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "site" / "index.html").read_text()
    for g in load_guides():
        page = tmp_path / "site" / "guides" / f"{g.doc_id}.html"
        assert page.is_file() and f'href="guides/{g.doc_id}.html"' in index
        assert '<aside class="card" lang="hi"' in page.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', index)
    bad = CliRunner().invoke(app, ["export-site", str(tmp_path / "site2"), "--lang", "xx"])
    assert bad.exit_code == 2
