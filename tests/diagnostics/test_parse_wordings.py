"""Every OOM wording, from real texts: the allocator's wording decides the category and the backend.

Each text is copied from a public report, named beside it (repository and issue, or the XLA source
or error page that prints it); none of them was used to write the signatures they now test, except
the XLA:CPU text, measured here (TPU_NOTES.md) and printed by XLA's tracked_tfrt_cpu_device_buffer.h.
"""

from __future__ import annotations

import pytest

from oomkb.diagnostics.parse import parse_error

K, M, G, T = 2**10, 2**20, 2**30, 2**40


# ------------------------------------------------------------------ GPU stream-executor allocator


@pytest.mark.parametrize(
    ("log", "requested"),
    [
        # oomkb issue 10: the text that came out as a TPU runtime allocation.
        ("Failed to allocate request for 2.99GiB (3206250496B) on device ordinal 0", 3206250496),
        # google-deepmind/jax_privacy#10
        ("Original error: RESOURCE_EXHAUSTED: Failed to allocate request for 176.00MiB (184549376B) "
         "on device ordinal 0", 184549376),
        # kingoflolz/mesh-transformer-jax#90
        ("2021-08-12 18:16:23.302001: E external/org_tensorflow/tensorflow/compiler/xla/pjrt/"
         "pjrt_stream_executor_client.cc:1960] Execution of replica 0 failed: Resource exhausted: "
         "Failed to allocate request for 20.18GiB (21670470184B) on device ordinal 0", 21670470184),
    ],
)
def test_stream_executor_failed_request_is_a_gpu_oom_with_the_exact_byte_count(log, requested):
    result = parse_error(log)
    assert (result.category, result.backend) == ("gpu_oom", "gpu")
    assert result.requested_bytes == requested
    assert result.device_ordinal == 0


# ---------------------------------------------------------------------------- XLA:CPU backend


def test_cpu_backend_out_of_memory_is_a_host_oom_on_cpu():
    log = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 9, in <module>\n'
        "    jnp.zeros((1 << 40,)).block_until_ready()\n"
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.\n"
    )
    result = parse_error(log)
    assert (result.category, result.backend, result.memory_space) == ("host_oom", "cpu", "host")
    assert result.requested_bytes == 4 * T
    assert result.signature == "xla_cpu_out_of_memory_allocating"


def test_cpu_backend_oom_inside_a_debug_callback_is_found_in_the_wrapping_error():
    # What XLA:CPU raises when a jax.debug.callback runs out of memory (measured here).
    log = (
        "jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
        '  File "/work/train.py", line 9, in <module>\n'
        '  File "/site-packages/jax/_src/interpreters/pxla.py", line 395, in __call__\n'
        "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.\n"
    )
    result = parse_error(log)
    assert (result.category, result.backend, result.requested_bytes) == ("host_oom", "cpu", 4 * T)


# ------------------------------------------------------------------------------ GPU BFC allocator


def test_bfc_allocator_failure_after_a_remat_warning_is_the_gpu_oom():
    # jax-ml/jax#27354
    log = (
        "2025-03-23 20:28:49.804627: W external/xla/xla/hlo/transforms/simplifiers/hlo_rematerialization.cc:3021] "
        "Can't reduce memory use below 0B (0 bytes) by rematerialization; only reduced to 1.25TiB "
        "(1374521760000 bytes), down from 1.25TiB (1374521760000 bytes) originally\n"
        "2025-03-23 20:28:59.832181: W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 1.25TiB (rounded to 1374521760000)requested by op \n"
    )
    result = parse_error(log)
    assert (result.category, result.backend) == ("gpu_oom", "gpu")
    assert result.signature == "bfc_allocator_ran_out"
    assert result.requested_bytes == 1374521760000
    assert result.allocator == "GPU_0_bfc"


def test_bfc_warnings_that_are_not_a_failure_give_way_to_the_real_error():
    # flatironinstitute/nemos#345
    log = (
        "`jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "3199993600 bytes.`\n"
        "2025-05-18 21:59:55.086788: W external/xla/xla/tsl/framework/bfc_allocator.cc:310] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 3.37GiB with freed_by_count=0. The caller "
        "indicates that this is not a failure, but this may mean that there could be performance gains "
        "if more memory were available.\n"
    )
    result = parse_error(log)
    assert (result.category, result.backend, result.requested_bytes) == ("gpu_oom", "gpu", 3199993600)


# ------------------------------------------------------------------------ hlo_rematerialization


def test_remat_warning_alone_gives_its_limit_and_what_it_reached():
    # EnzymeAD/Enzyme-JAX#1363
    log = (
        "W0000 00:00:1756998431.440298    5182 hlo_rematerialization.cc:3183] Can't reduce memory use "
        "below 10.64GiB (11428802214 bytes) by rematerialization; only reduced to 71.27GiB "
        "(76523901244 bytes), down from 73.51GiB (78931543988 bytes) originally\n"
    )
    result = parse_error(log)
    assert result.category == "gpu_oom"
    assert result.signature == "xla_rematerialization_warning"
    assert (result.available_bytes, result.used_bytes) == (11428802214, 76523901244)
    assert result.exceeded_by_bytes == 76523901244 - 11428802214


def test_remat_warning_beside_a_tpu_hbm_error_only_adds_numbers():
    # tensorflow/tpu#598
    log = (
        "W1110 07:24:24.387306     892 op_kernel.cc:1639] Resource exhausted: Compilation failure: Ran "
        "out of memory in memory space hbm. Used 18.56G of 16.00G hbm. Exceeded hbm capacity by 2.56G.\n"
        "W1110 07:32:01.391885     918 hlo_rematerialization.cc:1363] Can't reduce memory use below "
        "13.58GiB (14583876403 bytes) by rematerialization; only reduced to 15.22GiB (16339342336 bytes)\n"
    )
    result = parse_error(log)
    assert (result.category, result.backend) == ("compile_hbm_oom", "tpu")
    assert result.used_bytes == round(18.56 * G) and result.available_bytes == 16 * G
    assert result.remat_limit_bytes == 14583876403


# ------------------------------------------------------------------------------ Linux OOM killer


def test_oom_killer_line_is_a_host_oom_with_the_process_and_its_memory():
    # equinor/ert#7797
    log = (
        "2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) "
        "total-vm:87033376kB, anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 "
        "pgtables:169956kB oom_score_adj:0\n"
    )
    result = parse_error(log)
    assert (result.category, result.memory_space) == ("host_oom", "host")
    assert (result.pid, result.process_name) == (1440763, "perl")
    assert (result.total_vm_bytes, result.anon_rss_bytes) == (87033376 * K, 60356340 * K)


def test_oom_killer_line_with_grouped_digits_still_names_the_process():
    # 0jc1/py-autovod#7: the figures are printed with separators, one of them misplaced.
    log = (
        "[Sun Mar 30 08:24:00 2025] Out of memory: Killed process 7899 (python) total-vm:26,184,840kB, "
        "anon-rss:153,700,88kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:38964kB oom_score_adj:0\n"
    )
    result = parse_error(log)
    assert (result.category, result.pid, result.process_name) == ("host_oom", 7899, "python")
    # total-vm is grouped by thousands and read (issue 23); anon-rss's separators are misplaced.
    assert result.total_vm_bytes == 26_184_840 * K and result.anon_rss_bytes is None


# ----------------------------------------------------------- program load (E0101), SparseCore (E1002)


def test_program_load_failure_e0101_from_the_error_page():
    # openxla/xla docs/errors/error_0101.md
    log = (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_embedding_pipeline_step_fn': "
        "Attempting to reserve 29.49G at the bottom of memory. That was not possible. There are 147.64M "
        "free, 0B reserved, and 147.64M reservable. Scope: unknown..: while running replica 0 and "
        "partition 34 of a replicated computation (other replicas may have failed as well).\n"
    )
    result = parse_error(log)
    assert (result.category, result.backend) == ("runtime_allocation", "tpu")
    assert result.requested_bytes == round(29.49 * G)
    assert result.free_bytes == result.reservable_bytes == round(147.64 * M)
    assert result.program_name == "jit_embedding_pipeline_step_fn"


def test_program_load_failure_without_the_free_memory_figures():
    # AI-Hypercomputer/tpu-recipes#151
    log = ("RESOURCE_EXHAUSTED: Error loading program 'jit__multi_slice': Attempting to reserve 6.14G at "
           "the bottom of memory. That was not possible.\n")
    result = parse_error(log)
    assert (result.category, result.backend) == ("runtime_allocation", "tpu")
    assert result.requested_bytes == round(6.14 * G) and result.free_bytes is None
    assert result.program_name == "jit__multi_slice"


def test_sparsecore_hbm_e1002_from_the_error_page():
    # openxla/xla docs/errors/error_1002.md
    log = ("XlaRuntimeError: RESOURCE_EXHAUSTED: TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage "
           "174.10G, exceeding available bytes: 95.74G\n")
    result = parse_error(log)
    assert (result.category, result.backend, result.memory_space) == ("compile_hbm_oom", "tpu", "hbm")
    assert result.tensorcore_bytes == round(34.82 * G) and result.sparsecore_bytes == round(174.10 * G)
    assert result.used_bytes == result.tensorcore_bytes + result.sparsecore_bytes
    assert result.exceeded_by_bytes == result.used_bytes - round(95.74 * G)


# ------------------------------------------------------------------------------------------ SMEM


def test_smem_overflow_is_its_own_category_with_its_numbers():
    # vllm-project/vllm#8318
    log = ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran "
           "out of memory in memory space smem. Used 1.00M of 1.00M smem. Exceeded smem capacity by 1.7K.\n")
    result = parse_error(log)
    assert (result.category, result.backend, result.memory_space) == ("compile_smem_oom", "tpu", "smem")
    assert (result.used_bytes, result.available_bytes) == (M, M)
    assert result.exceeded_by_bytes == round(1.7 * K)


def test_smem_overflow_without_numbers():
    # pytorch/xla#2628
    log = ("(0) Resource exhausted: Ran out of memory in memory space smem. It should not be possible to "
           "run out of smem - please file a bug against XLA.\n")
    result = parse_error(log)
    assert (result.category, result.memory_space, result.used_bytes) == ("compile_smem_oom", "smem", None)


# ---------------------------------------------------- categories the guides do not cover: the answer


@pytest.mark.parametrize(
    ("log", "language", "numbers", "nearest"),
    [
        ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out "
         "of memory in memory space smem. Used 1.00M of 1.00M smem. Exceeded smem capacity by 1.7K.",
         "ja", ["1.00 MiB", "1.70 KiB"], "scoped-vmem-oom#retune-kernel"),
        ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.",
         "ko", ["4.00 TiB"], "e1000-compile-hbm-oom#scenario-3b-architecture-sharding"),
    ],
)
def test_uncovered_category_is_said_honestly_with_its_numbers_and_the_nearest_section(log, language, numbers, nearest):
    from oomkb.api.core.evidence import facts_from
    from oomkb.units import format_bytes
    from oomkb.kb.remedies import load_catalogue
    from oomkb.kb.remedies.choice import choose_remedies
    from oomkb.kb.remedies.rendering import diagnosis_line, remedy_text

    catalogue = load_catalogue()
    facts = facts_from(parse_error(log))
    line = diagnosis_line(catalogue, facts, language, format_bytes)
    assert all(n in line for n in numbers), line
    chosen = choose_remedies(catalogue, facts, facts["category"])
    assert nearest in [r.cite for r in chosen]
    note = remedy_text(catalogue, chosen[0], facts, "en", format_bytes)
    assert note.startswith("The guides do not treat")
