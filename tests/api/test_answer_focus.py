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
    assert "os.environ[\"XLA_PYTHON_CLIENT_MEM_FRACTION\"]" in second["answer"] and ".50 + .20 + .20" in second["answer"]
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
    assert third["grounded"] and "256.00 GiB" in third["answer"] and "最多放得下 27 条序列" in third["answer"]  # 15.75 GiB per chip


def test_array_deleted_after_donation_is_explained_and_the_shapes_quoted_stop_at_the_quote(client):
    r = _ask(client, {"question": 'hab jetzt @partial(jax.jit, donate_argnums=(0,)) gesetzt. bekomme aber "UserWarning: '
                                  'Some donated buffers were not usable: ShapedArray(float32[4096,1024]), ..." und später '
                                  'beim Loggen "RuntimeError: Array has been deleted with shape=float32[4096,1024]". '
                                  'was mach ich falsch?'})
    assert r["language"] == "de" and r["grounded"]
    assert r["facts"]["donation_unusable"].startswith("ShapedArray(float32[4096,1024])")
    assert "und später" not in r["facts"]["donation_unusable"]
    assert "`state = train_step(state, batch)`" in r["answer"] and "Array has been deleted" in r["answer"]


def test_old_and_new_state_alive_together_is_answered_with_donation_not_the_memory_tools(client):
    r = _ask(client, {"question": "unser train_step auf H100 80GB gibt ein neues TrainState zurück, params + adam state "
                                  "zusammen ~18GB. In memory_stats sehe ich peak ~36GB nur für den State, also alt + neu "
                                  "gleichzeitig. wie vermeide ich das?"})
    assert r["answer"].startswith("Dass alter und neuer Zustand gleichzeitig leben")
    assert "donate_argnums=(0,)" in r["answer"]
    assert "memory_analysis()" not in r["answer"]  # memory_stats is what they read, not what they ask about


def test_a_log_with_a_verdict_keeps_at_most_two_general_steps_after_it(client):
    log = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 41.37G of "
           "15.75G hbm. Exceeded hbm capacity by 25.62G.\n\nTotal hbm usage >= 42.62G:\n    reserved          1.25G\n"
           "    program          41.37G\n    arguments            0B\n\n  Largest program allocations in hbm:\n\n"
           "  1. Size: 4.00G\n     Shape: f32[2,8,8192,8192]{3,2,1,0:T(8,128)}\n     Unpadded size: 4.00G\n"
           "     Allocation type: HLO temp\n     ==========================\n\n  2. Size: 4.00G\n"
           "     Shape: f32[2,8,8192,8192]{3,2,1,0:T(8,128)}\n     Unpadded size: 4.00G\n"
           "     Allocation type: HLO temp\n     ==========================\n")
    r = _ask(client, {"question": "seq_len 2048 -> 8192 on v5e-16, dies at compile time. what is eating 41G?",
                      "error_log": log})
    assert r["verdict"] and "attention scores" in r["verdict"]
    general = [x["id"] for x in r["remedies"] if not x["triggered_by_evidence"]]
    # the verdict's lead step (a smaller batch helps linearly) and two general ones, not a newer TPU
    assert len(general) <= 3 and not {"hbm-newer-tpu", "hbm-larger-topology"} & set(general), general


def test_memory_stats_keys_and_logging_are_explained_per_device_and_host(client):
    r = _ask(client, {"question": "学習ループの中で毎ステップ HBM 使用量をログりたいです。memory_stats() で bytes_in_use と "
                                  "peak_bytes_in_use 取れるのは知ってるけど、各キーの意味と、wandb に流すときのちゃんとした"
                                  "やり方（全デバイス分・マルチホスト）を教えてください"})
    assert r["language"] == "ja" and r["answer"].startswith("`memory_stats()` は GPU と TPU で使え")
    assert "jax.local_devices()" in r["answer"] and "jax.process_index()" in r["answer"]
    assert "memory_analysis()" not in r["answer"]


def test_figures_asked_to_size_a_batch_are_not_followed_by_reduce_the_batch(client):
    r = _ask(client, {"question": "TPU 세대별 칩 하나당 HBM 용량 좀 알려주세요. v4, v5e, v5p 각각 몇 GiB인지. 배치 사이즈 계산하려고 해요"})
    assert r["answer"].startswith("**v4:**") and "**v5p:**" in r["answer"]
    assert not r["remedies"], [x["id"] for x in r["remedies"]]


def test_what_memory_analysis_counts_is_answered_yes_or_no_and_an_estimate_needs_no_tpu(client):
    de = _ask(client, {"question": "kurze Frage: zählt compiled.memory_analysis().temp_size_in_bytes die Argumente "
                                   "(params/opt state) mit? ja oder nein"})
    # "counts only the temporaries" is the no (a bare "No" would also open answers to questions that did not ask)
    assert de["grounded"] and de["answer"].startswith("`temp_size_in_bytes` zählt nur die Temporärpuffer")
    assert "argument_size_in_bytes" in de["answer"]
    en = _ask(client, {"question": "how do I estimate peak HBM for my train step before I burn pod time on it? "
                                   "ideally without having the TPU attached"})
    assert en["answer"].startswith("Compile the step ahead of time") and "get_topology_desc" in en["answer"]


def test_a_memory_chain_in_russian_gets_a_new_answer_each_turn(client):
    first = _ask(client, {"question": "как в рантайме посмотреть сколько HBM реально занято на TPU во время трейна?"})
    assert "memory_stats()" in first["answer"].split("\n")[0]
    cid = first["conversation_id"]
    second = _ask(client, {"question": "а memory_stats() на TPU вообще работает? peak_bytes_in_use там есть?",
                           "conversation_id": cid})
    assert second["answer"].startswith("`memory_stats()` работает на GPU и TPU")
    third = _ask(client, {"question": "и как сохранить профиль памяти в файл, чтобы глянуть в pprof?",
                          "conversation_id": cid})
    assert third["answer"].startswith("`jax.profiler.save_device_memory_profile(") and "go tool pprof" in third["answer"]


def test_tried_fixes_in_korean_and_hinglish_and_a_batch_of_one_are_not_offered_again(client):
    ko = _ask(client, {"question": "TPU v4-8에서 llama 7B 풀 파인튜닝 중인데 per-device batch 1로 줄이고 "
                                   "jax.checkpoint(policy=nothing_saveable)까지 걸었는데도 compile 단계에서 HBM OOM 나요. "
                                   "다음엔 뭘 해야 하죠?"})
    ids = [x["id"] for x in ko["remedies"]]
    assert {"hbm-batch-size", "hbm-checkpoint"}.issubset(set(ko["tried"])) and "hbm-checkpoint" not in ids
    hi = _ask(client, {"question": "bhai maine train_step pe donate_argnums=(0,) lagaya aur har epoch ke baad "
                                   "jax.clear_caches() bhi call kar raha hoon, phir bhi eval ke baad GPU memory badhti "
                                   "ja rahi hai. leak kahan se ho raha hoga?"})
    assert "rt-donate" in hi["tried"] and not {"hbm-donate", "rt-donate"} & {x["id"] for x in hi["remedies"]}
    en = _ask(client, {"question": "llama-7b on v4-8, seq 4096, per-device batch 1, fsdp. compile OOMs, what do I change?"})
    assert "hbm-batch-size" not in [x["id"] for x in en["remedies"]]


def test_a_follow_up_asking_for_the_code_it_names_gets_those_snippets_in_that_order(client):
    # round 16 Q10: "the optax snippet + the embedding's sharding" was answered with the previous
    # turn's text again; it names two pieces of code, and gets both, without general steps after them
    first = _ask(client, {"question": "Salut, full finetune de Gemma 2B (2.51B params, tout en f32) sur 4x RTX 4090 "
                                      "avec un mesh jax ('model', 4). En AdamW OOM direct. J'ai shardé toutes les "
                                      "matrices sauf l'embedding 256000x2048 que j'ai laissé répliqué."})
    third = _ask(client, {"question": "vas-y donne moi le snippet optax + le sharding de l'embedding",
                          "conversation_id": first["conversation_id"]})
    answer = third["answer"]
    assert third["grounded"] and third["follow_up"] and third["language"] == "fr"
    assert "réponse précédente" not in answer
    assert "mu_dtype=jnp.bfloat16" in answer and "NamedSharding" in answer
    assert answer.index("mu_dtype") < answer.index("NamedSharding")  # in the order the turn names them
    assert "### Que faire" not in answer


def test_an_all_pairs_allocation_is_explained_from_the_askers_figures_and_its_follow_ups_answered(client):
    # round 16 Q5, in another language and other figures: 8,000 items of 50x50 compared pairwise
    requested = 8000 * 8000 * 50 * 50 * 4
    first = _ask(client, {"question": f"calculo la similitud entre todos los pares de 8.000 parches 50x50 (float32) "
                                      f"con vmap(vmap(sim)) en una 3090 y sale \"Out of memory while trying to "
                                      f"allocate {requested} bytes\". ¿de dónde sale eso?"})
    answer = first["answer"]
    assert first["language"] == "es" and answer.startswith("**La asignación que falló es el producto")
    assert "8.000 × 8.000 × 50 × 50 × 4 B" in answer and "244.14 MiB" in answer  # the result: 8000² × 4 B
    assert "### Qué hacer" not in answer  # no profiling steps to find an allocation already named
    second = _ask(client, {"question": "vale, si cambio el vmap de fuera por jax.lax.map(..., batch_size=b), "
                                       "¿qué b cabe? tengo unos 12 GiB libres",
                           "conversation_id": first["conversation_id"]})
    assert "`batch_size=161`" in second["answer"]  # 12 GiB / (8000 x 50 x 50 x 4 B = 76.29 MiB) = 161
    third = _ask(client, {"question": "funciona pero va lentísimo. ¿hay algo mejor? es exp(-||a-b||^2/sigma)",
                          "conversation_id": first["conversation_id"]})
    assert "‖a−b‖² = ‖a‖² + ‖b‖² − 2·a·b" in third["answer"] and "def sq_dists" in third["answer"]


def test_the_pairwise_distance_snippet_computes_the_distances_it_claims():
    import numpy as np

    from oomkb.kb.figures import load_figures

    code = next(a.snippet for a in load_figures().data.answers if a.id == "pairwise_distances")
    scope: dict = {"__name__": "snippet"}
    exec(compile(code, "pairwise_distances.py", "exec"), scope)
    x = np.random.default_rng(0).random((40, 9), dtype=np.float32)
    direct = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    assert np.allclose(np.asarray(scope["sq_dists"](x, x)), direct, atol=1e-5)


def test_a_follow_up_naming_other_code_than_the_conversations_gets_that_code(client):
    # tuning_i Q20: after a LoRA answer, "give me the JAX lines for a mesh over the 8 cores and the frozen
    # weights spread over it" got the LoRA code again; "the code for that" still gets the conversation's own
    first = _ask(client, {"question": "LoRA fine-tune of a 34B model on a TPU v3-8, OOM. gradients and Adam state only "
                                      "for the adapters?"})
    second = _ask(client, {"question": "give me the JAX lines for a mesh over the 8 cores and to shard the frozen "
                                       "weights over it at load time",
                           "conversation_id": first["conversation_id"]})
    assert "NamedSharding" in second["answer"] and "stop_gradient" not in second["answer"]
    third = _ask(client, {"question": "and the optax code for that LoRA part?", "conversation_id": first["conversation_id"]})
    assert "optax" in third["answer"]


def test_the_failed_cell_snippet_frees_what_the_last_error_holds():
    from oomkb.kb.figures import load_figures

    code = next(a.snippet for a in load_figures().data.answers if a.id == "failed_cell_keeps_arrays")
    exec(compile(code, "failed_cell_keeps_arrays.py", "exec"), {"__name__": "snippet"})
    import jax

    assert not [a for a in jax.live_arrays() if a.shape == (1024, 1024)]  # cleared by the snippet itself
