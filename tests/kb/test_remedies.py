"""The remedy catalogue (kb/catalogue/*.yaml read by kb.remedies), checked as a specification:
complete in every language, citing real guide sections, choosing the guide's remedies for the
user's evidence in the right order, and rendering the user's numbers in human units."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from oomkb.units import format_bytes
from oomkb.indexer.guides import load_guides
from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import SUPPORTED
from oomkb.kb.remedies import default_catalogue_dir, load_catalogue
from oomkb.kb.remedies.choice import choose_remedies
from oomkb.kb.remedies.plurals import placeholders
from oomkb.kb.remedies.rendering import diagnosis_line, message, remedy_text, render
from oomkb.kb.remedies.schema import REQUIRED_MESSAGES, FactError

GiB = 2**30
MiB = 2**20
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


@pytest.fixture(scope="module")
def guides():
    return {g.doc_id: g for g in load_guides()}


def chosen_ids(catalogue, facts, category, limit=100):
    return [r.id for r in choose_remedies(catalogue, facts, category, limit=limit)]


def all_texts(catalogue):
    """(where, language -> text) for every text in the catalogue."""
    for cid, info in catalogue.categories.items():
        yield f"category {cid} name", info.name
        for t in info.diagnosis:
            yield f"category {cid} diagnosis {t.id}", t.text
    for r in catalogue.remedies:
        for n, variant in enumerate(r.text):
            yield f"remedy {r.id} variant {n + 1}", variant
    for key, spec in catalogue.messages.items():
        yield f"message {key}", spec.text


# --------------------------------------------------------------------------- loading


def test_builtin_catalogue_loads_with_all_categories_and_remedies(catalogue):
    assert set(catalogue.categories) == {
        "compile_hbm_oom", "runtime_allocation", "scoped_vmem_oom", "gpu_oom", "host_oom", "unknown",
        "compile_smem_oom", "other_framework_oom",
    }
    assert len(catalogue.remedies) >= 40
    assert len({r.id for r in catalogue.remedies}) == len(catalogue.remedies)
    for category in ("compile_hbm_oom", "runtime_allocation", "scoped_vmem_oom", "gpu_oom", "host_oom",
                     "compile_smem_oom"):
        assert catalogue.remedies_for(category), category
    assert catalogue.remedies_for("unknown") == []
    # Another framework's OOM gets no JAX remedy, and says so (the assistant declines).
    assert catalogue.remedies_for("other_framework_oom") == []
    assert not catalogue.categories["other_framework_oom"].jax_remedies_apply


def test_every_text_exists_in_all_eleven_languages(catalogue):
    assert len(SUPPORTED) == 11
    for where, texts in all_texts(catalogue):
        for lang in SUPPORTED:
            assert (texts.get(lang) or "").strip(), f"{where} has no {lang} text"


def test_every_language_shows_the_same_numbers_as_english(catalogue):
    for where, texts in all_texts(catalogue):
        expected = placeholders(texts["en"])
        for lang in SUPPORTED:
            assert placeholders(texts[lang]) == expected, f"{where} [{lang}]"


def test_translations_are_not_english_copies(catalogue):
    for where, texts in all_texts(catalogue):
        if where.startswith("message sources"):
            continue  # "Sources" is the French word too
        for lang in ("ar", "hi", "ru", "zh", "ja", "ko"):
            assert texts[lang] != texts["en"], f"{where} [{lang}] is the English text"


def test_every_citation_names_an_existing_guide_section(catalogue, guides):
    cites = [r.cite for r in catalogue.remedies]
    cites += [c for info in catalogue.categories.values() for c in info.cite]
    for cite in cites:
        doc_id, _, section = cite.partition("#")
        assert doc_id in guides, cite
        assert guides[doc_id].section(section) is not None, cite


UNCOVERED = {"host_oom", "compile_smem_oom"}  # categories that no guide treats


def test_remedies_cite_guides_about_their_category_except_those_no_guide_covers(catalogue, guides):
    for r in catalogue.remedies:
        for category in r.category:
            if category in UNCOVERED:
                continue
            assert category in guides[r.doc_id].categories, f"{r.id} cites {r.cite} for {category}"
    assert all(category not in UNCOVERED for g in guides.values() for category in g.categories)


def test_flags_and_apis_appear_verbatim_in_the_cited_section_and_in_every_text(catalogue, guides):
    named = 0
    for r in catalogue.remedies:
        section = guides[r.doc_id].section(r.section).text
        for term in r.flags + r.apis:
            named += 1
            assert term in section, f"{r.id}: {term} not in {r.cite}"
            for variant in r.text:
                for lang in SUPPORTED:
                    assert term in variant[lang], f"{r.id} [{lang}] does not name {term}"
    assert named >= 15


def test_catalogue_names_the_guides_flags_and_apis(catalogue):
    flags = {f for r in catalogue.remedies for f in r.flags}
    apis = {a for r in catalogue.remedies for a in r.apis}
    assert {
        "--xla_sc_num_serialized_tables_to_optimize_hbm",
        "--xla_tpu_rematerialization_algo=PEAK_PRIORITY",
        "--xla_tpu_scoped_vmem_limit_kib",
        "tpu_log_allocations_on_oom",
    } <= flags
    assert {
        "jax.debug.print", "donate_argnums", "jax.checkpoint", "vmem_limit_bytes",
        "pallas.tpu.with_memory_space_constraint", "jax.Array", "jax.profiler.trace",
    } <= apis


# --------------------------------------------------------------------------- evidence triggers

# E1000 with a TensorCore / SparseCore split (the guide's first example: SC is the bottleneck).
SC_HIGH = {"category": "compile_hbm_oom", "tensorcore_bytes": 37_387_690_312,
           "sparsecore_bytes": 186_938_451_558, "available_bytes": 102_800_042_230}
TC_HIGH = {"category": "compile_hbm_oom", "tensorcore_bytes": 150 * GiB,
           "sparsecore_bytes": 10 * GiB, "available_bytes": 95 * GiB}
BALANCED = {"category": "compile_hbm_oom", "tensorcore_bytes": 60 * GiB,
            "sparsecore_bytes": 50 * GiB, "available_bytes": 95 * GiB}
HBM = {"category": "compile_hbm_oom", "used_bytes": 49 * GiB, "available_bytes": 32 * GiB,
       "exceeded_by_bytes": 17 * GiB}
RUNTIME = {"category": "runtime_allocation", "requested_bytes": 8 * MiB}
VMEM = {"category": "scoped_vmem_oom", "instruction": "%my-custom-call"}
GPU = {"category": "gpu_oom", "requested_bytes": 200 * GiB}


def _with(base, **facts):
    return {**base, **facts}


# remedy id -> (facts that trigger it, [facts where the fact is absent or below its threshold])
EVIDENCE_CASES = {
    "hbm-sc-stack": (SC_HIGH, [HBM, TC_HIGH, BALANCED]),
    "hbm-sc-padding": (SC_HIGH, [HBM, TC_HIGH]),
    "hbm-sc-heap": (SC_HIGH, [HBM, BALANCED]),
    "hbm-sc-sharding": (SC_HIGH, [HBM, TC_HIGH]),
    "hbm-tc-high": (TC_HIGH, [HBM, SC_HIGH, BALANCED]),
    "hbm-tc-sc-balanced": (BALANCED, [HBM, SC_HIGH, TC_HIGH]),
    "hbm-host-callback": (
        _with(HBM, host_callback_count=2, host_callback_source="train.py:41"),
        [HBM, _with(HBM, host_callback_count=0)],
    ),
    "hbm-large-allocation-debug-print": (
        _with(HBM, largest_allocation_bytes=20 * GiB, largest_allocation_fraction=0.625),
        [HBM, _with(HBM, largest_allocation_fraction=0.5), _with(HBM, largest_allocation_fraction=0.2)],
    ),
    "hbm-replicated-arguments": (
        _with(HBM, replicated_argument_count=1, replicated_argument_bytes=4 * GiB),
        [HBM, _with(HBM, replicated_argument_count=0, replicated_argument_bytes=0)],
    ),
    "hbm-large-allocation-sharding": (
        _with(HBM, largest_allocation_fraction=0.51, largest_allocation_shape="f32[65536,65536]"),
        [HBM, _with(HBM, largest_allocation_fraction=0.5)],
    ),
    "hbm-no-large-allocation": (
        _with(HBM, largest_allocation_bytes=4 * GiB, largest_allocation_fraction=0.125),
        [HBM, _with(HBM, largest_allocation_fraction=0.8)],
    ),
    "hbm-donation-measured": (
        _with(HBM, donation_savings_bytes=3 * GiB),
        [HBM, _with(HBM, donation_savings_bytes=0)],
    ),
    "hbm-padding-measured": (
        _with(HBM, padding_waste_bytes=6 * GiB, padding_waste_fraction=0.25),
        [HBM, _with(HBM, padding_waste_fraction=0.10), _with(HBM, padding_waste_fraction=0.02)],
    ),
    "hbm-checkpoint-near-fit": (
        _with(HBM, exceeded_by_bytes=2 * GiB, exceeded_fraction=0.0625),
        [HBM, _with(HBM, exceeded_fraction=0.53)],
    ),
    "rt-fragmentation": (
        _with(RUNTIME, free_bytes=16 * MiB, free_fraction=2.0),
        [RUNTIME, _with(RUNTIME, free_bytes=6 * MiB, free_fraction=0.75)],
    ),
    "rt-not-enough-free": (
        _with(RUNTIME, free_bytes=6 * MiB, free_fraction=0.75),
        [RUNTIME, _with(RUNTIME, free_bytes=16 * MiB, free_fraction=2.0)],
    ),
    "rt-donation-measured": (
        _with(RUNTIME, donation_savings_bytes=512 * MiB),
        [RUNTIME, _with(RUNTIME, donation_savings_bytes=0)],
    ),
    "rt-padding-measured": (
        _with(RUNTIME, padding_waste_bytes=GiB, padding_waste_fraction=0.3),
        [RUNTIME, _with(RUNTIME, padding_waste_fraction=0.05)],
    ),
    "rt-leak-references": (
        _with(RUNTIME, growth_bytes_per_call=MiB, leak_suspect_count=1,
              leak_suspect_shape="float32(256, 1024)", leak_suspect_source="step.py:12"),
        [RUNTIME, _with(RUNTIME, growth_bytes_per_call=0, leak_suspect_count=0)],
    ),
    "live-arrays-held": (
        _with(RUNTIME, live_group_bytes=MiB, live_group_shape="float32(256, 1024)",
              live_group_source="train.py:12", live_group_held_by="GRADS[4] (list, module_global train, train.py:3)"),
        [RUNTIME, _with(RUNTIME, live_group_bytes=MiB, live_group_shape="float32(256, 1024)",
                        live_group_source="train.py:12")],
    ),
    "live-arrays-held-gpu": (
        _with(GPU, live_group_bytes=MiB, live_group_shape="float32(256, 1024)",
              live_group_source="train.py:12", live_group_held_by="GRADS[4] (list, module_global train, train.py:3)"),
        [GPU, _with(GPU, live_group_bytes=MiB, live_group_shape="float32(256, 1024)", live_group_source="train.py:12")],
    ),
    "leak-growth": (
        _with(GPU, growth_bytes_per_call=4 * MiB, peak_bytes=GiB),
        [GPU, _with(GPU, growth_bytes_per_call=0, peak_bytes=GiB)],
    ),
    "vmem-kernel-block-sizes": (
        _with(VMEM, custom_call_target="tpu_custom_call", opcode="custom-call"),
        [VMEM, _with(VMEM, opcode="fusion")],
    ),
    "vmem-compiler-bug": (
        _with(VMEM, instruction="%fusion.3", opcode="fusion"),
        [VMEM, _with(VMEM, custom_call_target="tpu_custom_call", opcode="custom-call")],
    ),
}


def test_every_evidence_remedy_has_a_trigger_case(catalogue):
    evidence = {r.id for r in catalogue.remedies if r.is_evidence}
    assert evidence == set(EVIDENCE_CASES)


@pytest.mark.parametrize("remedy_id", sorted(EVIDENCE_CASES))
def test_evidence_remedy_fires_on_its_fact_and_is_marked_as_evidence(catalogue, remedy_id):
    facts, _ = EVIDENCE_CASES[remedy_id]
    chosen = {r.id: r for r in choose_remedies(catalogue, facts, facts["category"], limit=100)}
    assert remedy_id in chosen
    assert chosen[remedy_id].evidence
    for lang in SUPPORTED:
        text = remedy_text(catalogue, chosen[remedy_id], facts, lang, format_bytes)
        assert not PLACEHOLDER.search(text), f"{remedy_id} [{lang}]: {text}"


@pytest.mark.parametrize("remedy_id", sorted(EVIDENCE_CASES))
def test_evidence_remedy_stays_silent_without_its_fact_or_below_its_threshold(catalogue, remedy_id):
    _, quiet = EVIDENCE_CASES[remedy_id]
    for facts in quiet:
        assert remedy_id not in chosen_ids(catalogue, facts, facts["category"]), facts


def test_sparsecore_bottleneck_gets_the_four_sparsecore_steps_first(catalogue):
    assert chosen_ids(catalogue, SC_HIGH, "compile_hbm_oom", limit=4) == [
        "hbm-sc-stack", "hbm-sc-padding", "hbm-sc-heap", "hbm-sc-sharding"
    ]


def test_vmem_error_from_a_custom_call_target_names_the_kernel_and_its_target(catalogue):
    facts = _with(VMEM, custom_call_target="tpu_custom_call")
    chosen = choose_remedies(catalogue, facts, "scoped_vmem_oom")
    assert chosen[0].id == "vmem-kernel-block-sizes"
    text = remedy_text(catalogue, chosen[0], facts, "pt", format_bytes)
    assert "%my-custom-call" in text and "`custom_call_target` tpu_custom_call" in text
    assert "vmem-compiler-bug" not in [r.id for r in chosen]


def test_vmem_error_from_a_standard_hlo_op_only_suggests_filing_a_compiler_bug(catalogue):
    facts = _with(VMEM, instruction="%fusion.3", opcode="fusion")
    assert chosen_ids(catalogue, facts, "scoped_vmem_oom") == ["vmem-compiler-bug"]


def test_vmem_error_of_unknown_origin_asks_to_tell_kernel_from_hlo_and_offers_kernel_steps(catalogue):
    ids = chosen_ids(catalogue, VMEM, "scoped_vmem_oom")
    assert ids[0] == "vmem-identify-source"
    assert {"vmem-block-sizes", "vmem-limit-bytes", "vmem-global-limit"} <= set(ids)


# --------------------------------------------------------------------------- general advice


@pytest.mark.parametrize(
    ("remedy_id", "facts"),
    [
        ("hbm-donate", _with(HBM, donation_savings_bytes=0)),
        ("rt-donate", _with(RUNTIME, donation_savings_bytes=0)),
        ("hbm-padding", _with(HBM, padding_waste_fraction=0.03)),
        ("rt-padding", _with(RUNTIME, padding_waste_fraction=0.03)),
        ("hbm-checkpoint", _with(HBM, exceeded_fraction=0.53)),
        ("hbm-remove-debug-print", _with(HBM, largest_allocation_fraction=0.1)),
        ("hbm-check-sharding", _with(HBM, largest_allocation_fraction=0.1)),
        ("hbm-find-peak-contributors", _with(HBM, largest_allocation_fraction=0.9)),
        ("rt-no-leaks", _with(RUNTIME, growth_bytes_per_call=0, leak_suspect_count=0)),
        ("gpu-memory-profile", _with(GPU, growth_bytes_per_call=0)),
        ("vmem-limit-bytes", _with(VMEM, opcode="fusion")),
    ],
)
def test_general_step_is_dropped_when_a_measurement_shows_it_does_not_apply(catalogue, remedy_id, facts):
    assert remedy_id in chosen_ids(catalogue, {"category": facts["category"]}, facts["category"])
    assert remedy_id not in chosen_ids(catalogue, facts, facts["category"])


@pytest.mark.parametrize(
    ("facts", "evidence_id", "general_id"),
    [
        (_with(HBM, donation_savings_bytes=GiB), "hbm-donation-measured", "hbm-donate"),
        (_with(HBM, padding_waste_fraction=0.4), "hbm-padding-measured", "hbm-padding"),
        (_with(HBM, exceeded_fraction=0.1), "hbm-checkpoint-near-fit", "hbm-checkpoint"),
        (_with(HBM, largest_allocation_fraction=0.3), "hbm-no-large-allocation", "hbm-find-peak-contributors"),
        (_with(HBM, host_callback_count=1), "hbm-host-callback", "hbm-remove-debug-print"),
        (_with(RUNTIME, growth_bytes_per_call=MiB), "rt-leak-references", "rt-no-leaks"),
        (_with(GPU, growth_bytes_per_call=MiB), "leak-growth", "gpu-memory-profile"),
        (_with(VMEM, opcode="custom-call"), "vmem-kernel-block-sizes", "vmem-block-sizes"),
    ],
)
def test_evidence_remedy_replaces_its_general_alternative(catalogue, facts, evidence_id, general_id):
    ids = chosen_ids(catalogue, facts, facts["category"])
    assert evidence_id in ids
    assert general_id not in ids


def test_evidence_remedies_come_first_in_guide_order_then_general_ones(catalogue):
    facts = _with(
        HBM, largest_allocation_fraction=0.7, host_callback_count=1, donation_savings_bytes=GiB,
        padding_waste_fraction=0.2, replicated_argument_count=2,
    )
    chosen = choose_remedies(catalogue, facts, "compile_hbm_oom", limit=100)
    flags = [r.evidence for r in chosen]
    assert flags == sorted(flags, reverse=True)
    assert [r.id for r in chosen][:6] == [
        "hbm-host-callback",          # scenario 2, displaces the large-allocation debug-print step
        "hbm-replicated-arguments",   # scenario 2, displaces the large-allocation sharding step
        "hbm-donation-measured",      # 3.A
        "hbm-padding-measured",       # 3.C
        "hbm-batch-size",             # first general step left (3.A)
        "hbm-bfloat16",
    ]


@pytest.mark.parametrize("category", ["compile_hbm_oom", "runtime_allocation", "scoped_vmem_oom", "gpu_oom"])
def test_general_remedies_follow_the_order_of_the_guide_sections(catalogue, guides, category):
    position = {
        (doc_id, s.id): i for doc_id, g in guides.items() for i, s in enumerate(g.sections)
    }
    general = [r for r in catalogue.remedies_for(category) if not r.is_evidence]
    by_guide: dict[str, list[int]] = {}
    for r in general:
        by_guide.setdefault(r.doc_id, []).append(position[(r.doc_id, r.section)])
    for doc_id, order in by_guide.items():
        assert order == sorted(order), f"{category}: {doc_id} sections out of order {order}"


def test_e1000_general_advice_walks_scenario_2_then_3a_to_3f(catalogue):
    sections = []
    for r in catalogue.remedies_for("compile_hbm_oom"):
        if not r.is_evidence and r.section not in sections:
            sections.append(r.section)
    assert sections == [
        "scenario-2-large-allocations", "scenario-3-total-allocations", "scenario-3a-configuration",
        "scenario-3b-architecture-sharding", "scenario-3c-padding", "scenario-3e-rematerialization",
        "scenario-3f-profiling-tools",
    ]


def test_plain_hbm_error_gets_the_first_general_steps_in_guide_order(catalogue):
    assert chosen_ids(catalogue, HBM, "compile_hbm_oom", limit=5) == [
        "hbm-remove-debug-print", "hbm-check-sharding", "hbm-find-peak-contributors",
        "hbm-batch-size", "hbm-donate",
    ]


def test_limit_caps_the_number_of_remedies(catalogue):
    assert chosen_ids(catalogue, HBM, "compile_hbm_oom", limit=0) == []
    assert len(chosen_ids(catalogue, HBM, "compile_hbm_oom", limit=2)) == 2


def test_host_oom_says_honestly_that_the_guides_do_not_cover_it(catalogue):
    chosen = choose_remedies(catalogue, {"category": "host_oom"}, "host_oom")
    assert [r.id for r in chosen] == ["host-offload-note"]
    assert "do not treat host" in remedy_text(catalogue, chosen[0], {}, "en", format_bytes)


def test_unknown_category_and_wrongly_typed_fact_are_clear_errors(catalogue):
    with pytest.raises(CatalogueError, match="unknown error category"):
        choose_remedies(catalogue, {}, "disk_full")
    with pytest.raises(FactError, match="free_fraction"):
        choose_remedies(catalogue, _with(RUNTIME, free_fraction="high"), "runtime_allocation")


# --------------------------------------------------------------------------- rendering

RICH_FACTS = {
    "category": "compile_hbm_oom", "backend": "tpu", "memory_space": "hbm",
    "requested_bytes": 12 * GiB, "available_bytes": 16 * GiB, "used_bytes": 19 * GiB,
    "exceeded_by_bytes": 3 * GiB, "exceeded_fraction": 0.1875, "free_bytes": 6 * MiB,
    "free_fraction": 0.75, "largest_free_block_bytes": 2 * MiB, "tensorcore_bytes": 9 * GiB,
    "sparsecore_bytes": 10 * GiB, "shape": "bf16[8192,8192]", "instruction": "%fusion.7",
    "opcode": "fusion", "custom_call_target": "tpu_custom_call",
    "largest_allocation_bytes": 12 * GiB, "largest_allocation_fraction": 0.75,
    "largest_allocation_shape": "bf16[8192,8192]", "padding_waste_bytes": 3 * GiB,
    "padding_waste_fraction": 0.158, "padding_worst_shape": "f32[129,1024]",
    "donation_savings_bytes": 1536 * MiB, "donation_arguments": "params, opt_state",
    "host_callback_count": 2, "host_callback_source": "train.py:41",
    "host_callback_kind": "io_callback", "replicated_argument_count": 3, "replicated_argument_bytes": 5 * GiB,
    "replicated_argument_path": "params['embed']", "temp_bytes": 7 * GiB,
    "target_generation": "v5e", "total_bytes": 19 * GiB, "hbm_bytes": 16 * GiB, "fits": False,
    "growth_bytes_per_call": 4 * MiB, "peak_bytes": 2 * GiB,
    "leak_suspect_count": 1, "leak_suspect_shape": "float32(256, 1024)",
    "leak_suspect_source": "step.py:12",
    "leak_suspect_held_by": "GRADS[3] (list, module_global train, train.py:4)",
    "live_group_bytes": 12 * MiB, "live_group_shape": "float32(256, 1024)", "live_group_source": "train.py:9",
    "live_group_held_by": "GRADS[3] (list, module_global train, train.py:4)",
}


def test_every_template_renders_without_leftover_placeholders(catalogue):
    rendered = 0
    for where, texts in all_texts(catalogue):
        if where.startswith("message"):
            continue
        for lang in SUPPORTED:
            text = render(texts[lang], RICH_FACTS, format_bytes, catalogue)
            assert "{" not in text and "}" not in text, f"{where} [{lang}]: {text}"
            rendered += 1
    assert rendered > 1000


def test_host_callback_remedy_names_the_kind_of_callback_the_program_has(catalogue):
    remedy = catalogue.remedy("hbm-host-callback")
    facts = _with(HBM, host_callback_count=1, host_callback_kind="io_callback",
                  host_callback_source="model.py:7")
    for lang in SUPPORTED:
        text = remedy_text(catalogue, remedy, facts, lang, format_bytes)
        assert "`io_callback`" in text and "model.py:7" in text, (lang, text)
        assert "`jax.debug.print()`" in text and "`jax.pure_callback`" in text, (lang, text)
    unknown = remedy_text(catalogue, remedy, _with(HBM, host_callback_count=3), "en", format_bytes)
    assert unknown.startswith("Host callbacks in the compiled program: 3.")
    assert "`jax.debug.callback`" in unknown


def test_rendered_remedy_shows_the_users_numbers_in_binary_units(catalogue):
    facts = _with(SC_HIGH)
    text = remedy_text(catalogue, catalogue.remedy("hbm-sc-stack"), facts, "zh", format_bytes)
    assert "174.10 GiB" in text and "34.82 GiB" in text
    assert "186938451558" not in text


def test_fractions_render_as_percentages(catalogue):
    facts = _with(HBM, padding_waste_bytes=6 * GiB, padding_waste_fraction=0.25,
                  padding_worst_shape="f32[129,1024]")
    text = remedy_text(catalogue, catalogue.remedy("hbm-padding-measured"), facts, "de", format_bytes)
    assert "6.00 GiB" in text and "25%" in text and "f32[129,1024]" in text


def test_most_specific_variant_is_used_when_its_numbers_are_known(catalogue):
    remedy = catalogue.remedy("rt-fragmentation")
    base = _with(RUNTIME, free_bytes=16 * MiB, free_fraction=2.0)
    with_block = remedy_text(catalogue, remedy, _with(base, largest_free_block_bytes=MiB), "en", format_bytes)
    without = remedy_text(catalogue, remedy, base, "en", format_bytes)
    bare = remedy_text(catalogue, remedy, {"free_fraction": 2.0}, "en", format_bytes)
    assert "1.00 MiB" in with_block and "16.00 MiB" in with_block
    assert "16.00 MiB" in without and "largest contiguous" not in without
    assert "MiB" not in bare


def test_diagnosis_line_states_the_users_numbers_in_each_language(catalogue):
    facts = _with(SC_HIGH, used_bytes=224_326_141_870, exceeded_by_bytes=121_526_099_640)
    for lang in SUPPORTED:
        line = diagnosis_line(catalogue, facts, lang, format_bytes)
        assert "174.10 GiB" in line and "34.82 GiB" in line and "95.74 GiB" in line, lang
        assert not PLACEHOLDER.search(line)


def test_unsupported_language_falls_back_to_english(catalogue):
    remedy = catalogue.remedy("rt-batch-size")
    assert remedy_text(catalogue, remedy, RUNTIME, "sw", format_bytes) == remedy.text[0]["en"]


# --------------------------------------------------------------------------- messages


def test_answer_messages_exist_in_every_language_with_their_values(catalogue):
    assert set(REQUIRED_MESSAGES) == {
        "diagnosis", "what_to_do", "from_the_guides", "sources", "not_covered",
        "paste_log_hint", "unsupported_language",
    }
    for key, params in REQUIRED_MESSAGES.items():
        spec = catalogue.messages[key]
        assert spec.params == list(params)
        values = {p: "Swahili" for p in params}
        for lang in SUPPORTED:
            text = message(catalogue, key, lang, **values)
            assert text.strip() and not PLACEHOLDER.search(text), (key, lang)
            if params:
                assert "Swahili" in text


def test_not_covered_says_what_the_guides_do_cover(catalogue):
    en = message(catalogue, "not_covered", "en")
    assert "do not cover" in en and "TPU" in en and "GPU" in en and "JAX" in en
    for lang in SUPPORTED:
        assert "XProf" in message(catalogue, "not_covered", lang)


def _broken_copy(tmp_path: Path, file: str, mutate) -> Path:
    """A copy of the built-in catalogue in tmp_path with `mutate` applied to one file's data."""
    folder = tmp_path / "catalogue"
    shutil.copytree(default_catalogue_dir(), folder, ignore=shutil.ignore_patterns("__*"))
    path = folder / file
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    mutate(data)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump(data, Dumper=dumper, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return folder


def _remedy(data, remedy_id):
    return next(r for r in data["remedies"] if r["id"] == remedy_id)


def _set_when(remedy_id, when):
    def mutate(data):
        _remedy(data, remedy_id)["when"] = when
    return mutate


def _drop_language(remedy_id, lang):
    def mutate(data):
        text = _remedy(data, remedy_id)["text"]
        (text[0] if isinstance(text, list) else text).pop(lang)
    return mutate


def _set_cite(remedy_id, cite):
    def mutate(data):
        _remedy(data, remedy_id)["cite"] = cite
    return mutate


def _add_flag_everywhere(remedy_id, flag):
    def mutate(data):
        remedy = _remedy(data, remedy_id)
        remedy["flags"] = [flag]
        remedy["text"] = {lang: f"{t} {flag}" for lang, t in remedy["text"].items()}
    return mutate


def _add_api_to_list_only(remedy_id, api):
    def mutate(data):
        _remedy(data, remedy_id)["apis"] = [api]
    return mutate


def _append_to_all_texts(remedy_id, suffix):
    def mutate(data):
        remedy = _remedy(data, remedy_id)
        remedy["text"] = {lang: f"{t} {suffix}" for lang, t in remedy["text"].items()}
    return mutate


def _append_to_one_text(remedy_id, lang, suffix):
    def mutate(data):
        _remedy(data, remedy_id)["text"][lang] += suffix
    return mutate


@pytest.mark.parametrize(
    ("file", "mutate", "expected"),
    [
        ("remedies.yaml", _set_when("hbm-host-callback", {"fact": "gpu_temperature", "gt": 0}),
         ["hbm-host-callback", "unknown fact", "gpu_temperature"]),
        ("remedies.yaml", _drop_language("rt-batch-size", "ko"),
         ["rt-batch-size", "missing language", "ko"]),
        ("remedies.yaml", _set_cite("hbm-bfloat16", "e1000-compile-hbm-oom#scenario-9"),
         ["hbm-bfloat16", "scenario-9"]),
        ("remedies.yaml", _set_cite("hbm-bfloat16", "no-such-guide#intro"),
         ["hbm-bfloat16", "no guide"]),
        ("remedies.yaml", _add_flag_everywhere("rt-batch-size", "--xla_tpu_made_up_flag"),
         ["rt-batch-size", "--xla_tpu_made_up_flag", "does not appear in the cited section"]),
        ("remedies.yaml", _add_api_to_list_only("hbm-bfloat16", "jax.jit"),
         ["hbm-bfloat16", "does not name 'jax.jit'"]),
        ("remedies.yaml", _append_to_all_texts("rt-batch-size", "{gpu_temperature}"),
         ["rt-batch-size", "unknown placeholder", "gpu_temperature"]),
        ("remedies.yaml", _append_to_one_text("rt-batch-size", "ja", " {requested}"),
         ["rt-batch-size", "[ja]", "same numbers"]),
        ("remedies.yaml", _append_to_all_texts("hbm-donate", "{donation_savings}"),
         ["hbm-donate", "does not guarantee"]),
        ("remedies.yaml", _set_when("rt-fragmentation", {"fact": "free_fraction", "ge": "high"}),
         ["rt-fragmentation"]),
        ("messages.yaml", lambda d: d["messages"].pop("unsupported_language"),
         ["unsupported_language", "required"]),
        ("messages.yaml", lambda d: d["messages"]["sources"]["text"].pop("ar"),
         ["message 'sources'", "missing language", "ar"]),
        ("categories.yaml", lambda d: d["categories"]["gpu_oom"]["name"].pop("hi"),
         ["category 'gpu_oom'", "hi"]),
        ("facts.yaml", lambda d: d["facts"].append(dict(d["facts"][1])),
         ["fact 'backend'", "defined twice"]),
    ],
    ids=[
        "unknown-fact", "missing-language", "missing-section", "unknown-guide",
        "flag-not-in-cited-section", "api-missing-from-texts", "unknown-placeholder",
        "numbers-differ-between-languages", "last-variant-needs-unguaranteed-number",
        "comparison-with-text", "required-message-missing", "message-missing-language",
        "category-name-missing-language", "fact-defined-twice",
    ],
)
def test_broken_catalogue_is_rejected_naming_the_file_and_the_item(tmp_path, file, mutate, expected):
    folder = _broken_copy(tmp_path, file, mutate)
    with pytest.raises(CatalogueError) as error:
        load_catalogue(folder)
    text = str(error.value)
    assert str(folder / file) in text
    for part in expected:
        assert part in text, text


def test_missing_catalogue_file_is_a_clear_error(tmp_path):
    folder = tmp_path / "catalogue"
    shutil.copytree(default_catalogue_dir(), folder, ignore=shutil.ignore_patterns("__*"))
    (folder / "messages.yaml").unlink()
    with pytest.raises(CatalogueError, match="catalogue file missing: .*messages.yaml"):
        load_catalogue(folder)


def test_unchanged_copy_of_the_catalogue_loads(tmp_path):
    folder = _broken_copy(tmp_path, "remedies.yaml", lambda data: None)
    assert len(load_catalogue(folder).remedies) == len(load_catalogue().remedies)


# --------------------------------------------------------------------------- the facts vocabulary


def _estimate_report(**overrides):
    from oomkb.diagnostics.estimate.report import EstimateReport

    data = {
        "function": "train_step", "compile_seconds": 1.5,
        "target": {"generation": "v5e", "topology": "v5e:2x2", "hbm_bytes": 16 * GiB, "devices": 4,
                   "devices_used": 4, "device_kind": "TPU v5 lite", "libtpu_version": "0.0.0"},
        "fits": False, "argument_bytes": 6 * GiB, "output_bytes": 2 * GiB, "temp_bytes": 12 * GiB,
        "alias_bytes": 0, "generated_code_bytes": MiB, "total_bytes": 20 * GiB + MiB,
        "headroom_bytes": -(4 * GiB + MiB),
        "top_buffers": [{"bytes": 9 * GiB, "unpadded_bytes": 8 * GiB, "padding_bytes": GiB,
                         "shape": "f32[129,1024]{1,0:T(8,128)}", "kind": "temp",
                         "source": "model.py:10"}],
        "padding": {"waste_bytes": 3 * GiB},
        "donation": {"checked": True, "savings_bytes": 2 * GiB},
        "host_callbacks": [{"kind": "debug_print", "source": "model.py:20"}],
        "replicated_arguments": [{"path": "params['w']", "bytes": GiB, "shape": "f32[16384,16384]",
                                  "devices": 4}],
    }
    data.update(overrides)
    return EstimateReport.model_validate(data)


def _profile_report():
    from oomkb.diagnostics.profile import ProfileReport

    return ProfileReport.model_validate({
        "backend": "cpu", "calls": 4, "baseline_bytes": 0,
        "live_bytes_per_call": [MiB, 2 * MiB, 3 * MiB, 4 * MiB], "peak_bytes": 4 * MiB,
        "peak_call": 4, "growth_bytes_per_call": MiB,
        "leak_suspects": [{"shape": "(256, 1024)", "dtype": "float32", "count": 4, "bytes": 4 * MiB,
                           "count_per_call": [1, 2, 3, 4], "source": "step.py:12 (step)"}],
        "call_seconds": [0.01] * 4, "trace_dir": "/tmp/trace",
        "xprof_command": "xprof --logdir=/tmp/trace --port=6006",
    })


def test_facts_the_assistant_derives_from_evidence_are_declared_and_well_typed(catalogue):
    from oomkb.api.core.evidence import facts_from
    from oomkb.diagnostics.parse import parse_error
    from oomkb.kb.remedies.conditions import check_facts

    logs = [
        "Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.",
        "TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage 174.10G, exceeding available bytes: 95.74G",
        "Allocation (size=107374182400) would exceed memory (size=17179869184) :: #allocation7 "
        "[shape = 'u8[327680,327680]{1,0:T(8,128)(4,1)}', space=hbm, size = 0xffffffffffffffff]",
        "Error allocating device buffer: Attempting to allocate 8.00M. That was not possible. "
        "There are 6.43M free.; (0x0x1_HBM0)",
        "Ran out of memory in memory space vmem while allocating on stack for %k = bf16[8] "
        'custom-call(%p), custom_call_target="tpu_custom_call"',
        "Out of memory while trying to allocate 214748364800 bytes.",
    ]
    fact_sets = [facts_from(parse_error(log)) for log in logs]
    fact_sets += [facts_from(None, _estimate_report()), facts_from(None, _profile_report())]
    seen: set[str] = set()
    for facts in fact_sets:
        undeclared = set(facts) - set(catalogue.facts)
        assert not undeclared, f"facts.yaml does not declare {sorted(undeclared)}"
        check_facts(catalogue, facts)
        seen |= set(facts)
    # the evidence that drives the evidence remedies really reaches the catalogue
    assert {"tensorcore_bytes", "sparsecore_bytes", "largest_allocation_fraction", "free_fraction",
            "padding_waste_fraction", "donation_savings_bytes", "host_callback_count",
            "replicated_argument_count", "custom_call_target", "growth_bytes_per_call",
            "leak_suspect_count"} <= seen


def test_an_estimate_that_does_not_fit_gets_remedies_from_its_own_numbers(catalogue):
    from oomkb.api.core.evidence import facts_from

    facts = facts_from(None, _estimate_report())
    ids = chosen_ids(catalogue, facts, facts["category"])
    assert {"hbm-host-callback", "hbm-replicated-arguments", "hbm-donation-measured",
            "hbm-padding-measured"} <= set(ids)
    text = remedy_text(catalogue, catalogue.remedy("hbm-donation-measured"), facts, "es", format_bytes)
    assert "2.00 GiB" in text


@pytest.mark.parametrize(
    "language, calls, expected",
    [
        ("ru", 1, "Профиль за 1 вызов:"), ("ru", 3, "Профиль за 3 вызова:"),
        ("ru", 5, "Профиль за 5 вызовов:"), ("ru", 21, "Профиль за 21 вызов:"),
        ("ru", 12, "Профиль за 12 вызовов:"), ("en", 1, "Profile over 1 call:"),
        ("en", 4, "Profile over 4 calls:"), ("de", 1, "Profil über 1 Aufruf:"),
        ("fr", 0, "Profil sur 0 appel :"), ("ar", 2, "على مدى استدعاءين:"),
        ("ar", 11, "على مدى 11 استدعاءً:"), ("zh", 1, "1 次调用"),
    ],
)
def test_profile_summary_counts_agree_with_the_number_in_each_language(catalogue, language, calls, expected):
    text = message(catalogue, "profile_summary", language, calls=calls, peak="2.00 GiB",
                   growth_per_call="4.00 MiB")
    assert expected in text, text


def test_a_plural_without_the_forms_its_language_needs_is_rejected(tmp_path):
    from oomkb.kb.remedies.plurals import plural_categories

    assert plural_categories("ru") == {"one", "few", "many"}
    assert plural_categories("zh") == {"other"}
    folder = tmp_path / "catalogue"
    shutil.copytree(default_catalogue_dir(), folder)
    path = folder / "messages.yaml"
    text = path.read_text(encoding="utf-8").replace(
        "{calls, plural, one {# вызов} few {# вызова} many {# вызовов} other {# вызова}}",
        "{calls, plural, one {# вызов} other {# вызовов}}",
    )
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogueError, match=r"profile_summary.*\[ru\].*lacks the form\(s\) few, many"):
        load_catalogue(folder)
