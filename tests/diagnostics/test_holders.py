"""`held_by`: what keeps an array alive, named with the access path and the line that binds it."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import jax.numpy as jnp
import pytest

from oomkb.diagnostics.holders import held_by

MODULE = textwrap.dedent(
    """\
    import functools

    import jax.numpy as jnp

    HISTORY = []


    class Trainer:
        def __init__(self):
            self.metrics = {"loss": []}


    trainer = Trainer()


    def make_step():
        scale = jnp.full((3, 3), 2.0)

        def step(x):
            return x * scale

        return step


    step = make_step()


    @functools.lru_cache(maxsize=None)
    def lookup_table(n):
        return jnp.arange(n)
    """
)


@pytest.fixture(scope="module")
def holders_module(tmp_path_factory):
    path = tmp_path_factory.mktemp("holders") / "holders_demo.py"
    path.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("holders_demo", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["holders_demo"] = module
    spec.loader.exec_module(module)
    yield module, str(path)
    sys.modules.pop("holders_demo", None)


def _line(text: str) -> int:
    return next(n for n, line in enumerate(MODULE.splitlines(), 1) if text in line)


def test_module_level_list_is_named_with_its_index_module_and_binding_line(holders_module):
    module, path = holders_module
    module.HISTORY.extend(jnp.ones(4) * i for i in range(3))
    (holder,) = held_by(module.HISTORY[2], limit=1)
    assert (holder.kind, holder.path, holder.container) == ("module_global", "HISTORY[2]", "list")
    assert (holder.module, holder.source) == ("holders_demo", f"{path}:{_line('HISTORY = []')}")
    assert holder.describe() == f"list `HISTORY[2]` (global of module `holders_demo`, {path}:{_line('HISTORY = []')})"
    module.HISTORY.clear()


def test_list_in_an_object_attribute_is_reached_through_the_object(holders_module):
    module, path = holders_module
    loss = jnp.zeros(2)
    module.trainer.metrics["loss"].append(loss)
    holders = held_by(loss)
    via_global = next(h for h in holders if h.kind == "module_global")
    assert via_global.path == "trainer.metrics['loss'][0]" and via_global.container == "list"
    local = next(h for h in holders if h.kind == "local_variable")  # this test's own `loss`
    assert local.path == "loss" and local.name.endswith("test_list_in_an_object_attribute_is_reached_through_the_object")
    module.trainer.metrics["loss"].clear()


def test_closure_cell_names_the_function_and_the_variable(holders_module):
    module, path = holders_module
    scale = module.step.__closure__[0].cell_contents
    holders = [h for h in held_by(scale) if h.kind == "closure"]
    assert holders and holders[0].path == "scale"
    assert holders[0].name == "make_step.<locals>.step"
    assert holders[0].source == f"{path}:{_line('def step(x)')}"


def test_functools_cache_is_a_holder(holders_module):
    module, path = holders_module
    table = module.lookup_table(5)
    cache = next(h for h in held_by(table) if h.kind == "function_cache")
    assert cache.name == "lookup_table" and cache.path.startswith("lookup_table.cache")


def test_an_unreferenced_temporary_has_no_python_holder():
    def make():
        return jnp.ones(3) + 1

    assert [h for h in held_by(make()) if h.kind != "local_variable"] == []


def test_the_walk_is_bounded_on_long_reference_chains():
    import time

    root = [jnp.ones(1)]
    chain = root
    for _ in range(200):
        chain = [chain]
    started = time.perf_counter()
    holders = held_by(root[0], ignore=[chain])
    assert time.perf_counter() - started < 5
    # Only the nearest root within the depth bound: this test's `root`, never the far end of the chain.
    assert [(h.kind, h.path) for h in holders] == [("local_variable", "root[0]")]
