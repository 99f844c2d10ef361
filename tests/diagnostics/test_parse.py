"""The OOM error parser and `oomkb diagnose`, specified by realistic logs.

Each log wraps a real error wording (from the seed guides and public bug reports) in the
noise that surrounds it in practice: log prefixes, timestamps, tracebacks, JAX internals.
Expected byte counts are computed from the figures the message states.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from oomkb.api.cli import diagnose as cli_diagnose
from oomkb.diagnostics.exceptions import LogReadError, SignatureCatalogueError
from oomkb.diagnostics.parse import CATEGORIES, ParsedError, load_signatures, parse_error, read_log

K, M, G, T = 2**10, 2**20, 2**30, 2**40

CONTRACT_FIELDS = {
    "category": (str,),
    "backend": (str, type(None)),
    "memory_space": (str, type(None)),
    "requested_bytes": (int, type(None)),
    "available_bytes": (int, type(None)),
    "used_bytes": (int, type(None)),
    "exceeded_by_bytes": (int, type(None)),
    "free_bytes": (int, type(None)),
    "tensorcore_bytes": (int, type(None)),
    "sparsecore_bytes": (int, type(None)),
    "shape": (str, type(None)),
    "instruction": (str, type(None)),
    "custom_call_target": (str, type(None)),
}

JAX_TRACEBACK = """\
Traceback (most recent call last):
  File "/home/user/project/train.py", line 142, in <module>
    state, metrics = train_step(state, batch)
                     ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/user/.venv/lib/python3.11/site-packages/jax/_src/traceback_util.py", line 180, in reraise_with_filtered_traceback
    return fun(*args, **kwargs)
  File "/home/user/.venv/lib/python3.11/site-packages/jax/_src/pjit.py", line 337, in cache_miss
    executable, pgle_profiler = _python_pjit_helper(fun, jit_info, *args, **kwargs)
  File "/home/user/.venv/lib/python3.11/site-packages/jax/_src/interpreters/pxla.py", line 2503, in compile
    executable = UnloadedMeshExecutable.from_hlo(
"""

JAX_FOOTER = """\
--------------------
For simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.
"""

TPU_STARTUP = """\
I1129 20:41:02.517201    8812 pjrt_c_api_client.cc:113] PjRtCApiClient created.
I1129 20:41:02.902118    8812 tpu_initializer_helper.cc:269] libtpu.so already in use by another process probably owned by another user. Run "$ sudo lsof -w /dev/accel0" to figure out which process is using the TPU.
2024-11-29 20:41:05,001 INFO train.py:88] step=0 compiling train_step
"""


def _all_sizes_are_null(result: ParsedError) -> bool:
    return all(value is None for name, value in result if name.endswith("_bytes"))


# ------------------------------------------------------------ compile-time HBM OOM (E1000)


def test_compile_hbm_oom_reports_used_available_and_exceeded_bytes():
    log = (
        TPU_STARTUP
        + JAX_TRACEBACK
        + "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
        "error. Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm "
        "capacity by 17.34G.\n"
        + JAX_FOOTER
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.backend == "tpu"
    assert result.memory_space == "hbm"
    assert result.used_bytes == round(49.34 * G)
    assert result.available_bytes == 32 * G
    assert result.exceeded_by_bytes == round(17.34 * G)
    assert result.requested_bytes is None
    assert result.signature == "tpu_hbm_used_of_capacity"
    assert result.message.startswith("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED")
    assert log.splitlines()[result.line - 1].startswith("jaxlib.xla_extension.XlaRuntimeError")


def test_compile_hbm_oom_split_over_lines_with_error_code_is_read_whole():
    log = (
        "Model init done (58 MoE layers, 670B params).\n"
        "  JaxRuntimeError: RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom:\n"
        "  XLA:TPU compile permanent error. Ran out of memory in memory space\n"
        "  hbm. Used 126.45G of 94.75G hbm. Exceeded hbm capacity by 31.70G.\n"
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.error_code == "E1000"
    assert (result.used_bytes, result.available_bytes, result.exceeded_by_bytes) == (
        round(126.45 * G),
        round(94.75 * G),
        round(31.70 * G),
    )
    assert "CompileTimeHbmOom" in result.message


def test_compile_hbm_oom_without_stated_excess_derives_it_from_used_and_available():
    log = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom:\nRan out of memory in memory space hbm. Used 32.08G of 31.25G hbm.\n"
    result = parse_error(log)
    assert result.used_bytes == round(32.08 * G)
    assert result.available_bytes == round(31.25 * G)
    assert result.exceeded_by_bytes == round(32.08 * G) - round(31.25 * G)


def test_tensorcore_and_sparsecore_usage_add_up_to_used_bytes():
    log = (
        "W0305 11:02:13.400112    9021 sparse_core_layout.cc:77] Table 'item_embedding' feature "
        "width 4 is padded to 8.\n"
        + JAX_TRACEBACK
        + "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: TPU TensorCore Hbm usage: 34.82G, "
        "SparseCore Hbm usage 174.10G, exceeding available bytes: 95.74G\n"
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.backend == "tpu"
    tensorcore, sparsecore = round(34.82 * G), round(174.10 * G)
    assert result.tensorcore_bytes == tensorcore
    assert result.sparsecore_bytes == sparsecore
    assert result.used_bytes == tensorcore + sparsecore
    assert result.available_bytes == round(95.74 * G)
    assert result.exceeded_by_bytes == tensorcore + sparsecore - round(95.74 * G)


def test_hlo_temporaries_exceeding_available_hbm_is_compile_hbm_oom():
    log = (
        "[maxtext] compiling train step with per_device_batch_size=12\n"
        "Traceback (most recent call last):\n"
        '  File "/deps/MaxText/train.py", line 612, in main\n'
        "    p_train_step = jax.jit(train_step).lower(*args).compile()\n"
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required\n"
        "for HLO temporaries (100.13G) exceeds available HBM (94.74G).\n"
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.backend == "tpu"
    assert result.used_bytes == round(100.13 * G)
    assert result.available_bytes == round(94.74 * G)
    assert result.exceeded_by_bytes == round(100.13 * G) - round(94.74 * G)
    assert result.signature == "tpu_hlo_temporaries_exceed_hbm"


def test_early_compilation_abort_reports_required_and_available_bytes():
    log = (
        TPU_STARTUP
        + "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Compilation failure: Aborting "
        "compilation early because it's unlikely to have enough memory. Requires 3.84T, has "
        "90.96G available. If more detailed logging is desired, set "
        "--xla_tpu_impure_oom_fast_exit_threshold=-1\n"
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.requested_bytes == round(3.84 * T)
    assert result.available_bytes == round(90.96 * G)
    assert result.used_bytes is None


def test_allocation_exceeding_memory_reports_sizes_shape_and_instruction_from_tag():
    # The XProf guide's example: a bf16 (327680, 327680) matmul on a 16 GiB TPU.
    log = (
        "/home/user/oom.py:9: UserWarning: Explicitly requested dtype bfloat16 requested\n"
        + JAX_TRACEBACK
        + "XlaRuntimeError: RESOURCE_EXHAUSTED: Allocation (size=107374182400) would exceed memory "
        "(size=17179869184) :: #allocation7 [shape = 'u8[327680,327680]{1,0:T(8,128)(4,1)}', "
        "space=hbm, size = 0xffffffffffffffff, tag = 'output of xor_convert_fusion@{}'] :: "
        "<no-hlo-instruction>\n"
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.backend == "tpu"
    assert result.memory_space == "hbm"
    assert result.requested_bytes == 107374182400
    assert result.available_bytes == 17179869184
    assert result.shape == "u8[327680,327680]{1,0:T(8,128)(4,1)}"
    assert result.instruction == "xor_convert_fusion"
    assert result.allocation_tag == "output of xor_convert_fusion@{}"


def test_allocation_exceeding_vmem_space_is_scoped_vmem_oom():
    log = (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Allocation (size=134217728) would exceed memory "
        "(size=67108864) :: #allocation25 [shape = 'u8[134217728]{0}', space=vmem, size = 0x8000000, "
        "tag = 'scoped memory for ragged_all_gather_matmul_kernel.2'] :: ragged_all_gather_matmul_kernel.2\n"
    )
    result = parse_error(log)
    assert result.category == "scoped_vmem_oom"
    assert result.memory_space == "vmem"
    assert (result.requested_bytes, result.available_bytes) == (128 * M, 64 * M)
    assert result.instruction == "ragged_all_gather_matmul_kernel.2"


HBM_REPORT_LOG = """\
I0421 09:14:55.120044   20311 tpu_compiler.cc:1213] Compiling jit_generate for 8 devices
Traceback (most recent call last):
  File "/tmp/ipykernel_1363/19855715.py", line 3, in <module>
    output = generate(params, input_ids)
XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 30.21G of 15.48G hbm. Exceeded hbm capacity by 14.73G.

Total hbm usage >= 30.73G:
    reserved        530.00M 
    program          14.31G 
    arguments        15.90G 

Output size 1.0K; shares 0B with arguments.

Program hbm requirement 14.31G:
    global           481.0K
    scoped           512.0K
    HLO temp         14.31G (99.6% utilization: Unpadded (14.25G) Padded (14.31G), 0.4% fragmentation (62.60M))

  Largest program allocations in hbm:

  1. Size: 1.46G
     Operator: op_name="pjit(generate)/jit(main)/Model/embed_tokens/convert_element_type[new_dtype=bfloat16 weak_type=False]" source_file="/tmp/ipykernel_1363/19855715.py" source_line=3
     Shape: bf16[256000,3072]{1,0:T(8,128)(2,1)}
     Unpadded size: 1.46G
     XLA label: convert.15982 = convert(param.72)
     Allocation type: HLO temp
     ==========================

  2. Size: 256.00M
     Operator: op_type="lt" op_name="pmap(mapped_update)/jit(_bernoulli)/lt"
     Shape: pred[64,512,2048]{2,1,0:T(8,128)E(32)}
     Unpadded size: 64.00M
     Extra memory due to padding: 192.00M (4.0x expansion)
     XLA label: %reshape.4751 = pred[64,512,2048]{2,1,0:T(8,128)E(32)} reshape(pred[67108864]{0:T(1024)E(32)} %fusion.3020), metadata={op_type="lt" op_name="pmap(mapped_update)/jit(_bernoulli)/lt"}
     Allocation type: HLO temp
     ==========================

  3. Size: 144.00M
     Shape: bf16[3072,24576]{1,0:T(8,128)(2,1)}
     Unpadded size: 144.00M
     XLA label: %fusion.6043 = bf16[3072,24576]{1,0:T(8,128)(2,1)} fusion(bf16[3072,24576]{1,0:T(8,128)(2,1)} %get-tuple-element.11663), kind=kLoop, calls=%fused_computation.12
     Allocation type: HLO temp
     ==========================


The stack trace above excludes JAX-internal frames.
"""


def test_total_hbm_usage_report_lists_largest_program_allocations():
    result = parse_error(HBM_REPORT_LOG)
    assert result.category == "compile_hbm_oom"
    assert result.backend == "tpu"
    assert result.used_bytes == round(30.21 * G)
    assert result.available_bytes == round(15.48 * G)
    assert result.exceeded_by_bytes == round(14.73 * G)
    assert result.total_hbm_usage_bytes == round(30.73 * G)
    assert result.reserved_bytes == 530 * M
    assert result.program_bytes == round(14.31 * G)
    assert result.argument_bytes == round(15.90 * G)
    assert result.output_bytes == 1 * K
    assert result.output_aliased_bytes == 0
    assert result.program_requirement_bytes == round(14.31 * G)
    assert result.global_bytes == round(481.0 * K)
    assert result.scoped_bytes == 512 * K
    assert result.hlo_temp_bytes == round(14.31 * G)
    assert result.hlo_temp_utilization_percent == pytest.approx(99.6)
    assert result.hlo_temp_unpadded_bytes == round(14.25 * G)
    assert result.hlo_temp_padded_bytes == round(14.31 * G)
    assert result.fragmentation_percent == pytest.approx(0.4)
    assert result.fragmentation_bytes == round(62.60 * M)

    assert [a.rank for a in result.allocations] == [1, 2, 3]
    first, second, third = result.allocations
    assert first.size_bytes == round(1.46 * G)
    assert first.shape == "bf16[256000,3072]{1,0:T(8,128)(2,1)}"
    assert first.unpadded_size_bytes == round(1.46 * G)
    assert first.padded_size_bytes == round(1.46 * G)
    assert first.op_name.startswith("pjit(generate)/jit(main)/Model/embed_tokens/convert_element_type")
    assert first.source == "/tmp/ipykernel_1363/19855715.py:3"
    assert first.source_line == 3
    assert first.instruction == "convert.15982"
    assert first.allocation_type == "HLO temp"
    assert second.size_bytes == 256 * M
    assert second.unpadded_size_bytes == 64 * M
    assert second.padding_bytes == 192 * M
    assert second.expansion_factor == pytest.approx(4.0)
    assert second.op_type == "lt"
    assert second.instruction == "%reshape.4751"
    assert second.source is None
    assert third.op_name is None
    assert third.size_bytes == 144 * M
    assert "Used 30.21G of 15.48G hbm" in result.message


def test_hbm_report_with_tensorflow_log_prefixes_and_windows_line_endings_is_read():
    prefix = "2020-05-04 09:05:40.719332: E    1578 tensorflow/compiler/xla/xla_client/xla_util.cc:76] "
    body = """\
Compilation failure: Ran out of memory in memory space hbm. Used 41.74G of 16.00G hbm. Exceeded hbm capacity by 25.74G.

Total hbm usage >= 41.74G:
    reserved        528.00M
    program          41.22G
    arguments       unknown size

Output size unknown.

Program hbm requirement 41.22G:
    reserved           4.0K
    global           29.82M
    HLO temp         41.19G (24.2% utilization, 0.7% fragmentation (293.84M))

  Largest program allocations in hbm:

  1. Size: 32.00G
     Operator: op_type="FloorMod" op_name="slicewise_79/cic_update/FloorMod"
     Shape: s32[8388608,8,4]{2,1,0:T(8,128)}
     Unpadded size: 1.00G
     Extra memory due to padding: 31.00G (32.0x expansion)
     XLA label: %copy.40488 = s32[8388608,8,4]{2,1,0:T(8,128)} copy(s32[8388608,8,4]{0,2,1:T(4,128)} %get-tuple-element.32429)
     Allocation type: HLO temp
     =========================="""
    log = "\r\n".join(prefix + line for line in body.split("\n")) + "\r\n"
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert (result.used_bytes, result.available_bytes) == (round(41.74 * G), 16 * G)
    assert result.exceeded_by_bytes == round(25.74 * G)
    assert result.reserved_bytes == 528 * M
    assert result.argument_bytes is None  # "unknown size"
    assert result.hlo_temp_bytes == round(41.19 * G)
    assert result.hlo_temp_unpadded_bytes is None
    assert result.fragmentation_bytes == round(293.84 * M)
    [allocation] = result.allocations
    assert allocation.size_bytes == 32 * G
    assert allocation.padding_bytes == 31 * G
    assert allocation.expansion_factor == pytest.approx(32.0)
    assert allocation.op_name == "slicewise_79/cic_update/FloorMod"
    assert "\r" not in result.message and "xla_util.cc" not in result.message


def test_hbm_report_pasted_without_its_header_is_compile_hbm_oom_with_used_from_total():
    log = """\
Logs, error messages, etc:
Total hbm usage >= 11.47G:
    reserved        530.00M 
    program          10.96G 
    arguments            0B 

Output size 0B; shares 0B with arguments.

Program hbm requirement 10.96G:
    global             4.0K
    HLO temp         10.96G (1.2% utilization: Unpadded (140.25M) Padded (10.96G), 0.0% fragmentation (0B))

  Largest program allocations in hbm:

  1. Size: 8.77G
     Operator: op_type="conv_general_dilated" op_name="jit(conv_general_dilated)/conv_general_dilated[\\n  batch_group_count=1\\n  feature_group_count=1\\n]"
     Shape: f32[1,2,2176,1056,8]{4,3,2,1,0:T(8,128)}
     Unpadded size: 70.12M
     Extra memory due to padding: 8.70G (128.0x expansion)
     XLA label: %convolution.1 = f32[1,2,2176,1056,8]{4,3,2,1,0:T(8,128)} convolution(f32[1,8,2176,1056,2]{4,3,2,1,0:T(8,128)} %pad, f32[3,3,1,2,1]{4,3,2,1,0} %param.1)
     Allocation type: HLO temp
     ==========================
"""
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert result.signature == "tpu_hbm_usage_report_total"
    assert result.total_hbm_usage_bytes == round(11.47 * G)
    assert result.used_bytes == round(11.47 * G)
    assert result.argument_bytes == 0
    assert result.hlo_temp_unpadded_bytes == round(140.25 * M)
    [allocation] = result.allocations
    assert allocation.size_bytes == round(8.77 * G)
    assert allocation.expansion_factor == pytest.approx(128.0)
    assert allocation.op_type == "conv_general_dilated"
    assert allocation.instruction == "%convolution.1"


def test_single_line_hbm_error_with_inline_report_keeps_header_figures():
    log = (
        '"XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory '
        "in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G. Total hbm "
        'usage >= 49.34G: reserved 3.12M program unknown size arguments 49.34G"\n'
    )
    result = parse_error(log)
    assert result.used_bytes == round(49.34 * G)
    assert result.reserved_bytes == round(3.12 * M)
    assert result.program_bytes is None
    assert result.argument_bytes == round(49.34 * G)


# Written by libtpu 0.0.42.1 (tpu_logs/tpu_driver.INFO) for a deviceless v5e compile of a
# (65536, 65536) f32 matmul chain; the Python exception carried only the short text.
TPU_DRIVER_LOG = """\
Log file created at: 2026/11/29 21:02:24
Running on machine: vm
Log line format: [IWEF]mmdd hh:mm:ss.uuuuuu threadid file:line] msg
W1129 21:02:24.131793   23225 tpu_version_flag.cc:87] No hardware is found. Using default TPU version: jellyfish
W1129 21:02:24.166987   23225 hlo_rematerialization.cc:3231] Can't reduce memory use below 0B (0 bytes) by rematerialization; only reduced to 32.00GiB (34359738368 bytes), down from 32.00GiB (34359738368 bytes) originally
E1129 21:02:24.646898   23295 deepsea_compiler_base.cc:3781] XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 48.00G of 15.75G hbm. Exceeded hbm capacity by 32.25G. Memory usage report: 

Memory Space: default (color=0)
Total bytes: 51539607552 (48.00GiB)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
   16.00GiB(100%);   16.00GiB;            0;                1; f32[65536,65536]

  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
   16.00GiB(100%);   16.00GiB;            0;                1; f32[65536,65536]


Memory Space: vmem (color=1)
Total bytes: 0 (0B)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
       512B(100%);       512B;            0;                1; f32[]


E1129 21:02:24.661007   23295 deepsea_compiler_base.cc:3801] Failed to verify buffer assignment.
"""


def test_libtpu_driver_log_memory_usage_report_becomes_allocations():
    result = parse_error(TPU_DRIVER_LOG)
    assert result.category == "compile_hbm_oom"
    assert (result.used_bytes, result.available_bytes, result.exceeded_by_bytes) == (
        48 * G,
        round(15.75 * G),
        round(32.25 * G),
    )
    assert [(a.rank, a.size_bytes, a.shape) for a in result.allocations] == [
        (1, 16 * G, "f32[65536,65536]"),
        (2, 16 * G, "f32[65536,65536]"),
    ]  # the vmem table is not part of the HBM list
    assert result.remat_reduced_to_bytes == 34359738368
    assert result.remat_limit_bytes == 0
    assert result.message.startswith("XLA:TPU compile permanent error.")


_LIVE_COMPILE = """
import jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec
devices = topologies.get_topology_desc("v5e:2x2", "tpu").devices
sharding = NamedSharding(Mesh(devices[:1], ("x",)), PartitionSpec())
def oversized():
    return jnp.zeros((1 << 18, 1 << 18), jnp.float32)  # 256 GiB
try:
    jax.jit(oversized, out_shardings=sharding).trace().lower().compile()
except Exception as err:
    print(str(err))
"""


def test_live_deviceless_tpu_compile_error_is_parsed(tmp_path):
    """The real XLA:TPU compiler's current wording, and its driver log, parse as E1000."""
    env = dict(
        os.environ,
        ALLOW_MULTIPLE_LIBTPU_LOAD="1",
        TPU_ACCELERATOR_TYPE="v5litepod-4",
        TPU_WORKER_HOSTNAMES="localhost",
        TPU_LOG_DIR=str(tmp_path),
        JAX_PLATFORMS="cpu",
    )
    done = subprocess.run(
        [sys.executable, "-c", _LIVE_COMPILE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    short = parse_error(done.stdout)
    assert short.category == "compile_hbm_oom", done.stdout
    assert short.available_bytes == round(15.75 * G)  # v5e, as TPU_NOTES.md records
    assert short.used_bytes == 256 * G
    driver_logs = sorted(tmp_path.glob("tpu_driver*ERROR*"))
    assert driver_logs, list(tmp_path.iterdir())
    report = parse_error(read_log(driver_logs[-1]))
    assert report.category == "compile_hbm_oom"
    assert report.used_bytes == 256 * G
    assert report.allocations and report.allocations[0].size_bytes == 256 * G


# ------------------------------------------------------------ TPU runtime allocation (E0100)


def test_runtime_allocation_error_reports_requested_and_free_bytes():
    log = (
        TPU_STARTUP
        + "Traceback (most recent call last):\n"
        '  File "/home/user/load.py", line 21, in <module>\n'
        "    x = jax.device_put(big, jax.devices()[0])\n"
        '  File "/home/user/.venv/lib/python3.11/site-packages/jax/_src/api.py", line 2296, in device_put\n'
        "    out_flat = dispatch.device_put_p.bind(*x_flat, devices=device_flat)\n"
        "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate "
        "8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)\n"
    )
    result = parse_error(log)
    assert result.category == "runtime_allocation"
    assert result.backend == "tpu"
    assert result.memory_space == "hbm"
    assert result.requested_bytes == 8 * M
    assert result.free_bytes == round(6.43 * M)
    assert result.available_bytes is None
    assert result.device == "0x0x1_HBM0"
    assert result.signature == "tpu_runtime_attempting_to_allocate"


def test_runtime_allocation_reports_largest_contiguous_free_block():
    log = (
        "I0602 07:01:12.004512  5511 checkpoint_manager.py:441] Restoring step 5000\n"
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
        "Attempting to allocate 128.00M. That was not possible. There are 1.20G free. The largest "
        "contiguous region of free memory is 96.00M due to fragmentation.; (0x0x0_HBM0)\n"
    )
    result = parse_error(log)
    assert result.category == "runtime_allocation"
    assert result.requested_bytes == 128 * M
    assert result.free_bytes == round(1.20 * G)
    assert result.largest_free_block_bytes == 96 * M


def test_program_reservation_failure_reports_free_reserved_and_reservable_bytes():
    log = (
        JAX_TRACEBACK
        + "XlaRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_embedding_pipeline_step_fn': "
        "Attempting to reserve 29.49G at the bottom of memory. That was not possible. There are "
        "147.64M free, 0B reserved, and 147.64M reservable. Scope: unknown..: while running "
        "replica 0 and partition 34 of a replicated computation (other replicas may have failed as well).\n"
    )
    result = parse_error(log)
    assert result.category == "runtime_allocation"
    assert result.backend == "tpu"
    assert result.requested_bytes == round(29.49 * G)
    assert result.free_bytes == round(147.64 * M)
    assert result.reserved_bytes == 0
    assert result.reservable_bytes == round(147.64 * M)
    assert result.program_name == "jit_embedding_pipeline_step_fn"


def test_failed_request_on_device_ordinal_takes_exact_byte_count_and_gpu_from_cuda_lines():
    log = (
        "[1] 2019-05-29 23:55:55.555823: E external/org_tensorflow/tensorflow/stream_executor/cuda/"
        "cuda_driver.cc:828] failed to allocate 528.00M (553648128 bytes) from device: "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        "[1] 2019-05-29 23:55:55.581962: E external/org_tensorflow/tensorflow/compiler/xla/service/"
        "gpu/cudnn_conv_algorithm_picker.cc:525] Resource exhausted: Failed to allocate request "
        "for 528.00MiB (553648128B) on device ordinal 0\n"
    )
    result = parse_error(log)
    assert result.category == "gpu_oom"
    assert result.signature == "xla_failed_to_allocate_request"
    assert result.requested_bytes == 553648128
    assert result.device_ordinal == 0
    assert result.backend == "gpu"


def test_failed_request_without_backend_cues_is_gpu_by_its_allocator_wording():
    log = (
        "RuntimeError: Resource exhausted: Failed to allocate request for 32.00MiB (33554432B) "
        "on device ordinal 0\n"
    )
    result = parse_error(log)
    assert result.category == "gpu_oom"
    assert result.requested_bytes == 33554432
    assert result.backend == "gpu"


# ------------------------------------------------------------ compile-time scoped VMEM (E1001)


def test_scoped_vmem_error_combines_stack_allocation_limit_and_custom_call_target():
    log = (
        "I0512 10:22:41.100230   4410 tpu_compiler.cc:1840] Compiling jit(gmm) for v5p\n"
        + JAX_TRACEBACK
        + "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\n"
        "Ran out of memory in memory space vmem while allocating on stack for %gmm.1 = "
        "f32[16384,512]{1,0:T(8,128)} custom-call(%p0.1, %p1.2), custom_call_target=\"tpu_custom_call\", "
        "operand_layout_constraints={f32[16384,512]{1,0}, f32[1,512]{1,0}}, "
        'metadata={op_name="jit(gmm)/pallas_call" stack_frame_id=7}.\n'
        "Scoped allocation with size 18.00M and limit 16.00M exceeded scoped vmem limit by 2.00M.\n"
        + JAX_FOOTER
    )
    result = parse_error(log)
    assert result.category == "scoped_vmem_oom"
    assert result.backend == "tpu"
    assert result.memory_space == "vmem"
    assert result.requested_bytes == 18 * M
    assert result.available_bytes == 16 * M
    assert result.exceeded_by_bytes == 2 * M
    assert result.instruction == "%gmm.1"
    assert result.shape == "f32[16384,512]{1,0:T(8,128)}"
    assert result.custom_call_target == "tpu_custom_call"
    assert result.error_code == "E1001"
    assert result.signature == "tpu_vmem_allocating_on_stack"
    lines = result.message.splitlines()
    assert lines[0].endswith("E1001: CompileTimeScopedVmemOom:")
    assert lines[-1].startswith("Scoped allocation with size 18.00M")


def test_seed_example_of_scoped_vmem_error_names_the_kernel_and_its_shape():
    log = (
        "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while allocating on stack for "
        "%my-custom-kernel = bf16[2048,4096]{1,0:T(8,128)(2,1)} custom-call(...) ...\n"
    )
    result = parse_error(log)
    assert result.category == "scoped_vmem_oom"
    assert result.instruction == "%my-custom-kernel"
    assert result.shape == "bf16[2048,4096]{1,0:T(8,128)(2,1)}"
    assert result.requested_bytes is None


def test_scoped_vmem_error_wins_over_a_runtime_wrapper_in_the_same_message():
    # Measured on a TPU: the runtime wording wraps the compile-time VMEM error and its numbers.
    log = (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Error loading program: Attempting to allocate "
        "36.25M. That was not possible. There are 32.00M free.; (0x0x0_HBM0): while running "
        "replica 0 and partition 0 of a replicated computation (other replicas may have failed "
        "as well).\nCompileTimeScopedVmemOom:\nRan out of memory in memory space vmem while "
        "allocating on stack for %_fwd.1 = bf16[16384,6144]{1,0:T(8,128)(2,1)} "
        'custom-call(%args_0_.1, %bitcast.1), custom_call_target="tpu_custom_call", '
        "operand_layout_constraints={bf16[16384,6144]{1,0}, f32[1,6144]{1,0}}, "
        'frontend_attributes={kernel_metadata={}}, metadata={op_name="jit(call)/jit(_fwd)/'
        'pallas_call" stack_frame_id=23}. Scoped allocation with size 36.25M and limit 32.00M '
        "exceeded scoped vmem limit by 4.25M. It should not be possible to run out of scoped vmem - "
        "\nSee https://openxla.org/xla/errors/error_1001 for more details.\n"
    )
    result = parse_error(log)
    assert result.category == "scoped_vmem_oom"
    assert result.requested_bytes == round(36.25 * M)
    assert result.available_bytes == 32 * M
    assert result.exceeded_by_bytes == round(4.25 * M)
    assert result.free_bytes is None  # belongs to the runtime wording, another category
    assert result.instruction == "%_fwd.1"
    assert result.custom_call_target == "tpu_custom_call"
    assert result.error_code == "E1001"


def test_truncated_vmem_kernel_name_loses_its_ellipsis():
    log = (
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\n"
        "Ran out of memory in memory space vmem while allocating on stack for %splash_mha_fwd...\n"
        "Scoped allocation with size 19.85M and limit 16.00M exceeded scoped vmem limit by 3.85M.\n"
    )
    result = parse_error(log)
    assert result.instruction == "%splash_mha_fwd"
    assert result.requested_bytes == round(19.85 * M)


def test_vmem_used_of_capacity_is_scoped_vmem_oom():
    log = (
        "I0101 00:00:00.900000      77 tpu_compiler.cc:1840] Compiling jit(flash_fwd) for v6e\n"
        "E0101 00:00:01.000000      77 tpu_compiler.cc:2110] RESOURCE_EXHAUSTED: Ran out of memory "
        "in memory space vmem. Used 44.05M of 32.00M vmem.\n"
        + JAX_TRACEBACK
        + "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem. "
        "Used 44.05M of 32.00M vmem.\n"
    )
    result = parse_error(log)
    assert result.category == "scoped_vmem_oom"
    assert result.used_bytes == round(44.05 * M)
    assert result.available_bytes == 32 * M
    assert result.exceeded_by_bytes == round(44.05 * M) - 32 * M


def test_scoped_allocation_line_alone_is_scoped_vmem_oom():
    log = "CompileTimeScopedVmemOom: Scoped allocation with size 37.99M and limit 32.00M exceeded scoped vmem limit by 5.99M\n"
    result = parse_error(log)
    assert result.category == "scoped_vmem_oom"
    assert (result.requested_bytes, result.available_bytes, result.exceeded_by_bytes) == (
        round(37.99 * M),
        32 * M,
        round(5.99 * M),
    )


# ------------------------------------------------------------------------------------ GPU

GPU_LOG = """\
2023-11-01 10:12:40.101213: W external/xla/xla/service/gpu/nvptx_compiler.cc:744] The NVIDIA driver's CUDA version is 12.2 which is older than the ptxas CUDA version (12.3.103).
2023-11-01 10:12:44.018312: W external/xla/xla/service/hlo_rematerialization.cc:2946] Can't reduce memory use below 10.37GiB (11134803148 bytes) by rematerialization; only reduced to 14.44GiB (15506138521 bytes), down from 14.44GiB (15506138521 bytes) originally
2023-11-01 10:12:54.554019: W external/tsl/tsl/framework/bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.44GiB (rounded to 4770354432)requested by op 
Traceback (most recent call last):
  File "/app/predict.py", line 58, in <module>
    out = predict(params, batch)
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.
BufferAssignment OOM Debugging.
BufferAssignment stats:
             parameter allocation:  372.76MiB
              constant allocation:    48.5KiB
        maybe_live_out allocation:    9.64GiB
     preallocated temp allocation:    4.44GiB
                 total allocation:   14.44GiB
              total fragmentation:  680.30MiB (4.60%)
Peak buffers:
\tBuffer 1:
\t\tSize: 4.44GiB
\t\tOperator: op_name="jit(predict)/jit(main)/Model/dense/dot_general[dimension_numbers=(([2], [0]), ([], []))]" source_file="/app/model.py" source_line=689
\t\tXLA Label: fusion
\t\tShape: f32[1024,1024,1137]
\t\t==========================

\tBuffer 2:
\t\tSize: 384.0KiB
\t\tEntry Parameter Subshape: f32[256,128,3]
\t\t==========================

"""


def test_gpu_out_of_memory_parses_buffer_assignment_report_into_allocations():
    result = parse_error(GPU_LOG)
    assert result.category == "gpu_oom"
    assert result.backend == "gpu"
    assert result.requested_bytes == 4770354232
    assert result.signature == "xla_gpu_out_of_memory_trying_to_allocate"
    assert result.parameter_allocation_bytes == round(372.76 * M)
    assert result.constant_allocation_bytes == round(48.5 * K)
    assert result.maybe_live_out_allocation_bytes == round(9.64 * G)
    assert result.preallocated_temp_allocation_bytes == round(4.44 * G)
    assert result.total_allocation_bytes == round(14.44 * G)
    assert result.fragmentation_bytes == round(680.30 * M)
    assert result.fragmentation_percent == pytest.approx(4.60)
    assert result.remat_limit_bytes == 11134803148
    assert result.remat_reduced_to_bytes == 15506138521
    first, second = result.allocations
    assert first.size_bytes == round(4.44 * G)
    assert first.shape == "f32[1024,1024,1137]"
    assert first.xla_label == "fusion"
    assert first.source == "/app/model.py:689"
    assert first.op_name.startswith("jit(predict)/jit(main)/Model/dense/dot_general")
    assert second.size_bytes == 384 * K
    assert second.shape == "f32[256,128,3]"
    assert second.allocation_type == "entry parameter"
    assert result.message.startswith("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory")


def test_xprof_guide_gpu_variant_is_gpu_oom_with_the_requested_bytes():
    log = (
        "2025-02-10 09:00:01.441102: W external/xla/xla/tsl/framework/bfc_allocator.cc:501] "
        "*******************************************************************************_____\n"
        + JAX_TRACEBACK
        + "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 214748364800 bytes.\n"
    )
    result = parse_error(log)
    assert result.category == "gpu_oom"
    assert result.backend == "gpu"
    assert result.requested_bytes == 214748364800
    assert result.allocations == []


def test_bfc_warnings_that_are_not_failures_are_not_an_oom():
    log = (
        "2020-09-24 21:35:23.363348: W tensorflow/core/common_runtime/bfc_allocator.cc:246] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 1.02GiB with freed_by_count=0. The caller "
        "indicates that this is not a failure, but may mean that there could be performance gains "
        "if more memory were available.\n"
        "Epoch 1/30 - loss: 0.4211\n"
    )
    result = parse_error(log)
    assert result.category == "unknown"
    assert _all_sizes_are_null(result)


def test_tensorflow_oom_on_gpu_computes_requested_bytes_from_shape_and_dtype():
    log = (
        "2019-01-04 16:21:00.922232: I tensorflow/core/common_runtime/bfc_allocator.cc:678] Sum Total of in-use chunks: 4.02GiB\n"
        "2019-01-04 14:16:00.828279: W tensorflow/core/framework/op_kernel.cc:1318] OP_REQUIRES failed "
        "at transpose_op.cc:199 : Resource exhausted: OOM when allocating tensor with "
        "shape[2,480,640,66] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by "
        "allocator GPU_0_bfc\n"
    )
    result = parse_error(log)
    assert result.category == "gpu_oom"
    assert result.backend == "gpu"
    assert result.requested_bytes == 2 * 480 * 640 * 66 * 4
    assert result.shape == "float[2,480,640,66]"
    assert result.dtype == "float"
    assert result.allocator == "GPU_0_bfc"


def test_tensorflow_oom_on_cpu_allocator_is_host_oom():
    log = (
        "Epoch 1/10\n"
        "Traceback (most recent call last):\n"
        '  File "/home/user/sim.py", line 12, in <module>\n'
        "    noise = tf.random.normal((64, 1024, 1024), dtype=tf.float64)\n"
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[64,1024,1024] and type double on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu [Op:RandomStandardNormal]\n"
    )
    result = parse_error(log)
    assert result.category == "host_oom"
    assert result.memory_space == "host"
    assert result.backend == "cpu"
    assert result.requested_bytes == 64 * 1024 * 1024 * 8


def test_cuda_driver_out_of_memory_alone_is_gpu_oom_with_exact_bytes():
    log = "failed to allocate 17.79G (19104890880 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
    result = parse_error(log)
    assert result.category == "gpu_oom"
    assert result.backend == "gpu"
    assert result.requested_bytes == 19104890880



def test_cuda_executor_s_failed_device_memory_is_gpu_oom_with_exact_bytes():
    # (the newer wording: "Failed to allocate device memory of X (N bytes): RESOURCE_EXHAUSTED: : CUDA_ERROR...")
    log = ("E0624 16:54:38.775269    1496 cuda_executor.cc:1182] [0] Failed to allocate device memory of 14.39GiB "
           "(15453913088 bytes): RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory\n")
    result = parse_error(log)
    assert result.category == "gpu_oom" and result.backend == "gpu"
    assert result.requested_bytes == 15453913088

def test_ptxas_s_shared_data_over_the_block_limit_is_read_in_hexadecimal():
    log = ("nvptx_compiler.cc:414] Error during compilation of ptx to sass: Internal: ptxas exited with non-zero "
           "error code 65280, output: ptxas error   : Entry function 'fusion_42' uses too much shared data "
           "(0xc600 bytes, 0xc000 max)\n")
    result = parse_error(log)
    assert result.category == "gpu_oom" and result.memory_space == "shared"
    assert (result.requested_bytes, result.available_bytes) == (0xC600, 0xC000)

# ----------------------------------------------------------------------------------- host


def test_host_out_of_memory_while_allocating_on_host_is_host_oom():
    log = JAX_TRACEBACK + "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 64.00GiB on host.\n"
    result = parse_error(log)
    assert result.category == "host_oom"
    assert result.memory_space == "host"
    assert result.requested_bytes == 64 * G


def test_linux_oom_killer_is_host_oom_with_process_and_rss():
    log = (
        "[183623.120001] python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0\n"
        "[183623.123999] Out of memory: Killed process 48213 (python3) total-vm:98765432kB, "
        "anon-rss:65432100kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:130000kB oom_score_adj:0\n"
    )
    result = parse_error(log)
    assert result.category == "host_oom"
    assert result.pid == 48213
    assert result.process_name == "python3"
    assert result.total_vm_bytes == 98765432 * K
    assert result.anon_rss_bytes == 65432100 * K


@pytest.mark.parametrize(
    "log",
    [
        "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\nAborted (core dumped)\n",
        "Traceback (most recent call last):\n  File \"prep.py\", line 3, in <module>\nOSError: [Errno 12] Cannot allocate memory\n",
        "Traceback (most recent call last):\n  File \"prep.py\", line 9, in <module>\n    data = np.zeros((1 << 40,))\nnumpy.core._exceptions._ArrayMemoryError: Unable to allocate 8.00 TiB\nMemoryError\n",
    ],
    ids=["bad_alloc", "errno_12", "python_memory_error"],
)
def test_generic_host_allocation_failures_are_host_oom(log):
    result = parse_error(log)
    assert result.category == "host_oom"
    assert result.memory_space == "host"


# -------------------------------------------------------------- choosing among several messages


def test_specific_tpu_error_wins_over_an_earlier_generic_bad_alloc():
    log = (
        "what():  std::bad_alloc\n"
        "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate "
        "50.00M. That was not possible. There are 27.86M free.; (0x0x0_HBM0)\n"
    )
    result = parse_error(log)
    assert result.category == "runtime_allocation"
    assert result.requested_bytes == 50 * M


def test_first_of_two_runtime_errors_is_reported_without_figures_from_the_second():
    log = (
        "step 4999 loss=2.01\n"
        "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 5.94M.\n"
        "That was not possible. There are 4.20M free.\n"
        "retrying after defragmentation\n"
        "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 5.94M. That was "
        "not possible. There are 4.10M free. The largest contiguous region of free memory is 2.00M "
        "due to fragmentation.; (0x0x0_HBM0)\n"
    )
    result = parse_error(log)
    assert result.requested_bytes == round(5.94 * M)
    assert result.free_bytes == round(4.20 * M)
    assert result.largest_free_block_bytes is None
    assert result.line == 2


def test_two_different_compile_errors_are_not_mixed():
    # The E1000 guide lists two example messages one after the other.
    log = (
        "Example error messages:\n\n"
        "RESOURCE_EXHAUSTED: TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage 174.10G, "
        "exceeding available bytes: 95.74G\n\n"
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
        "hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.\n"
    )
    result = parse_error(log)
    assert result.signature == "tpu_tensorcore_sparsecore_hbm_usage"
    assert result.used_bytes == round(34.82 * G) + round(174.10 * G)
    assert result.available_bytes == round(95.74 * G)
    assert "49.34G" not in result.message


def test_log_prefixes_ansi_colours_and_crlf_do_not_hide_the_message():
    log = (
        "\x1b[1m\x1b[31mE1129 20:43:12.123456  1234 tpu_compiler.cc:123] RESOURCE_EXHAUSTED: "
        "Ran out of memory in memory space hbm.\x1b[0m\r\n"
        "E1129 20:43:12.123499  1234 tpu_compiler.cc:123] Used 21.95G of 15.48G hbm.\r\n"
        "E1129 20:43:12.123511  1234 tpu_compiler.cc:123]  Exceeded hbm capacity by 6.47G.\r\n"
    )
    result = parse_error(log)
    assert result.category == "compile_hbm_oom"
    assert (result.used_bytes, result.available_bytes, result.exceeded_by_bytes) == (
        round(21.95 * G),
        round(15.48 * G),
        round(6.47 * G),
    )
    assert "\x1b" not in result.message


def test_a_tpu_log_warning_about_cuda_does_not_make_the_backend_gpu():
    log = (
        "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu.\n"
        "Platform 'tpu' is experimental and not all JAX functionality may be correctly supported!\n"
        "Attempting to allocate 256.00M. That was not possible. There are 6.43M free.\n"
        "I0308 12:00:00.000000  1 tpu_client.cc:55] TPU client ready\n"
    )
    result = parse_error(log)
    assert result.category == "runtime_allocation"
    assert result.backend == "tpu"


# ------------------------------------------------------------------------------ robustness


@pytest.mark.parametrize("text", ["", "   \n\t\r\n", "\x00\x01\x02", "RESOURCE_EXHAUSTED"])
def test_text_without_an_oom_message_is_unknown_with_all_sizes_null(text):
    result = parse_error(text)
    assert result.category == "unknown"
    assert _all_sizes_are_null(result)
    assert result.signature is None and result.allocations == []


def test_ordinary_training_log_is_unknown():
    log = TPU_STARTUP + "".join(f"step {i} loss={2.0 - i / 1000:.3f} hbm=12.3G/16.0G\n" for i in range(500))
    result = parse_error(log)
    assert result.category == "unknown"
    assert _all_sizes_are_null(result)
    assert result.backend == "tpu"


def test_binary_garbage_is_unknown():
    garbage = random.Random(0).randbytes(1_000_000)
    assert parse_error(garbage).category == "unknown"
    assert parse_error(garbage.decode("latin-1")).category == "unknown"


def test_text_with_lone_surrogates_still_gives_json():
    log = "junk \udcff\udc80 Attempting to allocate 8.00M. That was not possible. There are 6.43M free. \ud800"
    result = parse_error(log)
    assert result.requested_bytes == 8 * M
    assert json.loads(result.model_dump_json())["category"] == "runtime_allocation"


def test_ten_megabyte_log_is_parsed_in_a_couple_of_seconds():
    noise = (
        "I1129 20:41:02.517201    8812 pjrt_c_api_client.cc:113] step 1234: loss=2.3451 "
        "hbm used 12.00G program 1.00G reserved 530.00M arguments 2.00G\n"
        '  File "/home/user/.venv/lib/python3.11/site-packages/jax/_src/pjit.py", line 337, in cache_miss\n'
    )
    log = noise * (10_000_000 // len(noise)) + (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
        "in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.\n"
    )
    assert len(log) >= 10_000_000
    started = time.perf_counter()
    result = parse_error(log)
    elapsed = time.perf_counter() - started
    assert result.category == "compile_hbm_oom"
    assert result.used_bytes == round(49.34 * G)
    assert elapsed < 3.0, f"10 MB log took {elapsed:.2f} s"


@pytest.mark.parametrize(
    "unit",
    [
        "a",
        "1",
        " ",
        "Ran out of memory in memory space hbm. Used ",
        "Attempting to allocate 8.00M. That was not possible. There are ",
        "Allocation (size=1",
        "Ran out of memory in memory space vmem while allocating on stack for %k = ",
        "OOM when allocating tensor with shape[1,",
        "custom_call_target=\"",
        "Largest program allocations in hbm:\n  1. Size: 1.00G\n     Operator: op_name=\"",
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.00G ",
    ],
    ids=["letters", "digits", "spaces", "hbm", "runtime", "allocation", "vmem", "tf", "target", "report", "bfc"],
)
def test_adversarial_ten_megabyte_inputs_stay_linear(unit):
    log = unit * (10_000_000 // len(unit))
    started = time.perf_counter()
    result = parse_error(log)
    elapsed = time.perf_counter() - started
    assert isinstance(result, ParsedError)
    assert elapsed < 5.0, f"{elapsed:.2f} s"


FRAGMENTS = [
    "Ran out of memory in memory space hbm. Used ",
    "49.34G", " of ", "32.00G", " hbm.", " Exceeded hbm capacity by ", "17.34G",
    "Attempting to allocate ", "8.00M", ". That was not possible. There are ", " free.",
    "Allocation (size=", "107374182400", ") would exceed memory (size=", ")",
    "Scoped allocation with size ", " and limit ", " exceeded scoped vmem limit by ",
    "while allocating on stack for %", " = ", "custom-call(", "custom_call_target=\"", "\"",
    "Largest program allocations in hbm:\n", "  1. Size: ", "\n", "     Shape: ", "==========\n",
    "Peak buffers:\n", "Buffer 1:\n", "OOM when allocating tensor with shape[", "] and type ",
    "float", " by allocator ", "cpu", "TensorCore Hbm usage: ", ", SparseCore Hbm usage ",
    ", exceeding available bytes: ", "E1000: ", "\x1b[31m", "\r", "\x00", "\ufffd",
    "99999999999999999999E", "0.5", ".", "9" * 25,
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)))
def test_parse_error_never_raises_and_returns_integer_sizes(text):
    result = parse_error(text)
    assert result.category in CATEGORIES
    for name, value in result:
        if name.endswith("_bytes"):
            assert value is None or isinstance(value, int)
    if result.category == "unknown":
        assert _all_sizes_are_null(result)


# ---------------------------------------------------------------------- the contract shape


def test_json_output_has_the_contract_fields_with_integer_byte_counts():
    data = json.loads(parse_error(HBM_REPORT_LOG).model_dump_json())
    for name, types in CONTRACT_FIELDS.items():
        assert name in data, name
        assert isinstance(data[name], types), name
    assert data["used_bytes"] == round(30.21 * G)
    assert isinstance(data["allocations"], list) and data["allocations"][0]["size_bytes"] == round(1.46 * G)


def test_contract_fields_come_first_in_the_model():
    assert list(ParsedError.model_fields)[: len(CONTRACT_FIELDS)] == list(CONTRACT_FIELDS)


# --------------------------------------------------------------------------- the catalogue

# One log per primary signature: adding a wording to signatures.yaml needs a sample here.
SAMPLES = {
    "tpu_hbm_used_of_capacity": "Ran out of memory in memory space hbm. Used 2.00G of 1.00G hbm.",
    "tpu_hbm_used_of_capacity_quoted": "Fehlermeldung: \"Used 26.71G of 15.75G hbm. Exceeded hbm capacity by 10.96G\"",
    "tpu_tensorcore_sparsecore_hbm_usage": "TPU TensorCore Hbm usage: 1.00G, SparseCore Hbm usage 2.00G, exceeding available bytes: 2.50G",
    "tpu_hlo_temporaries_exceed_hbm": "RESOURCE_EXHAUSTED: HLO temporaries (16.23G) exceeds available HBM (15.75G)",
    "tpu_compile_aborted_early": "Aborting compilation early because it's unlikely to have enough memory. Requires 1.00T, has 95.00G available.",
    "tpu_allocation_would_exceed_memory": "Allocation (size=2048) would exceed memory (size=1024)",
    "tpu_hbm_usage_report_total": "Total hbm usage >= 11.47G:\n    reserved        530.00M",
    "tpu_largest_program_allocations_in_hbm": "  Largest program allocations in hbm:\n\n  1. Size: 8.77G\n     Shape: f32[8]{0}\n",
    "tpu_hbm_out_of_memory_bare": "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: XLA:TPU compile permanent error. Ran out of memory in memory space hbm.",
    "tpu_runtime_attempting_to_allocate": "RESOURCE_EXHAUSTED: Attempting to allocate 128.00M. That was not possible. There are 87.93M free.",
    "tpu_runtime_reserve_program": "Attempting to reserve 51.43G at the bottom of memory. That was not possible. There are 46.61G free, 0B reserved, and 46.61G reservable.",
    "xla_failed_to_allocate_request": "RESOURCE_EXHAUSTED: Failed to allocate request for 256.00MiB (268435456B) on device ordinal 0",
    "tpu_vmem_allocating_on_stack": "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while allocating on stack for ragged_paged_attention",
    "tpu_scoped_allocation_exceeded_limit": "CompileTimeScopedVmemOom: Scoped allocation with size 36.25M and limit 32.00M",
    "tpu_vmem_used_of_capacity": "Ran out of memory in memory space vmem. Used 44.05M of 32.00M.",
    "tpu_vmem_out_of_memory_bare": "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:",
    "xla_out_of_memory_on_host": "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes on host",
    "tcmalloc_large_alloc_failed": "tcmalloc: large alloc 34359738368 bytes == (nil) @  0x7f3a5c2b1680 0x7f3a5c2d2824",
    "xla_gpu_out_of_memory_trying_to_allocate": "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 16.00GiB.",
    "tf_oom_when_allocating_tensor": "ResourceExhaustedError: OOM when allocating tensor of shape [4096] and type float",
    "bfc_allocator_ran_out": "Allocator (GPU_0_bfc) ran out of memory trying to allocate 32.0KiB (rounded to 32768)",
    "cuda_driver_out_of_memory": "failed to allocate 106.88M (112066560 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY",
    "ptxas_too_much_shared_data": "ptxas error   : Entry function 'fusion_42' uses too much shared data (0xc600 bytes, "
                                  "0xc000 max)",
    "cuda_pinned_host_out_of_memory": "failed to alloc 17179869184 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "xla_gpu_host_bfc_out_of_memory": "RESOURCE_EXHAUSTED: Out of host memory while trying to allocate 15204089856 "
                                      "bytes with allocator xla_gpu_host_bfc on device 0.",
    "xla_gpu_schedule_arguments_over_limit": "gpu_hlo_schedule.cc:968] The byte size of input/output arguments "
                                             "(131344632216) exceeds the base limit (20236835225). This indicates an "
                                             "error in the calculation!",
    "torch_cuda_out_of_memory": "RuntimeError: CUDA out of memory. Tried to allocate 1.12 MiB (GPU 0; 22.37 GiB total capacity)",
    "linux_oom_killer": "Out of memory: Killed process 1234 (python)",
    "cpp_bad_alloc": "what():  std::bad_alloc",
    "errno_cannot_allocate_memory": "OSError: [Errno 12] Cannot allocate memory",
    "python_memory_error": "MemoryError",
    "xla_rematerialization_warning": "Can't reduce memory use below 1.00GiB (1073741824 bytes) by rematerialization; only reduced to 2.00GiB (2147483648 bytes)",
    "xla_gpu_buffer_report_alone": "BufferAssignment stats:\n             parameter allocation:    1.00GiB\n                 total allocation:    2.00GiB",
    "xla_gpu_peak_buffers_heading": "Peak buffers:\n        Buffer 1:\n                Size: 1.00GiB\n                Shape: pred[1,1,32768,32768]",
    "xla_gpu_peak_buffers_alone": "Buffer 8:\n                Size: 1.00GiB\n                XLA Label: fusion\n                Shape: f32[1048576,256]",
    "xla_cpu_out_of_memory_allocating": "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.",
    "tpu_smem_used_of_capacity": "Ran out of memory in memory space smem. Used 1.10M of 1.00M smem.",
    "tpu_smem_out_of_memory_bare": "Resource exhausted: Ran out of memory in memory space smem.",
    # oomkb issue 23
    "tpu_runtime_could_not_allocate_in_memory": "RESOURCE_EXHAUSTED: Could not allocate 8589934592 bytes in "
    "memory 0x0x0_HBM0; 4294967296 bytes allocatable, 10737418240 bytes available",
    "mosaic_estimated_exceeds_vmem_capacity": "Mosaic failed to compile TPU kernel: Estimated 268.96MB exceeds "
    "67.11MB vmem capacity.",
    "cuda_async_allocator_out_of_memory": "gpu_async_0 cuMemAllocAsync failed to allocate 1073741824 bytes: "
    "RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "cuda_cubin_load_out_of_memory": "INTERNAL: Failed to load in-memory CUBIN: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "cuda_primary_context_out_of_memory": "failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of "
    "memory; total memory reported: 11996954624",
    "cuda_runtime_memory_allocation": "cudaErrorMemoryAllocation : out of memory",
    "cuda_driver_error_out_of_memory": "I0719 run_docker.py] E external/org_tensorflow/tensorflow/stream_executor/"
    "cuda/cuda_driver.cc] CUDA error out of memory",
    "xla_gpu_out_of_memory_without_size": "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory "
    "while trying to allocate",
    "gpu_shared_memory_limit_exceeded": "Shared memory size limit exceeded: requested 1179648, available: 232448",
    "gpu_shared_memory_exceeds_device": "INTERNAL: Shared memory requested exceeds device resources.",
    "cuda_error_out_of_memory_bare": "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "torch_out_of_memory_error": "torch.OutOfMemoryError",
    "linux_oom_kill_constraint": "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/job,task_memcg=/job,task=python3,pid=4242,uid=1000",
    "shell_killed_python": "71885 Killed                  python -m train",
    "cuda_unified_alloc_failed": "E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:767] "
                                 "failed to alloc 34359738368 bytes unified memory; result: CUDA_ERROR_INVALID_VALUE: "
                                 "invalid argument",
    "tpu_program_host_requirement": "E0110 18:36:27.929281 1590 compiler_base.cc:2121] Program host requirement 145.69G:",
    "xla_gpu_new_constant": "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to allocate 4194304000 bytes for "
                            "new constant",
    "cufft_plan_work_area": "F external/xla/xla/stream_executor/cuda/cuda_fft.cc:439] failed to initialize batched cufft "
                            "plan with customized allocator: Allocating 5000000000 bytes exceeds the memory limit of "
                            "4294967296 bytes.",
}


def test_every_primary_signature_has_a_sample():
    primary = {s.spec.id for s in load_signatures().signatures if s.spec.role == "primary"}
    assert set(SAMPLES) == primary


@pytest.mark.parametrize("signature_id", sorted(SAMPLES))
def test_each_sample_is_recognised_by_its_own_signature(signature_id):
    result = parse_error("noise before\n" + SAMPLES[signature_id] + "\nnoise after\n")
    assert result.signature == signature_id
    assert result.category != "unknown"


def test_sample_sizes_are_read_exactly():
    assert parse_error(SAMPLES["xla_gpu_new_constant"]).requested_bytes == 4194304000
    assert parse_error(SAMPLES["bfc_allocator_ran_out"]).requested_bytes == 32768
    assert parse_error(SAMPLES["cuda_pinned_host_out_of_memory"]).requested_bytes == 17179869184
    assert parse_error(SAMPLES["torch_cuda_out_of_memory"]).requested_bytes == round(1.12 * M)
    assert parse_error(SAMPLES["tf_oom_when_allocating_tensor"]).requested_bytes == 4096 * 4


@pytest.mark.parametrize(
    ("yaml_text", "complaint"),
    [
        ("signatures:\n  - {id: x, category: gpu_oom, needle: a, regex: '(?P<nonsense>a)'}\n", "names no field"),
        ("signatures:\n  - {id: x, category: gpu_oom, needle: a, regex: '(unclosed'}\n", "invalid regular expression"),
        ("signatures:\n  - {id: x, category: not_a_category, needle: a, regex: 'a'}\n", "expected shape"),
        ("signatures:\n  - {id: x, category: gpu_oom, needle: A, regex: 'a'}\n", "lower-case"),
        ("signatures: [\n", "not valid YAML"),
    ],
    ids=["unknown-field", "bad-regex", "bad-category", "needle-case", "bad-yaml"],
)
def test_a_malformed_catalogue_is_refused_with_a_message(tmp_path, yaml_text, complaint):
    path = tmp_path / "signatures.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(SignatureCatalogueError, match=complaint):
        load_signatures(path)


def test_a_new_wording_is_a_yaml_edit(tmp_path):
    source = load_signatures.__wrapped__  # the uncached loader
    path = tmp_path / "signatures.yaml"
    path.write_text(
        "signatures:\n"
        "  - id: made_up_allocator\n"
        "    category: gpu_oom\n"
        "    needle: 'gizmo allocator'\n"
        "    regex: 'Gizmo allocator wanted (?P<requested_bytes>{SIZE}) but had (?P<free_bytes>{SIZE})'\n",
        encoding="utf-8",
    )
    catalogue = source(path)
    [signature] = catalogue.signatures
    match = signature.regex.search("Gizmo allocator wanted 3.00G but had 1.50G")
    assert match and match.group("requested_bytes") == "3.00G"


# ---------------------------------------------------------------------------- reading files


def test_read_log_decodes_invalid_utf8_and_utf16(tmp_path):
    path = tmp_path / "bad.log"
    path.write_bytes(b"\x80\xfa\xff garbage\nRan out of memory in memory space hbm. Used 2.00G of 1.00G hbm.\n")
    assert "Used 2.00G" in read_log(path)
    utf16 = tmp_path / "windows.log"
    utf16.write_bytes("Attempting to allocate 8.00M. That was not possible. There are 6.43M free.".encode("utf-16"))
    assert parse_error(read_log(utf16)).requested_bytes == 8 * M


def test_read_log_reports_missing_files_and_directories(tmp_path):
    with pytest.raises(LogReadError, match="no such file"):
        read_log(tmp_path / "absent.log")
    with pytest.raises(LogReadError, match="is a directory"):
        read_log(tmp_path)


# ---------------------------------------------------------------------------- the command


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """oomkb (test build)."""

    cli_diagnose.register(app)
    return app


def test_diagnose_command_shows_category_and_sizes_in_binary_units(cli, tmp_path):
    path = tmp_path / "train.log"
    path.write_text(HBM_REPORT_LOG, encoding="utf-8")
    result = CliRunner().invoke(cli, ["diagnose", str(path)])
    assert result.exit_code == 0, result.output
    assert "compile_hbm_oom" in result.stdout
    assert "14.73 GiB" in result.stdout
    assert "30.21 GiB" in result.stdout
    assert "bf16[256000,3072]" in result.stdout  # markup-like brackets are printed as text
    assert "Used 30.21G of 15.48G hbm" in result.stdout


def test_diagnose_command_reads_standard_input_by_default_and_with_dash(cli):
    log = "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)\n"
    for args in (["diagnose"], ["diagnose", "-"]):
        result = CliRunner().invoke(cli, args, input=log)
        assert result.exit_code == 0, result.output
        assert "runtime_allocation" in result.stdout
        assert "8.00 MiB" in result.stdout and "6.43 MiB" in result.stdout


def test_diagnose_json_prints_the_contract_object(cli):
    result = CliRunner().invoke(cli, ["diagnose", "--json", "-"], input=GPU_LOG)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(CONTRACT_FIELDS) <= set(data)
    assert data["category"] == "gpu_oom"
    assert data["requested_bytes"] == 4770354232
    assert all(isinstance(data[name], (int, type(None))) for name in CONTRACT_FIELDS if name.endswith("_bytes"))


def test_diagnose_unknown_log_exits_zero_with_a_note(cli):
    result = CliRunner().invoke(cli, ["diagnose", "-"], input="all good, loss=0.01\n")
    assert result.exit_code == 0
    assert "No known out-of-memory message" in result.stdout
    result = CliRunner().invoke(cli, ["diagnose", "--json", "-"], input="all good\n")
    assert json.loads(result.stdout)["category"] == "unknown"


def test_diagnose_missing_file_exits_2_with_a_message_and_no_traceback(cli, tmp_path):
    result = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "nope.log")])
    assert result.exit_code == 2
    assert "file not found" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_diagnose_directory_exits_2_with_a_message(cli, tmp_path):
    result = CliRunner().invoke(cli, ["diagnose", str(tmp_path)])
    assert result.exit_code == 2
    assert "is a folder, not a file" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output


def test_diagnose_file_with_invalid_utf8_is_still_read(cli, tmp_path):
    path = tmp_path / "mixed.log"
    path.write_bytes(b"\x80\x81 binary junk \xff\n" + SAMPLES["tpu_runtime_reserve_program"].encode() + b"\n")
    result = CliRunner().invoke(cli, ["diagnose", "--json", str(path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["category"] == "runtime_allocation"
    assert data["requested_bytes"] == round(51.43 * G)


def test_no_byte_figure_is_printed_without_its_unit(cli):
    result = CliRunner().invoke(cli, ["diagnose", "-"], input=GPU_LOG)
    for line in result.stdout.splitlines():
        for number in re.findall(r"\b\d+\.\d\d\b(?! ?[KMGTPE]iB)", line):
            assert number in GPU_LOG, f"unitless figure {number!r} in {line!r}"


def test_a_tiled_shape_quoted_in_a_question_is_sized_as_its_layout_stores_it():
    # a question quoting the figures, not the report: "Used 35.12G of 30.75G hbm" and the shape
    text = ('compile OOM on v4: "Used 35.12G of 30.75G hbm", the biggest allocation is '
            'f32[1048576,3,16]{2,1,0:T(8,128)} and there are 4 of them')
    result = parse_error(text)
    assert result.category == "compile_hbm_oom"
    (a,) = result.allocations
    # 16 -> 128 (minor) and 3 -> 8 (second minor): 192 MiB of data stored in 4 GiB
    assert a.unpadded_size_bytes == 1048576 * 3 * 16 * 4 and a.size_bytes == 1048576 * 8 * 128 * 4
    assert a.expansion_factor == 21.3 and a.padding_bytes == a.size_bytes - a.unpadded_size_bytes


def test_a_tiled_shape_that_fits_its_tiles_or_packs_a_second_tile_is_not_called_padded():
    assert parse_error('Used 20.00G of 15.75G hbm: f32[4096,1024]{1,0:T(8,128)}').allocations == []
    assert parse_error('Used 20.00G of 15.75G hbm: bf16[4096,3]{1,0:T(8,128)(2,1)}').allocations == []


@pytest.mark.parametrize("stats", [
    "memory_stats() right before says bytes_in_use 10.2 GiB, bytes_limit 17.99 GiB, largest_free_block_bytes 2.1 GiB",
    "{'bytes_in_use': 10952166400, 'peak_bytes_in_use': 17179869184, 'bytes_limit': 19316539392, "
    "'largest_free_block_bytes': 2254857830}",
])
def test_memory_stats_beside_a_gpu_error_give_the_pool_and_its_largest_free_block(stats):
    GiB = 1 << 30
    result = parse_error(f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate 3.00GiB\n{stats}")
    assert result.category == "gpu_oom"
    assert abs(result.pool_in_use_bytes - 10.2 * GiB) < 0.01 * GiB  # not the peak
    assert abs(result.pool_limit_bytes - 17.99 * GiB) < 0.01 * GiB
    assert abs(result.largest_free_block_bytes - 2.1 * GiB) < 0.01 * GiB
    assert result.free_bytes == result.pool_limit_bytes - result.pool_in_use_bytes


def test_of_two_quoted_figures_before_and_now_the_last_is_the_current_state():
    result = parse_error("did it, still OOM: before 'Used 16.31G of 15.75G hbm', now 'Used 16.02G of 15.75G hbm'")
    assert result.signature == "tpu_hbm_used_of_capacity_quoted"
    assert abs(result.used_bytes / (1 << 30) - 16.02) < 0.005


def test_a_gpu_buffer_report_printed_by_a_ray_worker_without_its_error_line_is_read():
    log = "\n".join(f"(MeshHostWorker pid=489) {line}" for line in [
        "BufferAssignment stats:",
        "             parameter allocation:    2.00GiB",
        "        maybe_live_out allocation:   10.00MiB",
        "     preallocated temp allocation:    1.50GiB",
        "                 total allocation:    3.51GiB",
        "Peak buffers:",
        "    Buffer 1:",
        "        Size: 1.50GiB",
        '        Operator: op_name="jit(step)/Model/head/convert_element_type[new_dtype=float32 weak_type=False]"',
        "        XLA Label: convert",
        "        Shape: f32[98304,4096]",
    ])
    d = parse_error(log)
    assert d.category == "gpu_oom" and d.backend == "gpu"
    assert d.total_allocation_bytes == int(3.51 * 2**30) and d.parameter_allocation_bytes == 2 * 2**30
    assert d.allocations[0].shape == "f32[98304,4096]" and d.allocations[0].xla_label == "convert"
    # the same report without the worker prefixes reads the same
    assert parse_error(log.replace("(MeshHostWorker pid=489) ", "")).allocations[0].size_bytes == \
        d.allocations[0].size_bytes


def test_a_scoped_allocation_wrapped_over_lines_keeps_its_memory_space():
    # a splash kernel's prefetched SMEM operand, the log wrapped before "::" and inside the brackets
    text = ("RESOURCE_EXHAUSTED: Allocation (size=2097152) would exceed memory (size=1048576)\n"
            ":: #allocation3 [shape = 'u8[2097152]{0}', space=smem, size = 0x200000, scoped,\n"
            "   tag = 'prefetched SMEM operand 0'] :: splash_mha_fwd_segmented_residuals.3")
    p = parse_error(text)
    assert (p.category, p.memory_space) == ("compile_smem_oom", "smem")
    assert (p.requested_bytes, p.available_bytes) == (2 * M, 1 * M)
    assert p.instruction and "splash" in p.instruction
    # the one-line form of a VMEM allocation still reads as scoped VMEM
    one = parse_error("Allocation (size=33554432) would exceed memory (size=16777216) :: #allocation7 "
                      "[shape = 'f32[2048,4096]{1,0}', space=vmem, size = 0x2000000, scoped, tag = 'scratch "
                      "operand'] :: my_kernel.1")
    assert (one.category, one.memory_space) == ("scoped_vmem_oom", "vmem")


def test_an_allocation_line_without_its_number_or_size_still_names_its_memory_space():
    # (after a vLLM-on-TPU thread: the newer wording, "[shape = ..., space=smem, scoped, tag = ...]")
    r = parse_error("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Allocation (size=1179648) would exceed memory "
                    "(size=1048576)\n:: [shape = 'u8[1179648]{0}', space=smem, scoped, tag = 'prefetched SMEM operand "
                    "0'] :: compress_norm_rope_store\n")
    assert r.category == "compile_smem_oom" and r.memory_space == "smem"
    assert (r.requested_bytes, r.available_bytes) == (1179648, 1048576)


def test_a_peak_buffer_list_printed_by_a_python_logger_without_thread_ids_is_read():
    # AlphaFold's run_docker.py relays the container's log as "I0309 12:51:51.367185 run_docker.py:247] ..."
    log = ("I0309 12:51:51.367185 run_docker.py:247] Buffer 2:\n"
           "I0309 12:51:51.367281 run_docker.py:247] Size: 2.63GiB\n"
           "I0309 12:51:51.367475 run_docker.py:247] XLA Label: fusion\n"
           "I0309 12:51:51.367573 run_docker.py:247] Shape: f32[2350,2350,128]\n"
           "I0309 12:51:51.367865 run_docker.py:247] Buffer 3:\n"
           "I0309 12:51:51.367963 run_docker.py:247] Size: 1.32GiB\n"
           "I0309 12:51:51.368157 run_docker.py:247] Shape: f32[2350,2350,64]\n")
    parsed = parse_error(log)
    assert parsed.category == "gpu_oom" and parsed.allocations[0].shape == "f32[2350,2350,128]"


# an HLO dump pasted instead of an allocation report (issue 21, round 66: nothing read its 14.96 GiB buffers)
_HLO_DUMP = """\
  p0.1 = bf16[64,8192]{1,0} parameter(0), metadata={op_name="x"}
  broadcast.7 = bf16[64,8192,8192]{2,1,0} broadcast(p0.1), dimensions={0,2}, metadata={op_name="jit(step)/broadcast_in_dim" source_file="/work/model.py" source_line=31}
  exponential.9 = bf16[64,8192,8192]{2,1,0} exponential(broadcast.7), metadata={op_name="jit(step)/exp" source_file="/work/model.py" source_line=32}
  constant.2 = bf16[] constant(0)
  ROOT reduce.12 = bf16[64,8192]{1,0} reduce(exponential.9, constant.2), dimensions={2}, to_apply=region_0.10, metadata={op_name="jit(step)/reduce_sum" source_file="/work/model.py" source_line=33}
"""


def test_hlo_buffers_are_read_from_a_pasted_dump_largest_first_with_their_source_lines():
    from oomkb.diagnostics.parse import hlo_buffers

    got = hlo_buffers(_HLO_DUMP)
    assert [(a.instruction, a.shape, a.size_bytes, a.op_type, a.source) for a in got] == [
        ("broadcast.7", "bf16[64,8192,8192]", 8 << 30, "broadcast", "/work/model.py:31"),
        ("exponential.9", "bf16[64,8192,8192]", 8 << 30, "exponential", "/work/model.py:32"),
        ("p0.1", "bf16[64,8192]", 1 << 20, "parameter", None),
        ("reduce.12", "bf16[64,8192]", 1 << 20, "reduce", "/work/model.py:33"),
    ]
    assert [a.rank for a in got] == [1, 2, 3, 4]
    assert hlo_buffers("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12 bytes") == []
    assert hlo_buffers("") == [] and hlo_buffers("a = b") == []
