"""The ranks of a job: traces know their rank, the collectives view, and the rank queries
(rank_steps, collective_skew, comm_overlap) on the real 2-GPU pair and on a job built by
tests/make_rank_traces.py with a known straggler."""

import json

import pytest

from conftest import TEST_DATA, db_rows, invoke_cli, read_trace
from tracekit.ingest.distributed import job_folder, rank_info

RTX = [TEST_DATA / "foreign" / f"rtx4090_tp2_rank{rank}_nccl_allreduce.json.gz" for rank in (0, 1)]


@pytest.fixture(scope="module")
def rtx_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("rtx") / "rtx.duckdb"
    result = invoke_cli("load", *RTX, TEST_DATA / "foreign" / "l4_square_memcpy_two_steps.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    return db


def query(db, name, *params):
    args = [item for pair in params for item in ("-p", *pair)]
    result = invoke_cli("query", name, "--db", db, "-f", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def nccl_kernel(path):
    """The NCCL kernel event of a trace, and its trace's header, read with plain json."""
    trace = read_trace(path)
    return next(e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")), trace


def test_traces_know_their_rank_and_a_trace_without_one_has_null_never_zero(rtx_db):
    rows = db_rows(rtx_db, "SELECT trace, rank, world_size, dist_backend, job FROM traces ORDER BY trace")
    by_trace = {row[0]: row[1:] for row in rows}
    for path in RTX:
        info = read_trace(path)["distributedInfo"]
        # torch wrote backend 'undefined' for a group with a backend per device: the GPU's is nccl.
        assert info["backend"] == "undefined" and "cuda:nccl" in info["pg_config"][0]["backend_config"]
        name = path.name.split(".")[0]
        assert by_trace[name] == (info["rank"], info["world_size"], "nccl", str(path.parent.resolve()))
    assert by_trace["l4_square_memcpy_two_steps"] == (None, None, None, None)


@pytest.mark.parametrize("info, expected", [
    ({"rank": 3, "world_size": 8, "backend": "nccl"}, (3, 8, "nccl")),
    ({"rank": "2", "world_size": 4}, (2, 4, None)),
    ({"rank": 0}, (0, None, None)),
    ({"rank": 5, "world_size": 4, "backend": "gloo"}, (5, None, "gloo")),  # a size that cannot hold it
    ({"rank": -1, "world_size": 4}, (None, None, None)),
    ({"rank": True, "world_size": 4}, (None, None, None)),
    ({"rank": "x"}, (None, None, None)),
    ({"world_size": 4}, (None, None, None)),
    ("rank 0", (None, None, None)),
    ({"rank": 1, "backend": "undefined", "pg_config": [{"backend_config": "cpu:gloo,cuda:nccl"}]}, (1, None, "nccl")),
])
def test_rank_info_takes_only_what_distributed_info_says(info, expected, tmp_path):
    got = rank_info({"distributedInfo": info}, tmp_path / "t.json")
    assert (got.rank, got.world_size, got.backend) == expected
    assert (got.job is None) == (expected[0] is None)


def test_a_job_is_the_folder_above_rank_folders(tmp_path):
    assert job_folder(tmp_path / "run" / "rank3" / "trace.json") == str(tmp_path / "run")
    assert job_folder(tmp_path / "run" / "rank_12" / "t.json.gz") == str(tmp_path / "run")
    assert job_folder(tmp_path / "run" / "ranks" / "t.json") == str(tmp_path / "run" / "ranks")
    assert job_folder(tmp_path / "run" / "rank-0.json") == str(tmp_path / "run")


def test_a_folder_of_rank_folders_loads_as_one_job_with_distinct_names(rank_job):
    job, folder, db = rank_job
    rows = db_rows(db, "SELECT trace, rank, world_size, dist_backend, job, path FROM traces ORDER BY rank")
    # Every file is called trace.json.gz: the names are made unique, the ranks tell them apart.
    assert sorted(row[0] for row in rows) == sorted(["trace"] + [f"trace-{n}" for n in range(2, job.ranks + 1)])
    assert [row[1] for row in rows] == list(range(job.ranks))
    assert {row[2:5] for row in rows} == {(job.ranks, "nccl", str(folder.resolve()))}
    assert [row[5] for row in rows] == [str((folder / f"rank{r}" / "trace.json.gz").resolve()) for r in range(job.ranks)]


def test_collectives_read_what_kineto_wrote_on_the_kernel_and_its_op(rtx_db):
    rows = {row[0]: row[1:] for row in db_rows(rtx_db, """
        SELECT c.rank, c.collective, c.collective_name, c.process_group, c.process_group_desc,
               c.process_group_ranks, c.group_size, c.in_nelems, c.out_nelems, c.dtype, c.in_bytes, c.seq, c.call,
               c.ts_us, c.dur_us, c.stream, c.correlation, o.name, c.cpu_ts_us, o.ts_us, c.ranks_matched
        FROM collectives c LEFT JOIN cpu_ops o ON o.trace = c.trace AND o.op_id = c.cpu_op_id""")}
    assert sorted(rows) == [0, 1]
    for rank, path in enumerate(RTX):
        kernel, _ = nccl_kernel(path)
        args = kernel["args"]
        row = rows[rank]
        assert row[:12] == ("all_reduce", args["Collective name"], args["Process Group Name"],
                            args["Process Group Description"], args["Process Group Ranks"], args["Group size"],
                            args["In msg nelems"], args["Out msg nelems"], args["dtype"],
                            args["In msg nelems"] * 4, None, 1)  # Float: 4 bytes; this torch wrote no Seq
        assert row[12:16] == (pytest.approx(kernel["ts"], abs=1e-3), pytest.approx(kernel["dur"], abs=1e-3),
                              args["stream"], args["correlation"])
        assert row[16] == "record_param_comms" and row[17] == row[18]
        assert row[19] == 2


def test_collective_skew_names_the_rank_that_arrived_last_on_the_real_pair(rtx_db):
    (k0, _), (k1, _) = nccl_kernel(RTX[0]), nccl_kernel(RTX[1])
    # Rank 1 reached the all_reduce first and waited in its kernel for rank 0.
    assert k1["ts"] < k0["ts"] and k1["dur"] > k0["dur"]
    [row] = query(rtx_db, "collective_skew")
    assert (row["straggler_rank"], row["collective"], row["ranks"]) == (0, "all_reduce", 2)
    assert row["max_wait_us"] == pytest.approx(k1["dur"] - k0["dur"], abs=1e-3)
    assert row["start_spread_us"] == pytest.approx(k0["ts"] - k1["ts"], abs=1e-3)
    assert row["end_spread_us"] == pytest.approx(abs(k0["ts"] + k0["dur"] - k1["ts"] - k1["dur"]), abs=1e-3)
    assert row["transfer_us"] == pytest.approx(k0["dur"], abs=1e-3)


def test_rank_steps_treats_a_trace_without_steps_as_one_step(rtx_db):
    rows = query(rtx_db, "rank_steps")
    assert [(r["trace"], r["step"]) for r in rows] == [(p.name.split(".")[0], None) for p in RTX]
    (k0, _), (k1, _) = nccl_kernel(RTX[0]), nccl_kernel(RTX[1])
    assert rows[0]["wait_us"] == 0 and rows[1]["wait_us"] == pytest.approx(k1["dur"] - k0["dur"], abs=1e-3)
    for row in rows:
        assert row["work_us"] == pytest.approx(row["step_us"] - row["wait_us"], abs=1e-3)
    assert rows[0]["vs_others_us"] == pytest.approx(rows[0]["work_us"] - rows[1]["work_us"], abs=1e-3)
    assert {r["slowest_by_us"] for r in rows} == {max(r["vs_others_us"] for r in rows)}


def test_a_rank_alone_has_no_one_to_wait_for(tmp_path):
    db = tmp_path / "one.duckdb"
    assert invoke_cli("load", RTX[1], "--db", db).exit_code == 0
    assert db_rows(db, "SELECT ranks_matched, wait_us, start_lag_us FROM collectives") == [(1, None, None)]
    assert query(db, "collective_skew") == []


def test_the_queries_name_the_straggler_and_its_delay(rank_job):
    job, _, db = rank_job
    within = 0.1 * job.delay_us
    skew = {row["step"]: row for row in query(rank_job[2], "collective_skew")}
    assert sorted(skew) == sorted(int(step) for step in job.pauses_us)
    late = skew[job.step]
    assert late["straggler_rank"] == job.straggler
    assert late["max_wait_us"] == pytest.approx(job.delay_us, abs=within)
    assert late["start_spread_us"] == pytest.approx(job.delay_us, abs=within)
    assert late["seq"] == job.step and late["ranks"] == job.ranks and late["end_spread_us"] < 1
    assert all(row["max_wait_us"] < within for step, row in skew.items() if step != job.step)

    steps = [row for row in query(db, "rank_steps") if row["step"] == job.step]
    assert len(steps) == job.ranks
    assert {(row["slowest_rank"], round(row["slowest_by_us"], 3)) for row in steps} == {
        (job.straggler, round(max(row["vs_others_us"] for row in steps), 3))}
    assert steps[0]["slowest_by_us"] == pytest.approx(job.delay_us, abs=within)
    others = [row for row in query(db, "rank_steps") if row["step"] != job.step]
    assert all(abs(row["slowest_by_us"]) < within for row in others)

    overlap = [row for row in query(db, "comm_overlap") if row["step"] == job.step]
    exposed = {row["rank"]: row["exposed_us"] for row in overlap}
    for rank in set(exposed) - {job.straggler}:
        assert exposed[rank] - exposed[job.straggler] == pytest.approx(job.delay_us, abs=within)


def test_comm_overlap_counts_each_moment_once(rank_job):
    """The overlap is the intersection of the union of collective kernels with the union of the
    rest, computed here from the kernels view in plain Python."""
    _, _, db = rank_job
    kernels = db_rows(db, "SELECT trace, step, ts_us, ts_us + dur_us, kernel_class = 'communication' FROM kernels")

    def union(spans):
        merged = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return merged

    for trace in {k[0] for k in kernels}:
        comm = union((k[2], k[3]) for k in kernels if k[0] == trace and k[4])
        compute = union((k[2], k[3]) for k in kernels if k[0] == trace and not k[4])
        both = sum(max(0.0, min(a[1], b[1]) - max(a[0], b[0])) for a in comm for b in compute)
        rows = query(db, "comm_overlap", ("trace", trace))
        assert sum(r["comm_us"] for r in rows) == pytest.approx(sum(e - s for s, e in comm), abs=1e-2)
        assert sum(r["overlapped_us"] for r in rows) == pytest.approx(both, abs=1e-2)
        assert both > 0
        for row in rows:
            assert row["exposed_us"] == pytest.approx(row["comm_us"] - row["overlapped_us"], abs=1e-3)


def test_a_replaced_rank_trace_leaves_no_collectives_behind(tmp_path):
    db = tmp_path / "r.duckdb"
    for args in ([RTX[0]], [RTX[0], "--replace"]):
        assert invoke_cli("load", *args, "--db", db).exit_code == 0
    assert db_rows(db, "SELECT count(*) FROM collective_rows") == [(1,)]


def test_the_rank_queries_take_one_trace(rtx_db):
    [row] = query(rtx_db, "rank_steps", ("trace", RTX[1].name.split(".")[0]))
    assert row["rank"] == 1 and row["slowest_rank"] == 0
    assert len(query(rtx_db, "collective_skew", ("trace", RTX[1].name.split(".")[0]))) == 1
    assert query(rtx_db, "collective_skew", ("trace", "l4_square_memcpy_two_steps")) == []
