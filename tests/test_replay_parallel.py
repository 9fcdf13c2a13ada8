"""Replays on every core (replay.parallel) give what one after another gives, on a real capture."""

import duckdb
import pytest

from conftest import TEST_DATA, cli_loaded

FIXES = TEST_DATA / "h200" / "fixes"
WHATIFS = ["pin-copies", "drop-sync:cudaStreamSynchronize", "cuda-graph:1000", "drop-copies:aten::nothing_here",
           "no-profiler:7.9; pin-copies"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return cli_loaded(tmp_path_factory, "parallel", FIXES / "train_copy_pageable.json.gz")


def _savings(db, monkeypatch, min_nodes):
    from tracekit.replay import parallel
    from tracekit.replay.savings import TraceReplay

    monkeypatch.setattr(parallel, "MIN_NODES", min_nodes)
    con = duckdb.connect(str(db))
    try:
        replayer = TraceReplay(con, "train_copy_pageable")
        return replayer.savings(WHATIFS), replayer.without_profiler(WHATIFS[:3], 7.9)
    finally:
        con.close()


def test_forked_replays_give_the_sequential_answer(db, monkeypatch):
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform: replays run one after another there")
    forked, forked_unprofiled = _savings(db, monkeypatch, 0)
    alone, alone_unprofiled = _savings(db, monkeypatch, 10 ** 12)
    assert forked == alone and forked_unprofiled == alone_unprofiled
    # the pageable copy's fix saves time; the op that does not exist is said so, in both
    assert alone["pin-copies"].saving_us > 1000
    assert alone["drop-copies:aten::nothing_here"].saving_us is None
    assert alone["drop-copies:aten::nothing_here"].why
    assert alone_unprofiled["pin-copies"].profiler_us_per_op == 7.9


@pytest.fixture(scope="module")
def three_db(tmp_path_factory):
    return cli_loaded(tmp_path_factory, "prefetch", FIXES / "train_copy_pageable.json.gz",
                      FIXES / "infer_item.json.gz", FIXES / "infer_no_item.json.gz")


def test_graphs_read_while_the_rules_run_give_the_findings_read_after_them(three_db, monkeypatch):
    """findings reads the replay graphs on a second connection while the rules run, and on while
    the replays run (replay.prefetch): the same rows as reading them on the connection afterwards."""
    from pandas.testing import assert_frame_equal

    from tracekit.analysis import findings_engine
    from tracekit.replay import prefetch
    from tracekit.store.database import connect_for_queries

    by_thread = []
    keep = prefetch.GraphPrefetch._keep
    monkeypatch.setattr(prefetch.GraphPrefetch, "_keep",
                        lambda self, trace, found: by_thread.append(trace) or keep(self, trace, found))
    con = connect_for_queries(three_db)  # as the CLI opens it: attached, in a catalog of its own
    try:
        beside = findings_engine.run_findings(con)
        monkeypatch.setattr(prefetch, "graphs_read_meanwhile", lambda con, trace=None: None)
        after = findings_engine.run_findings(con)
    finally:
        con.close()
    assert_frame_equal(beside, after)
    assert beside["saving_us_per_step"].notna().any()
    assert by_thread and set(by_thread) <= {"train_copy_pageable", "infer_item", "infer_no_item"}


def test_the_replaying_thread_reads_other_graphs_while_the_prefetch_reads_the_one_it_needs(three_db, monkeypatch):
    """The thread is held reading the first trace wanted: asked for it, the caller reads the other
    two itself meanwhile (from the far end), then takes the first as the thread read it; each graph
    read once, each the graph the connection reads alone."""
    import threading

    from tracekit.replay import prefetch
    from tracekit.replay.job import Jobs
    from tracekit.store.database import connect_for_queries, second_connections

    wanted = ["train_copy_pageable", "infer_item", "infer_no_item"]
    release, reading_first = threading.Event(), threading.Event()
    read_by = []
    of = Jobs.of

    def held_of(self, trace):
        if threading.current_thread().name == "tracekit-graph-prefetch":
            if trace == wanted[0]:
                reading_first.set()
                assert release.wait(60)
            read_by.append(("thread", trace))
        else:
            read_by.append(("caller", trace))
            if len([who for who, _ in read_by if who == "caller"]) == 2:
                release.set()  # both others read here: let the thread end its read
        return of(self, trace)

    monkeypatch.setattr(Jobs, "of", held_of)
    con = connect_for_queries(three_db)
    try:
        fetch = prefetch.GraphPrefetch(second_connections(con), con, wanted)
        assert reading_first.wait(60)
        reader = fetch.jobs_for(wanted)
        first = reader.of(wanted[0])
        assert read_by == [("thread", wanted[0]), ("caller", "infer_no_item"), ("caller", "infer_item")] or \
            read_by == [("caller", "infer_no_item"), ("caller", "infer_item"), ("thread", wanted[0])]
        others = [reader.of(trace) for trace in wanted[1:]]
        assert len(read_by) == 3  # nothing read twice
        fetch.stop()
        alone = Jobs(con)
        for job, trace in zip([first] + others, wanted):
            assert job.traces == [trace]
            assert (job.graphs[trace].item_dur == alone.of(trace).graphs[trace].item_dur).all()
    finally:
        release.set()
        con.close()


def test_the_prefetch_reads_no_further_ahead_of_the_replays_than_it_may(three_db, monkeypatch):
    """Each graph read waits in memory for its replay: at most READ_AHEAD of them."""
    import time

    from tracekit.replay import prefetch
    from tracekit.store.database import connect_for_queries, second_connections

    monkeypatch.setattr(prefetch, "READ_AHEAD", 1)
    con = connect_for_queries(three_db)
    try:
        fetch = prefetch.GraphPrefetch(second_connections(con), con, ["train_copy_pageable", "infer_item", "infer_no_item"])
        deadline = time.monotonic() + 60
        while not fetch._read and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # time enough to read the other two, were it let
        assert list(fetch._read) == ["train_copy_pageable"] and fetch._thread.is_alive()
        reader = fetch.jobs_for(["train_copy_pageable", "infer_item"])
        assert reader.of("train_copy_pageable").traces == ["train_copy_pageable"]
        assert reader.of("infer_item").traces == ["infer_item"]
        fetch._thread.join(60)
        assert not fetch._thread.is_alive() and "infer_no_item" not in fetch._taken  # not wanted: never read
        fetch.stop()
    finally:
        con.close()


def test_a_prefetch_stopped_at_once_leaves_the_connection_as_it_was(three_db):
    from tracekit.replay.prefetch import GraphPrefetch
    from tracekit.store.database import connect_for_queries, second_connections

    con = connect_for_queries(three_db)
    try:
        GraphPrefetch(second_connections(con), con, ["train_copy_pageable", "infer_item"]).stop()
        assert con.execute("SELECT count(*) FROM trace_files").fetchone()[0] == 3
    finally:
        con.close()


def test_a_failure_in_the_prefetch_thread_is_raised_where_its_graphs_are_asked_for(three_db):
    """Not lost in its thread: a defect there would only show as a slower findings."""
    from tracekit.replay.prefetch import GraphPrefetch
    from tracekit.store.database import connect_for_queries

    def broken():
        raise RuntimeError("a defect in the reading thread")

    con = connect_for_queries(three_db)
    try:
        prefetch = GraphPrefetch(broken, con, ["infer_item"])
        prefetch._thread.join(60)  # it meets the defect at once
        with pytest.raises(RuntimeError, match="a defect in the reading thread"):
            prefetch.jobs_for(["infer_item"])
        prefetch.stop()  # again: nothing left to end
    finally:
        con.close()


def test_a_second_connection_makes_the_views_a_database_of_another_tracekit_needs(three_db, tmp_path):
    """A database whose stored views are another tracekit's: each connection makes this one's as
    its own (temporary), and so does the second connection the graphs are read on."""
    import shutil

    from tracekit.store.database import connect_for_queries, second_connections

    stale = tmp_path / "stale.duckdb"
    shutil.copy(three_db, stale)
    con = duckdb.connect(str(stale))
    con.execute("UPDATE schema_info SET value = 'another tracekit' WHERE key = 'views_digest'")
    con.close()
    con = connect_for_queries(stale)
    try:
        own = "SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal"
        assert con.execute(own).fetchone()[0] > 50
        second = second_connections(con)()
        assert second.execute(own).fetchone()[0] == con.execute(own).fetchone()[0]
        steps = "SELECT trace, step, ts_us FROM steady_steps ORDER BY ALL"
        assert second.execute(steps).fetchall() == con.execute(steps).fetchall() != []
        second.close()
    finally:
        con.close()
