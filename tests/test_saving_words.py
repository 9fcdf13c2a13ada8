"""What a finding's detail says of its replayed saving (tracekit.analysis.saving_words), case by
case on Replayed values as the replay gives them: the figures of real replays (GPT-2 trained with
.item(), tests/data/h100/model_pairs), and the edges a replay can give (no estimate, an empty step,
a fix that makes the step longer, fixes combined)."""

import math

import pytest

from tracekit.analysis.saving_words import same_saving, why_less, why_more
from tracekit.replay.savings import Replayed

# gpt2_train_item's host_sync: the .item() waits 213.2 µs a step; replayed without the profiler
# (8.6 µs a recorded op) dropping it saves 5,796.4 of a 31,531.6 µs step, as traced 219.2
ITEM = Replayed(5796.4, 31531.6, 25735.2, traced_saving_us=219.2, profiler_us_per_op=8.6)


def test_a_saving_far_above_the_estimate_says_what_the_fix_also_takes_off():
    words = why_more(ITEM, 213.2, "drop-sync:aten::item")
    assert words.startswith("; replayed, the fix saves 5,796.4 µs a step, more than the 213.2 the rule counts: "
                            "the wait also held the CPU back from queuing the work after it")
    assert "(the step, replayed without the profiler, from 31,531.6 µs to 25,735.2)" in words
    assert words.endswith("; as traced it saves 219.2: there the profiler's cost (8.6 µs a recorded op) slows the "
                          "CPU so much that the step waits on it either way")
    assert why_less(ITEM, 213.2) == ""


@pytest.mark.parametrize("estimate", [None, math.nan, 0.0, -5.0, 5796.4, 3000.0])
def test_no_word_without_an_estimate_to_compare_or_where_the_two_are_near(estimate):
    assert why_more(ITEM, estimate, "drop-sync:aten::item") == ""


def test_no_word_on_an_empty_step_or_an_unknown_saving():
    assert why_more(Replayed(10.0, 0.0, -10.0), 1.0, "drop-sync:x") == ""
    assert why_more(Replayed(why="the trace has no steps"), 1.0, "drop-sync:x") == ""
    assert why_less(Replayed(why="the trace has no steps"), 1.0) == ""


def test_a_difference_under_a_hundredth_of_the_step_is_no_news():
    """3 µs over a 1 µs estimate, in a 1 ms step: no sentence; 30 µs over it: one."""
    assert why_more(Replayed(3.0, 1000.0, 997.0), 1.0, "drop-sync:x") == ""
    assert why_more(Replayed(31.0, 1000.0, 969.0), 1.0, "drop-sync:x").startswith("; replayed, the fix saves 31.0")


def test_a_traced_saving_near_the_replayed_one_or_above_the_estimate_is_not_said_to_be_hidden():
    """The traced sentence is for a profiler that hid what the fix does: a traced saving of 5x the
    estimate (gpt2_train_eager_attn's drop-sync: 556.7 against 109.0) hid nothing."""
    seen = Replayed(1486.8, 32590.1, 31103.3, traced_saving_us=556.7, profiler_us_per_op=7.5)
    assert "as traced" not in why_more(seen, 109.0, "drop-sync:cudaStreamSynchronize")
    unprofiled_only = Replayed(1486.8, 32590.1, 31103.3)  # no profiler's cost taken out: one loop
    assert "as traced" not in why_more(unprofiled_only, 109.0, "drop-sync:x")
    assert "replayed, from 32,590.1" in why_more(unprofiled_only, 109.0, "drop-sync:x")


def test_a_traced_saving_below_zero_is_said_as_nothing_saved():
    longer = Replayed(5796.4, 31531.6, 25735.2, traced_saving_us=-40.0, profiler_us_per_op=8.6)
    assert "; as traced it saves nothing (40.0 µs longer): there" in why_more(longer, 213.2, "drop-sync:aten::item")
    assert "the fix saves nothing (12.0 µs longer) of the 100.0 µs" in why_less(Replayed(-12.0, 5000.0, 5012.0), 100.0)


def test_fixes_combined_each_say_what_they_take_off_once():
    """gpu_idle's data loading: its loader's ops dropped and its copies pinned."""
    words = why_more(Replayed(900.0, 5000.0, 4100.0), 100.0, "drop-cpu:(?i)dataloader; pin-copies")
    assert "the step runs at the CPU's pace" in words and "; and a pageable copy's call also holds the CPU" in words
    twice = why_more(Replayed(900.0, 5000.0, 4100.0), 100.0, "drop-cpu-gaps:5-10; drop-host-ops:100")
    assert twice.count("the step runs at the CPU's pace") == 1
    unknown = why_more(Replayed(900.0, 5000.0, 4100.0), 100.0, "a-fix-to-come:1")
    assert "the work the fix removes also held back the work after it" in unknown


def test_findings_with_the_same_saving_are_counted_by_rule():
    assert same_saving([]) == ""
    assert same_saving(["gpu_idle"]) == ("; the same saving as 1 other finding of this trace (`gpu_idle`): their "
                                         "fixes replay the same, one saving, not to be added")
    assert same_saving(["simt_gemm", "per_call_setup", "per_call_setup"]).startswith(
        "; the same saving as 3 other findings of this trace (`per_call_setup` ×2, `simt_gemm`)")
