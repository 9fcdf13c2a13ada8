"""The ranks of a job: traces know their rank, which traces are one job, the collectives view,
and the rank queries (rank_steps, collective_skew, comm_overlap) on the real 2-GPU pair, on a
job built by tests/make_rank_traces.py with a known straggler, and on a real gloo (CPU) job."""

import gzip
import json

import pytest

from conftest import TEST_DATA, db_rows, invoke_cli, read_trace
from tracekit.ingest.distributed import rank_info

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
        # A job is named for its lowest rank's trace.
        assert by_trace[name] == (info["rank"], info["world_size"], "nccl", "rtx4090_tp2_rank0_nccl_allreduce")
    assert by_trace["l4_square_memcpy_two_steps"] == (None, None, None, None)


@pytest.mark.parametrize("info, expected", [
    ({"rank": 3, "world_size": 8, "backend": "nccl"}, (3, 8, "nccl", None)),
    ({"rank": "2", "world_size": 4}, (2, 4, None, None)),
    ({"rank": 0}, (0, None, None, None)),
    ({"rank": 5, "world_size": 4, "backend": "gloo"}, (5, None, "gloo", None)),  # a size that cannot hold it
    ({"rank": -1, "world_size": 4}, (None, None, None, None)),
    ({"rank": True, "world_size": 4}, (None, None, None, None)),
    ({"rank": "x"}, (None, None, None, None)),
    ({"world_size": 4}, (None, None, None, None)),
    ("rank 0", (None, None, None, None)),
    ({"rank": 1, "backend": "undefined", "pg_config": [{"backend_config": "cpu:gloo,cuda:nccl"}]},
     (1, None, "nccl", None)),
    ({"rank": 1, "world_size": 2, "backend": "gloo", "pg_config": [
        {"pg_name": "1", "pg_desc": "tp", "ranks": [1]},
        {"pg_name": "0", "pg_desc": "default_pg", "ranks": [1, 0]}]}, (1, 2, "gloo", "0,1")),
])
def test_rank_info_takes_only_what_distributed_info_says(info, expected):
    got = rank_info({"distributedInfo": info})
    assert (got.rank, got.world_size, got.backend, got.default_group) == expected


def copy_trace(source, target, *, shift_ns=0, **distributed):
    """Writes `source` (a real trace) to `target` as another run of it: its baseTimeNanoseconds
    moved by `shift_ns` (the same events, that much later on the epoch's clock), and its
    distributedInfo's fields replaced by `distributed`."""
    trace = read_trace(source)
    trace["baseTimeNanoseconds"] = trace["baseTimeNanoseconds"] + shift_ns
    trace["distributedInfo"].update(distributed)
    target.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(target, "wt") as out:
        json.dump(trace, out)
    return target


def jobs(db):
    return {row[0]: row[1] for row in db_rows(db, "SELECT trace, job FROM traces")}


HOUR_NS = 3600 * 10**9


def test_a_job_is_ranks_that_agree_and_ran_together_not_a_folder(tmp_path):
    """One folder: the real pair, the same pair an hour later (a second run), and one rank of it
    as a 1-rank run thrice at once; a trace without a rank. Then the pair split over two folders."""
    one = tmp_path / "all"
    for rank, path in enumerate(RTX):
        copy_trace(path, one / f"a_rank{rank}.json.gz")
        copy_trace(path, one / f"b_rank{rank}.json.gz", shift_ns=HOUR_NS)
    for n in range(3):
        copy_trace(RTX[0], one / f"single{n}.json.gz", shift_ns=n * 10**6, world_size=1, pg_config=[])
    db = tmp_path / "all.duckdb"
    assert invoke_cli("load", one, TEST_DATA / "foreign" / "l4_square_memcpy_two_steps.json.gz", "--db", db).exit_code == 0
    assert jobs(db) == {"a_rank0": "a_rank0", "a_rank1": "a_rank0", "b_rank0": "b_rank0", "b_rank1": "b_rank0",
                        "single0": "single0", "single1": "single1", "single2": "single2",
                        "l4_square_memcpy_two_steps": None}
    # Each run's all_reduce is matched within its run; the single runs have no one to compare with.
    skew = query(db, "collective_skew")
    assert sorted(row["straggler_trace"] for row in skew) == ["a_rank0", "b_rank0"]
    assert {row["ranks"] for row in skew} == {2}
    singles = [row for row in query(db, "rank_steps") if row["trace"].startswith("single")]
    assert [(row["vs_others_us"], row["wait_us"]) for row in singles] == [(None, 0.0)] * 3

    apart = tmp_path / "apart"
    copy_trace(RTX[0], apart / "node_a" / "r0.json.gz")
    copy_trace(RTX[1], apart / "node_b" / "logs" / "r1.json.gz")
    db = tmp_path / "apart.duckdb"
    assert invoke_cli("load", apart, "--db", db).exit_code == 0
    assert jobs(db) == {"r0": "r0", "r1": "r0"}


def test_overlapping_runs_of_one_setup_are_told_apart_by_folder(tmp_path):
    """Two runs at once (a sweep): the same job twice, 1 ms apart, one folder each."""
    for run, shift in (("run_a", 0), ("run_b", 10**6)):
        for rank, path in enumerate(RTX):
            copy_trace(path, tmp_path / run / f"{run}_rank{rank}.json.gz", shift_ns=shift)
    db = tmp_path / "runs.duckdb"
    assert invoke_cli("load", tmp_path / "run_a", tmp_path / "run_b", "--db", db).exit_code == 0
    assert jobs(db) == {"run_a_rank0": "run_a_rank0", "run_a_rank1": "run_a_rank0",
                        "run_b_rank0": "run_b_rank0", "run_b_rank1": "run_b_rank0"}


def test_ranks_that_disagree_on_their_job_are_not_one(tmp_path):
    copy_trace(RTX[0], tmp_path / "r0.json.gz")
    copy_trace(RTX[1], tmp_path / "r1.json.gz", world_size=4, pg_config=[
        {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 4, "ranks": [0, 1, 2, 3]}])
    db = tmp_path / "d.duckdb"
    assert invoke_cli("load", tmp_path, "--db", db).exit_code == 0
    assert jobs(db) == {"r0": "r0", "r1": "r1"}
    assert query(db, "collective_skew") == []


def test_calls_matched_by_order_must_line_up(tmp_path):
    """Without Seq, the pair's all_reduce is matched by its place; moved 134 ms later on rank 1
    (its kernel now ends long after rank 0's), it is no match: no wait is made up from it."""
    assert db_rows_of_pair(tmp_path, 0) == [(0, 2, "order", 0.0), (1, 2, "order", 11257.218)]
    assert db_rows_of_pair(tmp_path, 134_153) == [(0, 1, None, None), (1, 1, None, None)]


def db_rows_of_pair(tmp_path, late_us):
    folder = tmp_path / f"late{late_us}"
    copy_trace(RTX[0], folder / "r0.json.gz")
    trace = read_trace(RTX[1])
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    kernel["ts"] += late_us
    with gzip.open(folder / "r1.json.gz", "wt") as out:
        json.dump(trace, out)
    db = folder / "p.duckdb"
    assert invoke_cli("load", folder, "--db", db).exit_code == 0
    return db_rows(db, "SELECT rank, ranks_matched, matched_by, round(wait_us, 3) FROM collectives ORDER BY rank")


def test_a_folder_of_rank_folders_loads_as_one_job_with_distinct_names(rank_job):
    job, folder, db = rank_job
    rows = db_rows(db, "SELECT trace, rank, world_size, dist_backend, job, path FROM traces ORDER BY rank")
    # Every file is called trace.json.gz: the names are made unique, the ranks tell them apart.
    assert sorted(row[0] for row in rows) == sorted(["trace"] + [f"trace-{n}" for n in range(2, job.ranks + 1)])
    assert [row[1] for row in rows] == list(range(job.ranks))
    assert {row[2:5] for row in rows} == {(job.ranks, "nccl", "trace")}
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
    assert row["max_wait_us"] == pytest.approx(k1["dur"] - k0["dur"], abs=0.05)
    assert row["start_spread_us"] == pytest.approx(k0["ts"] - k1["ts"], abs=0.05)
    assert row["end_spread_us"] == pytest.approx(abs(k0["ts"] + k0["dur"] - k1["ts"] - k1["dur"]), abs=0.05)
    assert row["transfer_us"] == pytest.approx(k0["dur"], abs=0.05)


def test_rank_steps_treats_a_trace_without_steps_as_one_step(rtx_db):
    rows = query(rtx_db, "rank_steps")
    assert [(r["trace"], r["step"]) for r in rows] == [(p.name.split(".")[0], None) for p in RTX]
    (k0, _), (k1, _) = nccl_kernel(RTX[0]), nccl_kernel(RTX[1])
    assert rows[0]["wait_us"] == 0 and rows[1]["wait_us"] == pytest.approx(k1["dur"] - k0["dur"], abs=0.1)
    for row in rows:
        # each figure to 0.1 µs: a difference of two is within 0.1 of the third
        assert row["work_us"] == pytest.approx(row["span_us"] - row["wait_us"], abs=0.11)
    assert rows[0]["vs_others_us"] == pytest.approx(rows[0]["work_us"] - rows[1]["work_us"], abs=0.11)
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
        assert sum(r["comm_us"] for r in rows) == pytest.approx(sum(e - s for s, e in comm), abs=0.05 * len(rows))  # rows to 0.1 µs
        assert sum(r["overlapped_us"] for r in rows) == pytest.approx(both, abs=0.05 * len(rows))
        assert both > 0
        for row in rows:
            assert row["exposed_us"] == pytest.approx(row["comm_us"] - row["overlapped_us"], abs=0.11)


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


GLOO_JOB = TEST_DATA / "cpu" / "gloo_job"


@pytest.fixture(scope="module")
def gloo_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("gloo") / "gloo.duckdb"
    result = invoke_cli("load", GLOO_JOB, "--db", db)
    assert result.exit_code == 0, result.output
    return db


def test_a_gloo_jobs_collectives_are_its_cpu_ranges_matched_by_their_place(gloo_db):
    """Gloo runs each collective on a CPU thread (gloo:all_reduce); the traces have no Seq."""
    assert jobs(gloo_db) == {"train_naive_inplace_rank0": "train_naive_inplace_rank0",
                             "train_naive_inplace_rank1": "train_naive_inplace_rank0"}
    rows = db_rows(gloo_db, """SELECT rank, runs_on, matched_by, collective, count(*), sum(in_bytes)
                               FROM collectives GROUP BY ALL ORDER BY ALL""")
    # Per rank: DDP's 2 broadcasts when it rebuilds its buckets, 2 all_reduces a step (two
    # buckets: 1,048,576 + 1,865,216 bytes of fp32 gradients) but 1 in the first step.
    per_rank = [("all_reduce", 15, 1 * 2_913_792 + 7 * 2_913_792), ("broadcast", 2, 224)]
    assert rows == [(rank, "cpu", "order", *row) for rank in (0, 1) for row in per_rank]


def test_rank_steps_finds_the_gloo_straggler_and_what_the_other_waited(gloo_db):
    delays = dict(db_rows(gloo_db, "SELECT step, dur_us FROM cpu_ops WHERE name = 'tracekit.injected_delay'"))
    assert sorted(delays) == list(range(8)) and all(20_000 < d < 25_000 for d in delays.values())
    steady = [row for row in query(gloo_db, "rank_steps") if row["step"] >= 2]
    assert len(steady) == 12
    for row in steady:
        assert row["slowest_rank"] == 1 and row["slowest_by_us"] > delays[row["step"]]
        if row["rank"] == 0:  # it waited in gloo for rank 1, at least as long as rank 1 slept
            assert row["wait_us"] > delays[row["step"]]
        else:
            assert row["wait_us"] == 0
    skew = [row for row in query(gloo_db, "collective_skew") if row["step"] >= 2]
    assert len(skew) == 12 and {row["straggler_rank"] for row in skew} == {1}
