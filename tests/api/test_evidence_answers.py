"""Answers decided by the user's own figures, through the real app (REST, Slack blocks): the
verdict first, remedies led and excluded by the evidence, settings computed from it, other
frameworks' errors declined honestly, the language of the prose around a pasted log, and quotes in
the reader's language with the guide's wording as their source.

The error lines are the shapes of logs posted in public issue threads (LargeWorldModel/LWM#60,
pytorch/xla#9524, jax-ml/jax#9237, PyTorch CUDA OOM reports), not sentences from the guides."""

from __future__ import annotations

import shutil
import time

import pytest
import yaml
from fastapi.testclient import TestClient

from oomkb.api.http.app import create_app
from oomkb.api.http.slack import answer_blocks
from oomkb.api.schemas import AskResponse
from oomkb.kb.errors import CatalogueError
from oomkb.kb.figures import load_figures
from oomkb.kb.evidence_rules import derive_facts, load_rules
from oomkb.kb.language import SUPPORTED
from oomkb.kb.prose import detect_prose_language, prose_of
from oomkb.kb.remedies import default_catalogue_dir, load_catalogue
from oomkb.settings import Settings
from oomkb.units import format_bytes
from tests.conftest import LOCAL
from tests.diagnostics.test_parse import HBM_REPORT_LOG

MiB = 1 << 20

# arguments 15.90G > 15.48G of HBM (the parse tests' report)
ARGS_LOG = HBM_REPORT_LOG
# LargeWorldModel/LWM#60: the program alone, arguments 0B
PROGRAM_LOG = """\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.

Total hbm usage >= 22.47G:
    reserved        530.00M
    program          21.95G
    arguments            0B
"""
PADDING_LOG = """\
Compilation failure: Ran out of memory in memory space hbm. Used 41.74G of 16.00G hbm. Exceeded hbm capacity by 25.74G.

Total hbm usage >= 41.74G:
    reserved        528.00M
    program          41.22G
    arguments       unknown size

  Largest program allocations in hbm:

  1. Size: 32.00G
     Operator: op_type="FloorMod" op_name="slicewise_79/cic_update/FloorMod"
     Shape: s32[8388608,8,4]{2,1,0:T(8,128)}
     Unpadded size: 1.00G
     Extra memory due to padding: 31.00G (32.0x expansion)
     Allocation type: HLO temp
     ==========================
"""
VMEM_LOG = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
            "Ran out of memory in memory space vmem. Used 29.95M of 16.00M vmem. Exceeded vmem capacity "
            "by 13.95M.")
DONATION_LOG = ("/usr/local/lib/python3.8/dist-packages/jax/_src/interpreters/mlir.py:705: UserWarning: "
                "Some donated buffers were not usable: ShapedArray(float32[185,16,16,3]), "
                "ShapedArray(int32[185]).\nSee an explanation at "
                "https://jax.readthedocs.io/en/latest/faq.html#buffer-donation.")
TORCH_LOG = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
             "    loss.backward()\n"
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a "
             "total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is "
             "allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated.")
FRAGMENTED_LOG = ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
                  "Attempting to allocate 8.00M. That was not possible. There are 12.50M free.; (0x0x1_HBM0)")
SHORT_OF_FREE_LOG = ("ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                     "allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)")


@pytest.fixture(scope="module")
def assistant(searcher):
    from oomkb.api.core.assistant import Assistant

    return Assistant(searcher)


@pytest.fixture(scope="module")
def client(assistant):
    with TestClient(create_app(Settings(), assistant), base_url=LOCAL) as c:
        yield c


def ask(client, question="", error_log=None, **kw) -> AskResponse:
    body = {"question": question, **kw}
    if error_log is not None:
        body["error_log"] = error_log
    r = client.post("/v1/ask", json=body)
    assert r.status_code == 200, r.text
    return AskResponse.model_validate(r.json())


def ids(r: AskResponse) -> list[str]:
    return [x.id for x in r.remedies]


# ------------------------------------------------------------------ the verdict, in 11 languages


@pytest.mark.parametrize("language", SUPPORTED)
def test_arguments_larger_than_the_hbm_give_the_verdict_first_in_every_language(client, language):
    r = ask(client, error_log=ARGS_LOG, language=language)
    assert r.language == language and r.verdict
    assert "15.90 GiB" in r.verdict and "15.48 GiB" in r.verdict
    assert r.answer.startswith(f"**{r.verdict}**")


def test_arguments_larger_than_the_hbm_lead_with_sharding_and_never_suggest_a_smaller_batch(client):
    r = ask(client, "What should I change?", error_log=ARGS_LOG)
    assert r.verdict.startswith("Your arguments alone, 15.90 GiB, exceed one device's 15.48 GiB")
    assert "a smaller batch cannot fix this" in r.verdict
    assert "sharding" in ids(r)[0]
    for pointless in ("hbm-batch-size", "hbm-remove-debug-print", "hbm-checkpoint", "hbm-donate"):
        assert pointless not in ids(r)
    assert "Reduce the batch size" not in r.answer
    assert r.citations[0].citation == "e1000-compile-hbm-oom#scenario-3b-architecture-sharding"


@pytest.mark.parametrize("question,language,devices", [
    ("And if I shard them with FSDP over 4 chips, how much per chip?", "en", 4),
    ("Und wenn ich das auf 8 Geräte verteile?", "de", 8),
    ("如果用 FSDP 分到 16 个芯片上，每个芯片要多少？", "zh", 16),
    ("Se eu rodar numa v5e-8, quanto fica por chip?", "pt", 8),
])
def test_arguments_too_big_for_one_device_are_divided_over_the_devices_the_follow_up_names(
        client, question, language, devices):
    first = ask(client, "compile OOM on my TPU", error_log=ARGS_LOG)
    r = ask(client, question, conversation_id=first.conversation_id)
    assert r.follow_up and r.language == language
    per_device = -(-first.facts["argument_bytes"] // devices)
    assert r.facts["devices_named"] == devices and r.facts["argument_per_device_bytes"] == per_device
    assert r.verdict and format_bytes(per_device) in r.verdict and str(devices) in r.verdict
    assert "hbm-batch-size" not in ids(r)


def test_a_device_count_is_read_from_the_question_only_never_from_the_log(assistant):
    rules = assistant.rules
    assert rules.read_count_facts({"x": 1}, "the same on 4 devices?")["devices_named"] == 4
    assert "devices_named" not in rules.read_count_facts({"x": 1}, "batch 32, seq 2048, what now?")
    assert "devices_named" not in rules.read_count_facts({"x": 1}, "")
    # a batch said per card ("每卡 batch 2") is not the global batch a per-device buffer could hold whole
    assert "batch_named" not in rules.read_count_facts({"x": 1}, "v5e-8 上 8 路 fsdp，每卡 batch 2，一编译就 oom")
    assert rules.read_count_facts({"x": 1}, "v5e-8 上 8 路 fsdp，batch 16")["batch_named"] == 16


def test_a_log_naming_devices_gives_no_device_count(client):
    r = ask(client, "", error_log=ARGS_LOG.replace("Ran out of memory", "On 8 chips: ran out of memory"))
    assert "devices_named" not in r.facts


def test_a_program_larger_than_its_arguments_leads_with_what_the_program_holds(client):
    r = ask(client, error_log=PROGRAM_LOG)
    assert r.verdict.startswith("The compiled program's own buffers, 21.95 GiB, are most of the 21.95 GiB")
    assert ids(r)[0] == "hbm-batch-size"


def test_a_32x_padding_leads_with_the_layout_not_with_debug_print(client):
    r = ask(client, error_log=PADDING_LOG)
    assert "s32[8388608,8,4]" in r.verdict and "32×" in r.verdict and "31.00 GiB" in r.verdict
    assert ids(r)[0] in ("hbm-padding-measured", "hbm-padding")
    assert not {"hbm-large-allocation-debug-print", "hbm-remove-debug-print"} & set(ids(r))
    assert "jax.debug.print" not in r.answer.split("### ")[1]  # not in the steps


def test_a_padding_that_is_one_small_last_dimension_names_it_and_no_bigger_slice(client):
    # s32[8388608,8,4]{2,1,0:T(8,128)}: the last dimension, 4, is stored as 128
    r = ask(client, "do I just need a bigger slice?", error_log=PADDING_LOG)
    assert "its last dimension, 4, is stored as 128" in r.verdict and "A bigger slice" in r.verdict
    assert not {"hbm-newer-tpu", "hbm-larger-topology"} & set(ids(r))


def test_the_hlo_temporaries_padding_over_every_array_like_it_is_said_beside_the_worst_one(client):
    log = PADDING_LOG.replace(
        "    arguments       unknown size\n",
        "    arguments       unknown size\n\nProgram hbm requirement 41.22G:\n"
        "    HLO temp         41.20G (9.7% utilization: Unpadded (4.00G) Padded (41.20G), 0.0% fragmentation (0B))\n")
    r = ask(client, error_log=log)
    assert "31.00 GiB" in r.verdict and "41.20 GiB for 4.00 GiB of data" in r.verdict and "37.20 GiB is padding" in r.verdict
    # without the HLO temp line, the worst array's own figures only
    assert "is padding" not in ask(client, error_log=PADDING_LOG).verdict


def test_a_padding_spread_over_large_dimensions_names_no_single_dimension():
    from oomkb.kb.evidence_rules import derive_facts

    assert "padding_minor_dim" not in derive_facts({"padding_worst_shape": "f32[129,1000]{1,0:T(8,128)}"})
    assert derive_facts({"padding_worst_shape": "f32[4,4096,1024,3]{3,2,1,0:T(8,128)}"})["padding_minor_padded"] == 128


# ------------------------------------------------------------------ VMEM: computed settings


def test_vmem_without_a_generation_gives_its_figures_and_the_computed_limit(client):
    r = ask(client, error_log=VMEM_LOG)
    assert "29.95 MiB" in r.verdict and "16.00 MiB" in r.verdict and "13.95 MiB" in r.verdict
    assert "vmem_limit_bytes=32505856" in r.verdict  # 29.95 MiB rounded up to 30 MiB, and one to spare
    assert "64 * 1024 * 1024" not in r.answer and "(here 64 MiB)" not in r.answer
    assert "vmem-identify-source" not in ids(r)
    by_id = {x.id: x for x in r.remedies}
    assert "vmem_limit_bytes=32505856" in by_id["vmem-limit-bytes"].snippet
    assert "--xla_tpu_scoped_vmem_limit_kib=31744" in by_id["vmem-global-limit"].snippet


def test_vmem_on_a_generation_that_has_room_sets_the_limit_for_the_kernel(client):
    r = ask(client, "My Pallas kernel fails to compile on TPU v5e", error_log=VMEM_LOG)
    assert "v5e" in r.verdict and "128.00 MiB" in r.verdict and "vmem_limit_bytes=32505856" in r.verdict
    assert ids(r)[0] == "vmem-limit-bytes"


def test_vmem_beyond_the_physical_vmem_says_only_smaller_blocks_help(client):
    r = ask(client, "Mein Pallas-Kernel kompiliert auf TPU v4 nicht, was tun?", error_log=VMEM_LOG)
    assert r.language == "de"
    assert "29.95 MiB" in r.verdict and "16.00 MiB" in r.verdict and "kleinere Blöcke" in r.verdict
    assert not {"vmem-limit-bytes", "vmem-global-limit"} & set(ids(r))
    assert "vmem_limit_bytes=" not in r.answer


# the need rounded up to a whole MiB and one to spare (measured on a v5e: a report of 72.00M failed at 72 MiB
# and compiled at 73 MiB), never above the physical VMEM
@pytest.mark.parametrize("need_mib,generation,expected_mib", [
    (29.95, "v5e", 31), (127.5, "v5e", 128), (15.2, "v4", 16), (60.01, "v5p", 62), (72.0, "v5e", 73),
    (16.2, "v4", None), (64.5, "TPU7x", None), (29.95, None, 31),
])
def test_the_limit_to_set_is_the_need_rounded_up_with_one_to_spare_and_never_above_the_physical_vmem(
        need_mib, generation, expected_mib):
    facts = derive_facts({"category": "scoped_vmem_oom", "used_bytes": int(need_mib * MiB)}, generation)
    if expected_mib is None:
        assert "vmem_limit_to_set_bytes" not in facts
        assert facts["vmem_need_bytes"] > facts["vmem_physical_bytes"]
    else:
        assert facts["vmem_limit_to_set_bytes"] == expected_mib * MiB
        assert facts.get("vmem_physical_bytes", 1 << 40) >= facts["vmem_limit_to_set_bytes"]


# ------------------------------------------------------------------ runtime and donation


def test_free_memory_larger_than_the_request_is_fragmentation(client):
    # (12.50 MiB free in all is a full device: fragmentation is named as the last straw)
    r = ask(client, error_log=FRAGMENTED_LOG)
    assert "12.50 MiB" in r.verdict and "8.00 MiB" in r.verdict and "fragmentation" in r.verdict
    assert "essentially full" in r.verdict and "rt-not-enough-free" not in ids(r)
    big = FRAGMENTED_LOG.replace("12.50M free", "1.50G free")
    assert big != FRAGMENTED_LOG
    r = ask(client, error_log=big)
    assert "1.50 GiB" in r.verdict and "fragmented" in r.verdict
    assert ids(r)[0] == "rt-fragmentation" and "rt-not-enough-free" not in ids(r)


def test_free_memory_smaller_than_the_request_is_a_plain_oom(client):
    r = ask(client, error_log=SHORT_OF_FREE_LOG)
    assert r.verdict.startswith("Only 6.43 MiB is free when 8.00 MiB is requested")
    assert ids(r)[0] == "rt-not-enough-free" and "rt-fragmentation" not in ids(r)


def test_the_donation_warning_is_explained_not_answered_with_donate_argnums(client):
    r = ask(client, "Why do I get this warning? I already pass donate_argnums.", error_log=DONATION_LOG)
    assert r.grounded and r.verdict
    assert "same shape, dtype and sharding" in r.verdict
    assert "float32[185,16,16,3]" in r.verdict
    assert not {"hbm-donate", "rt-donate"} & set(ids(r))
    assert "pass `donate_argnums`" not in r.answer
    assert r.citations and r.citations[0].citation == "e1000-compile-hbm-oom#scenario-3a-configuration"
    assert "jax.debug.print" not in r.answer


def test_the_donation_warning_in_spanish(client):
    r = ask(client, "¿Por qué sale este aviso?\n" + DONATION_LOG)
    assert r.language == "es" and "misma forma, dtype y sharding" in r.verdict


# ------------------------------------------------------------------ honest scope


@pytest.mark.parametrize("question,language,word", [
    ("How do I fix this?", "en", "PyTorch"),
    ("Wie behebe ich das?", "de", "PyTorch"),
    ("这个怎么解决？", "zh", "PyTorch"),
])
def test_a_pytorch_cuda_oom_is_named_and_nothing_is_grounded(client, question, language, word):
    r = ask(client, question, error_log=TORCH_LOG)
    assert r.language == language
    assert r.out_of_scope == "pytorch" and not r.grounded
    assert r.remedies == [] and r.citations == [] and r.next_steps == []
    assert word in r.answer and "JAX/XLA" in r.answer
    assert "```" not in r.answer and "offload" not in r.answer.lower()
    # where to look instead, in the reader's language: PyTorch's own notes and its setting
    assert "https://pytorch.org/docs/stable/notes/cuda.html" in r.answer and "expandable_segments:True" in r.answer


def _bfc_log(limit: int, in_use: int, requested: int) -> str:
    return (f"W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying to "
            f"allocate {requested / 2**30:.2f}GiB (rounded to {requested})requested by op \n"
            f"I external/xla/xla/tsl/framework/bfc_allocator.cc:1108] Stats: \nLimit:                     {limit}\n"
            f"InUse:                     {in_use}\nMaxInUse:                  {in_use}\nLargestFreeBlock:                    0\n\n"
            f"E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:3045] Execution of replica 0 failed: "
            f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {requested} bytes.")


def test_a_slice_s_usable_hbm_is_the_log_s_own_when_the_log_is_of_that_generation(client):
    log = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. "
           "Used 32.23G of 30.75G hbm. Exceeded hbm capacity by 1.48G.")
    r = ask(client, "init on a v4-32 runs out of memory, how much does each chip have?", error_log=log)
    assert "16 devices (one per chip) of 30.75 GiB" in r.answer and "30.50 GiB" not in r.answer  # one capacity


def test_the_allocator_s_limit_is_read_back_as_the_pool_s_cap_and_the_fraction_that_holds_the_step_is_computed(client):
    # (an L4 in a container, PREALLOCATE=false "so as not to be capped": Limit 16.87 GiB is 75 % of the
    # 22.49 GiB CUDA reports; 16.14 GiB in use + 1.50 GiB asked = 17.64 GiB; .85 gives 19.12 GiB)
    log = _bfc_log(18114674688, 17334534144, 1610612736)
    r = ask(client, "Inférence Flax sur une L4 (24 Go) dans un conteneur, j'ai mis XLA_PYTHON_CLIENT_PREALLOCATE=false "
                    "pour ne pas être bridé, et ça plante avant 22 Go. C'est quoi ce 'Limit' ?", error_log=log)
    first = r.answer.split("\n\n")[0]
    assert "(16.87 GiB) est le plafond du pool de JAX : 75% des 22.49 GiB" in first
    assert "`XLA_PYTHON_CLIENT_PREALLOCATE=false` empêche seulement" in first
    assert "17.64 GiB en tout" in first and "`XLA_PYTHON_CLIENT_MEM_FRACTION=.85` (19.12 GiB)" in first
    assert r.next_steps == [] and r.remedies == []  # the fix is named: no profiling plan after it
    # without PREALLOCATE said, the cap and the fraction alone; the step over .95 of the card gets no fraction
    plain = ask(client, "what is this Limit and what do I change?", error_log=log)
    assert "75% of the 22.49 GiB" in plain.answer and "PREALLOCATE=false` only" not in plain.answer
    over = ask(client, "what is this Limit and what do I change?", error_log=_bfc_log(18114674688, 17334534144, 6 << 30))
    assert "cap of JAX's pool" not in over.answer


def test_a_pytorch_oom_in_a_process_the_asker_says_runs_jax_too_is_weighed_against_jax_s_pool(client):
    # (a benchmark runner that imports jax for its other workloads, its env vars set only later:
    # PyTorch reserved 5.31 GiB, 842.56 MiB were free, so 25.62 GiB of 31.75 GiB were held outside it)
    log = ("RuntimeError: CUDA out of memory. Tried to allocate 1.22 GiB (GPU 0; 31.75 GiB total capacity; "
           "5.10 GiB already allocated; 842.56 MiB free; 5.31 GiB reserved in total by PyTorch)")
    r = ask(client, "Der Lauf nutzt --framework=pytorch, aber submission_runner.py importiert auch jax, die env vars "
                    "werden erst in pytorch_setup() gesetzt. Ist JAX schuld? Was muss ich wo setzen?", error_log=log)
    assert r.language == "de" and r.out_of_scope is None
    first = r.answer.split("\n\n")[0]
    assert "25.62 GiB der 31.75 GiB" in first and "23.81 GiB" in first  # 75 % of the card: JAX's default pool
    assert "`JAX_PLATFORMS=cpu`" in first and "`XLA_PYTHON_CLIENT_PREALLOCATE=false`" in first
    assert "vor `import jax`" in first
    # the fix is named: no profiling plan after it, and PyTorch's 5 GiB is not read as a cap for JAX
    assert r.next_steps == [] and r.remedies == [] and "XLA_PYTHON_CLIENT_MEM_FRACTION=.15" not in r.answer
    # the same log without JAX named is still PyTorch's own, declined
    plain = ask(client, "Was muss ich wo setzen?", error_log=log)
    assert plain.out_of_scope == "pytorch" and not plain.grounded
    # and so is one where PyTorch held most of the card itself, JAX named or not
    own = ("RuntimeError: CUDA out of memory. Tried to allocate 1.22 GiB (GPU 0; 31.75 GiB total capacity; "
           "28.10 GiB already allocated; 842.56 MiB free; 29.31 GiB reserved in total by PyTorch)")
    moved = ask(client, "Ich portiere gerade von JAX nach PyTorch und bekomme das. Was tun?", error_log=own)
    assert moved.out_of_scope is not None and not moved.grounded and "JAX_PLATFORMS" not in moved.answer


@pytest.mark.parametrize("question", [
    "full fine-tune of an SDXL model with a diffusers script under DeepSpeed ZeRO-2 still OOMs on an 80GB card, how to fix?",
    "torchrun with 8 processes, the 70B model loaded with bitsandbytes 4-bit still runs out of memory",
])
def test_pytorch_s_training_stacks_named_without_an_error_text_are_named_as_pytorch(client, question):
    r = ask(client, question)
    assert r.out_of_scope == "pytorch" and not r.grounded and "PyTorch" in r.answer


def test_tensorflow_oom_is_named_too(client):
    r = ask(client, "", error_log="tensorflow.python.framework.errors_impl.ResourceExhaustedError: "
                                  "OOM when allocating tensor with shape[64,512,512] and type float")
    assert r.out_of_scope == "tensorflow" and "TensorFlow" in r.answer and not r.grounded
    assert "set_memory_growth" in r.answer and r.citations == []


def test_a_tensorflow_oom_asked_about_with_a_jax_variable_is_still_tensorflow_s(client):
    # TensorFlow prints RESOURCE_EXHAUSTED too; asking whether a JAX variable fixes it does not make it JAX's
    log = ("2024-06-03 10:41:17.552519: W tensorflow/core/framework/op_kernel.cc:1839] OP_REQUIRES failed at "
           "conv_ops_3d.cc:359 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[2,32,256,256,256] and "
           "type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
           "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:")
    r = ask(client, "tf.keras の 3D U-Net が RTX 3090 で落ちます。XLA_PYTHON_CLIENT_MEM_FRACTION を .95 にすれば直りますか？",
            error_log=log)
    assert r.out_of_scope == "tensorflow" and not r.grounded and r.language == "ja"


def test_a_jax_error_that_mentions_torch_is_still_answered(client):
    r = ask(client, "I import torch for data loading only.\n" + SHORT_OF_FREE_LOG
                    .replace("ValueError", "jax.errors.JaxRuntimeError"))
    assert r.out_of_scope is None and r.grounded and r.remedies


# ------------------------------------------------------------------ the language of the prose


@pytest.mark.parametrize("question,language", [
    ("Was mache ich falsch?\n" + HBM_REPORT_LOG, "de"),
    ("Por que isso acontece?\n" + HBM_REPORT_LOG, "pt"),
    ("Что делать?\n" + HBM_REPORT_LOG + "\nПомогите, пожалуйста", "ru"),
    ("Comment corriger ça ?\n```\n" + VMEM_LOG + "\n```", "fr"),
    ("What should I do?\n" + HBM_REPORT_LOG, "en"),
])
def test_a_question_around_a_pasted_log_is_answered_in_the_language_of_its_prose(client, question, language):
    r = ask(client, question)
    assert r.language == language
    assert r.diagnosis is not None and r.diagnosis.category != "unknown"


def test_prose_detection_reads_each_line_in_linear_time():
    line = "a" * 200_000 + "[" + " x" * 50_000
    started = time.perf_counter()
    prose_of(line + "\n" + "=" * 100_000 + "\n" + "(" * 100_000)
    assert time.perf_counter() - started < 1.0
    assert detect_prose_language("Warum passiert das?\n    reserved        530.00M").language == "de"


# ------------------------------------------------------------------ the reader's language first


def test_quotes_are_in_the_readers_language_with_the_guides_wording_as_source(client):
    r = ask(client, "¿Cómo reduzco la memoria HBM de mi modelo JAX en TPU cuando la compilación "
                    "falla por falta de memoria?")
    assert r.language == "es" and r.grounded
    foreign = [c for c in r.citations if c.language != "es"]
    assert foreign and all(c.translation and c.translation_language == "es" for c in foreign)
    for c in foreign:
        assert r.answer.index(c.translation.split("\n")[0]) < r.answer.index(c.quote.split("\n")[0])
    assert "↳ _Texto original de la guía" in r.answer
    blocks = answer_blocks(r)
    body = "\n".join(b["text"]["text"] for b in blocks if b["type"] == "section")
    small = [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]
    assert "↳" not in body and any(t.startswith("↳") for t in small)


def test_a_reader_of_the_guides_language_gets_no_translation(client):
    r = ask(client, "TPU 编译时 HBM 内存不足怎么办？")
    assert r.language == "zh"
    assert all(c.translation is None for c in r.citations if c.language == "zh")


# ------------------------------------------------------------------ the rules are checked data


def _rules_copy(tmp_path, change):
    folder = tmp_path / "catalogue"
    shutil.copytree(default_catalogue_dir(), folder)
    path = folder / "evidence_rules.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), "utf-8")
    return load_catalogue(folder)


def _rule(data, rule_id="arguments-exceed-capacity"):
    return next(r for r in data["rules"] if r["id"] == rule_id)


@pytest.mark.parametrize("change,problem", [
    (lambda d: _rule(d)["lead"].append("no-such-remedy"), "unknown remedy"),
    (lambda d: _rule(d)["verdict"].pop("ko"), "missing language"),
    (lambda d: _rule(d).update(when={"fact": "no_such_fact", "gt": 1}), "unknown fact"),
    (lambda d: _rule(d)["exclude"].append(_rule(d)["lead"][0]), "leads with and excludes"),
])
def test_a_broken_rule_is_refused_at_load_time(tmp_path, change, problem):
    catalogue = _rules_copy(tmp_path, change)
    with pytest.raises(CatalogueError, match=problem):
        load_rules(catalogue)


# ------------------------------------------------------------------ the batch that fits, from a plan


def test_a_plan_that_found_the_largest_fitting_batch_says_so_first(client):
    import json
    from pathlib import Path

    baseline = json.loads((Path(__file__).parents[1] / "data" / "estimate_report.json").read_text())
    plan = {"kind": "plan", "function": "train.py:make_step", "target": baseline["target"],
            "baseline": baseline, "fixes": [], "compiles": 6, "seconds": 12.0,
            "vary": {"name": "batch", "low": 1, "high": 512, "largest_fitting": 96, "compiles": 6}}
    r = ask(client, "Welche Batchgröße passt?", report=plan)
    assert r.language == "de"
    assert r.verdict.startswith("`batch` = 96 ist der größte Wert, der passt")
    assert "6 Kompilierungen" in r.verdict and r.answer.startswith(f"**{r.verdict}**")


def test_a_standard_op_out_of_vmem_is_not_told_to_set_a_kernel_limit(client):
    log = ("XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while allocating "
           "on stack for %fusion.12 = f32[1024,1024]{1,0} fusion(f32[1024,1024]{1,0} %p0)")
    r = ask(client, "Pourquoi ?", error_log=log)
    assert r.language == "fr"
    assert "`fusion`" in r.verdict and "bug du compilateur" in r.verdict
    assert ids(r)[0] == "vmem-compiler-bug"
    assert "vmem-limit-bytes" not in ids(r) and "vmem_limit_bytes=" not in r.answer


@pytest.mark.parametrize(("role", "words"), [
    ("optimizer_state", {"en": "optimizer state is the largest part", "de": "Optimizer-Zustand der größte Teil"}),
    ("activation", {"en": "activations kept for the backward pass are the largest part",
                    "de": "Aktivierungen der größte Teil"}),
    ("parameter", {"en": "the weights are the largest part", "de": "die Gewichte der größte Teil"}),
])
def test_an_estimate_answers_from_what_its_peak_is_made_of(client, role, words):
    """Issue 25 item 5: with an estimate attached, the answer starts from the roles at the peak."""
    import json
    from pathlib import Path

    report = json.loads((Path(__file__).parents[1] / "data" / "estimate_report.json").read_text())
    peak = report["peak_heap_bytes"] or 6 << 20
    roles = dict.fromkeys(("parameter", "optimizer_state", "gradient", "activation", "temporary", "output",
                           "unknown"), peak // 8)
    roles[role] = peak - 6 * (peak // 8)
    report.update(peak_heap_bytes=peak, peak_by_role=roles)
    for language, expected in words.items():
        r = ask(client, "why does my train step use so much memory?", report=report, language=language)
        assert expected in r.answer.split("\n")[0], r.answer[:400]


# A GPU BFC allocator failure (the shape of logs posted in jax-ml/jax GPU OOM threads)
BFC_LOG = """\
2024-05-01 10:00:00.123456: W external/tsl/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate 12.50GiB (rounded to 13421772800)requested by op
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 13421772800 bytes.
"""


@pytest.mark.parametrize("question,language,share,pool", [
    ("training a 1B model on my A100 40GB and it dies with this, help", "en", "31%", "30.00 GiB"),
    ("Meine RTX 3090 mit 24 GB läuft damit voll, was tun?", "de", "52%", "18.00 GiB"),
])
def test_a_gpu_allocation_is_measured_against_the_card_the_question_names(client, question, language, share, pool):
    r = ask(client, question, error_log=BFC_LOG)
    assert r.language == language and r.verdict and r.answer.startswith(f"**{r.verdict}**")
    assert "12.50 GiB" in r.verdict and share in r.verdict and pool in r.verdict
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" in r.verdict
    assert ids(r)[0].startswith("gpu-")


def test_a_pool_share_the_asker_set_replaces_the_default_75_percent(client):
    r = ask(client, "RTX 3090 24GB, I already export XLA_PYTHON_CLIENT_MEM_FRACTION=.95 and it still dies",
            error_log=BFC_LOG)
    assert r.facts["mem_fraction_named_fraction"] == 0.95
    assert "95%" in r.verdict and "22.80 GiB" in r.verdict  # 0.95 x 24 GiB
    assert "75%" not in r.verdict and "18.00 GiB" not in r.verdict


def test_a_gpu_allocation_without_the_card_s_size_still_gets_its_verdict(client):
    r = ask(client, "¿Qué hago?", error_log=BFC_LOG)
    assert r.language == "es" and r.verdict.startswith("Falló una asignación de 12.50 GiB")
    assert "gpu_memory_named_bytes" not in r.facts


def test_a_fragmented_bfc_pool_names_its_largest_free_block_from_the_allocator_dump(client):
    log = ("W bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.00GiB "
           "(rounded to 4294967296)requested by op\n"
           "Limit:                     64140607488\nInUse:                     56168022016\n"
           "LargestFreeBlock:           2952790016\n"
           "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
           "4294967296 bytes.\n")
    r = ask(client, "H100 80GB, a 4G buffer worked every step before, why now?", error_log=log)
    assert r.facts["largest_free_block_bytes"] == 2952790016
    assert "7.43 GiB free" in r.verdict and "largest free block was 2.75 GiB" in r.verdict


# An XLA:GPU BufferAssignment OOM (the shape of the stats XLA prints for a GPU compile that does
# not fit its pool): 3.75 GiB parameters + 3.75 GiB outputs + 26.50 GiB temporaries = 34.00 GiB
BUFFER_ASSIGNMENT_LOG = """\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 28454158336 bytes.
BufferAssignment OOM Debugging.
BufferAssignment stats:
             parameter allocation:    3.75GiB
              constant allocation:       144B
        maybe_live_out allocation:    3.75GiB
     preallocated temp allocation:   26.50GiB
                 total allocation:   34.00GiB
              total fragmentation:  412.33MiB (1.18%)
Peak buffers:
        Buffer 1:
                Size: 512.00MiB
                Operator: op_name="jit(train_step)/jit(main)/jvp(Encoder)/layers_23/attention/softmax"
                XLA Label: fusion
                Shape: f32[8,16,1024,1024]
                ==========================
"""


def test_a_step_over_jax_s_default_pool_but_under_the_card_explains_the_free_quarter_then_its_largest_buffer(client):
    r = ask(client, "A100 40GB, nvidia-smi still shows ~10 GB free but I get this OOM. who is eating the memory?",
            error_log=BUFFER_ASSIGNMENT_LOG)
    assert r.answer.startswith(f"**{r.verdict}**")
    assert r.verdict.startswith("This step needs 34.00 GiB in all (3.75 GiB parameters, 3.75 GiB outputs, "
                                "26.50 GiB temporaries)")
    assert "30.00 GiB" in r.verdict and "XLA_PYTHON_CLIENT_MEM_FRACTION=.95" in r.verdict
    # the second finding: the largest buffer is attention scores
    assert "f32[8,16,1024,1024]" in r.verdict and 'implementation="cudnn"' in r.verdict
    assert "gpu-buffer-lifetimes" not in ids(r) and "gpu-memory-profile" not in ids(r)


def test_a_step_larger_than_the_card_is_not_told_that_the_pool_is_the_problem(client):
    r = ask(client, "on my RTX 4090 24GB this happens", error_log=BUFFER_ASSIGNMENT_LOG)
    assert not r.verdict.startswith("This step needs")


# A weather model's rollout on one GPU (after ecmwf-lab/ai-models-graphcast#25): its outputs are many
# times its parameters, every step's result kept until the call returns
ROLLOUT_LOG = """\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 15724724752 bytes.
BufferAssignment OOM Debugging.
BufferAssignment stats:
             parameter allocation:  959.50MiB
              constant allocation:  136.16MiB
        maybe_live_out allocation:   12.84GiB
     preallocated temp allocation:   14.64GiB
                 total allocation:   28.56GiB
Peak buffers:
        Buffer 1:
                Size: 8.91GiB
                Operator: op_name="jit(<unnamed wrapped function>)/jit(main)/while/body/remat/mesh2grid_gnn/_process/mesh2grid_gnn/concatenate[dimension=2]"
                XLA Label: fusion
                Shape: bf16[3114720,1,1536]
                ==========================
"""


def test_outputs_many_times_the_parameters_are_read_as_a_loop_keeping_every_step_then_the_largest_buffer_named(client):
    r = ask(client, "je capte pas le rapport BufferAssignment : il veut combien au total, c'est quoi ce buffer de "
                    "8.91GiB, et comment je fais passer ça sans changer de carte ?", error_log=ROLLOUT_LOG)
    assert r.language == "fr"
    assert r.verdict.startswith("Cette étape demande 28.56 GiB en tout sur un GPU : 959.50 MiB de paramètres, "
                                "12.84 GiB de sorties et 14.64 GiB de temporaires.")
    assert "13.7 fois les paramètres" in r.verdict and "jax.device_get" in r.verdict
    assert "`bf16[3114720,1,1536]` (8.91 GiB)" in r.verdict and "`mesh2grid_gnn/concatenate`" in r.verdict
    # a step whose outputs are its updated state (about the parameters' size) is no rollout
    r = ask(client, "A100 40GB, why?", error_log=BUFFER_ASSIGNMENT_LOG)
    assert "times the parameters" not in r.verdict


def test_a_kernel_that_could_not_be_launched_is_memory_outside_the_pool_not_the_program_s_size(client):
    # (after google/brax#123: a PPO example on a 24 GB card, failing with one environment too)
    r = ask(client, "Brax PPO 在 RTX 3090 24G 上直接 OOM，num_envs 设成 1 照样炸，为啥？",
            error_log="RuntimeError: INTERNAL: Failed to launch CUDA kernel: fusion_29 with block dimensions: "
                      "128x1x1 and grid dimensions: 1x1x1: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
    assert r.language == "zh" and r.verdict.startswith("失败发生在启动 CUDA kernel 时")
    assert "tf.config.set_visible_devices([], 'GPU')" in r.verdict and "XLA_PYTHON_CLIENT_PREALLOCATE=false" in r.verdict
    assert not {"gpu-xprof-trace", "gpu-xprof-peak-ops", "gpu-memory-profile"} & set(ids(r))


def test_unified_memory_in_the_log_is_the_pool_that_ran_out_with_its_size_from_the_log_s_settings(client):
    # (after an AlphaFold thread: a 12 GB card, docker's unified memory at 4.0, the driver's own wording)
    r = ask(client, "Запускаю alphafold в докере на карте 12 GB, 128 GB RAM. Падает, хотя unified memory "
                    "включена. Что не так?",
            error_log="I0719 run_docker.py] TF_FORCE_UNIFIED_MEMORY=1 XLA_PYTHON_CLIENT_MEM_FRACTION=4.0\n"
                      "I0719 run_docker.py] E external/org_tensorflow/tensorflow/stream_executor/cuda/"
                      "cuda_driver.cc] CUDA error out of memory")
    assert r.language == "ru" and r.verdict.startswith("С включённой unified memory пул JAX")
    assert "4 × 12.00 GiB = 48.00 GiB" in r.answer  # the fraction read from the log's own settings
    # a log cut before its size is still an out-of-memory error
    r = ask(client, "what now?", error_log="jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of "
                                           "memory while trying to allocate")
    assert r.diagnosis is not None and r.diagnosis.category == "gpu_oom"


def test_the_newer_donation_warning_is_read_with_what_its_buffers_take(client):
    # (after an sglang-jax thread: JAX's newer wording, the buffers a server's batch metadata)
    r = ask(client, "is this warning the cause of my memory problem? how much memory is actually wasted?",
            error_log="UserWarning: Some donation buffers unavailable: int32[128], int32[128], int32[129], int32[129], "
                      "int32[40959], int32[128], int32[3].\nSee documentation: "
                      "https://docs.jax.dev/en/latest/faq.html#buffer-donation.")
    assert "integer arrays" in r.verdict and "162.52 KiB" in r.verdict and "cannot be what fills the memory" in r.verdict


def test_a_remat_warning_whose_peak_fits_the_pool_is_not_called_the_failure(client):
    # (after an AlphaFold-multimer thread on an A100 40GB: "can't reduce below 12.46GiB ... only to 21.28GiB")
    log = ("W external/xla/xla/service/hlo_rematerialization.cc:3005] Can't reduce memory use below 12.46GiB "
           "(13379584647 bytes) by rematerialization; only reduced to 21.28GiB (22848300023 bytes), down from "
           "21.58GiB (23170454683 bytes) originally")
    r = ask(client, "AlphaFold multimer on an A100 40GB keeps OOMing. does JAX only let me use 12 GB?", error_log=log)
    assert r.verdict.startswith("XLA's rematerialization pass aimed at 12.46 GiB and reached 21.28 GiB, which still fits")
    assert "30.00 GiB" in r.verdict and "MEM_FRACTION=.95" not in r.verdict
    # the warning is not the failure: no "ran out of memory" diagnosis line after that verdict
    assert "**Diagnosis:**" not in r.answer
    # with unified memory on, no advice to set a fraction of .95 that would shrink the pool
    r = ask(client, "AlphaFold3, TF_FORCE_UNIFIED_MEMORY=true and XLA_CLIENT_MEM_FRACTION=3.2: what do the numbers mean?",
            error_log=log)
    assert "MEM_FRACTION=.95" not in r.verdict


def _report_log(output: str, shares: str) -> str:
    return ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out "
            "of memory in memory space hbm. Used 41.09G of 30.75G hbm. Exceeded hbm capacity by 10.34G.\n\n"
            "Total hbm usage >= 41.59G:\n    reserved        512.00M \n    program          27.31G \n"
            f"    arguments        13.78G \n\nOutput size {output}; shares {shares} with arguments.\n")


def test_outputs_that_share_nothing_with_the_arguments_lead_with_donation_when_it_covers_the_overflow(client):
    r = ask(client, '"shares 0B with arguments" का क्या मतलब है?', error_log=_report_log("13.78G", "0B"))
    assert r.language == "hi" and r.verdict and "shares 0B with arguments" in r.verdict
    assert "13.78 GiB" in r.verdict and "10.34 GiB" in r.verdict
    assert ids(r)[0] in ("hbm-donation-measured", "hbm-donate")


def test_outputs_that_already_share_the_arguments_never_get_donate_argnums_as_news(client):
    r = ask(client, "what now?", error_log=_report_log("13.78G", "13.78G"))
    assert "hbm-donate" not in ids(r)
    assert not (r.verdict or "").startswith("Your outputs")


def test_donated_buffers_jax_could_not_use_are_the_verdict_not_a_call_to_donate(client):
    warning = ("UserWarning: Some donated buffers were not usable: ShapedArray(float32[4096,14336]), "
               "ShapedArray(float32[14336,4096]).\n")
    r = ask(client, "I donate the state with donate_argnums=(0,) but my step returns it cast to bf16, why no effect?",
            error_log=warning + _report_log("13.78G", "0B"))
    assert "did not reuse the buffers you donated" in r.verdict and "float32[4096,14336]" in r.verdict
    assert "Donating what the step replaces" not in r.verdict


def test_a_donated_batch_jax_could_not_use_is_said_harmless_and_the_largest_buffer_follows(client):
    # round 16 Q9's shape, in German and other figures: the warning names the int32 batch, the
    # overflow is the logits; "(0=state, 1=batch)" annotates the arguments, it is no smaller batch
    warning = ("UserWarning: Some donated buffers were not usable: ShapedArray(int32[16,2048]), "
               "ShapedArray(int32[16,2048]).\n")
    r = ask(client, "Ist die Donation das Problem? Ich habe schon donate_argnums=(0,1) am train_step (0=state, 1=batch).",
            error_log=warning + _largest_log("f32[16,2048,32000]", "lm_head/dot_general"))
    assert r.language == "de" and "int32[16,2048]" in r.verdict and "`donate_argnums=(0,)`" in r.verdict
    assert "`f32[16,2048,32000]`" in r.verdict and "32000" in r.verdict  # the logits, after the donation
    assert r.verdict.index("int32") < r.verdict.index("f32[16,2048,32000]")
    assert "batch" not in r.tried_items  # "1=batch" names an argument
    assert "Donation ist bereits aktiv" not in r.answer  # the verdict judged it: no general word on it


def test_outputs_too_small_to_cover_the_overflow_do_not_make_donation_the_verdict(client):
    r = ask(client, "what now?", error_log=_report_log("2.00G", "0B"))
    assert not (r.verdict or "").startswith("Your outputs")


def _largest_log(shape: str, op: str) -> str:
    return ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out "
            "of memory in memory space hbm. Used 22.41G of 15.75G hbm. Exceeded hbm capacity by 6.66G.\n\n"
            "Total hbm usage >= 22.91G:\n    reserved        512.00M \n    program          19.87G \n"
            "    arguments         2.54G \n\nOutput size 2.54G; shares 2.54G with arguments.\n\n"
            "  Largest program allocations in hbm:\n\n  1. Size: 8.00G\n"
            f'     Operator: op_type="exp" op_name="jit(train_step)/jit(main)/{op}"\n'
            f"     Shape: {shape}{{3,2,1,0:T(8,128)}}\n     Unpadded size: 8.00G\n     Allocation type: HLO temp\n"
            "     ==========================\n")


def test_a_sequence_by_sequence_buffer_is_named_attention_scores_with_its_sequence(client):
    r = ask(client, "what do i change first?", error_log=_largest_log("f32[2,16,8192,8192]", "attn/softmax/exp"))
    assert r.facts["largest_allocation_kind"] == "attention_scores" and r.facts["largest_allocation_seq"] == 8192
    assert r.verdict.startswith("The largest buffer, `f32[2,16,8192,8192]` (8.00 GiB)")
    # a TPU log: the Pallas kernels, not cuDNN's attention, which a TPU does not have
    assert "8192 × 8192" in r.verdict and "splash_attention" in r.verdict and "cudnn" not in r.verdict


def test_attention_scores_listed_again_in_another_dtype_are_added_up(client):
    one = _largest_log("f32[2,16,8192,8192]", "attn/softmax/exp")
    copy = ("\n  2. Size: 4.00G\n     Operator: op_type=\"convert\" op_name=\"jit(train_step)/jit(main)/attn/convert\"\n"
            "     Shape: bf16[2,16,8192,8192]{3,2,1,0:T(8,128)(2,1)}\n     Unpadded size: 4.00G\n"
            "     Allocation type: HLO temp\n     ==========================\n")
    r = ask(client, "what do i change first?", error_log=one + copy)
    assert r.facts["largest_dims_copies"] == 2 and "2 buffers of these dimensions, 12.00 GiB together" in r.verdict
    assert "buffers of these dimensions" not in ask(client, "what do i change first?", error_log=one).verdict


GPU_SCORES_LOG = (  # the shape of a ViT's GPU BufferAssignment report (jax-ml/jax#12575)
    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12884901888 bytes.\n"
    "BufferAssignment OOM Debugging.\nBufferAssignment stats:\n             parameter allocation:  330.21MiB\n"
    "     preallocated temp allocation:   19.87GiB\n                 total allocation:   20.84GiB\n"
    "Peak buffers:\n        Buffer 1:\n                Size: 12.00GiB\n                Operator: "
    'op_name="jit(train_step)/jit(main)/transpose(jvp(VisionTransformer))/Encoder/block_3/attn/softmax"\n'
    "                XLA Label: fusion\n                Shape: f32[64,12,2048,2048]\n"
    "                ==========================\n")


def test_attention_scores_on_a_gpu_get_cudnn_s_fused_attention_not_the_tpu_kernels(client):
    r = ask(client, "why 12GB for one tensor?", error_log=GPU_SCORES_LOG)
    assert r.facts["category"] == "gpu_oom" and r.facts["largest_allocation_kind"] == "attention_scores"
    assert 'implementation="cudnn"' in r.verdict and "splash" not in r.verdict and "TPU" not in r.verdict


def test_a_program_with_no_arguments_is_not_told_to_donate_them(client):
    r = ask(client, "what now?", error_log=_largest_log("f32[2,16,8192,8192]", "attn/softmax/exp").replace(
        "arguments         2.54G", "arguments            0B"))
    assert r.facts["argument_bytes"] == 0
    assert not {"hbm-donate", "hbm-donation-measured"} & set(ids(r))


def test_the_next_command_targets_the_generation_whose_hbm_the_log_reports(client):
    r = ask(client, "moved from v4-8 to v5e-16 and now it dies at compile time, what is eating the memory?",
            error_log=_largest_log("f32[2,16,8192,8192]", "attn/softmax/exp"))  # 15.75G: v5e
    commands = [s.command for s in r.next_steps]
    assert commands and all("--tpu v5e" in c for c in commands if "--tpu" in c), commands


def test_a_vocabulary_sized_buffer_is_named_the_logits(client):
    r = ask(client, "로그 좀 봐주세요", error_log=_largest_log("f32[8,1024,262144]", "lm_head/dot_general"))
    assert r.language == "ko" and r.facts["largest_allocation_kind"] == "vocab_logits"
    assert "262144" in r.verdict and "logits" in r.verdict


def test_an_ordinary_shape_names_no_kind(client):
    r = ask(client, "what now?", error_log=_largest_log("f32[4096,4096]", "mlp/dot_general"))
    assert "largest_allocation_kind" not in r.facts


# ------------------------------------------------------------------ a fragmented GPU pool (BFC stats)

BFC_STATS_LOG = (
    "W1104 10:01:02.000001   77 bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out of memory trying to "
    "allocate 6.00GiB (rounded to 6442450944)requested by op \n"
    "W1104 10:01:02.000101   77 bfc_allocator.cc:1129] Stats: \n"
    "Limit:                     29.66GiB\n"
    "InUse:                     22.90GiB\n"
    "MaxInUse:                  29.10GiB\n"
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
    "6442450944 bytes.")


def test_a_gpu_pool_with_enough_free_bytes_in_pieces_is_called_fragmented(client):
    r = ask(client, "Why does it fail when the stats say almost 7 GiB are free?", error_log=BFC_STATS_LOG)
    assert r.facts["pool_limit_bytes"] and r.facts["free_bytes"] > r.facts["requested_bytes"]
    assert r.verdict.startswith("JAX's pool had 6.76 GiB free (22.90 GiB in use of its 29.66 GiB limit)")
    assert "fragmented" in r.verdict and "XLA_PYTHON_CLIENT_MEM_FRACTION" in r.verdict
    assert "only 6.76 GiB is free" not in r.answer  # the diagnosis does not say "only" of enough bytes


def test_integer_inputs_in_the_donation_warning_are_named_as_the_batch(client):
    log = DONATION_LOG.replace("float32[185,16,16,3]", "bfloat16[64,2048]")
    r = ask(client, "Is my donation broken?", error_log=log)
    assert "integer arrays" in r.verdict and "donate_argnums=(0,)" in r.verdict
    assert "recognise" not in r.answer.lower() and "Diagnosis" not in r.answer


def test_a_tensorflow_error_from_someone_who_says_they_do_not_use_jax_is_declined(client):
    r = ask(client, "tf.keras で ResourceExhaustedError: OOM when allocating tensor with shape[64,256,256,128] "
                    "が出ます。JAXは使ってないです。どうすれば？")
    assert r.language == "ja" and not r.grounded and "TensorFlow" in r.answer
    assert ask(client, "my jax program prints OOM when allocating tensor, why?").grounded


def test_the_same_shape_listed_again_and_again_is_named_not_called_no_single_tensor(client):
    block = ("  {n}. Size: 2.50G\n     Operator: op_name=\"jit(step)/moe/{op}/einsum\"\n"
             "     Shape: f32[16,2048,64,320]{{3,2,1,0:T(8,128)}}\n     Unpadded size: 2.50G\n"
             "     Allocation type: HLO temp\n     ==========================\n\n")
    log = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out "
           "of memory in memory space hbm. Used 40.10G of 31.25G hbm. Exceeded hbm capacity by 8.85G.\n\n"
           "  Largest program allocations in hbm:\n\n"
           + "".join(block.format(n=n, op=op) for n, op in ((1, "dispatch"), (2, "combine"), (3, "dispatch"))))
    r = ask(client, "my MoE train step OOMs at compile, why?", error_log=log)
    assert r.verdict.startswith("The largest buffers are 3 copies of `f32[16,2048,64,320]`, 2.50 GiB each and "
                                "7.50 GiB together")
    assert "no single tensor" not in r.answer


def test_a_gpu_kernel_s_shared_memory_is_not_called_gpu_memory(client):
    r = ask(client, "my Pallas (Triton) kernel fails on an RTX 4090 with 24GB free, should I raise "
                    "XLA_PYTHON_CLIENT_MEM_FRACTION?",
            error_log="jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Shared memory size limit "
                      "exceeded: requested 196608, available: 101376")
    assert r.diagnosis.memory_space == "shared" and r.facts["requested_bytes"] == 196608
    assert r.verdict.startswith("This is the kernel's shared memory per thread block")
    assert "192.00 KiB" in r.verdict and "99.00 KiB" in r.verdict and "num_stages" in r.verdict
    assert "XProf" not in r.answer.split("### ")[0]


LOOP_LOG = (  # a diffusion sampler's scan stacking every step's latents (the shape of a public GPU report)
    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 75497472000 bytes.\n"
    "BufferAssignment OOM Debugging.\nBufferAssignment stats:\n             parameter allocation:  512.00MiB\n"
    "     preallocated temp allocation:   70.31GiB\n                 total allocation:   71.00GiB\n"
    "Peak buffers:\n        Buffer 1:\n                Size: 70.31GiB\n                Operator: "
    'op_name="jit(sample)/jit(main)/while/body/dynamic_update_slice"\n'
    "                XLA Label: fusion\n                Shape: f32[1000,96,3,256,256]\n"
    "                ==========================\n")


def test_a_buffer_filled_slice_by_slice_in_a_loop_is_named_the_loop_s_stacked_outputs(client):
    r = ask(client, "mon échantillonneur de diffusion plante sur H100 avec ça, pourquoi 70 Go ?", error_log=LOOP_LOG)
    assert r.language == "fr" and r.facts["largest_allocation_kind"] == "loop_outputs"
    assert r.facts["largest_allocation_steps"] == 1000
    assert r.verdict.startswith("Le plus gros tampon, `f32[1000,96,3,256,256]` (70.31 GiB)")
    assert "`ys`" in r.verdict and "None" in r.verdict
    assert "tenseur d'activations ou de logits" not in r.answer  # not the batch x sequence template


def test_a_stack_of_per_layer_buffers_under_grad_is_named_a_layer_scan_s_residuals(client):
    log = ("XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
           "hbm. Used 43.13G of 30.75G hbm. Exceeded hbm capacity by 12.38G.\n\nTotal hbm usage >= 44.38G:\n"
           "    reserved          1.25G\n    program          39.57G\n    arguments         3.56G\n\n"
           "  Largest program allocations in hbm:\n\n  1. Size: 12.00G\n     Operator: op_name=\"jit(train_step)/"
           "jit(main)/jvp(Transformer)/decoder/layers/while/body/mlp/wi_0/dot_general\"\n"
           "     Shape: bf16[24,16,2048,8192]{3,2,1,0:T(8,128)(2,1)}\n     Unpadded size: 12.00G\n"
           "     XLA label: dynamic-update-slice.44 = dynamic-update-slice(...)\n     Allocation type: HLO temp\n"
           "     ==========================\n")
    r = ask(client, "nn.scan으로 24 layer 쌓았는데 v4-8에서 compile할 때 OOM 나요. 맨 앞에 24 붙은 버퍼가 뭐예요?",
            error_log=log)
    assert r.language == "ko" and r.facts["largest_allocation_kind"] == "scan_residuals"
    assert r.facts["largest_allocation_steps"] == 24
    assert "nn.scan(nn.remat(Block)" in r.verdict and "24" in r.verdict


def test_an_error_quoted_inside_the_user_s_sentence_does_not_set_the_language():
    d = detect_prose_language("treinando LoRA do SDXL no PyTorch numa RTX 4090 e deu 'torch.OutOfMemoryError: CUDA out "
                              "of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of which "
                              "1.12 GiB is free.' como resolvo?")
    assert d.language == "pt"


def test_an_error_pasted_unquoted_into_a_german_sentence_leaves_the_sentence_s_language():
    d = detect_prose_language("Kurze Frage: HF Trainer mit PyTorch auf RTX 3090, beim Finetuning von Mistral-7B kommt "
                              "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
                              "23.69 GiB total capacity; 19.87 GiB already allocated; 1.51 GiB free). Hilft "
                              "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512?")
    assert d.language == "de"
    # an English question around the same error stays English
    assert detect_prose_language("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB "
                                 "total capacity). How do I fix this?").language == "en"


def test_a_log_s_error_category_decides_which_guides_cards_are_shown(client):
    r = ask(client, "why 12GB for one tensor?", error_log=GPU_SCORES_LOG)
    cards = [line for line in r.answer.splitlines() if line.startswith("**") and "[`" in line]
    assert not any("e1000-compile-hbm-oom" in line for line in cards), cards  # a TPU compile guide, not a GPU OOM's


def test_the_sentences_of_a_pasted_error_that_carry_its_sizes_are_the_error_s_not_the_user_s():
    d = detect_prose_language("Entrenando con PyTorch en una RTX 3090 me sale: torch.OutOfMemoryError: CUDA out of "
                              "memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.69 GiB of which "
                              "1.12 GiB is free. Including non-PyTorch memory, this process has 22.57 GiB memory in "
                              "use. ¿qué hago?")
    assert d.language == "es"


# A data-parallel step on 8 chips whose per-device buffers still carry the global batch of 32
# (the shape of logs in threads where a batch was put with P(), i.e. replicated).
REPLICATED_BATCH_LOG = """\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 19.39G of 15.75G hbm. Exceeded hbm capacity by 3.64G.

Total hbm usage >= 19.89G:
    reserved        512.00M
    program          17.39G
    arguments         2.00G

  Largest program allocations in hbm:

  1. Size: 3.50G
     Operator: op_name="jit(train_step)/jit(main)/jvp(Model)/mlp/up/dot_general" source_file="/srv/train/model.py" source_line=88
     Shape: bf16[32,4096,14336]{2,1,0:T(8,128)(2,1)}
     Unpadded size: 3.50G
     Allocation type: HLO temp
     ==========================
"""


def test_a_per_device_buffer_holding_the_whole_stated_batch_says_the_batch_is_replicated(client):
    r = ask(client, "data parallel over 8 chips on a v5e-8, global batch 32, seq 4096. why OOM?",
            REPLICATED_BATCH_LOG)
    assert r.facts["batch_named"] == 32 and r.facts["largest_holds_whole_batch"] is True
    assert r.verdict.startswith("The largest buffer, `bf16[32,4096,14336]`") and "replicated" in r.verdict
    assert "P('data')" in r.verdict
    assert "hbm-batch-size" not in [x.id for x in r.remedies]  # a smaller batch is not the fix
    # in German too, with the figures kept
    de = ask(client, "Datenparallel auf 8 Chips (v5e-8), globale batch 32 — warum OOM?", REPLICATED_BATCH_LOG)
    assert de.language == "de" and "repliziert" in de.verdict and "32" in de.verdict


def test_a_batch_said_per_device_or_already_split_is_not_called_replicated(client):
    per_device = ask(client, "8 chips, batch 32 per device, why OOM?", REPLICATED_BATCH_LOG)
    assert "largest_holds_whole_batch" not in per_device.facts
    one_device = ask(client, "batch 32 on one chip, why OOM?", REPLICATED_BATCH_LOG)
    assert "largest_holds_whole_batch" not in one_device.facts
    split = ask(client, "8 chips, global batch 256, why OOM?", REPLICATED_BATCH_LOG)
    assert "largest_holds_whole_batch" not in split.facts and "replicated" not in (split.verdict or "")
    # each device's batch said before the word batch, in Arabic and English
    each = ask(client, "درّبت على TPU v5e-8 بشكل data parallel، كل جهاز عليه batch 32 و seq 4096، ليش OOM؟",
               REPLICATED_BATCH_LOG)
    assert each.facts["batch_per_device_named"] == 32 and "largest_holds_whole_batch" not in each.facts
    each_en = ask(client, "v5e-8 data parallel, each chip gets a batch of 32, why OOM?", REPLICATED_BATCH_LOG)
    assert "largest_holds_whole_batch" not in each_en.facts


# jax.hessian of a pairwise energy over 1000 particles (x: f32[1000,3]): forward mode over reverse
# pushes 3000 tangents through the [1000,1000,3] pairwise term
HESSIAN_LOG = """\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 36000000000 bytes.
BufferAssignment OOM Debugging.
BufferAssignment stats:
             parameter allocation:   11.72KiB
              constant allocation:         4B
        maybe_live_out allocation:   34.33MiB
     preallocated temp allocation:   33.56GiB
                 total allocation:   33.59GiB
              total fragmentation:   11.44MiB (0.03%)
Peak buffers:
        Buffer 1:
                Size: 33.53GiB
                Operator: op_name="jit(energy)/jit(main)/jvp(transpose(jvp(energy)))/mul" source_file="/work/md/hess.py" source_line=17
                XLA Label: fusion
                Shape: f32[3000,1000,1000,3]
                ==========================
"""


def test_a_hessian_s_tangent_batch_is_named_with_its_count_and_hessian_vector_products(client):
    r = ask(client, "jax.hessian of my energy function OOMs on an A100 40GB, the hessian itself is tiny. why?",
            HESSIAN_LOG)
    assert r.facts["largest_allocation_kind"] == "forward_tangents"
    assert "`jax.hessian`" in r.verdict and "3000" in r.verdict and "jax.jvp(jax.grad(f)" in r.verdict
    ko = ask(client, "jax.hessian 돌리면 OOM 나요. 왜 그렇죠?", HESSIAN_LOG)
    assert ko.language == "ko" and "탄젠트" in ko.verdict


def test_a_kernel_s_shared_memory_error_gets_the_blocks_that_fit_and_no_leak_profiling_step(client):
    r = ask(client, "Pallas Triton matmul, bf16, bm=bn=128, K entier dans un bloc. Quels block_k et num_stages ?",
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Shared memory size limit exceeded: "
            "requested 2097152, available: 101376")
    assert r.language == "fr"
    assert "`block_k=64` avec `num_stages=3` prend 96.00 KiB" in r.answer
    assert not {s.tool for s in r.next_steps} & {"profile", "run"}


def test_a_log_with_its_own_sizes_gets_no_unasked_estimate_of_the_model_s_training_state(client):
    q = "training a 2B model with adamw, FSDP over a v5e-8, it OOMs at compile"
    with_log = ask(client, q, REPLICATED_BATCH_LOG)
    assert "training_state" not in [f.subject for f in with_log.figures]
    asked = ask(client, q + ". how much memory does the training state take per chip?", REPLICATED_BATCH_LOG)
    assert "training_state" in [f.subject for f in asked.figures]
    without_log = ask(client, q + ". how much memory does the training state take per chip?")
    assert "training_state" in [f.subject for f in without_log.figures]


def test_a_donation_warning_cut_short_by_the_asker_names_only_the_shapes_it_lists(client):
    r = ask(client, "donated my state but: UserWarning: Some donated buffers were not usable: "
                    "ShapedArray(float32[32000,4096]), ShapedArray(float32[4096,11008]), ... my model is 7B, why?")
    assert r.facts["donation_unusable"] == "ShapedArray(float32[32000,4096]), ShapedArray(float32[4096,11008])"


def test_the_cpu_client_s_wording_beside_a_gpu_named_is_the_gpu_s_memory(client):
    # "Out of memory allocating N bytes" is how XLA's CPU client words it; the asker runs on an A10G
    r = ask(client, "jax.vmap over 50000 indices on my A10G 24GB fails: RESOURCE_EXHAUSTED: Out of memory "
                    "allocating 10000000000 bytes. why so much?")
    assert r.diagnosis.category == "gpu_oom" and r.facts.get("requested_bytes") == 10_000_000_000
    assert "CPU RAM" not in r.answer and "(RAM)" not in r.answer
    # without a device named it stays the host's
    r = ask(client, "RESOURCE_EXHAUSTED: Out of memory allocating 10000000000 bytes. why so much?")
    assert r.diagnosis.category == "host_oom"


GATHER_LOG = ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
              "memory space hbm. Used 9.50G of 7.48G hbm. Exceeded hbm capacity by 2.02G.\n\nTotal hbm usage >= 9.75G:\n"
              "    reserved        256.00M\n    program           8.00G\n    arguments         1.50G\n\n"
              "Output size 8.00G; shares 0B with arguments.\n")


def test_outputs_many_times_the_arguments_are_not_read_as_missing_donation(client):
    # an all-gather's output is 5x its input: donating the 1.50G of arguments cannot hold 8.00G
    r = ask(client, "process_allgather of my params OOMs on v2-8", error_log=GATHER_LOG)
    assert r.facts["output_argument_ratio"] > 5
    assert "donat" not in (r.verdict or "").lower()
    assert "hbm-donation-measured" not in ids(r)


# ------------------------------------------------------------------ the arguments read per parameter

# EasyDeL#166's shape: a 6.74B model on a v4-32, FSDP over its 16 chips; the arguments are the
# f32 weights and Adam's moments (12 B per parameter) divided by 16
FSDP_WORKS_LOG = """\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 41.37G of 30.75G hbm. Exceeded hbm capacity by 10.62G.

Total hbm usage >= 42.62G:
    reserved          1.25G
    program          36.66G
    arguments         4.71G
"""


def test_arguments_that_are_the_state_divided_by_the_chips_say_fsdp_works(client):
    r = ask(client, "6.74B param model on a v4-32 with FSDP, remat on every layer and sharded params. "
                    "I thought FSDP shards everything, where do the 36G come from?", error_log=FSDP_WORKS_LOG)
    assert r.facts["devices_named"] == 16  # a v4-32 is 16 chips, one JAX device each
    assert r.facts["state_bytes_per_param"] == 12.0
    assert r.verdict and "FSDP works" in r.verdict and "36.66 GiB" in r.verdict
    assert "hbm-check-sharding" not in ids(r)
    assert "visualize_array_sharding" not in r.answer  # the general word on sharding already tried


@pytest.mark.parametrize("question, language, word", [
    ("3B model, fp32 weights + Adam, v6e-8. compile OOM: \"Used 35.80G of 31.25G hbm. Exceeded hbm capacity "
     "by 4.55G\", program 2.27G, arguments 33.53G. batch is already 1 per chip, what am I missing?", "en", "replicated"),
    ("Modelo de 3B en una v6e-8 con Adam, ya bajé el batch a 1 y sigue: \"Used 35.80G of 31.25G hbm. Exceeded "
     "hbm capacity by 4.55G\", program 2.27G, arguments 33.53G. ¿Qué se me escapa?", "es", "replicado"),
])
def test_arguments_that_are_the_whole_state_on_each_chip_say_replicated(client, question, language, word):
    r = ask(client, question)
    assert r.language == language and r.facts["category"] == "compile_hbm_oom"
    assert r.facts["devices_named"] == 8 and r.facts["argument_bytes_per_param"] == 12.0
    assert r.verdict and word in r.verdict and "3B" in r.verdict
    assert format_bytes(-(-r.facts["argument_bytes"] // 8)) in r.verdict  # what each chip would hold sharded
    assert "hbm-batch-size" not in ids(r)


def test_chips_said_outright_win_over_the_slice_name(assistant):
    rules = load_rules()
    assert rules.read_count_facts({}, "v4-32, FSDP over all 16 chips")["devices_named"] == 16
    assert rules.read_count_facts({}, "on a v5p-64")["devices_named"] == 32
    assert rules.read_count_facts({}, "on a v5e-8")["devices_named"] == 8


def test_memory_stats_quoted_with_a_gpu_error_say_fragmented_and_not_that_the_pool_is_full(client):
    r = ask(client, "RTX 4090 with JAX: \"RESOURCE_EXHAUSTED: Out of memory while trying to allocate 3.00GiB\" but "
                    "memory_stats() just before says bytes_in_use 10.2 GiB, bytes_limit 17.99 GiB, "
                    "largest_free_block_bytes 2.1 GiB. which setting should I change?")
    assert r.verdict and "fragmented" in r.verdict and "7.79 GiB" in r.verdict
    assert "pool is full" not in r.answer


DONATED_BATCH_LOG = """\
UserWarning: Some donated buffers were not usable: ShapedArray(int32[32,1024]), ShapedArray(int32[32,1024]).
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 18.10G of 15.75G hbm. Exceeded hbm capacity by 2.35G.

Total hbm usage >= 18.35G:
    reserved        256.00M
    program          10.10G
    arguments         8.00G

Output size 8.00G; shares 0B with arguments.
"""


def test_a_donation_that_went_to_the_batch_says_so_and_names_the_state_s_argnum(client):
    r = ask(client, "jit(train_step, donate_argnums=(1,)) with train_step(state, batch), still OOM. donation is on?",
            error_log=DONATED_BATCH_LOG)
    assert r.verdict and "your batch" in r.verdict and "`donate_argnums=(0,)`" in r.verdict
    assert "8.00 GiB" in r.verdict and "2.35 GiB" in r.verdict
    assert not {"hbm-batch-size", "hbm-padding"} & set(ids(r))


def test_a_slice_name_followed_by_a_korean_particle_still_counts_its_devices():
    from oomkb.kb.evidence_rules import load_rules

    rules = load_rules()
    facts = {"argument_bytes": 10 << 30}
    assert rules.read_count_facts(facts, "TPU v3-8이면 HBM 128GB라고 알고 있는데")["devices_named"] == 8
    assert rules.read_count_facts(facts, "v4-32で学習")["devices_named"] == 16
    assert "devices_named" not in rules.read_count_facts(facts, "v5e-8x8 mesh")


def test_the_stream_executors_failed_request_on_a_tpu_slice_named_is_the_tpus(client):
    # tuning_i Q13: an old TPU runtime words its runtime OOM like a GPU's; the asker names a v3-8
    log = ("E external/org_tensorflow/tensorflow/compiler/xla/pjrt/pjrt_stream_executor_client.cc:2153] Execution of "
           "replica 0 failed: RESOURCE_EXHAUSTED: Failed to allocate request for 625.00MiB (655360000B) on device "
           "ordinal 7")
    r = ask(client, "llama-13b fp32 adamw on a TPU v3-8, fsdp over the 8 cores, dies while sharding the train state",
            error_log=log)
    assert r.facts["category"] == "runtime_allocation" and r.facts["backend"] == "tpu"
    assert "GPU" not in r.answer.split("###")[0] and "XLA_PYTHON_CLIENT" not in r.answer
    # the same log from an A100 stays a GPU's
    g = ask(client, "training on an A100 40GB, this happens", error_log=log)
    assert g.facts["category"] == "gpu_oom"


def test_tensorflows_tpuestimator_printing_xlas_wording_is_declined_and_a_jax_library_beside_pytorch_is_not(client):
    # tuning_i Q11: TensorFlow 1.15's TPUEstimator prints XLA's "Ran out of memory in memory space hbm"
    r = ask(client, "ALBERT xlarge on RACE with TensorFlow 1.15 and TPUEstimator on a v2-8: Compilation failure: Ran "
                    "out of memory in memory space hbm. Used 12.34G of 8.00G hbm. Do I need a v3-8?")
    assert not r.grounded and "TensorFlow" in r.answer and "donate_argnums" not in r.answer
    # tuning_i Q17: a PyTorch checkpoint converted to Paxml on a TPU is a JAX question, its count read
    p = ask(client, "converting the PyTorch GPT-J 6B checkpoint to Paxml on a TPU v3-8 OOMs. With a mesh [1, 1, 8] "
                    "how much per core for the fp32 weights? (GPT-J = 6 053 381 344 parameters)")
    assert p.grounded and "22.55 GiB" in p.answer and "2.82 GiB" in p.answer and "6.05B" in p.answer


# a GPU program with no temporaries whose arrays are the failed size: a weight loaded or converted
WEIGHT_LOAD_LOG = (
    "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes.\n"
    "BufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
    "             parameter allocation:    1.00GiB\n              constant allocation:         0B\n"
    "        maybe_live_out allocation:    1.00GiB\n     preallocated temp allocation:         0B\n"
    "                 total allocation:    2.00GiB\nPeak buffers:\n    Buffer 1:\n        Size: 1.00GiB\n"
    "        Entry Parameter Subshape: f32[16384,16384]\n")


def test_a_gpu_program_without_temporaries_is_a_weight_loaded_not_activations(client):
    r = ask(client, "Loading my checkpoint on 4 GPUs of 24GB each, that should be 96GB, but it dies while "
                    "loading the params. Why?", WEIGHT_LOAD_LOG)
    first = r.answer.split("\n\n")[0]
    assert "no temporaries" in first and "1.00 GiB" in first and "a smaller batch cannot help" in first
    assert "first GPU" in first
    # four cards of 24 GB are not one of 96 GB: no share of a "96 GB GPU" anywhere
    assert "96.00 GiB GPU" not in r.answer and "96 GB GPU" not in r.answer
    r = ask(client, "bhai 2 GPU matlab 30GB hona chahiye na, load karte hi OOM aa gaya", WEIGHT_LOAD_LOG)
    assert "30.00 GiB" not in r.answer


# a TPU compile log that gives the program's size but no capacity ("of 7.48G" is missing)
NO_CAPACITY_LOG = (
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error.\n"
    "Total hbm usage >= 6.20G:\n    reserved        530.00M\n    program           5.68G\n    arguments            0B\n\n"
    "Output size 0B; shares 0B with arguments.\n\nProgram hbm requirement 5.68G:\n    global           241.0K\n"
    "    scoped            9.56M\n    HLO temp          5.67G (100.0% utilization: Unpadded (5.64G) Padded (5.64G), "
    "0.4% fragmentation (36.60M))\n")


def test_a_log_without_capacity_is_set_against_the_tpu_the_question_names(client):
    # on a v2 core (7.48 GiB usable) 5.68 GiB fits; on... the question names a v2-8 whose core has 7.48 GiB
    r = ask(client, "dies at the first step on a TPU v2-8, how much am I over?", NO_CAPACITY_LOG.replace(
        "6.20G", "9.50G").replace("5.68G", "8.98G").replace("5.67G", "8.97G"))
    # program 8.98 GiB against the v2 core's 7.48 GiB: 1.50 GiB over (not the 9.50 GiB total with reserved)
    assert "needs 8.98 GiB of HBM but only 7.48 GiB is available: 1.50 GiB too much" in r.answer
    # no TPU named: nothing is assumed
    r = ask(client, "dies at the first step, how much am I over?", NO_CAPACITY_LOG)
    assert "too much" not in r.answer


def test_keeping_a_batch_of_one_per_device_is_not_answered_with_microbatches(client):
    # v4-256 is 128 chips: a global batch of 128 is one sequence on each
    r = ask(client, "80 layers, d_model 8192, seq 2048 on a v4-256, global batch 128, remat per layer. Compile OOM by "
                    "1.8G: how do I get rid of it without changing the batch?")
    assert "one sample per device" in r.answer and "MultiSteps" not in r.answer
    assert "nothing_saveable" in r.answer
    # eight per device: microbatches are the way to keep it
    r = ask(client, "seq 2048 on a v4-8, global batch 32, compile OOM: how do I fix it without reducing the batch?")
    assert "MultiSteps" in r.answer and "one sample per device" not in r.answer


def test_two_slices_compared_beside_a_log_say_which_one_the_program_fits(client):
    r = ask(client, "on a v2-8 it dies at the first step. v2-8 and v3-8 are the same memory, right? switching is "
                    "pointless?", NO_CAPACITY_LOG.replace("6.20G", "9.50G").replace("5.68G", "8.98G")
            .replace("5.67G", "8.97G"))
    v2 = next(line for line in r.answer.splitlines() if line.startswith("**v2-8:**"))
    v3 = next(line for line in r.answer.splitlines() if line.startswith("**v3-8:**"))
    assert "8.98 GiB per device, is 1.50 GiB over here" in v2
    assert "fits here with 6.50 GiB to spare" in v3


SMALL_REQUEST_LOG = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
                     "allocate 535484416 bytes.")


def test_a_small_failed_request_on_a_full_pool_is_the_last_straw_not_a_big_buffer(client):
    # an RTX A6000 named by its model (48 GB), XLA_PYTHON_CLIENT_MEM_FRACTION=.9: a 43.20 GiB pool
    r = ask(client, "Full fine-tune on an RTX A6000 with XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 dies with this. "
                    "Fragmentation?", SMALL_REQUEST_LOG)
    first = r.answer.split("\n\n")[0]
    assert "510.68 MiB" in first and "1.0%" in first and "43.20 GiB" in first and "jax.live_arrays()" in first
    assert "temporaries" not in first
    # a fraction set and no card known: a larger fraction cannot help, not "at most the last 25%"
    r = ask(client, "with XLA_PYTHON_CLIENT_MEM_FRACTION=.95 set it still fails", SMALL_REQUEST_LOG)
    assert "95%" in r.answer.split("\n\n")[0] and "25%" not in r.answer.split("\n\n")[0]


def test_devices_times_their_memory_added_up_gets_the_slice_per_device_against_the_log(client):
    r = ask(client, "Auf einer Colab TPU v2-8 kommt das hier. Die TPU hat doch 8 Kerne à 8 GB, also 64 GB?",
            "RuntimeError: Resource exhausted: Ran out of memory in memory space hbm. Used 18.74G of 8.00G hbm. "
            "Exceeded hbm capacity by 10.74G.")
    line = next(x for x in r.answer.splitlines() if x.startswith("**v2-8:**"))
    assert "kein gemeinsamer Pool" in line and "18.74 GiB pro Gerät, liegt hier 10.74 GiB darüber" in line


def test_a_device_buffer_error_while_weights_load_is_about_loading_them_sharded_not_the_batch(client):
    r = ask(client, "loading gemma with keras_nlp on a TPU v3-8, the VM has 330GB of RAM so why only 2.30G free??",
            ">>> keras_nlp.models.GemmaCausalLM.from_preset(\"hf://google/gemma-2-9b-it\")\nXlaRuntimeError: "
            "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 4.39G. That was not possible. "
            "There are 2.30G free.; (0x0x0_HBM0)")
    first = r.answer.split("\n\n")[0]
    assert "while the weights are loaded" in first and "host's RAM does not count" in first
    assert "batch" not in first and "rt-batch-size" not in ids(r)


def test_a_memory_fraction_proposed_in_the_question_is_not_read_as_set(client):
    log = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 92203078656 bytes."
    r = ask(client, "GraphCast sur une Tesla V100 32 Go. C'est quoi ce 23.81GiB ? Si je mets "
                    "XLA_PYTHON_CLIENT_MEM_FRACTION=.95 ça passe ?", log)
    first = r.answer.split("\n\n")[0]
    assert "votre `XLA_PYTHON_CLIENT_MEM_FRACTION`" not in first and "75%" in first
    r = ask(client, "XLA_PYTHON_CLIENT_MEM_FRACTION=.95 is set and it still fails on my V100 32GB", log)
    assert "95%" in r.answer.split("\n\n")[0]


def test_a_small_failed_request_without_the_card_known_is_still_the_last_straw(client):
    r = ask(client, "grad through a long simulation runs out of memory", "RESOURCE_EXHAUSTED: Out of memory while "
            "trying to allocate 131072 bytes.")
    first = r.answer.split("\n\n")[0]
    assert "128.00 KiB, is small" in first and "single buffer this large" not in r.answer


def test_a_gpu_program_without_temporaries_and_no_loading_said_is_one_array_in_one_out(client):
    log = WEIGHT_LOAD_LOG.replace("Entry Parameter Subshape: f32[16384,16384]", "Entry Parameter Subshape: f64[8192,16384]")
    r = ask(client, "Running an optimal transport solver on the GPU with x64 on, it blows up like this. Bigger GPU?", log)
    first = r.answer.split("\n\n")[0]
    assert "one whole array in and one out" in first and "float32 instead of float64" in first
    assert "weights" not in first


def test_a_small_failed_request_on_cards_named_each_is_the_last_straw_or_another_process(client):
    # "2 GPUs (24 GB each)": one card's memory, not the two together; 272 MiB is 1.1% of it
    log = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 285212672 bytes."
    r = ask(client, "zwei lokale GPUs mit jeweils 24 GB, das Training stürzt sofort ab, dabei sind 272 MB doch nichts?", log)
    assert r.language == "de" and r.verdict and "1.1%" in r.verdict and "24.00 GiB" in r.verdict, r.verdict
    assert "nvidia-smi" in r.verdict  # or another process holds the card


def test_jax_fallen_back_to_the_cpu_is_said_before_any_memory_setting(client):
    log = ("WARNING:jax._src.xla_bridge:An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib "
           "is not installed. Falling back to cpu.\nstep 1\nKilled")
    r = ask(client, "mi entrenamiento en la A100 muere tras unos pasos y nvidia-smi casi no muestra uso, ¿por qué?", log)
    assert r.language == "es" and r.verdict and "CPU" in r.verdict and "jax[cuda12]" in r.verdict, r.verdict
    tpu = ask(client, "", "I0106 xla_bridge.py:355] Unable to initialize backend 'tpu': INTERNAL: Failed to open "
                          "libtpu.so\nMemoryError: std::bad_alloc")
    assert tpu.verdict and "jax[tpu]" in tpu.verdict
    # the old TPU Node driver missing on a TPU VM is normal: no such verdict
    old = ask(client, "", "I0106 xla_bridge.py:355] Unable to initialize backend 'tpu_driver': NOT_FOUND: Unable "
                          "to find driver in registry\nMemoryError: std::bad_alloc")
    assert not (old.verdict and "jax[tpu]" in old.verdict)


def test_a_cpu_run_on_purpose_and_backends_probed_on_a_gpu_are_not_a_fall_back(client):
    # (round 63: "sem jit, jax 0.3.1 na CPU" with JAX's "No GPU/TPU found" warning, and a CUDA unified-memory
    # failure after JAX's probes of 'tpu' and 'rocm', were both told to install the accelerator's build)
    cpu = ask(client, "rodando jax.scipy.sparse.linalg.cg num while True, sem jit, jax 0.3.1 na CPU: a RSS só sobe. "
                      "o que tá segurando essa memória?",
              "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)")
    assert cpu.language == "pt" and "jax[cuda12]" not in cpu.answer and "jax[tpu]" not in cpu.answer, cpu.answer[:400]
    gpu = ask(client, "在一张 8GB 显存的卡上跑 AlphaPulldown，一启动就报下面这个。这 17178951680 字节是哪来的？",
              "I0514 xla_bridge.py:353] Unable to initialize backend 'rocm': NOT_FOUND: Could not find registered "
              "platform with name: \"rocm\". Available platform names are: CUDA Interpreter Host\nI0514 xla_bridge.py:353] "
              "Unable to initialize backend 'tpu': module 'jaxlib.xla_extension' has no attribute 'get_tpu_client'\n"
              "2023-05-14 12:24:49.060530: E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/cuda/"
              "cuda_driver.cc:767] failed to alloc 17178951680 bytes unified memory; result: CUDA_ERROR_OUT_OF_MEMORY")
    assert gpu.language == "zh" and "jax[tpu]" not in gpu.answer and "jax[cuda12]" not in (gpu.verdict or ""), \
        gpu.answer[:400]


def test_the_largest_buffer_a_copy_of_an_argument_says_the_weights_are_there_twice_and_the_layout_fix(client):
    log = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.20G of "
           "15.75G hbm. Exceeded hbm capacity by 1.45G.\n\nTotal hbm usage >= 17.45G:\n    reserved        "
           "258.00M\n    program           5.10G\n    arguments        12.09G\n\n  Largest program allocations in "
           "hbm:\n\n  1. Size: 1.00G\n     Operator: op_name=\"params['decoder']['mlp']['wi']['kernel']\"\n     "
           "Shape: bf16[32,4096,4096]{1,2,0:T(8,128)(2,1)}\n     Unpadded size: 1.00G\n     XLA label: copy.88 = "
           "copy(param.3), sharding={devices=[1,1,8]<=[8]}\n     Allocation type: HLO temp")
    r = ask(client, "Warum braucht das Programm 5 GB Temporäre, wenn die Gewichte doch schon Argumente sind?", log)
    assert r.language == "de" and r.verdict and "Kopie Ihres eigenen Arguments" in r.verdict, r.verdict
    assert "Format(Layout.AUTO" in r.verdict and "5.10 GiB" in r.verdict
    # an op that is an operation, not an argument, is no such copy
    other = ask(client, "", log.replace("params['decoder']['mlp']['wi']['kernel']", "jit(step)/transpose"))
    assert not (other.verdict and "Format(Layout.AUTO" in other.verdict)


def test_a_grid_said_as_a_power_against_a_log_s_use_per_device_counts_whole_copies(client):
    # "2048^3" is a [2048, 2048, 2048] grid: 32.00 GiB in float32, 2.00 GiB per device split over 16;
    # the log's 96.00G per device is 3 whole copies
    log = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 96.00G of "
           "95.74G hbm. Exceeded hbm capacity by 264.00M.")
    r = ask(client, "Simulação de onda 2048^3 num v5p-32 (16 dispositivos), campos com NamedSharding sobre os 16. "
                    "De onde vêm os 96G por chip?", log)
    line = next(f for f in r.figures if f.subject == "tensor_log_copies")
    assert "[2048, 2048, 2048]" in line.text and "32.00 GiB" in line.text and "3 cópias inteiras" in line.text, line.text
    assert "2.00 GiB" in line.text and "jax.make_array_from_callback" in line.text


def test_a_constant_that_failed_to_load_is_an_array_read_from_a_closure_not_a_temporary(client):
    log = "jax.errors.JaxRuntimeError: INTERNAL: Failed to allocate 2147483648 bytes for new constant"
    r = ask(client, "Il crashe au premier appel de ma fonction jit, juste après avoir chargé le dataset, pourquoi ?", log)
    assert r.grounded and r.language == "fr" and r.verdict and "2.00 GiB" in r.verdict, r.answer[:400]
    assert "constante du programme compilé" in r.verdict and "\n1. " not in r.answer  # no generic steps
    assert "def sample(buffer, key" in r.answer  # the closure's short answer, with its code
    # loaded outside JAX's pool: leaving room outside it lets it load, the argument is the fix
    assert "hors du pool de JAX" in r.verdict and "XLA_PYTHON_CLIENT_PREALLOCATE=false" in r.verdict


def test_unified_memory_the_driver_refuses_is_a_setting_the_machine_does_not_allow_not_the_program(client):
    log = ("E external/xla/xla/stream_executor/cuda/cuda_driver.cc:767] failed to alloc 68719476736 bytes unified "
           "memory; result: CUDA_ERROR_INVALID_VALUE: invalid argument\nE external/xla/xla/stream_executor/cuda/"
           "cuda_driver.cc:767] failed to alloc 61847529062 bytes unified memory; result: CUDA_ERROR_INVALID_VALUE: "
           "invalid argument")
    r = ask(client, "Unter WSL2 startet ColabFold gar nicht erst, nur diese Zeilen. Reicht der Speicher meiner 16-GB-Karte "
                    "nicht?", log)
    assert r.language == "de" and r.verdict and "64.00 GiB" in r.verdict and "--disable-unified-memory" in r.verdict
    assert "\n1. " not in r.answer  # no memory remedies after it


def test_a_transfer_guard_stopping_a_copy_is_not_memory(client):
    log = ("jax.errors.JaxRuntimeError: INVALID_ARGUMENT: Disallowed host-to-device transfer: "
           "aval=ShapedArray(int32[4096,16]), dst_sharding=GSPMDSharding({replicated})")
    r = ask(client, "Mi entorno de RL en GPU falla así al hacer reset. ¿Es falta de memoria? ¿Lo paso a CPU?", log)
    assert r.language == "es" and r.verdict and "`ShapedArray(int32[4096,16])`" in r.verdict, r.verdict
    assert "jax.transfer_guard" in r.verdict and "jax.device_put(x)" in r.verdict and "\n1. " not in r.answer


def test_a_tpu_program_s_host_buffers_are_offloaded_ones_stacked_over_the_layers(client):
    log = ("E0110 09:12:44.101010    2231 compiler_base.cc:2121] Program host requirement 40.00G:\nE0110 09:12:44.101010    2231 compiler_base.cc:2121]     HLO temp"
           "        40.00G (100.0% utilization: Unpadded (40.00G) Padded (40.00G), 0.0% fragmentation (0B))\nE0110 "
           "compiler_base.cc:2121]   Largest program allocations in host:\nE0110 09:12:44.101010    2231 compiler_base.cc:2121]   1. Size: "
           "20.00G\nE0110 09:12:44.101010    2231 compiler_base.cc:2121]      Shape: bf16[80,4,4096,8192]{3,2,1,0:T(8,128)(2,1)S(5)}\nE0110 "
           "compiler_base.cc:2121]      Unpadded size: 20.00G\nE0110 09:12:44.101010    2231 compiler_base.cc:2121]      XLA label: "
           "custom-call.7 = custom-call(), custom_call_target=\"AllocateBuffer\"\nE0110 09:12:44.101010    2231 compiler_base.cc:2121]      "
           "Allocation type: HLO temp")
    r = ask(client, "Warum braucht mein Programm auf dem TPU-Pod 40 GB Host-Speicher beim Kompilieren?", log)
    assert r.language == "de" and r.verdict and "`bf16[80,4,4096,8192]`" in r.verdict and "40.00 GiB" in r.verdict
    assert "`S(5)`" in r.verdict and "pinned_host" in r.verdict, r.verdict


def test_a_tpu_held_by_another_process_is_not_memory_and_says_how_to_split_the_chips(client):
    log = ("RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid "
           "40123. Not attempting to load libtpu.so in this process.")
    r = ask(client, "두 번째 평가 스크립트를 같은 TPU VM에서 띄우면 바로 죽습니다. HBM이 모자란 건가요? 배치를 줄여야 하나요?", log)
    assert r.language == "ko" and r.verdict and "40123" in r.verdict and "TPU_VISIBLE_CHIPS" in r.verdict, r.verdict
    assert "jax[tpu]" not in r.verdict  # (not a missing TPU build)
    assert "\n1. " not in r.answer  # no memory remedy steps after it


def test_an_empty_pool_in_a_ray_actor_is_the_card_taken_by_other_processes_not_the_model(client):
    # "<allocator contains no memory>": this process reserved nothing; a small request is not the model's size
    log = ("(Worker pid=5121) 2024-03-02 10:01:06.985303: W external/xla/xla/tsl/framework/bfc_allocator.cc:479] Allocator "
           "(GPU_0_bfc) ran out of memory trying to allocate 48.0KiB (rounded to 49152)requested by op \n"
           "(Worker pid=5121) 2024-03-02 10:01:06.985476: W external/xla/xla/tsl/framework/bfc_allocator.cc:491] "
           "<allocator contains no memory>\n(Worker pid=5121) Exception raised in creation task: The actor died because "
           "of an error raised in its creation task, ray::Worker.__init__() (pid=5121)")
    r = ask(client, "pourquoi mes 3 workers ray meurent au chargement des poids alors que le premier démarre bien ?", log)
    assert r.language == "fr" and r.verdict and "48.00 KiB" in r.verdict and "num_gpus=1" in r.verdict, r.verdict
    assert "\n1. " not in r.answer  # no remedy steps (batch, remat) after it
    # without Ray: the same reading, with the processes named generally
    r = ask(client, "why does this fail on 48KB??", log.replace("ray::", "").replace("(Worker pid=5121) ", ""))
    assert r.verdict and "no memory at all" in r.verdict and "num_gpus" not in r.verdict, r.verdict


def test_unified_memory_chunks_refused_as_out_of_memory_are_the_pool_s_setting_not_the_input(client):
    log = ("2023-05-02 11:00:30.889012: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:771] failed to alloc "
           "1073741824 bytes unified memory; result: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n2023-05-02 "
           "11:00:30.948473: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:771] failed to alloc 966367744 "
           "bytes unified memory; result: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n2023-05-02 11:00:42.551242: W "
           "external/xla/xla/tsl/framework/bfc_allocator.cc:462] Allocator (GPU_0_bfc) ran out of memory trying to "
           "allocate 8.00MiB (rounded to 8388608)requested by op")
    r = ask(client, "colabfold en WSL2 con una 3060 de 12GB, se cae nada más empezar. ¿acorto la secuencia?", log)
    assert r.language == "es" and r.verdict and "--disable-unified-memory" in r.verdict and "por pequeña que fuera" in r.verdict, r.verdict
    assert "WSL2" in r.verdict and "\n1. " not in r.answer  # no batch or sequence steps after it


def test_a_jax_library_named_beside_an_earlier_pytorch_version_is_a_jax_question(client):
    # "my PyTorch version fit ~100 examples": the question is about stax (neural-tangents), not a PyTorch error
    r = ask(client, "empirical NTK with stax on 30000 images, 12 GB GPU. my PyTorch implementation only fit 100 "
                    "examples. how much memory does the full kernel need?")
    assert r.out_of_scope is None and r.grounded and "3.35 GiB" in r.answer, r.answer[:400]


def test_a_batched_fft_plan_over_xla_s_cap_is_split_by_the_rows_that_fit_not_more_memory(client):
    # 201 × 1,336,566 × 16 B = 4,298,396,256 B > 2^32: at most 1,335,499 transforms per call, 2 calls
    log = ("E external/xla/xla/stream_executor/cuda/cuda_fft.cc:430] Initialize Params: rank: 1 elem_count: 400 "
           "input_embed: 400 input_stride: 1 input_distance: 400 output_embed: 201 output_stride: 1 output_distance: 201 "
           "batch_count: 1336566\nF external/xla/xla/stream_executor/cuda/cuda_fft.cc:439] failed to initialize "
           "batched cufft plan with customized allocator: Allocating 4298396256 bytes exceeds the memory limit of "
           "4294967296 bytes.\nAborted (core dumped)")
    r = ask(client, "с jax_enable_x64 FFT падает с Aborted, хотя nvidia-smi показывает свободную память. почему?", log)
    assert r.language == "ru" and r.verdict and "1335499" in r.verdict and "4294967296 B" in r.verdict, r.verdict
    assert "\n1. " not in r.answer  # no memory remedy steps after it


def test_a_tpu_runtime_failure_with_its_allocator_stats_splits_the_chip_into_arrays_and_programs(client):
    log = ("E1123 04:35:32.542303    3439 tpu_pjrt_client.cc:1811] TpuClient::AllocateBuffer returning error after 1 "
           "attempt(s): RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 512.00M. That was not "
           "possible. There are 100.00M free. The largest contiguous region of free memory is 90.00M due to "
           "fragmentation.; (0x0x0_HBM0)\n[OOM Summary: Reason: Not enough free memory. Allocator stats:\n"
           "Limit:                    102803437568\nInUse:                     60129542144\n"
           "MaxInUse:                  60129542144\nReserved:                  42569400320\nLargestFreeBlock: 0\n]")
    r = ask(client, "retry or is something eating the HBM?", log)
    assert r.verdict and "95.74 GiB" in r.verdict and "56.00 GiB" in r.verdict and "39.65 GiB" in r.verdict, r.verdict
    assert "memory_analysis()" in r.verdict and "card" not in r.verdict


def test_cudnn_failing_with_the_card_s_use_equal_to_jax_s_own_pool_says_no_other_process_holds_it(client):
    # 12524191744 total, 2624061440 free: 9.22 GiB used = the 8.75 GiB default pool + the context
    log = ("E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:439] Could not create cudnn handle: "
           "CUDNN_STATUS_INTERNAL_ERROR\nE external/xla/xla/stream_executor/cuda/cuda_dnn.cc:443] Memory usage: "
           "2624061440 bytes free, 12524191744 bytes total.")
    r = ask(client, "is this really OOM? the card has 12GB", log)
    assert r.verdict and "9.22 GiB" in r.verdict and "8.75 GiB" in r.verdict and "no other process" in r.verdict, r.verdict


def test_a_vmem_need_over_any_core_s_vmem_gets_no_limit_even_without_a_generation(client):
    # "Estimated 268.96MB exceeds 67.11MB vmem capacity": 256.50 MiB, more than the 128 MiB of the largest core
    log = ("RuntimeError: XLA:TPU compile permanent error.\nRan out of memory in memory space vmem.\n"
           "Estimated 268.96MB exceeds 67.11MB vmem capacity.")
    r = ask(client, "Pallas attention kernel with an unrolled loop fails to compile. How high should vmem_limit_bytes go?",
            log)
    assert r.verdict and "256.50 MiB" in r.verdict and "no limit can give it that" in r.verdict, r.verdict
    assert "vmem_limit_bytes=" not in r.answer


def test_a_card_named_by_a_model_with_words_and_digits_before_its_memory_is_read(client):
    # "RTX PRO 5000 Blackwell (48 Go)": the model's own digits are not its memory
    log = ("W hlo_rematerialization.cc:3023] Can't reduce memory use below 40.00GiB (42949672960 bytes) by "
           "rematerialization; only reduced to 46.50GiB (49928994816 bytes), down from 52.00GiB (55834574848 bytes) "
           "originally")
    r = ask(client, "sur ma RTX PRO 5000 Blackwell (48 Go) ça plante en fin de run, je monte MEM_FRACTION ?", error_log=log)
    assert r.facts["gpu_memory_named_bytes"] == 48 << 30
    # 46.50 GiB > .95 × 48 GiB = 45.60 GiB: no fraction offered
    assert r.language == "fr" and "48.00 GiB" in r.verdict and "jusqu'à .95" in r.verdict, r.verdict


def test_a_log_with_only_a_small_failed_request_keeps_the_state_the_named_model_needs(client):
    # the log sizes only the request (64 MiB), not the program: the model's training state on the slice
    # named says why it fails (13B × 16 B = 193.7 GiB, 24.2 GiB per core of a v3-8's 8 × 15.48 GiB)
    log = ("XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 64.00MiB (67108864B) on device "
           "ordinal 0")
    r = ask(client, "Fine-tuning Llama 2 13B with AdamW on a TPU v3-8 fails right away, whatever the batch. Why?", log)
    state = [f for f in r.figures if f.subject == "training_state"]
    assert state and "13B" in state[0].text and "193.7" in state[0].text, r.answer
    # a log that sizes the program keeps its own figures first: no estimate beside it
    sized = ask(client, "Fine-tuning Llama 2 13B with AdamW on a TPU v3-8 fails. Why?",
                "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 20.11G of 15.48G hbm. Exceeded hbm "
                "capacity by 4.63G.")
    assert not [f for f in sized.figures if f.subject == "training_state"]


def test_an_smem_oom_says_no_vmem_limit_reaches_it_and_what_fills_it(client):
    log = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space smem. "
           "Used 1.00M of 1.00M smem. Exceeded smem capacity by 2.3K.")
    r = ask(client, "paged attention の Pallas カーネルが v6e でコンパイル時に落ちます。vmem_limit_bytes を上げれば直りますか？", log)
    assert r.language == "ja" and r.verdict and "SMEM" in r.verdict and "1.00 MiB" in r.verdict, r.verdict
    assert "--max-num-seqs" in r.verdict and "custom_call_target" not in r.answer  # no regex exercise


def test_a_gpu_shared_memory_error_without_figures_is_the_kernel_s_tiles_not_the_batch(client):
    log = "INTERNAL: Failed to execute XLA Runtime executable: Shared memory requested exceeds device resources."
    r = ask(client, "Mon attention Pallas/Triton sur A100 plante ainsi ; j'ai déjà divisé le batch par deux. Et maintenant ?", log)
    assert r.language == "fr" and r.verdict and "mémoire partagée" in r.verdict and "num_stages" in r.verdict
    assert "mémoire partagée par bloc de threads" in r.answer  # the diagnosis line says what it is too
    assert "ne réduit que les activations" not in r.answer  # the tried batch is settled by the verdict


def test_one_allocation_larger_than_the_card_while_weights_load_says_no_setting_can_hold_it(client):
    # 18 GiB asked on a 16 GB T4 (14.75 GiB as CUDA reports it) while from_pt converts the weights
    log = "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 19327352832 bytes."
    r = ask(client, "Loading FlaxAutoModel.from_pretrained(..., from_pt=True) on a Colab T4 blows up asking for 18 GB. "
                    "Is turning off XLA_PYTHON_CLIENT_PREALLOCATE enough?", log)
    assert r.verdict and "larger than your whole 14.75 GiB GPU" in r.verdict and "to_bf16" in r.verdict, r.verdict


SET_POOL_LOG = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                "5905580032 bytes.\nBufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
                "             parameter allocation:    2.10GiB\n              constant allocation:    12.0KiB\n"
                "        maybe_live_out allocation:   40.00MiB\n     preallocated temp allocation:    5.50GiB\n"
                "                 total allocation:    7.64GiB\n")


def test_a_step_over_the_pool_the_asker_s_own_fraction_allows_says_that_cap_is_short(client):
    # a 2080 Ti reports 10.76 GiB (public PyTorch log); .70 of it is 7.53 GiB < the step's 7.64 GiB
    r = ask(client, "RTX 2080 Ti, XLA_PYTHON_CLIENT_MEM_FRACTION=.70 and PREALLOCATE=false set, still OOM. why?",
            error_log=SET_POOL_LOG)
    assert r.verdict.startswith("This step needs 7.64 GiB in all")
    assert "7.53 GiB" in r.verdict and "70% of your 10.76 GiB GPU" in r.verdict
    assert "keeps that cap" in r.verdict and "XLA_PYTHON_CLIENT_MEM_FRACTION=.95" in r.verdict
    assert "not what is short" not in r.answer  # the one-large-allocation reading does not follow


def test_the_rematerialization_warning_says_the_peak_it_reached_is_the_need_not_its_own_target(client):
    log = ("W external/xla/xla/hlo/transforms/simplifiers/hlo_rematerialization.cc:3020] Can't reduce memory use "
           "below 3.00GiB (3221225472 bytes) by rematerialization; only reduced to 4.50GiB (4831838208 bytes), "
           "down from 4.75GiB (5100273664 bytes) originally")
    r = ask(client, "¿Qué significan estos números y cuánto me falta?", error_log=log)
    assert r.language == "es"
    # the 3.00 GiB is the pass's own target (not the room the device has): the 4.50 GiB peak is what must fit
    assert r.verdict.startswith("El paso de rematerialización de XLA solo pudo bajar el pico de este programa a 4.50 GiB, "
                                "no a los 3.00 GiB que buscaba")
    assert "el paso necesita unos 4.50 GiB en una GPU" in r.verdict and "1.50 GiB" not in r.verdict


@pytest.mark.parametrize("free, verdict_start", [
    ("40.00M", "Only 40.00 MiB is free in all: the device's memory is essentially full."),
    ("2.00G", "2.00 GiB is free, at least the 20.00 MiB requested, but not in one piece"),
])
def test_fragmentation_is_the_last_straw_when_little_is_free_in_all(client, free, verdict_start):
    log = (f"RuntimeError: RESOURCE_EXHAUSTED: Attempting to allocate 20.00M. That was not possible. There are {free} "
           "free. Due to fragmentation, the largest contiguous region of free memory is 15.00M.; (0x0x0_HBM0)")
    r = ask(client, "fragmentation or really out of memory?", error_log=log)
    assert r.verdict.startswith(verdict_start), r.verdict


def test_a_weight_converted_to_float32_at_run_time_is_named_with_the_dtype_fix(client):
    log = ("BufferAssignment stats:\n             parameter allocation:    2.00GiB\n"
           "     preallocated temp allocation:    1.50GiB\n                 total allocation:    3.51GiB\n"
           "Peak buffers:\n    Buffer 1:\n        Size: 1.50GiB\n"
           '        Operator: op_name="jit(step)/Model/head/convert_element_type[new_dtype=float32 weak_type=False]"\n'
           "        XLA Label: convert\n        Shape: f32[98304,4096]\n")
    r = ask(client, "the weights are float16, where does this f32 buffer come from?", error_log=log)
    assert r.verdict.startswith("The largest buffer, `f32[98304,4096]` (1.50 GiB), is a float32 copy of a weight")
    assert "dtype=jnp.float16" in r.verdict


def test_no_pool_is_spoken_of_when_the_platform_allocator_is_set(client):
    log = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 402653184 bytes."
    pooled = ask(client, "RTX 2080 Ti, loading the model OOMs on this small buffer, why?", error_log=log)
    assert "8.07 GiB" in pooled.answer  # the default pool (75% of 10.76 GiB) explains it
    plain = ask(client, "RTX 2080 Ti, I set XLA_PYTHON_CLIENT_ALLOCATOR=platform before importing jax and it still "
                        "OOMs on this small buffer, why?", error_log=log)
    assert "75%" not in (plain.verdict or "") and "8.07 GiB" not in plain.answer


@pytest.mark.parametrize("requested, said", [
    (66_000_000_000, "`TF_FORCE_UNIFIED_MEMORY=1`"),  # over the 60 GiB pool, within four cards: unified memory
    (1_220_000_000_000, "more than four times the card"),  # 1.11 TiB: no setting reaches it
])
def test_what_memory_settings_can_do_follows_a_single_large_gpu_allocation(client, requested, said):
    log = f"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate {requested} bytes."
    r = ask(client, "A100 80GB: is this a leak or do I just raise XLA_PYTHON_CLIENT_MEM_FRACTION?", error_log=log)
    assert r.verdict.startswith("One allocation of") and said in r.verdict


def test_a_boolean_square_buffer_is_an_attention_mask_built_for_the_whole_position_range(client):
    log = ("Peak buffers:\n        Buffer 1:\n                Size: 256.00MiB\n"
           "                Shape: pred[1,1,16384,16384]\n                ==========================\n")
    r = ask(client, "Flax model from_pretrained OOMs, what is this pred buffer? I train on 2k tokens", error_log=log)
    assert r.verdict.startswith("The largest buffer, `pred[1,1,16384,16384]` (256.00 MiB), is a boolean 16384 × 16384")
    assert "max_position_embeddings" in r.verdict


def test_a_process_killed_at_its_container_s_memory_limit_is_host_ram_not_the_gpu(client):
    log = ("[Fri Sep 16 10:37:38 2022] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=abc,mems_allowed=0-1,"
           "oom_memcg=/docker/abc,task_memcg=/docker/abc,task=python,pid=19712,uid=0\n"
           "[Fri Sep 16 10:37:38 2022] Memory cgroup out of memory: Killed process 19712 (python) total-vm:87716756kB, "
           "anon-rss:16715856kB, file-rss:0kB, shmem-rss:0kB")
    r = ask(client, "nvidia-smi shows the V100 almost full and the process gets Killed in docker. Is it the GPU?",
            error_log=log)
    assert r.verdict and "container's memory limit" in r.verdict and "docker run --memory" in r.verdict
    assert "host-offload-note" not in [x.id for x in r.remedies]


def test_a_splash_kernel_s_smem_is_answered_with_its_mask_tables_not_hbm(client):
    log = ("RESOURCE_EXHAUSTED: Allocation (size=4194304) would exceed memory (size=1048576)\n"
           ":: #allocation2 [shape = 'u8[4194304]{0}', space=smem, size = 0x400000, scoped,\n"
           "   tag = 'prefetched SMEM operand 0'] :: splash_mha_fwd.7")
    r = ask(client, "seq len 512k with splash attention on v5e, raising the scoped vmem limit did nothing. what is "
                    "this 1 MiB?", log)
    assert r.answer.startswith("**This is SMEM") and "`data_next`, `block_mask` and `mask_next`" in r.answer
    assert "4.00 MiB for one of them" in r.answer and "of HBM" not in r.answer


def test_xla_gpu_scheduler_s_arguments_over_its_limit_is_read_as_the_program_s_own_size(client):
    # gpu_hlo_schedule.cc's line repeated by threads (a log shaped like a public blackjax thread's)
    line = ("E0301 09:12:44.120031 4412 gpu_hlo_schedule.cc:968] The byte size of input/output arguments "
            "(64424509440) exceeds the base limit (17179869184). This indicates an error in the calculation!")
    r = ask(client, "sampler on one GPU prints this a lot and then dies of memory. XLA bug, or an env var?",
            "\n".join([line] * 3))
    assert r.answer.startswith("**XLA's GPU scheduler says the jitted function's inputs and outputs alone take "
                               "60.00 GiB, while the memory it schedules for on this GPU is 16.00 GiB")
    assert "no environment variable changes it" in r.answer
    assert "`donate_argnums`" in r.verdict  # an output may reuse an overwritten input's buffer
    assert "MCMC run keeps" not in r.answer  # not the samples-kept paragraph


def test_xla_s_pinned_host_pool_is_named_with_its_64_gib_default(client):
    log = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of host memory while trying to allocate "
           "15204089856 bytes with allocator xla_gpu_host_bfc on device 0.")
    r = ask(client, "gathering draws into pinned_host memory, the server has 512 GB of RAM. why?", log)
    assert "`xla_gpu_host_bfc`" in r.answer and "64 GiB by default" in r.answer
    assert "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB=128" in r.answer
    assert "Keep the state in host memory" not in r.answer  # not how to offload: it is offloaded


def test_cudnn_that_did_not_start_on_a_nearly_empty_card_is_not_memory(client):
    # (the lines XLA prints with it: the card's free and total memory)
    log = ("E0611 10:02:11.5 cuda_dnn.cc:439] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR\n"
           "E0611 10:02:11.5 cuda_dnn.cc:443] Memory usage: 23622320128 bytes free, 25393692672 bytes total.\n"
           "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed.")
    r = ask(client, "conv net dies at the first step. is this out of memory? should I lower MEM_FRACTION?", log)
    assert r.answer.startswith("**cuDNN failed to start while 22.00 GiB of the card's 23.65 GiB were free (93%)")
    assert 'pip install -U \\"jax[cuda12]\\"' in r.answer or 'pip install -U "jax[cuda12]"' in r.answer
    assert "Diagnosis" not in r.answer and "oomkb profile" not in r.answer  # not an OOM to measure
    assert r.remedies == [] and "### What to do" not in r.answer  # nor steps that save memory
    # TensorFlow in the same image: its pool is not the cause either, so no pool setting is offered
    question = "TensorFlow 2.18 and jax[cuda12_local] in one docker image, jax.random.PRNGKey(0) dies. Out of memory?"
    assert "tensorflow_with_jax" in {a.id for a in load_figures().short_answers_of(question)}  # its words match it
    r = ask(client, question, log)
    assert r.answer.startswith("**cuDNN failed to start") and "XLA_PYTHON_CLIENT_MEM_FRACTION" not in r.answer
    # a quarter of the card free (what JAX's default pool leaves) is still far more than a cuDNN handle needs
    quarter = log.replace("23622320128 bytes free", "6348464128 bytes free")
    r = ask(client, "importing torch first makes it work. is it memory?", quarter)
    assert r.answer.startswith("**cuDNN failed to start while 5.91 GiB of the card's 23.65 GiB were free (25%)")
    # the same failure with the card nearly full: room outside JAX's pool
    full = log.replace("23622320128 bytes free", "402653184 bytes free")
    r = ask(client, "conv net dies at the first step. is this out of memory?", full)
    assert r.answer.startswith("**cuDNN failed to start with only 384.00 MiB of the card's 23.65 GiB free (1.6%)")


# a program's part of the report only (no "Used X of Y"): one buffer whose size-2 axis is second-minor in
# its layout, stored as the f32 tile's 8 rows: 4× (1 GiB of data in 4 GiB), and the temporaries 50% used
SECOND_MINOR_LOG = """Program hbm requirement 14.20G:
    global            2.36M
    HLO temp         14.20G (50.1% utilization: Unpadded (7.12G) Padded (14.19G), 0.0% fragmentation (5.52M))

  Largest program allocations in hbm:

  1. Size: 4.00G
     Shape: f32[8192,2,16384]{0,1,2:T(8,128)}
     Unpadded size: 1.00G
     Extra memory due to padding: 3.00G (4.0x expansion)
     XLA label: broadcast.77 = broadcast(bitcast.3), dimensions={0,2}
     Allocation type: HLO temp
     ==========================
"""


def test_a_small_second_minor_axis_padded_to_the_tile_s_rows_is_named_with_its_fix(client):
    r = ask(client, "what is this 4.0x expansion?", error_log=SECOND_MINOR_LOG)
    assert r.verdict and "size-2 axis (axis 1)" in r.verdict and "`T(8,128)`" in r.verdict
    assert "stores it as 8 rows" in r.verdict and "about 1.00 GiB" in r.verdict
    assert "hbm-newer-tpu" not in ids(r)
    ko = ask(client, "로그에 4.0x expansion 이라고 나오는데 이게 뭔가요?", error_log=SECOND_MINOR_LOG)
    assert ko.language == "ko" and "크기 2인 축(축 1)" in ko.verdict


PROGRAM_LOAD_LOG = ("XlaRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_train_step': Attempting to reserve "
                    "12.20G at the bottom of memory. That was not possible. There are 310.50M free, 0B reserved, and "
                    "310.50M reservable.")


def test_a_program_that_cannot_be_loaded_is_read_as_arrays_from_outside_the_call_filling_the_hbm(client):
    r = ask(client, "it compiled fine, why does it fail when it starts?", error_log=PROGRAM_LOAD_LOG)
    assert r.verdict.startswith("This is the compiled program being loaded, not one array")
    assert "12.20 GiB" in r.verdict and "310.50 MiB" in r.verdict and "`donate_argnums`" in r.verdict
    assert "rt-fragmentation" not in ids(r)
    # an array's own failed reservation (no program named) keeps the general reading
    plain = ask(client, error_log="RESOURCE_EXHAUSTED: Attempting to allocate 12.20G. That was not possible. "
                                  "There are 310.50M free.")
    assert not (plain.verdict or "").startswith("This is the compiled program being loaded")


def test_the_flag_asked_for_comes_before_what_the_pasted_warning_says(client):
    # a donation warning pasted, and the question is only which XLA flag writes the buffer-assignment dump
    log = "UserWarning: Some donated buffers were not usable: ShapedArray(float32[64,64])"
    r = ask(client, "Which XLA flag gives me the BufferAssignment dump so I can check what really got aliased?",
            error_log=log)
    assert r.answer.startswith("**xla_dump_to**") and "XLA_FLAGS=--xla_dump_to=" in r.answer
    assert r.verdict and r.answer.index("XLA_FLAGS=--xla_dump_to=") < r.answer.index("donat")


def test_a_remat_warning_whose_peak_is_more_than_the_whole_card_says_no_fraction_fits(client):
    log = ("W external/xla/xla/service/hlo_rematerialization.cc:3005] Can't reduce memory use below 16.10GiB "
           "(17287042662 bytes) by rematerialization; only reduced to 30.50GiB (32749125632 bytes), down from "
           "33.02GiB (35454976000 bytes) originally")
    r = ask(client, "AlphaFold-Multimer on my RTX 3090 24GB dies on a 1400-residue complex. I have two of them, can it use both?",
            error_log=log)
    # 30.50 GiB > the 24 GiB card: the pass's 16.10 GiB target is not the room, and no fraction helps
    assert r.verdict.startswith("The step needs about 30.50 GiB at its peak") and "whole 24.00 GiB card" in r.verdict
    assert "18.00 GiB" in r.verdict and "Other GPUs in the machine do not add to it" in r.verdict


def test_a_remat_peak_above_the_pool_but_within_the_card_says_by_how_much_and_no_smaller_pool(client):
    # the kernel that cannot load afterwards is that overflow, not memory outside the pool
    log = ("W hlo_rematerialization.cc:3023] Can't reduce memory use below 50.00GiB (53687091200 bytes) by "
           "rematerialization; only reduced to 66.00GiB (70866960384 bytes), down from 70.00GiB (75161927680 bytes) "
           "originally\nE pjrt_stream_executor_client.cc:3077] Execution of replica 0 failed: RESOURCE_EXHAUSTED: "
           "Failed to load in-memory CUBIN (compiled for a different GPU?).: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
    r = ask(client, "8 ranks FSDP, nvidia-smi says 81559MiB per GPU, no env vars set. it dies on step 1 with this, why?",
            error_log=log)
    # 81559 MiB = 79.65 GiB; its default pool 59.74 GiB; 66.00 - 59.74 = 6.26 GiB over; (66/79.65 + .03) -> .90
    assert r.facts["gpu_memory_named_bytes"] == 81559 << 20
    assert r.verdict.startswith("The step needs about 66.00 GiB at its peak") and "59.74 GiB, by 6.26 GiB" in r.verdict
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.90" in r.verdict
    assert "lower `XLA_PYTHON_CLIENT_MEM_FRACTION` (e.g. .7)" not in r.answer  # (the short answer it replaces)
    # above .95 of the card: the step must need less, no fraction is offered
    big = log.replace("66.00GiB (70866960384 bytes)", "77.00GiB (82678120448 bytes)")
    r = ask(client, "nvidia-smi says 81559MiB per GPU, it dies on step 1 with this, why?", error_log=big)
    assert "no `XLA_PYTHON_CLIENT_MEM_FRACTION` up to .95 holds it" in r.verdict


def test_the_scheduler_line_beside_the_allocator_s_keeps_the_failed_request_apart(client):
    # the scheduler's inputs-and-outputs figure is not the allocation that failed after it
    log = ("E external/xla/xla/service/gpu/gpu_hlo_schedule.cc:795] The byte size of input/output arguments "
           "(12884901888) exceeds the base limit (9663676416). This indicates an error in the calculation!\n"
           "W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying "
           "to allocate 2.50GiB (rounded to 2684354560)requested by op")
    r = ask(client, "my RL training on a 12GB card dies right away, what is wrong?", error_log=log)
    assert r.diagnosis.requested_bytes == 2684354560 and r.diagnosis.schedule_arguments_bytes == 12884901888
    assert "inputs and outputs alone take 12.00 GiB" in r.verdict and "9.00 GiB" in r.verdict


def test_the_buffers_a_donation_could_not_use_are_sized_and_said_safe_to_ignore(client):
    log = ("UserWarning: Some donated buffers were not usable: ShapedArray(bfloat16[1024,4096]), "
           "ShapedArray(bfloat16[4096,1024]), ...")
    r = ask(client, "I get this warning with my optimizer; can I ignore it, and how much memory does it cost me?",
            error_log=log)
    # 2 × 1024 × 4096 × 2 B = 16 MiB
    assert "The 2 buffers it lists take 16.00 MiB" in r.verdict and "can be ignored while the step fits" in r.verdict


def test_the_cuda_driver_refusing_memory_below_the_pool_s_limit_is_a_full_card_not_fragmentation(client):
    log = ("E external/xla/xla/stream_executor/cuda/cuda_driver.cc:1044] failed to allocate 2.00GiB (2147483648 bytes) "
           "from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
           "W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying to "
           "allocate 2.00GiB (rounded to 2147483648)requested by op\n"
           "Limit:                 18253611008\nInUse:                  3221225472\nLargestFreeBlock:                0")
    r = ask(client, "two JAX jobs on one 24GB card, the second one dies though its pool is nearly empty. why?",
            error_log=log)
    assert r.verdict.startswith("The CUDA driver itself refused the 2.00 GiB")
    assert "3.00 GiB of its 17.00 GiB limit" in r.verdict and "fragment" not in r.verdict
    # nor does the diagnosis line call it fragmentation, and no profiling of this process follows
    assert "**Diagnosis:** The CUDA driver refused 2.00 GiB: the card itself had no room" in r.answer
    assert "fragment" not in r.answer.split("### Sources")[0].lower()
    assert r.remedies == [] and r.next_steps == []


@pytest.mark.parametrize("question,log,start,not_said", [
    # an earlier CUDA error broke the stream: every later input fails with it, whatever its size
    ("ColabFold plante sur des peptides de 7 résidus avec 'Not Enough GPU memory?'. Je réduis quoi ?",
     "Could not predict P1. Not Enough GPU memory? INVALID_ARGUMENT: stream is uninitialized or in an error state",
     "`INVALID_ARGUMENT: stream is uninitialized or in an error state` n'est pas un manque de mémoire", "fraction"),
    # XLA:CPU mapping memory for compiled code: the mapping limit, reached by recompiles; not RAM
    ("Считаю на CPU, ноды с 250 ГБ RAM не помогают, PREALLOCATE=false и MEM_FRACTION=.5 тоже. Что ещё?",
     "E contiguous_section_memory_manager.cc:101] allocateMappedMemory failed with error: Cannot allocate memory\n"
     "E contiguous_section_memory_manager.cc:139] Failed to satisfy suballocation request for 2869\n"
     "LLVM ERROR: Unable to allocate section memory!",
     "`Unable to allocate section memory`", "XLA_PYTHON_CLIENT_MEM_FRACTION** "),
    # cuSolver rejecting the call's parameters
    ("eigh on 16384x16384 complex128 fails on my H100, is it an OOM? should I bump the memory fraction?",
     "INTERNAL: jaxlib/gpu/solver_kernels_ffi.cc:593: operation cusolverDnXsyevBatched(...) failed: "
     "cuSolver invalid value error", "`cuSolver invalid value error` is cuSolver rejecting", "ran out of memory"),
])
def test_errors_that_are_not_memory_are_said_so_first_with_what_decides_them(client, question, log, start, not_said):
    r = ask(client, question, error_log=log)
    assert r.answer.startswith(f"**{start}"), r.answer[:200]
    assert not_said not in r.answer and r.next_steps == [] and r.remedies == []


def test_an_allocation_made_by_one_eager_operation_s_program_is_said_to_be_that_and_not_the_step(client):
    r = ask(client, "FDTD on an H100 80GB, nothing else on the card, our estimate is 50-65 GiB. What is this "
                    "jit_subtract and why the OOM?",
            error_log="RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.14GiB. "
                      "[executable_name='jit_subtract'] [tf-allocator-allocation-error='']")
    assert r.verdict.startswith("`jit_subtract` is not your step") and "donate_argnums=0" in r.verdict
    # a step's own program named so is not an eager operation
    own = ask(client, "why the OOM?", error_log="RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.14GiB. "
                                                "[executable_name='jit_train_step']")
    assert "is not your step" not in (own.verdict or "")


def test_tensorflow_s_allocator_settings_set_by_the_asker_are_said_not_to_be_read_by_jax(client):
    r = ask(client, "pipeline-parallel MoE on H100s; I set TF_GPU_ALLOCATOR=cuda_malloc_async on all ranks but the log "
                    "still shows GPU_0_bfc, and raising the memory fraction did not help. What now?")
    assert r.answer.startswith("`TF_GPU_ALLOCATOR` and `TF_FORCE_GPU_ALLOW_GROWTH` are TensorFlow's settings")
    assert "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async" in r.answer


def test_constants_captured_during_lowering_are_answered_as_constants_of_the_program(client):
    r = ask(client, "eqx.filter_jit над функцией, PSF-куб на 4.36 GB берётся из замыкания; после 3-4 прогонов OOM. Почему?",
            error_log="UserWarning: A large amount of constants were captured during lowering (4.46GB total). If this "
                      "is intentional, disable this warning by setting JAX_CAPTURED_CONSTANTS_WARN_BYTES=-1.")
    assert any(f.subject == "weights_as_constants" for f in r.figures)


def test_a_host_request_from_someone_without_a_gpu_is_host_ram_not_a_gpu_s(client):
    # "no GPU" names none: the CPU client's wording stays the host's, and no pool setting is offered
    r = ask(client, "Corro mi modelo en CPU (no tengo GPU), la máquina tiene 32 GB de RAM, y sale: RESOURCE_EXHAUSTED: "
                    "Out of memory allocating 68719476736 bytes. ¿Qué hago?")
    assert r.diagnosis.category == "host_oom"
    assert "64.00 GiB en la RAM del host" in (r.verdict or "")
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in r.answer and "GPU de" not in r.answer
    assert "host-offload-note" not in ids(r)  # moving tensors to host RAM is what failed


def test_memory_stats_asked_of_another_host_s_device_is_not_an_out_of_memory_error(client):
    r = ask(client, "v5p-32 multi-host, serving with jetstream; it dies where we log HBM. Is it an OOM?",
            error_log='  File "serve.py", line 88, in log_hbm\n    used = d.memory_stats()["bytes_in_use"]\n'
                      "jax.errors.JaxRuntimeError: INVALID_ARGUMENT: MemoryStats is only supported for addressable "
                      "PjRt devices.")
    assert (r.verdict or "").startswith("This is not an out-of-memory error")
    assert "jax.local_devices()" in r.answer and "process_allgather" in r.answer
    assert not r.remedies  # nothing to save: memory is not the cause


def test_the_bfc_warning_about_an_optional_allocation_is_not_the_failure(client):
    log = ("W bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 7.50GiB with "
           "freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be "
           "performance gains if more memory were available.\nTraceback (most recent call last):\n  File \"run.py\"")
    r = ask(client, "Mi RTX 3090 de 24 GB muestra esto y luego se cae. ¿7.5 GiB no caben en 24 GB?", log)
    assert r.grounded and r.language == "es"
    assert (r.verdict or "").startswith("Esa línea del BFC es un aviso, no el error")
    assert "--tpu" not in r.answer and not r.remedies


def test_a_kernel_the_driver_could_not_load_is_memory_outside_the_pool_not_a_broken_cuda(client):
    # (issue 21, round 45: a 4 GB laptop card failing in its test suite got the generic profiling
    # steps; the asker asked whether the CUDA installation is broken)
    log = ("2025-01-09 10:12:44.120931: W external/xla/xla/service/gpu/runtime/support.cc:58] Intercepted XLA "
           "runtime error:\nRESOURCE_EXHAUSTED: Failed to get module function:CUDA_ERROR_OUT_OF_MEMORY: out of "
           "memory\n2025-01-09 10:12:44.121002: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732] "
           "Execution of replica 0 failed: INTERNAL: Failed to instantiate GPU graphs: CaptureGpuGraph failed "
           "(Failed to get module function:CUDA_ERROR_OUT_OF_MEMORY: out of memory; current tracing scope: "
           "fusion.41)")
    r = ask(client, "RTX 3050 (4GB) のノートで pytest を回すと勾配のテストだけこれで落ちます。CPU では通ります。"
                    "CUDA のインストールが壊れてますか？", error_log=log)
    assert r.grounded and r.language == "ja"
    assert r.verdict.startswith("`Failed to get module function: CUDA_ERROR_OUT_OF_MEMORY` は")
    assert "CUDA のインストールが原因ではありません" in r.answer and "conftest.py" in r.answer
    assert not r.remedies and "jax.profiler" not in r.answer  # no profiling steps after it


UNDONATED = ("XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
             "space hbm. Used 24.10G of 15.75G hbm. Exceeded hbm capacity by 8.35G.\n\nTotal hbm usage >= 25.35G:\n"
             "    reserved          1.25G\n    program          17.90G\n    arguments         6.20G\n\n"
             "Output size 6.20G; shares 0B with arguments.\n\nProgram hbm requirement 17.90G:\n"
             "    global            8.00M\n    scoped            2.00M\n    HLO temp         17.89G")


def test_an_undonated_state_short_of_the_overflow_says_what_donation_leaves_and_again_when_asked(client):
    # (issue 21, round 45: "Output ... shares 0B with arguments" smaller than the overflow was not
    # read, and "with donation, does it fit? compute it" got a toy snippet and no figure)
    first = ask(client, "Mein train_step auf einer v5e kompiliert nicht mehr, was frisst den Speicher?",
                error_log=UNDONATED)
    assert first.verdict.startswith("Ihre Ausgaben, 6.20 GiB, teilen nichts mit den Argumenten")
    assert "höchstens 6.20 GiB: etwa 17.90 GiB belegt, immer noch 2.15 GiB über der Kapazität" in first.verdict
    assert first.remedies[0].id in ("hbm-donation-measured", "hbm-donate")
    again = ask(client, "Und wenn ich donate_argnums für den State setze, passt es dann? Rechnen Sie es aus.",
                conversation_id=first.conversation_id)
    assert again.follow_up and again.language == "de"
    assert "etwa 17.90 GiB belegt, immer noch 2.15 GiB über der Kapazität" in again.answer


def test_gigabytes_of_outputs_from_kilobytes_of_inputs_are_weights_being_created_not_a_rollout(client):
    # (issue 21, round 45: a model dying at startup on an 8 GB card was told to run fewer rollout steps)
    log = ("2023-02-11 09:41:03.118842: W external/xla/xla/stream_executor/tf_allocator_adapter.cc] Allocator "
           "(GPU_0_bfc) ran out of memory trying to allocate 512.00MiB (rounded to 536870912)requested by op \n"
           "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
           "536870912 bytes.\nBufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
           "             parameter allocation:     8.0KiB\n              constant allocation:        32B\n"
           "        maybe_live_out allocation:    3.10GiB\n     preallocated temp allocation:  120.00MiB\n"
           "                 total allocation:    3.22GiB\n")
    r = ask(client, "Mon modèle plante dès le démarrage sur ma RTX 3060 6GB. C'est ma config qui est cassée ?",
            error_log=log)
    assert r.language == "fr" and r.verdict.startswith("Cet appel demande 3.22 GiB sur un GPU : 3.10 GiB de sorties "
                                                       "produites à partir de seulement 8.00 KiB d'entrées")
    assert "Sur votre GPU de 6.00 GiB, ce pool fait 4.50 GiB par défaut" in r.verdict
    assert "Votre installation n'est pas cassée" in r.verdict
    assert "fois les paramètres" not in r.answer  # not the rollout's reading


def test_a_failed_request_whose_shape_leads_with_every_input_named_is_chunked_not_profiled(client):
    # (issue 21, round 45: TAPIR on 500 frames got four XProf steps and "cut the batch", the one
    # thing the asker ruled out)
    log = ("W external/xla/xla/service/gpu/conv_algorithm_picker.cc:1003] Failed to determine best cudnn convolution "
           "algorithm for:\n%cudnn-conv.12 = (f32[800,32,96,96]{3,2,1,0}, u8[0]{0}) custom-call(f32[800,32,96,96]{3,2,1,0} "
           "%p.3, f32[32,32,3,3]{3,2,1,0} %w.1), window={size=3x3 pad=1_1x1_1}, custom_call_target=\"__cudnn$convForward\", "
           "metadata={op_name=\"jit(encode)/jit(main)/encoder/stem/conv_0/conv_general_dilated\" source_file=\"model.py\" "
           "source_line=88}\n\nOriginal error: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 943718400 bytes.")
    r = ask(client, "Con 400 imágenes va bien, pero con imgs[:800] se queda sin memoria. ¿Qué hago sin reducir el "
                    "número de imágenes?", error_log=log)
    assert r.facts["requested_shape"] == "f32[800,32,96,96]" and r.facts["items_named"] == 800
    assert r.verdict.startswith("La asignación que falló, 900.00 MiB (`f32[800,32,96,96]`), es la salida de "
                                "`conv_0/conv_general_dilated` para todas tus 800 entradas a la vez")
    assert "jax.lax.map(f, xs, batch_size=k)" in r.verdict and not r.remedies  # no profiling steps after it


def test_a_context_the_driver_refused_at_start_is_the_gpus_visible_not_the_program(client):
    # (issue 21, round 56: a job granted one GPU of four, whose JAX tried a context on all of them,
    # was told "the GPU ran out of memory" and given profiling steps)
    log = ("2024-03-02 11:20:07.401233: W external/xla/xla/service/platform_util.cc:198] unable to create "
           "StreamExecutor for CUDA:1: failed initializing StreamExecutor for CUDA device ordinal 1: INTERNAL: "
           "failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory "
           "reported: 25393692672\n2024-03-02 11:20:07.402871: W external/xla/xla/service/platform_util.cc:198] "
           "unable to create StreamExecutor for CUDA:2: failed initializing StreamExecutor for CUDA device "
           "ordinal 2: INTERNAL: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; "
           "total memory reported: 25393692672")
    r = ask(client, "Slurm gibt mir eine GPU, aber schon beim import jax kommt das hier. Muss ich das Modell verkleinern?",
            error_log=log)
    assert r.language == "de" and r.grounded
    assert r.verdict.startswith("Das ist kein Speichermangel Ihres Programms") and "`1, 2`" in r.verdict, r.verdict
    assert "23.65 GiB" in r.verdict and "CUDA_VISIBLE_DEVICES" in r.verdict and "jax_cuda_visible_devices" in r.verdict
    assert not r.remedies and "jax.profiler" not in r.answer
    # the cited passage is named, not quoted: its "smaller batch" would read as the advice
    assert r.citations and "\n> " not in r.answer.split("###")[-1]


def test_a_tool_said_to_run_on_tensorflow_is_declined_as_tensorflow(client):
    # (issue 21, round 58: a SLEAP training log of pinned host allocations got JAX's host pool and offloading)
    r = ask(client, "SLEAP 로 학습 중인데 로그에 이게 계속 나오다가 죽어요. 어떻게 해결하죠?",
            "2023-05-02 10:11:12.123456: E tensorflow/compiler/xla/stream_executor/gpu/gpu_host_allocator.cc] could not "
            "allocate pinned host memory of size: 17179869184")
    assert r.language == "ko" and r.out_of_scope == "tensorflow" and not r.grounded, r.answer[:300]


def test_a_request_larger_than_any_machine_is_a_number_read_wrong_not_a_size_to_fit(client):
    # (issue 21, round 58: tcmalloc refusing 377396076847104 bytes right after installing jax with a
    # libtpu index: no log was recognised and the answer was profiling steps)
    r = ask(client, "Nach dem Update von jax stürzt schon jnp.ones(3) ab. Was ist das für eine Zahl?",
            "tcmalloc: large alloc 562949953421312 bytes == (nil) @  0x7f0e2a1c5680 0x7f0e2a1e6824 0x7f0c1b2c42da")
    assert r.language == "de" and r.grounded
    assert r.verdict.startswith("Keine Maschine hat 512.00 TiB") and "libtpu" in r.verdict, r.verdict
    assert not r.remedies


def test_one_buffer_past_the_compiler_s_32_bit_word_count_is_not_hbm_full_and_the_buffer_is_sized(client):
    # (issue 21, round 61: "RET_CHECK failure ... allocation_size_words <= int32 max" read as "does a chunk
    # fit in 95.74 GiB", with train_batch_size=4096 taken for lax.map's batch_size)
    r = ask(client, "Grug-MoE-Canary auf v5p-8 (train_batch_size=4096 global, 4-way data sharding, seq len 4096) stirbt "
                    "jedes Mal damit. Laut Dump ist das failing temporary f32[4194304,8192]. Kein normales HBM-OOM, oder?",
            "jax.errors.JaxRuntimeError: INTERNAL: RET_CHECK failure (jellyfish/bounds_check.cc:717) "
            "allocation_size_words <= std::numeric_limits<int32_t>::max() 2327838720")
    assert r.language == "de" and r.grounded
    assert r.verdict.startswith("Das ist kein Speichermangel des Geräts") and "2^31 − 1" in r.verdict, r.verdict
    assert "128.00 GiB" in r.answer and "Chunk" not in r.answer.split("### ")[0]


def test_a_gpu_allocation_failing_inside_a_flax_from_pretrained_is_the_load_s_two_copies_not_a_batch(client):
    # (issue 21, round 58: dalle-playground's Mega failing in DalleBart.from_pretrained was told to reduce a batch)
    log = ("  File \"app.py\", line 41, in load\n    model, params = FlaxBartForConditionalGeneration.from_pretrained(NAME)\n"
           "  File \"/usr/local/lib/python3.10/site-packages/transformers/modeling_flax_utils.py\", line 1012, in "
           "from_pretrained\njaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
           "allocate 536870912 bytes.")
    r = ask(client, "¿Por qué se queda sin memoria al cargar el modelo en una T4?", log)
    head = r.answer.split("### ")[0]
    assert r.language == "es" and "_do_init=False" in head, head[:600]
    assert "reduce" not in (r.verdict or "") and "lote" not in (r.verdict or ""), r.verdict


def test_tiny_requests_refused_beside_a_broken_stream_are_the_pool_gone_first(client):
    # (issue 21, round 60: "pytest -n" with every worker preallocating: tests failing to allocate 1 to 64
    # bytes were told the stream broke first and the build might be bad)
    log = ("FAILED tests/core_test.py::CoreTest::test_vjp_3 - RuntimeError: Resource exhausted: Out of memory while trying "
           "to allocate 16 bytes.\nFAILED tests/api_test.py::APITest::test_jit_2 - RuntimeError: INVALID_ARGUMENT: stream "
           "is uninitialized or in an error state")
    r = ask(client, "running the jax test suite with pytest -n 8 on one GPU: hundreds of tests fail with out of memory on "
                    "a few bytes. is my build broken?", log)
    head = r.answer.split("### ")[0]
    assert "stream is uninitialized" not in (r.verdict or ""), r.verdict
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" in head, head[:800]


def test_a_pasted_hlo_dump_gets_its_largest_buffer_first_with_the_fusion_it_depends_on(client):
    # (issue 21, round 66: a pasted HLO whose 6-D broadcast took 14.96 GiB per buffer was answered with
    # version-regression text and nothing read from it)
    from tests.diagnostics.test_parse import _HLO_DUMP

    r = ask(client, "Seit dem jax-Update läuft mein Schritt auf der GPU in RESOURCE_EXHAUSTED. Hier ein Stück vom "
                    "HLO-Dump: woher kommen die riesigen Puffer?", _HLO_DUMP).model_dump()
    assert r["language"] == "de"
    assert r["answer"].startswith("**Der größte Puffer im eingefügten HLO:** `bf16[64,8192,8192]` = 8.00 GiB, definiert "
                                  "von 2 Instruktionen (`broadcast.7`, `exponential.9`; model.py:31, model.py:32)."), \
        r["answer"][:300]
    assert "`bf16[64,8192]` = 1.00 MiB" in r["answer"] and "jax.lax.map" in r["answer"]


@pytest.mark.parametrize("peak, card, unified", [
    ("1.38TiB", "H200 (141GB)", False),  # (held-out round 72) ten cards: unified memory is no way out either
    ("180.50GiB", "H200 (141GB)", True),  # over the card, under four of it: unified memory can hold the rest
])
def test_a_remat_peak_far_over_the_card_is_not_sent_to_unified_memory(client, peak, card, unified):
    log = f"Can't reduce memory use below 99.55GiB by rematerialization; only reduced to {peak}, down from {peak} originally"
    r = ask(client, f"My haiku model OOMs on one {card}, batch 1024. Can a memory flag fix it?", error_log=log)
    assert ("TF_FORCE_UNIFIED_MEMORY=1" in r.verdict) is unified, r.verdict
    if not unified:
        assert "10 times your whole" in r.verdict and "Python loop" in r.verdict


def test_a_model_served_by_an_inference_engine_is_not_told_to_remat_its_backward_pass(client):
    log = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. "
           "Used 31.68G of 31.25G hbm. Exceeded hbm capacity by 440.32M.")
    served = ask(client, "sglang-jax serving DeepSeek-R1 on v6e-64 with --max-running-requests 64: the EXTEND "
                         "precompile fails just 440M over. Will fewer running requests fix it?", error_log=log)
    assert "hbm-checkpoint-near-fit" not in [x.id for x in served.remedies]
    trained = ask(client, "my train step fails to compile just 440M over on v6e, what now?", error_log=log)
    assert "hbm-checkpoint-near-fit" in [x.id for x in trained.remedies]


def test_backends_probed_beside_a_cuda_platform_are_not_a_fall_back_to_the_cpu(client):
    # (held-out round 74: grok-1 on WSL2; JAX lists CUDA while it probes 'rocm' and 'tpu')
    log = ("INFO:jax._src.xla_bridge:Unable to initialize backend 'rocm': NOT_FOUND: Could not find registered platform "
           "with name: \"rocm\". Available platform names are: CUDA\n"
           "INFO:jax._src.xla_bridge:Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so\n"
           "OSError: [Errno 28] No space left on device: './checkpoints/ckpt-0/tensor00000_000' -> '/dev/shm/tmpeq5bn6yp'")
    r = ask(client, "WSL2, 64G RAM, one 3090: loading the grok-1 checkpoint fails like this. Is /dev/shm a RAM disk?",
            error_log=log)
    assert not (r.verdict or "").startswith("JAX did not start the accelerator's backend"), r.verdict
    assert "`/dev/shm`, a tmpfs that lives in the host's RAM" in r.answer


def test_a_request_that_is_a_dense_square_matrix_is_said_to_be_all_pairs_whatever_the_batch(client):
    # (held-out round 74: moscot's MOSTA data; 2335208976 bytes = 24162 × 24162 × 4 at every batch_size)
    log = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2335208976 bytes."
    r = ask(client, "moscot on the GPU: I halved batch_size down to 15 and the error never changes. What now?",
            error_log=log)
    assert r.verdict.startswith("The failed request, 2.17 GiB, is exactly 24162 × 24162 elements of `float32`"), r.verdict
    assert "rt-batch-size" not in [x.id for x in r.remedies] and "You already reduced the batch" not in r.answer
    # a round side (16384, a multiple of 32) is as often [8, 2048, 16384] as a square: not read so
    r = ask(client, "it OOMs on the GPU, what now?", error_log=f"Out of memory while trying to allocate {4 * 16384 ** 2} bytes.")
    assert "elements of float32" not in (r.verdict or "")


def test_a_log_that_prints_the_failed_buffer_s_shape_is_not_overruled_by_the_asker_s_figures(client):
    # (held-out round 78: 4096 × 3072 × 768 × 4 B happens to equal bf16[12,524288,3072], which the log prints)
    log = ("jaxlib._jax.XlaRuntimeError: RESOURCE_EXHAUSTED: Allocation (size=38654705664) would exceed memory "
           "(size=34359738368) :: #allocation598 [shape = 'bf16[12,524288,3072]{2,1,0:T(8,128)(2,1)}', space=hbm, "
           "size = 0xffffffffffffffff, tag = 'output of custom-call.400@{}'] :: <no-hlo-instruction>")
    r = ask(client, "Levanter MoE (12 layers, hidden_dim 768, intermediate_dim 3072, seq_len 4096, batch 64) on a "
                    "TPU v4-128: the first step dies. What exactly is this buffer?", error_log=log)
    assert "requested_factored" not in r.facts and "4096, 3072, 768" not in r.answer
    assert "bf16[12,524288,3072]" in r.answer
