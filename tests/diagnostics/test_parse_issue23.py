"""The OOM wordings of oomkb issue 23, on real texts from public issue threads.

The texts, their sources, categories and stated figures are data (tests/data/oom_wordings_issue23.yaml):
`seen` and `near_misses` were used while writing the signatures; `kept_back` and
`kept_back_near_misses` were written down before and run only once the parser work was done.
Every real OOM text must get its category and every figure it states, in bytes; every near miss
must stay `unknown`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oomkb.diagnostics.parse import parse_error
from oomkb.units import parse_size

DATA = yaml.safe_load((Path(__file__).parents[1] / "data" / "oom_wordings_issue23.yaml").read_text("utf-8"))


def _expected(name: str, value):
    """A stated figure in bytes: text such as '55.57 GiB' is read as stated (binary units)."""
    return parse_size(value) if isinstance(value, str) and name.endswith("_bytes") else value


def _cases(*parts: str):
    return [pytest.param(case, id=f"{part}:{case['source'][:50]}") for part in parts for case in DATA[part]]


@pytest.mark.parametrize("case", _cases("seen", "kept_back"))
def test_real_oom_text_gets_its_category_and_every_stated_figure(case):
    result = parse_error(case["text"])
    assert result.category == case["category"], result.signature
    got = {name: getattr(result, name) for name in case["figures"]}
    assert got == {name: _expected(name, value) for name, value in case["figures"].items()}


@pytest.mark.parametrize("case", _cases("near_misses", "kept_back_near_misses"))
def test_near_miss_is_not_an_oom(case):
    assert parse_error(case["text"]).category == "unknown"


def test_torch_oom_is_not_taken_for_a_jax_gpu_oom_even_inside_a_jax_log():
    # A JAX log that also shows a PyTorch error in the same process: the PyTorch wording decides.
    log = ("2024-01-01 10:00:00.000000: W external/xla/xla/tsl/framework/bfc_allocator.cc:310] "
           "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.00GiB with freed_by_count=0. "
           "The caller indicates that this is not a failure.\n" + DATA["seen"][6]["text"])
    assert parse_error(log).category == "other_framework_oom"


def test_jax_gpu_oom_stays_gpu_oom_when_the_bare_cuda_code_comes_first():
    log = ("CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
           "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for "
           "2.99GiB (3206250496B) on device ordinal 0\n")
    result = parse_error(log)
    assert (result.category, result.requested_bytes) == ("gpu_oom", 3206250496)
    assert result.signature == "xla_failed_to_allocate_request"
