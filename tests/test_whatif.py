"""What-if replay (tracekit whatif, tracekit.whatif; issue [15]): the trace's dependency graph
replayed without change gives the trace back, and replayed with a fix predicts what the captured
fix saved (tests/data/h200/loops/truth.csv: each loop's time per step without the profiler)."""

import csv
import json

import pytest

from conftest import TEST_DATA, invoke_cli

TRUTH = {row["loop"]: row for row in csv.DictReader(open(TEST_DATA / "h200" / "loops" / "truth.csv"))}


def whatif(db, trace, *fixes):
    import tracekit
    return tracekit.whatif(trace, fixes, db=db)


def traces(db):
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [row[0] for row in con.execute("SELECT DISTINCT trace FROM steps ORDER BY trace").fetchall()]
    finally:
        con.close()


@pytest.mark.parametrize("db_name", ["sample_db", "loops_db", "launch_bound_db"])
def test_the_replay_without_change_gives_every_step_back(request, db_name):
    db = request.getfixturevalue(db_name)
    names = traces(db)
    assert len(names) >= 3
    for trace in names:
        for step in whatif(db, trace).steps:
            assert step.replayed_us == pytest.approx(step.trace_us, rel=0.001, abs=0.01), (trace, step)
            assert step.fixed_us == step.replayed_us


@pytest.mark.parametrize("naive, fixed", [("infer_naive", "infer_inplace"), ("train_naive", "train_inplace")])
def test_dropping_the_copies_masked_fill_makes_predicts_the_in_place_fix(loops_db, naive, fixed):
    """In training, masked_fill's backward copies too (a copy no user change removes): the fix
    drops the copies under the user's call alone, and predicts the saving within 5%."""
    result = whatif(loops_db, naive, "drop-copies:aten::masked_fill")
    measured = float(TRUTH[naive]["step_us"]) - float(TRUTH[fixed]["step_us"])
    assert result.saving_us == pytest.approx(measured, rel=0.05)
    assert result.fit_pct == pytest.approx(0, abs=0.1)
    every_copy = whatif(loops_db, naive, "drop:Memcpy DtoD")
    if naive.startswith("train"):  # both copies: about twice what the fix saved
        assert every_copy.saving_us == pytest.approx(2 * measured, rel=0.1)


def test_a_stall_the_gpu_hides_saves_nothing(loops_db):
    """train_stall sleeps 4 ms between forward and backward; removing it saved 88 µs of 41,244
    (0.2%, within run-to-run noise): the GPU was busy all along."""
    result = whatif(loops_db, "train_stall", "drop-cpu-gaps:3000")
    assert abs(result.saving_us) < 0.01 * result.mean("replayed_us")


def test_on_the_samples_the_copy_fix_predicts_naive_inplace(sample_db):
    """The samples sync every step: naive → naive_inplace saved 268 µs a step in the traces."""
    predicted = whatif(sample_db, "naive", "drop-copies:aten::masked_fill")
    measured = whatif(sample_db, "naive").mean("trace_us") - whatif(sample_db, "naive_inplace").mean("trace_us")
    assert predicted.saving_us == pytest.approx(measured, rel=0.1)


def test_launch_bound_training_saves_what_its_cpu_gaps_cost(launch_bound_db):
    """The fp32 training step is CPU-bound: removing the thread's gaps of 1 ms or more saves about
    what they add up to on the path; removing the syncs saves little (the GPU is idle at them)."""
    gaps = whatif(launch_bound_db, "train_naive", "drop-cpu-gaps:1000")
    assert 0.2 * gaps.mean("replayed_us") < gaps.saving_us < gaps.mean("replayed_us")
    syncs = whatif(launch_bound_db, "train_naive", "drop-sync:Synchronize")
    assert 0 <= syncs.saving_us < 0.05 * syncs.mean("replayed_us")


def test_the_command_prints_each_step_and_the_saving(sample_db):
    result = invoke_cli("whatif", "naive", "--apply", "drop-copies:aten::masked_fill", "--db", sample_db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "naive: replayed with drop-copies:aten::masked_fill"
    assert lines[1].split() == ["step", "steady", "trace_us", "replayed_us", "fixed_us", "saving_us"]
    assert lines[-1].startswith("Per step, over the steady steps: ") and "(+0.0%)" in lines[-1]
    data = json.loads(invoke_cli("whatif", "naive", "--apply", "drop-copies:aten::masked_fill", "--db", sample_db,
                                 "-f", "json").output)
    assert data["fit_pct"] == 0 and 200 < data["saving_us_per_step"] < 300
    assert [s["step"] for s in data["steps"]] == list(range(6)) and data["steady_steps"] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("args, says", [
    (["--apply", "bogus:1"], "Error: --apply 'bogus:1': a fix is one of drop-copies:..., drop:..., drop-sync:..., "
                             "drop-cpu-gaps:..."),
    (["--apply", "drop-cpu-gaps:x"], "Error: --apply 'drop-cpu-gaps:x': drop-cpu-gaps takes a time in microseconds above 0"),
    (["--apply", "drop:("], "Error: --apply 'drop:(': not a regular expression"),
])
def test_a_bad_fix_is_a_one_line_usage_error(sample_db, args, says):
    result = invoke_cli("whatif", "naive", *args, "--db", sample_db)
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(says)


def test_an_unknown_trace_is_one_line(sample_db):
    result = invoke_cli("whatif", "nosuch", "--db", sample_db)
    assert result.exit_code == 1 and result.output.strip() == "Error: no trace named 'nosuch' is loaded"


def test_a_trace_with_more_waits_than_the_replay_handles_is_one_line(sample_db, monkeypatch):
    """flex syncs 20 times in its 6 steps; with the limit set below that, the replay refuses."""
    from tracekit.replay import simulate

    monkeypatch.setattr(simulate, "MAX_WAITS", 10)
    result = invoke_cli("whatif", "flex", "--db", sample_db)
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: whatif flex: it holds 20 calls that wait for the GPU; the replay "
                                     "handles up to 10 yet (each costs a pass over the trace)")
