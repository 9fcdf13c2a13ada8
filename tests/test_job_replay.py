"""A job's ranks on the critical path and in the replay (issue [15]): a collective cannot end before
the last rank arrives. On the 3-rank job of tests/make_rank_traces.py (conftest.rank_job: rank 1
stalls 3 ms in step 3, so ranks 0 and 2 wait in that step's all_reduce), the waiting ranks' paths
say whom they waited for, and a fix that removes the straggler's stall saves every rank."""

import pytest

from conftest import db_rows as rows, invoke_cli

TOLERANCE_US = 100.0  # the ranks' jitter (20 µs each) and the wait's launch latency


def by_rank(db):
    return dict(rows(db, "SELECT rank, trace FROM traces ORDER BY rank"))


def test_a_rank_that_waited_for_a_late_one_says_whom_on_its_path(rank_job):
    job, _, db = rank_job
    ranks = by_rank(db)
    assert len(ranks) == job.ranks == 3
    bounds = {(rank, step): (step_us, comm_us, rank_wait_us, total, bound) for rank, step, step_us, comm_us,
              rank_wait_us, total, bound in rows(db, """
        SELECT t.rank, b.step, b.step_us, b.comm_us, b.rank_wait_us,
               b.cpu_us + b.launch_us + b.kernel_us + b.comm_us + b.rank_wait_us + b.memcpy_us + b.memset_us
               + b.sync_wait_us + b.idle_us, b.bound
        FROM step_bounds b JOIN traces t USING (trace)""")}
    for (rank, step), (step_us, comm_us, rank_wait_us, total, _) in bounds.items():
        assert total == pytest.approx(step_us, abs=0.01)  # the split keeps the path tiling the step
        if step == job.step and rank != job.straggler:
            assert rank_wait_us == pytest.approx(job.delay_us, abs=TOLERANCE_US)
            assert comm_us == pytest.approx(job.allreduce_us, abs=1.0)  # the transfer alone
        elif step >= 1:
            assert rank_wait_us < TOLERANCE_US
    named = rows(db, "SELECT DISTINCT trace, name FROM critical_path WHERE kind = 'rank_wait' AND dur_us > 1000"
                     f" AND step = {int(job.step)}")
    assert sorted(named) == sorted((ranks[r], f"waiting for rank {job.straggler} in all_reduce")
                                   for r in ranks if r != job.straggler)


def test_the_ranks_replayed_together_give_every_step_back(rank_job):
    import tracekit

    job, _, db = rank_job
    for trace in by_rank(db).values():
        result = tracekit.whatif(trace, [], db=db)
        assert len(result.ranks) == job.ranks
        for step in result.steps:
            assert step.replayed_us == pytest.approx(step.trace_us, rel=0.005), (trace, step)


def test_removing_the_stragglers_stall_saves_the_ranks_that_waited_for_it(rank_job):
    import tracekit

    job, _, db = rank_job
    for rank, trace in by_rank(db).items():
        result = tracekit.whatif(trace, ["drop-cpu-gaps:2000"], db=db)
        for step in result.steps:
            saving = step.replayed_us - step.fixed_us
            if step.step == job.step:
                assert saving == pytest.approx(job.delay_us, abs=TOLERANCE_US), (rank, step)
            else:
                assert abs(saving) < TOLERANCE_US, (rank, step)


def test_a_rank_loaded_alone_keeps_its_wait_in_the_collective(rank_job, tmp_path):
    """Without the other ranks nothing says the all_reduce waited: its kernel is comm, and no fix of
    this rank's own shortens it."""
    import tracekit

    job, folder, _ = rank_job
    alone = tmp_path / "alone.duckdb"
    rank0 = sorted(folder.glob("rank0/*.json.gz"))
    assert invoke_cli("load", *rank0, "--db", alone).exit_code == 0
    trace = by_rank(alone)[0]
    (comm_us, rank_wait_us), = rows(alone, f"SELECT comm_us, rank_wait_us FROM step_bounds WHERE step = {int(job.step)}")
    assert rank_wait_us == 0.0
    assert comm_us == pytest.approx(job.delay_us + job.allreduce_us, abs=TOLERANCE_US)
    result = tracekit.whatif(trace, ["drop-cpu-gaps:2000"], db=alone)
    assert result.ranks == [trace]
    assert all(abs(s.replayed_us - s.fixed_us) < TOLERANCE_US for s in result.steps)


def test_the_sweep_gives_the_rounds_answer_for_a_job(rank_job, monkeypatch):
    import numpy as np

    from tracekit.replay import simulate
    from tracekit.replay.job import Job, _side_by_side
    from tracekit.store.database import connect_for_queries

    _, _, db = rank_job
    con = connect_for_queries(db)
    try:
        job = Job(con, list(by_rank(db).values()))
    finally:
        con.close()
    joined, _, _ = _side_by_side(list(job.graphs.values()))
    assert (joined.item_collective >= 0).sum() >= 3 * 7  # an all_reduce a step on each rank
    rounds = simulate.replay(joined)
    monkeypatch.setattr(simulate, "MAX_WAITS", -1)
    swept = simulate.replay(joined)
    assert all(np.array_equal(a, b) for a, b in zip(rounds, swept))
