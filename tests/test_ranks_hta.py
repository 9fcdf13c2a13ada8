"""comm_overlap and collective_skew against HTA 0.5's get_comm_comp_overlap and
get_potential_stragglers, on the real 2-GPU pair (tests/data/foreign/rtx4090_tp2_*) and on the
job built by tests/make_rank_traces.py (conftest.rank_job).

HTA's own 2-rank test set (facebookresearch/HolisticTraceAnalysis, tests/data/trace_filter and
vision_transformer) is stored only as gzip files, which this project's tools for public
repositories cannot read (they hold text), so it is not here; see tests/data/foreign/README.md.
"""

import logging
import os

import pytest

from conftest import TEST_DATA, db_rows, invoke_cli

pytest.importorskip("hta", reason="needs HTA: pip install 'tracekit[hta]'")

RTX = [TEST_DATA / "foreign" / f"rtx4090_tp2_rank{rank}_nccl_allreduce.json.gz" for rank in (0, 1)]


def hta_analysis(folder, monkeypatch):
    """HTA's TraceAnalysis of every trace in `folder`, on the traces' own times (NOTES.md: its
    defaults round to whole ns and drop the last step)."""
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    logging.getLogger("hta").setLevel(logging.ERROR)
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)


def flat_folder(tmp_path, paths):
    """HTA reads the files of one folder: links to each rank's file, one folder."""
    folder = tmp_path / "hta"
    folder.mkdir()
    for n, path in enumerate(paths):
        os.symlink(path, folder / f"rank{n}.json.gz")
    return folder


def our_overlap_pct(db):
    """comm_overlap over every step of each rank, as HTA gives it: one percentage per rank."""
    return {rank: 100.0 * overlapped / comm for rank, overlapped, comm in db_rows(db, """
        SELECT rank, sum(overlapped_us), sum(comm_us) FROM (
            SELECT rank, overlap_us AS overlapped_us, comm_us FROM _comm_overlap) GROUP BY rank""")}


@pytest.fixture(scope="module")
def job_hta(rank_job, tmp_path_factory):
    job, folder, db = rank_job
    paths = [folder / f"rank{rank}" / "trace.json.gz" for rank in range(job.ranks)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        return hta_analysis(flat_folder(tmp_path_factory.mktemp("job_hta"), paths), monkeypatch)


def test_comm_overlap_equals_htas_on_the_built_job(rank_job, job_hta):
    """Same figure to HTA's two decimals: the same intersection of merged intervals. HTA leaves out
    the kernels launched outside ProfilerStep#N, and so do the steps summed here (every kernel of
    this job is launched in a step); its compute excludes Memcpy/Memset/Sync names, ours every
    communication kernel and nothing else (the kernels view holds no Memcpy or Memset)."""
    _, _, db = rank_job
    hta = {int(row.rank): row.comp_comm_overlap_pctg for row in job_hta.get_comm_comp_overlap(visualize=False).itertuples()}
    ours = our_overlap_pct(db)
    assert sorted(hta) == sorted(ours)
    for rank, pct in hta.items():
        assert 0 < pct < 100
        assert ours[rank] == pytest.approx(pct, abs=0.006)  # HTA rounds to two decimals
    assert db_rows(db, "SELECT count(*) FROM collectives WHERE step IS NULL") == [(0,)]


def test_hta_and_collective_skew_name_the_same_straggler(rank_job, job_hta):
    """HTA's metric is the start of each rank's last long NCCL kernel in a step (its top-1 rank is
    the straggler); ours, the rank whose kernel ran shortest, having waited least. In the step with
    the delay both name the straggler. Over all steps HTA 0.5 raises (its per-iteration metric
    ends up all NA on this job), where collective_skew gives each step's straggler."""
    job, _, db = rank_job
    assert job_hta.get_potential_stragglers(profiler_steps=[job.step], num_candidates=1) == [job.straggler]
    result = invoke_cli("query", "collective_skew", "--db", db, "-f", "csv", "--columns", "step,straggler_rank")
    assert result.exit_code == 0, result.output
    by_step = dict(line.split(",") for line in result.output.splitlines()[1:])
    assert by_step[str(job.step)] == str(job.straggler)


def test_on_the_real_pair_hta_finds_no_overlap_and_no_steps_to_find_a_straggler_in(rtx_db_for_hta, tmp_path, monkeypatch):
    """The pair's streams never run at once: 0% overlap for both tools. The traces have no
    ProfilerStep#N, so HTA cannot look for stragglers (it raises); collective_skew matches the one
    all_reduce by its place in the group and names rank 0, which arrived 11.26 ms after rank 1."""
    analysis = hta_analysis(flat_folder(tmp_path, RTX), monkeypatch)
    hta = {int(row.rank): row.comp_comm_overlap_pctg for row in analysis.get_comm_comp_overlap(visualize=False).itertuples()}
    assert hta == {0: 0.0, 1: 0.0} == our_overlap_pct(rtx_db_for_hta)
    with pytest.raises(ValueError, match="profiler_steps"):
        analysis.get_potential_stragglers(profiler_steps=[0], num_candidates=1)
    assert db_rows(rtx_db_for_hta, "SELECT count(*) FROM collectives WHERE rank = 0 AND wait_us = 0") == [(1,)]


@pytest.fixture
def rtx_db_for_hta(tmp_path):
    db = tmp_path / "rtx.duckdb"
    assert invoke_cli("load", *RTX, "--db", db).exit_code == 0
    return db
