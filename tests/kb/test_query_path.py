"""The query path stays light: no torch, transformers or jax in `oomkb search` or the server, and
several server processes share one index folder, each following `CURRENT`.

Real processes: the CLI and `oomkb serve` run as subprocesses on a copy of the real index.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "sentence_transformers", "jax", "jaxlib")


# Runs the CLI as `python -m api.cli` does and, at exit, prints the modules it had imported.
_RUN_CLI = (
    "import atexit, json, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + json.dumps(\n"
    "    sorted(n for n, m in sys.modules.items() if m is not None)) + '\\n'))\n"
    "sys.argv = ['oomkb', *sys.argv[1:]]\n"
    "runpy.run_module('oomkb.api.cli', run_name='__main__', alter_sys=True)\n"
)


def _imported_modules(stderr: str) -> set[str]:
    """The module names the child printed at exit (see _RUN_CLI)."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("MODULES "):
            return set(json.loads(line[len("MODULES "):]))
    raise AssertionError(f"the child printed no module list: {stderr[-2000:]}")


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_cli_search_imports_neither_torch_nor_transformers_nor_jax(loaded_index):
    index_dir = loaded_index.index.path.parent
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_CLI, "search", "scoped vmem limit", "--json", "-k", "2",
         "--index", str(index_dir)],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)["results"]
    assert results and results[0]["doc_id"] == "scoped-vmem-oom"
    modules = _imported_modules(proc.stderr)
    assert "onnxruntime" in modules and "oomkb.kb.search" in modules  # the check sees the imports
    assert _heavy(modules) == []
    # The lexical weights come precomputed in the generation: no bm25s, no scipy.
    assert not {"bm25s", "scipy"} & {m.split(".")[0] for m in modules}


def test_importing_the_package_and_its_interfaces_pulls_no_jax_or_torch():
    code = ("import oomkb.api, oomkb.api.core.assistant, oomkb.api.cli.main, oomkb.api.http.app, "
            "oomkb.kb.search, oomkb.kb.live, oomkb.kb.corpus, oomkb.indexer.lexical, "
            "oomkb.indexer.query_model, oomkb.indexer.model, json, sys\n"
            "oomkb.indexer.lexical._import_bm25s()\n"
            "print('MODULES ' + json.dumps([n for n, m in sys.modules.items() if m is not None]),"
            " file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=300, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _heavy(_imported_modules(proc.stderr)) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 30) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _post(url: str, body: dict, timeout: float = 60) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def _wait_ready(base: str, proc: subprocess.Popen, deadline: float) -> dict:
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {proc.stderr.read()[-2000:]}"
        try:
            status, body = _get(base + "/readyz", timeout=5)
            if status == 200:
                return body
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{base} not ready in time")


def _libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
def test_two_servers_share_one_index_and_both_follow_a_new_generation(index_copy, embedder):
    from oomkb.kb.corpus import build

    servers = []
    try:
        for _ in range(2):
            port = _free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "oomkb.api.cli", "serve", "--port", str(port), "--index",
                 str(index_copy), "--log-level", "warning"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
            )
            servers.append((f"http://127.0.0.1:{port}", proc))
        deadline = time.monotonic() + 300
        first = [_wait_ready(base, proc, deadline)["index"]["generation"] for base, proc in servers]
        assert first[0] == first[1]
        for base, proc in servers:
            status, answer = _post(base + "/v1/ask", {"question": "How do I raise the scoped VMEM limit?"})
            assert status == 200 and answer["citations"], answer
            maps = _libraries(proc.pid)
            assert "onnxruntime" in maps
            assert "libtorch" not in maps and "jaxlib" not in maps  # no torch, no jax loaded

        stats = build(index_dir=index_copy, embedder=embedder)  # what `oomkb index` does
        assert stats.embedded == 0 and stats.generation != first[0]
        for base, proc in servers:
            while True:
                _, body = _get(base + "/readyz")
                if body["index"]["generation"] == stats.generation:
                    break
                assert time.monotonic() < deadline, f"{base} still serves {body['index']}"
                time.sleep(0.5)
            status, answer = _post(base + "/v1/ask", {"question": "E1000 compile-time HBM OOM"})
            assert status == 200 and answer["citations"]
    finally:
        for _, proc in servers:
            proc.terminate()
        for _, proc in servers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
