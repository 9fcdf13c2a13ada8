"""A job's ranks on the critical path and in the replay (issue [15]): a collective cannot end before
the last rank arrives. On the 3-rank job of tests/make_rank_traces.py (conftest.rank_job: rank 1
stalls 3 ms in step 3, so ranks 0 and 2 wait in that step's all_reduce), the waiting ranks' paths
say whom they waited for, and a fix that removes the straggler's stall saves every rank. Likewise
on the real gloo job of tests/data/cpu/gloo_job, whose collectives run on CPU threads."""

import pytest

from conftest import TEST_DATA, db_rows as rows, invoke_cli

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


# The real gloo job of tests/data/cpu/gloo_job (conftest.launch_bound_db): rank 1 sleeps 20 ms before
# each step, so rank 0's main thread sits idle in DDP's wait for its gradient buckets, whose
# gloo:all_reduce ranges wait on their worker threads for rank 1. Steps 0 and 1 set the job up.
GLOO = ("train_naive_inplace_rank0", "train_naive_inplace_rank1")
GLOO_STEADY = range(2, 8)


def test_a_gloo_rank_that_waited_for_the_late_one_says_whom_on_its_path(launch_bound_db):
    """Rank 0's step 4 ends waiting for its second bucket: the all_reduce's range on its worker thread,
    up to where the main thread resumed, less rank 1's range of the same call (the last rank's own
    time: the durations, as no clock is shared), is rank_wait; rank 1's time is comm."""
    db = launch_bound_db
    (start_us, tid, last_rank_us), = rows(db, f"""
        SELECT mine.ts_us, mine.tid, theirs.dur_us
        FROM (SELECT * FROM cpu_ops WHERE trace = '{GLOO[0]}' AND step = 4 AND name = 'gloo:all_reduce'
              ORDER BY ts_us DESC LIMIT 1) mine,
             (SELECT * FROM cpu_ops WHERE trace = '{GLOO[1]}' AND step = 4 AND name = 'gloo:all_reduce'
              ORDER BY ts_us DESC LIMIT 1) theirs""")
    # DDP copies the first bucket's sums into the gradients, then waits for the second: the main
    # thread's next op is where it resumed
    (resumed_us,), = rows(db, f"""
        SELECT min(o.ts_us) FROM cpu_ops o
        JOIN (SELECT tid, ts_us + dur_us AS end_us FROM cpu_ops WHERE trace = '{GLOO[0]}' AND step = 4
              AND name = 'torch.distributed.ddp.reducer::copy_bucket_to_grad') c
             ON o.tid = c.tid AND o.ts_us >= c.end_us
        WHERE o.trace = '{GLOO[0]}'""")
    path = rows(db, f"SELECT kind, name, ts_us, dur_us, tid FROM critical_path WHERE trace = '{GLOO[0]}' AND step = 4"
                    " AND kind IN ('rank_wait', 'comm') ORDER BY seq")
    assert [(kind, name, t) for kind, name, _, _, t in path] == [
        ("rank_wait", "waiting for rank 1 in all_reduce", tid), ("comm", "gloo:all_reduce", tid)]
    (_, _, wait_start, wait_us, _), (_, _, comm_start, comm_us, _) = path
    assert wait_start == pytest.approx(start_us, abs=0.01)
    assert wait_us == pytest.approx(resumed_us - start_us - last_rank_us, abs=0.01)
    assert comm_start == pytest.approx(wait_start + wait_us, abs=0.01)
    assert comm_us == pytest.approx(last_rank_us, abs=0.01)
    # in every steady step rank 0 waited for rank 1, and rank 1 for no one
    waits = {(trace, step): wait for trace, step, wait in rows(db, "SELECT trace, step, rank_wait_us FROM step_bounds")}
    assert all(waits[(GLOO[0], step)] > 1000 and waits[(GLOO[1], step)] == 0 for step in GLOO_STEADY)
    assert {name for name, in rows(db, f"SELECT DISTINCT name FROM critical_path WHERE kind = 'rank_wait'"
                                       f" AND trace = '{GLOO[0]}' AND step >= 2")} == {"waiting for rank 1 in all_reduce"}


def test_the_gloo_job_replayed_without_the_late_ranks_sleep_saves_the_rank_that_waited(launch_bound_db, tmp_path):
    """Replayed together, each all_reduce a constraint across the ranks, the job gives its steps back,
    and removing rank 1's sleep saves rank 0, which has no sleep of its own, at most what it waited
    for rank 1 in each step, and on average no more than rank 1 saves itself."""
    import tracekit

    db = launch_bound_db
    as_is = tracekit.whatif(GLOO[0], [], db=db)
    assert as_is.ranks == list(GLOO)
    assert abs(as_is.fit_pct) < 1.0
    assert all(s.replayed_us == pytest.approx(s.trace_us, rel=0.05) for s in as_is.steps)
    waits = dict(rows(db, f"SELECT step, rank_wait_us FROM step_bounds WHERE trace = '{GLOO[0]}'"))
    fixed = tracekit.whatif(GLOO[0], ["drop-cpu:tracekit.injected_delay"], db=db)
    for step in fixed.steps:
        if step.step in GLOO_STEADY:
            assert 0 < step.replayed_us - step.fixed_us <= waits[step.step], step
    late = tracekit.whatif(GLOO[1], ["drop-cpu:tracekit.injected_delay"], db=db)
    assert late.saving_us == pytest.approx(20_000, rel=0.05)  # its 20 ms sleep a step
    assert late.saving_us / 2 < fixed.saving_us < late.saving_us
    # loaded alone, rank 0's all_reduce is comm as a whole, and the fix finds nothing to take away
    alone = tmp_path / "rank0.duckdb"
    assert invoke_cli("load", TEST_DATA / "cpu" / "gloo_job" / f"{GLOO[0]}.json.gz", "--db", alone).exit_code == 0
    assert all(wait == 0 for wait, in rows(alone, "SELECT rank_wait_us FROM step_bounds"))
    by_itself = tracekit.whatif(GLOO[0], ["drop-cpu:tracekit.injected_delay"], db=alone)
    assert by_itself.ranks == [GLOO[0]] and by_itself.saving_us == 0


def test_the_sweep_gives_the_rounds_answer_for_the_gloo_job(launch_bound_db, monkeypatch):
    import numpy as np

    from tracekit.replay import simulate
    from tracekit.replay.job import Job, _side_by_side
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(launch_bound_db)
    try:
        joined, _, _ = _side_by_side(list(Job(con, GLOO).graphs.values()))
    finally:
        con.close()
    assert (joined.item_collective >= 0).sum() == 34  # every gloo range of both ranks, matched
    assert (joined.call_wait >= 0).sum() == 19  # the main threads' waits for them
    rounds = simulate.replay(joined)
    monkeypatch.setattr(simulate, "MAX_WAITS", -1)
    swept = simulate.replay(joined)
    assert all(np.array_equal(a, b) for a, b in zip(rounds, swept))
