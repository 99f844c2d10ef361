"""An answer that its short answer settles stays on it (issue 21, round 8: "template paragraphs
stand in for the answer"): an error named without figures adds no general steps, cards or
measuring plan after it; a follow-up asking for the values of an earlier answer gets its code; a
KV-cache conversation keeps being answered. Through the real app (REST, real index and model)."""

from __future__ import annotations

from tests.api.rest import ask_json as _ask, client  # noqa: F401  (client: a fixture)

TWO_PROCESSES = ("running 2 jax scripts on the same A100 80GB (one trainer + one eval loop). the second one "
                 "crashes right away with CUDA_ERROR_OUT_OF_MEMORY even though the eval model is 300M params. why?")


def test_an_error_named_without_figures_gets_its_short_answer_alone_and_a_follow_up_its_code(client):
    first = _ask(client, {"question": TWO_PROCESSES})
    assert first["grounded"] and first["answer"].startswith("That is expected: each JAX process reserves 75%")
    for noise in ("### What to do", "**Diagnosis:**", "oomkb profile", "### From the guides", "Training state"):
        assert noise not in first["answer"], noise
    second = _ask(client, {"question": "ok. and with 3 processes on that card (trainer, eval, sampler), "
                                       "what exact env var values should I set for each?",
                           "conversation_id": first["conversation_id"]})
    assert second["grounded"] and second["follow_up"]
    assert second["answer"].startswith("In code:")
    assert 'os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".50"' in second["answer"]
    assert "### What to do" not in second["answer"]
    third = _ask(client, {"question": "someone said to just set XLA_PYTHON_CLIENT_ALLOCATOR=platform everywhere. "
                                      "is that fine for the trainer in prod?",
                          "conversation_id": first["conversation_id"]})
    assert "not for a trainer in production" in third["answer"]


def test_a_follow_up_that_says_it_still_fails_with_a_setting_still_gets_steps(client):
    first = _ask(client, {"question": "My JAX training on an A100 crashes with CUDA_ERROR_OUT_OF_MEMORY at startup"})
    second = _ask(client, {"question": "Still crashes with XLA_PYTHON_CLIENT_PREALLOCATE=false, what should I do?",
                           "conversation_id": first["conversation_id"]})
    assert second["grounded"] and second["citations"] and "### What to do" in second["answer"]


def test_a_kv_cache_conversation_in_chinese_is_answered_through_its_follow_ups(client):
    first = _ask(client, {"question": "v5e-8 上跑 8B 模型推理 (bf16, 32 layers, GQA 8 个 kv heads, head_dim 128), "
                                      "max_len=8192, batch=64, 一跑 generate 就 OOM。KV cache 到底多大？"})
    assert first["grounded"] and "= 64.00 GiB" in first["answer"]
    second = _ask(client, {"question": "权重我已经用 tensor parallel 切了，但 kv cache 是在 jit 外面用 "
                                       "jnp.zeros((32, 2, 64, 8192, 8, 128), dtype=jnp.bfloat16) 建的，这个有问题吗？",
                           "conversation_id": first["conversation_id"]})
    assert second["grounded"] and second["language"] == "zh"
    assert second["answer"].startswith("有问题") and "out_shardings=sharding" in second["answer"]
    third = _ask(client, {"question": "好的，那如果 max_len 要开到 32768，同样 v5e-8，batch 最大大概能开多少？",
                          "conversation_id": first["conversation_id"]})
    assert third["grounded"] and "256.00 GiB" in third["answer"] and "最多能放 28 条序列" in third["answer"]
