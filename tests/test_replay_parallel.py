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
