"""Rules of the plan that need no compile: which remedies count as fixes."""

from oomkb.diagnostics.plan import FixReport, _split_no_saving


def test_a_remedy_that_makes_things_worse_is_shown_as_no_saving_never_as_a_fix():
    # flash attention on v5e: 101,462,016 bytes with q, k, v donated vs 101,159,936 without
    worse = FixReport(id="donate_arguments", title="donate q, k, v", verified=True, fits=True,
                      total_bytes=101_462_016, saving_bytes=101_159_936 - 101_462_016)
    same = FixReport(id="bf16_arguments", title="bf16", verified=True, fits=True,
                     total_bytes=5, saving_bytes=0)
    better = FixReport(id="donate_arguments", title="donate x", verified=True, fits=True,
                       total_bytes=90, saving_bytes=10)
    generation = FixReport(id="other_generation", title="use v5p", verified=True, fits=True,
                           total_bytes=7, saving_bytes=None)
    fixes, no_saving = _split_no_saving([worse, same, better, generation])
    assert fixes == [better, generation]
    assert [f.title for f in no_saving] == ["donate q, k, v", "bf16"]
    assert no_saving[0].note.startswith(
        "no saving: 101,462,016 bytes per device with the change vs 101,159,936 without")
