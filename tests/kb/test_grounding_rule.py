"""The rule beside the grounding model (kb/grounding.py `names_jax_oom`): a question that says it ran
out of memory and names JAX, XLA or a TPU is about the guides' subject, in every language."""

import pytest

from oomkb.kb.grounding import names_jax_oom


@pytest.mark.parametrize("question", [
    "je fais du fine-tuning d'un modèle 1B sur une A100 40GB avec optax.adamw, OOM au premier step",
    "JAX 학습 중에 메모리 부족이 나요",
    "用 flax 训练的时候显存不足怎么办",
    "mein jax-Training bricht mit out of memory ab",
    "при обучении на TPU не хватает памяти",
    # a library built on JAX named for JAX itself
    "NumPyro на GPU: NUTS, num_chains=2. Ловлю OOM, что ещё можно сделать?",
    "EasyDeL full SFT on 8x A100, OOM at the first step",
])
def test_an_oom_with_jax_named_is_in_scope(question):
    assert names_jax_oom(question)


@pytest.mark.parametrize("question", [
    "how do I bake bread?",
    "torch OOM on my 4090",                       # another framework: no JAX term
    "how do I use optax.adamw with a warmup schedule?",  # JAX, no OOM
    "my phone runs out of memory when I open the camera",
])
def test_without_both_it_is_left_to_the_model(question):
    assert not names_jax_oom(question)
