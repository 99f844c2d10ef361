"""`import oomkb`: the documented Python API, cheap to import, the same answers as the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

import oomkb


def test_importing_oomkb_loads_neither_jax_nor_torch():
    code = ("import sys, oomkb; heavy = [m for m in ('jax', 'torch', 'transformers', 'sentence_transformers') "
            "if m in sys.modules]; print(','.join(heavy)); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout


def test_the_facade_names_what_users_may_import():
    assert set(oomkb.__all__) >= {"search", "diagnose", "estimate", "profile", "ask", "OomkbError"}


def test_diagnose_parses_an_error_text_into_bytes():
    parsed = oomkb.diagnose("Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. "
                            "Exceeded hbm capacity by 17.34G.")
    assert parsed.category == "compile_hbm_oom"
    assert parsed.available_bytes == 32 * (1 << 30)


def test_a_bad_program_spec_is_a_user_input_error():
    with pytest.raises(oomkb.UserInputError):
        oomkb.estimate("no_such_file.py:make", tpu="v5e")


def test_search_and_ask_answer_from_the_built_in_guides(loaded_index):
    found = oomkb.search("vmem_limit_bytes", k=3)
    assert found.results and found.results[0].doc_id == "scoped-vmem-oom"
    answer = oomkb.ask("Почему не компилируется?", error_log=(
        "Ran out of memory in memory space vmem while allocating on stack for %my-custom-kernel = "
        "bf16[2048,4096]{1,0} custom-call()"))
    assert answer.language == "ru"
    assert answer.diagnosis is not None and answer.diagnosis.category == "scoped_vmem_oom"
