"""The peak by role: real deviceless compiles of an AdamW step and a scanned model (with and
without remat); the rules file read as data."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from oomkb.diagnostics.roles import ROLES, assign_roles, origin_op_names, role_sentence, roles_at_peak
from oomkb.units import format_bytes

PROGRAMS = Path(__file__).parents[1] / "programs" / "roles_programs.py"
sys.path.insert(0, str(PROGRAMS.parent))

import roles_programs as rp  # noqa: E402


class Buf:
    def __init__(self, kind: str, op_name: str | None, shape: str = "f32[4,4]{1,0}", instruction: str | None = None):
        self.kind, self.op_name, self.shape, self.instruction = kind, op_name, shape, instruction


@pytest.mark.parametrize(("path", "role"), [
    ("params['layer0']['w_in']", "parameter"),
    ("state.params['Dense_0']['kernel']", "parameter"),
    ("params['mu_proj']", "parameter"),                       # a weight named mu is still a weight
    ("opt_state['mu']['layer0']['w_in']", "optimizer_state"),
    ("opt_state[0].nu['dense']['kernel']", "optimizer_state"),
    ("state.opt_state[1][0].mu['Dense_0']['kernel']", "optimizer_state"),
    ("grads['w']", "gradient"),
    ("x", "unknown"),                                          # never guessed
    ("batch['tokens']", "unknown"),
])
def test_arguments_get_their_role_from_their_pytree_path(path, role):
    assert assign_roles([Buf("argument", path)]) == [role]


def test_temps_get_their_role_from_the_transformations_in_their_op_name():
    buffers = [Buf("argument", "params['w']", "f32[8,8]{1,0}"),
               Buf("temp", "jit(step)/transpose(jvp())/dot_general", "f32[8,8]{1,0:T(8,128)}"),
               Buf("temp", "jit(step)/transpose(jvp())/mul", "f32[2,8]{1,0}"),
               Buf("temp", "jit(step)/jvp()/tanh", "f32[2,8]{1,0}"),
               Buf("temp", "jit(step)/transpose(jvp(checkpoint))/tanh", "f32[2,8]{1,0}"),
               Buf("output", None)]
    assert assign_roles(buffers) == ["parameter", "gradient", "temporary", "activation", "temporary", "output"]


def test_a_buffer_without_metadata_takes_the_op_of_the_loop_it_is_handed_to():
    hlo = "\n".join([
        '  %custom-call.2 = f32[8,64]{1,0} custom-call(), custom_call_target="AllocateBuffer"',
        "  %tuple.1 = (s32[], f32[8,64]{1,0}) tuple(%c.0, %custom-call.2)",
        '  %while.4 = (s32[], f32[8,64]{1,0}) while(%tuple.1), condition=%cond, body=%body, '
        'metadata={op_name="jit(step)/jvp()/while" stack_frame_id=5}',
    ])
    origins = origin_op_names(hlo)
    assert origins["custom-call.2"] == "jit(step)/jvp()/while"
    assert assign_roles([Buf("temp", None, instruction="custom-call.2{0}")], origins=origins) == ["activation"]


def test_what_the_listed_buffers_leave_of_the_peak_is_unknown_and_the_sentence_reads_largest_first():
    totals = roles_at_peak([(100, "parameter"), (300, "optimizer_state")], peak_bytes=450)
    assert set(totals) == set(ROLES) and totals["unknown"] == 50 and sum(totals.values()) == 450
    assert role_sentence(totals, format_bytes) == "at the peak: 300 B optimizer state, 100 B weights, 50 B other buffers"


@pytest.fixture(scope="module")
def estimate():
    pytest.importorskip("libtpu")
    from oomkb.diagnostics.estimate import estimate_factory

    return lambda factory: estimate_factory(factory, target="v5e", top_n=1000)


@pytest.mark.slow
def test_adamw_parameters_and_optimizer_state_equal_the_argument_pytree_exactly(estimate):
    report = estimate(rp.adamw_step)
    weight = rp.D * rp.H * 4
    by_role = report.peak_by_role
    assert by_role["parameter"] == 2 * rp.LAYERS * weight               # params
    assert by_role["optimizer_state"] == 2 * 2 * rp.LAYERS * weight     # mu and nu (count is tiny: lumped)
    assert sum(by_role.values()) == report.peak_heap_bytes
    assert {b.role for b in report.top_buffers if (b.op_name or "").startswith("params")} == {"parameter"}


@pytest.mark.slow
def test_a_scanned_model_keeps_activations_and_its_remat_variant_does_not(estimate):
    plain, remat = estimate(rp.scan_grad), estimate(rp.scan_grad_remat)
    stacked = rp.SCAN_LAYERS * rp.SCAN_B * rp.SCAN_D * 4
    assert plain.peak_by_role["activation"] >= stacked                  # the scan's residuals, per layer
    assert remat.peak_by_role["activation"] < plain.peak_by_role["activation"]
    for report in (plain, remat):
        assert sum(report.peak_by_role.values()) == report.peak_heap_bytes
        assert report.peak_by_role["parameter"] == rp.SCAN_LAYERS * rp.SCAN_D * rp.SCAN_D * 4
