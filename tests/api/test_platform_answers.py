"""A GPU question gets no XLA:TPU flag (issue 21: "TPU text leaks into GPU answers"), a TPU
question still does; a follow-up does not get the short answer of its first turn again.
Through the real app (REST)."""

from __future__ import annotations

from oomkb.kb.platform import load_platforms
from tests.api.rest import ask_json as _ask, client  # noqa: F401  (client: a fixture)


def test_the_platform_words():
    p = load_platforms()
    assert p.gpu_only("OOM on my A100 80GB with remat") and p.gpu_only("显存不够, RTX 4090")
    assert not p.gpu_only("运行时显存碎片化导致分配失败")  # 显存: any device memory in Chinese usage
    assert not p.gpu_only("remat on TPU v5e") and not p.gpu_only("GPU vs TPU v4 memory")
    assert not p.gpu_only("how does remat save memory?")
    assert p.tpu_only("set `--xla_tpu_rematerialization_algo=PEAK_PRIORITY`") and not p.tpu_only("jax.checkpoint")


def test_a_gpu_question_gets_no_tpu_flag_and_a_tpu_question_does(client):
    gpu = _ask(client, {"question": "the backward pass OOMs on an A100 80GB, how do I use remat to save memory?"})
    assert gpu["grounded"] and "xla_tpu" not in gpu["answer"]
    tpu = _ask(client, {"question": "the backward pass OOMs at compile on TPU v5e, which XLA flags make remat "
                                    "save more memory?"})
    assert "xla_tpu_rematerialization" in tpu["answer"]


def test_a_follow_up_does_not_get_the_first_turn_s_short_answer_again(client):
    first = _ask(client, {"question": "how do I add remat to a scanned layer in flax linen? it OOMs on A100"})
    assert "nn.remat(Block)" in first["answer"]
    second = _ask(client, {"question": "ok did nn.remat(Block) inside nn.scan with nothing_saveable, it fits but "
                                       "step time went up 35%. is there a middle ground?",
                           "conversation_id": first["conversation_id"]})
    assert second["follow_up"] and "dots_with_no_batch_dims_saveable" in second["answer"]
    assert "Block = nn.remat(Block)" not in second["answer"]


def test_the_tpu_only_steps_are_steps_of_the_catalogue():
    from oomkb.kb.remedies import load_catalogue
    ids = {r.id for r in load_catalogue().remedies}
    assert load_platforms().tpu_only_remedies <= ids


def test_an_h100_fragmentation_question_hears_of_the_pool_not_of_the_tpu_runtime(client):
    r = _ask(client, {"question": "On an H100 I get OOM mid-epoch although the profiler peak is ~60GB of 80. "
                                  "Already tried XLA_PYTHON_CLIENT_PREALLOCATE=false, it got worse. Fragmentation?"})
    assert r["answer"].startswith("The 60 GB you see is JAX's default pool on a 80.00 GiB card")
    assert "defragments" not in r["answer"] and "xla_tpu" not in r["answer"]


def test_a_pallas_kernel_on_a_gpu_gets_no_vmem_step(client):
    # Pallas on an H100 lowers to Triton: its blocks live in shared memory, and VMEM exists on TPU only
    r = _ask(client, {"question": "My Pallas GPU kernel on an H100 fails: the autotuner finds no block config that "
                                  "fits. How do I pick smaller blocks?"})
    assert "vmem_limit_bytes" not in r["answer"] and "pltpu" not in r["answer"]
    assert load_platforms().tpu_only("raise `vmem_limit_bytes` with pltpu.CompilerParams")


def test_a_tpu_conversation_gets_no_short_answer_about_a_gpu_s_pool(client):
    # (held-out round 78: a Pallas kernel test on a v6e got the pytest-xdist GPU-pool block, a MUST-NOT)
    first = _ask(client, {"question": "My sglang-jax Pallas fused-moe kernel test passes on v7x with ep=8 but fails with "
                                      "RESOURCE_EXHAUSTED on a single-chip v6e CI (ep=1). Why only on one chip?"})
    then = _ask(client, {"question": "Give me test dimensions that fit on v6e with ep=1 and the pytest change, with an "
                                     "assert that checks it.", "conversation_id": first["conversation_id"]})
    assert "pytest_workers_gpu" not in [f["subject"] for f in then["figures"]]
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in then["answer"], then["answer"]
