"""Launch commands built from a conversation's own settings (kb/commands.py, kb/catalogue/commands.yaml)."""

from __future__ import annotations

from oomkb.kb.commands import load_commands
from oomkb.kb.snippets import Snippet, snippet_markdown

COMMANDS = load_commands()


def test_a_maxtext_command_takes_the_conversation_s_settings_the_last_value_winning_and_no_env_vars():
    said = ("MaxText llama3.1-8b on a v5p-64, per_device_batch_size=8, remat_policy=full, "
            "XLA_PYTHON_CLIENT_MEM_FRACTION=.9\nand with per_device_batch_size=4?\nwrite me the command")
    assert COMMANDS.asks_for_one("write me the command") and COMMANDS.asks_for_one("커맨드 좀 써주세요")
    code = COMMANDS.command(said, "line").snippet
    assert "model_name=llama3.1-8b" in code and "per_device_batch_size=4" in code and "remat_policy=full" in code
    assert "per_device_batch_size=8" not in code and "mem_fraction" not in code.lower()
    assert snippet_markdown(Snippet(code=code, check="parse"))[0] == "```bash"


def test_a_maxtext_run_checked_ahead_of_time_gets_train_compile_for_the_slices_named():
    said = ("MaxText gemma2-9b on 4× v6e-256 multislice, per_device_batch_size=3, max_target_length=4096\n"
            "ok and per_device_batch_size=2?\nI want to check the memory with an AOT compile first: the command please")
    code = COMMANDS.command(said, "line").snippet
    assert "python3 -m MaxText.train_compile MaxText/configs/base.yml" in code, code
    assert "compile_topology=v6e-256 compile_topology_num_slices=4" in code
    assert "per_device_batch_size=2" in code and "per_device_batch_size=3" not in code and "model_name=gemma2-9b" in code
    # one slice said as a number of slices, none said: one
    assert "compile_topology_num_slices=2" in COMMANDS.command("MaxText train_compile, 2 slices of v5e-256, "
                                                               "remat_policy=full").snippet
    assert "compile_topology_num_slices=1" in COMMANDS.command("MaxText AOT on v5p-64, remat_policy=full").snippet
    # a run without ahead-of-time asked stays MaxText.train
    assert "MaxText.train MaxText" in COMMANDS.command("MaxText on v5p-64, remat_policy=full, the command").snippet


def test_no_command_without_the_tool_named_or_any_setting_of_it():
    assert COMMANDS.command("per_device_batch_size=4 on a v5e-8, the command please") is None
    assert COMMANDS.command("MaxText OOM on a v5e-8, the command please") is None
    assert not COMMANDS.asks_for_one("how much memory does it need?")


def test_a_slurm_script_carries_the_conversation_s_environment_host_ram_and_script():
    said = ("V100 16GB (4 cards), ~80 GB needed\ntheek hai unified memory try karta hu, XLA_PYTHON_CLIENT_MEM_FRACTION=6, "
            "node pe 64 GB RAM hai\naccha 128 GB RAM wale node pe shift, mere liye SLURM script likh do run_alphafold.py ke saath")
    assert COMMANDS.asks_for_one("mere liye SLURM script likh do run_alphafold.py ke saath")
    code = COMMANDS.command(said).snippet
    assert "#SBATCH --gres=gpu:1" in code and "#SBATCH --mem=128G" in code  # the last host RAM named
    assert "export XLA_PYTHON_CLIENT_MEM_FRACTION=6" in code and "export TF_FORCE_UNIFIED_MEMORY=1" in code
    assert "srun python run_alphafold.py" in code
    assert not COMMANDS.asks_for_one("my training script runs out of memory")  # a script named is no script asked for


def test_maxtext_settings_said_in_words_and_a_model_written_with_a_space_are_filled():
    conversation = ("Tô rodando o benchmark mixtral_8x7b_dropped_int8 do MaxText num v6e-256.\n"
                    "Beleza, me passa a linha de comando do MaxText pro v6e-64: FSDP nos 64 chips, sem iota embed, "
                    "remat full e quantização int8.")
    code = load_commands().command(conversation, "").snippet
    for setting in ("model_name=mixtral-8x7b", "use_iota_embed=false", "remat_policy=full", "quantization=int8",
                    "ici_fsdp_parallelism=64"):
        assert setting in code, code
    # a setting written out wins over the words ("ici_fsdp_parallelism=32" said, "FSDP over 64" too)
    code = load_commands().command("maxtext on Mixtral 8x7B: ici_fsdp_parallelism=32, fsdp over 64 chips", "").snippet
    assert "ici_fsdp_parallelism=32" in code and "ici_fsdp_parallelism=64" not in code and "mixtral-8x7b" in code
