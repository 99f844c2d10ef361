"""Index faults in a serving process: new generations, damaged ones, changed guides, two builders."""

import pytest
import json
import os
import shutil
import subprocess
import sys

from oomkb.indexer.guides import default_docs_dir
from oomkb.indexer.store import CURRENT, VECTORS, load_index
from oomkb.kb.corpus import build, load_corpus
from oomkb.kb.live import LiveIndex
from oomkb.kb.search import Searcher
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it


def _live(index_dir, embedder, docs_dir=None):
    corpus = load_corpus(docs_dir)
    searcher = Searcher(load_index(index_dir), corpus.guides, corpus.cards, embedder)
    return LiveIndex(searcher, index_dir=index_dir, docs_dir=docs_dir, check_every_s=0)


def test_a_serving_process_switches_to_a_generation_written_by_oomkb_index(index_copy, embedder):
    live = _live(index_copy, embedder)
    before = live.status().generation
    build(index_dir=index_copy, embedder=embedder)  # what `oomkb index` in another process does
    searcher = live.searcher()
    assert live.status().generation != before
    assert searcher.index.path.name == live.status().generation
    assert searcher.search("vmem_limit_bytes", k=1).results[0].doc_id == "scoped-vmem-oom"


def test_a_damaged_new_generation_is_reported_and_the_last_good_one_keeps_serving(index_copy, embedder):
    live = _live(index_copy, embedder)
    good = live.status().generation
    build(index_dir=index_copy, embedder=embedder)
    new = (index_copy / CURRENT).read_text().strip()
    (index_copy / new / VECTORS).write_bytes(b"garbage")
    searcher = live.searcher()
    status = live.status()
    assert status.generation == good and searcher.index.path.name == good
    assert status.problem and new in status.problem and "truncated" in status.problem
    assert searcher.search("HBM E1000", k=1).results  # still answers


def test_changed_guides_mark_the_served_index_stale(index_copy, embedder, tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(default_docs_dir(), docs, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    live = _live(index_copy, embedder, docs_dir=docs)
    assert live.refresh(check_docs=True).docs_changed is False
    guide = docs / "tensor-lifetime-leaks.md"
    guide.write_text(guide.read_text(encoding="utf-8") + "\nНовый абзац.\n", encoding="utf-8")
    assert live.refresh(check_docs=True).docs_changed is True
    assert live.searcher().search("утечка памяти", k=1).results  # keeps serving meanwhile


def test_two_oomkb_index_runs_at_once_take_turns_and_leave_a_valid_index(loaded_index, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(default_docs_dir() / "scoped-vmem-oom.md", docs)
    index_dir = tmp_path / "index"
    cmd = [sys.executable, "-m", "oomkb.api.cli", "index", "--docs", str(docs), "--index", str(index_dir), "--json"]
    env = dict(os.environ)
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1].decode()[-500:] for o in outs]
    stats = [json.loads(o[0]) for o in outs]
    assert sorted(s["embedded"] for s in stats)[0] == 0  # the second waited and reused everything
    assert load_index(index_dir).manifest.count == stats[0]["items"]
