"""Every remedy's code example: present, valid Python, and working with the installed JAX and
libtpu (run on CPU, or compiled deviceless for a TPU), so an API rename fails here first."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from oomkb.kb.errors import CatalogueError
from oomkb.kb.remedies import default_catalogue_dir, load_catalogue
from oomkb.kb.snippets import load_snippets, snippet_markdown

SNIPPETS = load_snippets()
CATALOGUE = load_catalogue()


def _unique(kind: str) -> list[tuple[str, object]]:
    seen: dict[str, tuple[str, object]] = {}
    for rid, s in SNIPPETS.by_remedy.items():
        if s.check == kind:
            seen.setdefault(s.code, (rid, s))
    return list(seen.values())


def test_every_remedy_has_a_snippet():
    assert {r.id for r in CATALOGUE.remedies} == set(SNIPPETS.by_remedy)


def _catalogue_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "catalogue"
    shutil.copytree(default_catalogue_dir(), dst)
    return dst


def _edit_snippets(folder: Path, change) -> None:
    path = folder / "snippets.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data["snippets"])
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


def test_a_remedy_without_snippet_is_refused_at_load(tmp_path):
    folder = _catalogue_copy(tmp_path)
    _edit_snippets(folder, lambda s: s.pop("vmem-limit-bytes"))
    with pytest.raises(CatalogueError, match="vmem-limit-bytes.*no snippet"):
        load_snippets(CATALOGUE, folder)


def test_a_snippet_that_does_not_parse_is_refused_at_load(tmp_path):
    folder = _catalogue_copy(tmp_path)
    _edit_snippets(folder, lambda s: s.__setitem__("hbm-donate", {"check": "run", "code": "jax.jit(f, donate_argnums=(0,)\n"}))
    with pytest.raises(CatalogueError, match="hbm-donate.*not valid Python"):
        load_snippets(CATALOGUE, folder)


def test_a_snippet_for_an_unknown_remedy_is_refused(tmp_path):
    folder = _catalogue_copy(tmp_path)
    _edit_snippets(folder, lambda s: s.__setitem__("no-such-remedy", {"check": "parse", "code": "x = 1\n"}))
    with pytest.raises(CatalogueError, match="no-such-remedy"):
        load_snippets(CATALOGUE, folder)


def test_snippets_name_the_apis_and_flags_of_their_remedy():
    for remedy in CATALOGUE.remedies:
        code = SNIPPETS.by_remedy[remedy.id].code
        for term in remedy.flags + remedy.apis:
            name = term.split("=")[0].lstrip("-").removeprefix("pallas.tpu.").removeprefix("jax.")
            if name == "Array":
                continue
            assert name in code, f"{remedy.id}: its snippet does not show {term}"


def test_snippet_markdown_is_one_fenced_python_block():
    lines = snippet_markdown(SNIPPETS.by_remedy["vmem-limit-bytes"])
    assert lines[0] == "```python" and lines[-1] == "```"
    assert any("vmem_limit_bytes=" in line for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("rid,snippet", _unique("run"), ids=lambda v: v if isinstance(v, str) else "")
def test_plain_jax_snippet_runs_on_cpu(rid, snippet, tmp_path, capsys):
    code = snippet.code.replace("/tmp/", f"{tmp_path}/")
    exec(compile(code, f"{rid}.py", "exec"), {"__name__": "snippet"})


def _tpu_devices():
    from oomkb.diagnostics.tpu import resolve_target, topology_devices

    return topology_devices(resolve_target("v5e", "2x2"))


@pytest.mark.slow
@pytest.mark.parametrize("rid,snippet", _unique("tpu"), ids=lambda v: v if isinstance(v, str) else "")
def test_tpu_snippet_compiles_deviceless_for_v5e(rid, snippet):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    namespace: dict = {"__name__": "snippet"}
    exec(compile(snippet.code, f"{rid}.py", "exec"), namespace)
    mesh = Mesh(_tpu_devices()[:1], ("x",))
    replicated = NamedSharding(mesh, P())
    specs = [jax.ShapeDtypeStruct(tuple(a[:-1]), jnp.dtype(a[-1])) for a in snippet.args]
    fn = jax.jit(namespace[snippet.call], in_shardings=tuple(replicated for _ in specs),
                 out_shardings=replicated)
    compiled = fn.trace(*specs).lower().compile()
    assert compiled.memory_analysis() is not None


_FLAG = re.compile(r"--([a-z0-9_]+)=([^\s\"']+)")


@pytest.mark.slow
@pytest.mark.parametrize("rid,snippet", _unique("flags"), ids=lambda v: v if isinstance(v, str) else "")
def test_libtpu_flags_in_snippets_are_known_to_the_compiler(rid, snippet):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    flags = dict(_FLAG.findall(snippet.code))
    assert flags, f"{rid}: no --flag=value in its LIBTPU_INIT_ARGS"
    mesh = Mesh(_tpu_devices()[:1], ("x",))
    s = NamedSharding(mesh, P())
    lowered = jax.jit(lambda x: x * 2, in_shardings=s, out_shardings=s).trace(
        jax.ShapeDtypeStruct((256, 256), jnp.float32)).lower()
    lowered.compile(compiler_options=flags)  # libtpu: "No such compile option" for a wrong name


def test_a_misspelt_flag_would_fail_that_check():
    pytest.importorskip("libtpu")
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(_tpu_devices()[:1], ("x",))
    s = NamedSharding(mesh, P())
    lowered = jax.jit(lambda x: x + 1, in_shardings=s, out_shardings=s).trace(
        jax.ShapeDtypeStruct((8, 128), jnp.float32)).lower()
    with pytest.raises(Exception, match="No such compile option"):
        lowered.compile(compiler_options={"xla_tpu_scoped_vmem_limit_kibs": "65536"})


def test_a_line_of_the_model_s_figures_takes_those_the_user_stated_and_keeps_the_others():
    from oomkb.kb.snippets import fill_stated

    code = "x = 1\nlayers, batch, seq = 4, 2, 1024  # your model's figures here\n"
    assert fill_stated(code, {"layers": 32.0, "seq": 8192.0}) == (
        "x = 1\nlayers, batch, seq = 32, 2, 8192  # your model's figures here\n")
    assert fill_stated(code, {"hidden": 4096.0}) == code


def test_the_share_per_process_in_a_snippet_is_the_asker_s_count_s():
    from oomkb.kb.snippets import fill_share
    code = ('# two processes .45 each\n#   XLA_PYTHON_CLIENT_MEM_FRACTION=.45 python train.py &\n'
            'os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".45"\n')
    three = fill_share(code, 3)
    assert 'MEM_FRACTION=.30 python' in three and '= ".30"' in three
    assert three.startswith("# two processes .45 each")  # the comment's example stays
    assert fill_share(code, None) == code and fill_share(code, 40) == code


def test_snippets_are_fenced_from_many_threads_at_once_one_parse_at_a_time(monkeypatch):
    # the server composes answers on a thread pool; CPython 3.11 before 3.11.8 raised SystemError ("AST
    # constructor recursion depth mismatch") under 16 concurrent /v1/ask requests when two threads ran
    # ast.parse at once: the parses are serialised (a slow parse here would overlap without the lock)
    import ast
    import threading
    import time

    from oomkb.kb import snippets
    from oomkb.kb.snippets import Snippet, snippet_markdown

    real_parse, active, most = ast.parse, [0], [0]
    guard = threading.Lock()

    def slow_parse(code, *args, **kwargs):
        with guard:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.002)
        try:
            return real_parse(code, *args, **kwargs)
        finally:
            with guard:
                active[0] -= 1

    monkeypatch.setattr(snippets.ast, "parse", slow_parse)
    snippets._parses.cache_clear()
    codes = [f"def f{i}(x):\n    return x + {i}\n" for i in range(80)]
    errors = []

    def fence(part):
        try:
            for code in part:
                assert snippet_markdown(Snippet(code=code, check="parse"))[0] == "```python"
        except Exception as err:  # noqa: BLE001 (any error fails the test)
            errors.append(err)

    threads = [threading.Thread(target=fence, args=(codes[n::8],)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snippets._parses.cache_clear()
    assert not errors, errors[:3]
    assert most[0] == 1, most[0]
    assert snippet_markdown(Snippet(code="python3 -m MaxText.train base.yml \\\n  run_name=x", check="parse"))[0] == "```bash"
