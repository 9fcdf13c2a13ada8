"""Collective bandwidth (view collective_bandwidth, query collective_bw, rule slow_collective) on
real rank traces: the 2-rank RTX 4090 pair (tests/data/foreign), HTA's A100 rank with large
all-reduces and HTA's rank of 128 whose kernels carry no sizes (tests/data/nccl), and the gloo job
(tests/data/cpu). The figures are worked out by hand from the traces' own events, as nccl-tests' formulas say."""

import gzip
import json

import pytest

from conftest import TEST_DATA, db_dicts as _rows, invoke_cli
from tracekit.analysis.findings_engine import run_findings
from tracekit.ingest.loader import load_file
from tracekit.store.database import connect, connect_for_queries

FOREIGN = TEST_DATA / "foreign"
RTX = [FOREIGN / f"rtx4090_tp2_rank{r}_nccl_allreduce.json.gz" for r in (0, 1)]
A100 = TEST_DATA / "nccl" / "a100_pg509_rank0_of2_nccl_allreduce_broadcast.json.gz"
NO_ARGS = TEST_DATA / "nccl" / "rank0_of128_sendrecv_without_comms_args.json.gz"
GLOO = sorted((TEST_DATA / "cpu" / "gloo_job").glob("*.json.gz"))
FILES = [*RTX, A100, NO_ARGS, *GLOO]


@pytest.fixture(scope="module")
def bw_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("collective_bw") / "bw.duckdb"
    con = connect(path)
    for file in FILES:
        assert load_file(con, file).status == "loaded", file
    con.close()
    return path


def _kernel_event(path, name_start, ts):
    """The kernel event of trace `path` whose name starts so and which starts at `ts` µs."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    found = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith(name_start)
             and abs(float(e["ts"]) - ts) < 0.001]
    assert len(found) == 1, (path, name_start, ts)
    return found[0]


def test_rtx4090_allreduce_by_hand_both_ranks_timed_without_the_wait(bw_db):
    # Rank 0's kernel: 100 Float elements (4 bytes each) in 7.424 µs on the GPU; rank 1's kernel
    # ran 11,264.642 µs, all but 7.424 of it waiting for rank 0.
    kernel = _kernel_event(RTX[0], "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 221475294803.148)
    assert (kernel["args"]["In msg nelems"], kernel["args"]["dtype"], kernel["args"]["Group size"]) == (100, "Float", 2)
    assert kernel["dur"] == 7.424
    message_bytes = 100 * 4                      # 400 B
    algbw = message_bytes / 7.424e-6 / 1e9       # 400 B / 7.424 µs = 0.053879 GB/s (decimal)
    busbw = algbw * 2 * (2 - 1) / 2              # all_reduce, n = 2: factor 2(n-1)/n = 1
    rows = _rows(bw_db, "SELECT rank, dur_us, wait_us, message_bytes, bw_us, timed_from, algbw_gbps, busbw_factor, "
                        "busbw_gbps, link, link_gb_s, link_pct FROM collective_bandwidth "
                        "WHERE trace LIKE 'rtx4090_tp2_rank%' ORDER BY rank")
    assert [r["rank"] for r in rows] == [0, 1]
    assert rows[1]["dur_us"] == pytest.approx(11264.642) and rows[1]["wait_us"] == pytest.approx(11257.218)
    for row in rows:
        assert row["message_bytes"] == message_bytes
        assert row["bw_us"] == pytest.approx(7.424) and row["timed_from"] == "all_ranks"
        assert row["algbw_gbps"] == pytest.approx(algbw) == pytest.approx(0.0538793, rel=1e-5)
        assert row["busbw_factor"] == 1.0 and row["busbw_gbps"] == pytest.approx(busbw)
        # a GeForce card: PCIe 4.0 x16, 31.5 GB/s a direction; 0.0539 / 31.5 = 0.17%
        assert (row["link"], row["link_gb_s"]) == ("PCIe 4.0 x16", 31.5)
        assert row["link_pct"] == pytest.approx(100 * busbw / 31.5)
    # Timed on its own kernel, rank 1 would have read 400 B / 11,264.642 µs = 0.0000355 GB/s: the
    # late rank, not the link.
    assert 400 / 11264.642e-6 / 1e9 < rows[1]["busbw_gbps"] / 1000


def test_a100_allreduce_by_hand_timed_on_its_own_rank(bw_db):
    kernel = _kernel_event(A100, "ncclKernel_AllReduce_RING_LL_Sum_float", 4458676566435.246)
    assert (kernel["args"]["In msg nelems"], kernel["args"]["dtype"], kernel["args"]["Group size"]) == (6637568, "Float", 2)
    assert kernel["dur"] == 2160.803
    message_bytes = 6637568 * 4                  # 26,550,272 B
    algbw = message_bytes / 2160.803e-6 / 1e9    # 12.2872 GB/s
    busbw = algbw * 2 * (2 - 1) / 2              # n = 2: factor 1
    [row] = _rows(bw_db, "SELECT * FROM collective_bandwidth WHERE trace = 'a100_pg509_rank0_of2_nccl_allreduce_broadcast' "
                         "AND abs(ts_us - 4458676566435.246) < 0.001")
    assert (row["collective"], row["group_size"], row["message_bytes"]) == ("all_reduce", 2, 26550272)
    # only rank 0's trace exists: no match, so the kernel's own span, any wait in it
    assert row["ranks_matched"] == 1 and row["timed_from"] == "this_rank" and row["bw_us"] == pytest.approx(2160.803)
    assert row["algbw_gbps"] == pytest.approx(algbw) == pytest.approx(12.2872, rel=1e-5)
    assert row["busbw_gbps"] == pytest.approx(busbw)
    # an A100 not named PCIe: NVLink 3, 600 GB/s both ways, 300 one way; 12.29 / 300 = 4.1%
    assert (row["link"], row["link_gb_s"]) == ("NVLink 3", 300.0)
    assert row["link_pct"] == pytest.approx(4.0957, rel=1e-4)


def test_broadcast_factor_is_one_and_all_gather_uses_the_whole_output(bw_db):
    rows = _rows(bw_db, "SELECT in_bytes, out_bytes, message_bytes, busbw_factor, algbw_gbps, busbw_gbps "
                        "FROM collective_bandwidth WHERE trace LIKE 'a100%' AND collective = 'broadcast' AND in_nelems = 53120")
    assert len(rows) == 3  # one a step, steps 4 to 6
    for row in rows:
        assert row["message_bytes"] == 53120 * 4 == row["in_bytes"]
        assert row["busbw_factor"] == 1.0 and row["busbw_gbps"] == row["algbw_gbps"]


def test_null_when_the_size_or_the_group_is_unknown_never_zero(bw_db):
    # HTA's rank of 128: SendRecv kernels with none of Kineto's collective fields
    rows = _rows(bw_db, "SELECT * FROM collective_bandwidth WHERE trace = 'rank0_of128_sendrecv_without_comms_args'")
    assert len(rows) == 10
    for row in rows:
        assert row["in_nelems"] is None and row["message_bytes"] is None
        assert row["algbw_gbps"] is None and row["busbw_gbps"] is None and row["link_pct"] is None
        assert row["busbw_factor"] == 1.0  # send_recv's factor needs no group size
    # gloo's CPU ranges give the size (Input Dims) but no group: all_reduce's factor is unknown
    rows = _rows(bw_db, "SELECT collective, message_bytes, algbw_gbps, busbw_gbps, link FROM collective_bandwidth "
                        "WHERE runs_on = 'cpu'")
    assert {r["collective"] for r in rows} == {"all_reduce", "broadcast"}
    for row in rows:
        assert row["message_bytes"] > 0 and row["algbw_gbps"] > 0 and row["link"] is None
        assert (row["busbw_gbps"] is None) == (row["collective"] == "all_reduce")
    assert _rows(bw_db, "SELECT count(*) AS n FROM collective_bandwidth WHERE algbw_gbps = 0 OR busbw_gbps = 0 "
                        "OR message_bytes = 0")[0]["n"] == 0


def test_slow_collective_fires_on_the_a100_all_reduces(bw_db):
    con = connect_for_queries(bw_db)
    try:
        found = run_findings(con, rule="slow_collective", replay=False)
        loaded = {row[0] for row in con.execute("SELECT trace FROM traces").fetchall()}
    finally:
        con.close()
    assert "a100_pg509_rank0_of2_nccl_allreduce_broadcast" in loaded
    [row] = found.to_dict("records")
    assert row["trace"] == "a100_pg509_rank0_of2_nccl_allreduce_broadcast"
    assert row["title"] == "all_reduce of 26.3-31.5 MB reach 10.0 GB/s busbw, 3% of NVLink 3's 300 GB/s"
    # timed on rank 0 alone: it may be a late rank, so never 'high'
    assert row["severity"] == "medium" and "timed on this rank alone" in row["detail"]
    # The steady steps are #5 and #6; the calls of 16 MiB or more in them: step 5: 2,673.916 +
    # 2,621.533 + 2,417.184 µs; step 6: 5,983.024 + 5,807.890 + 2,636.669 µs. At the link's 300
    # GB/s their 31,502,336 + 26,255,360 + 26,550,272 B take 281.0 µs a step. Excess: 7,431.6 and
    # 14,146.6 µs, under each step's exposed communication; mean 10,789.1 µs a step.
    link_us = (31502336 + 26255360 + 26550272) / 300e3
    excess = ((2673.916 + 2621.533 + 2417.184 - link_us) + (5983.024 + 5807.890 + 2636.669 - link_us)) / 2
    assert row["estimate_us_per_step"] == pytest.approx(round(excess, 1)) == pytest.approx(10789.1)
    assert row["whatif"] is None
    assert len(row["evidence"]) == 6


def test_slow_collective_leaves_small_messages_alone(bw_db):
    con = connect_for_queries(bw_db)
    try:
        loaded = {row[0] for row in con.execute("SELECT trace FROM traces").fetchall()}
        assert {"rtx4090_tp2_rank0_nccl_allreduce", "rtx4090_tp2_rank1_nccl_allreduce"} <= loaded
        quiet = run_findings(con, rule="slow_collective", replay=False)
        # The pair's one all-reduce moves 400 B at 0.17% of PCIe: latency, not the link, sets its
        # time; below min_bytes (16 MiB) the rule says nothing. With the floor at 1 B it would.
        loud = run_findings(con, rule="slow_collective", params={"min_bytes": "1"}, replay=False)
    finally:
        con.close()
    assert not any(t.startswith("rtx4090") for t in quiet["trace"])
    assert sorted(t for t in loud["trace"] if t.startswith("rtx4090")) == [
        "rtx4090_tp2_rank0_nccl_allreduce", "rtx4090_tp2_rank1_nccl_allreduce"]


def test_collective_bw_query_rounds_what_it_prints(bw_db):
    result = invoke_cli("query", "collective_bw", "--db", bw_db, "-p", "trace", "rtx4090_tp2_rank1_nccl_allreduce",
                        "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == ("trace,rank,step,collective,runs_on,group_size,message_bytes,dur_us,bw_us,timed_from,"
                        "algbw_gbps,busbw_gbps,link,link_gb_s,link_pct")
    assert lines[1] == ("rtx4090_tp2_rank1_nccl_allreduce,1,,all_reduce,gpu,2,400,11264.6,7.4,all_ranks,"
                        "0.0539,0.0539,PCIe 4.0 x16,31.5,0.2")


def test_a_database_loaded_before_interconnects_still_answers(bw_db, tmp_path):
    # A database of the same schema made by a tracekit without the interconnects table: opened
    # read-only, its views are made again over a temporary table of this tracekit's rows.
    import shutil

    import duckdb

    old = tmp_path / "old.duckdb"
    shutil.copy(bw_db, old)
    con = duckdb.connect(str(old))
    con.execute("DROP VIEW IF EXISTS collective_bandwidth")
    con.execute("DROP VIEW IF EXISTS _trace_links")
    con.execute("DROP VIEW IF EXISTS findings")
    con.execute("DROP TABLE interconnects")
    con.execute("UPDATE schema_info SET value = 'older' WHERE key = 'views_digest'")
    con.close()
    rows = _rows(old, "SELECT DISTINCT link FROM collective_bandwidth WHERE trace LIKE 'a100%'")
    assert rows == [{"link": "NVLink 3"}]


def test_factors_and_sizes_of_the_collectives_no_real_trace_here_holds(tmp_path):
    # No public trace at hand runs all_gather, reduce_scatter or all_to_all with sizes, nor a
    # group larger than its host: a built one (tests/trace_builder.py) on a host of 4 H200s.
    import trace_builder as tb

    events = [tb.step(1, 0, 10000),
              # 4 ranks each give 1,048,576 bf16 elements (2 MiB); the gathered whole is 8 MiB
              tb.collective_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", 100, 100.0, 1,
                                 "_allgather_base", 1048576, 4194304, 4),
              # the whole (8 MiB) goes in, each rank keeps a quarter
              tb.collective_kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*)", 300, 100.0, 2,
                                 "_reduce_scatter_base", 4194304, 1048576, 4),
              tb.collective_kernel("ncclDevKernel_SendRecv(ncclDevComm*)", 500, 100.0, 3, "all_to_allv", 4194304, 4194304, 4),
              # a group of 16 on a host that shows 4 GPUs spans hosts: no link to compare with
              tb.collective_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", 700, 100.0, 4,
                                 "allreduce", 4194304, 4194304, 16)]
    devices = [dict(tb.H200, id=i) for i in range(4)]
    path = tb.write(tmp_path, "built_collectives", tb.trace(events, devices=devices))
    con = connect(tmp_path / "built.duckdb")
    assert load_file(con, path).status == "loaded"
    con.close()
    rows = _rows(tmp_path / "built.duckdb", "SELECT collective, message_bytes, busbw_factor, algbw_gbps, busbw_gbps, "
                                            "link, link_gb_s FROM collective_bandwidth ORDER BY ts_us")
    eight_mib = 4194304 * 2
    # 8,388,608 B in 100 µs: algbw 83.886 GB/s
    assert [r["collective"] for r in rows] == ["all_gather", "reduce_scatter", "all_to_all", "all_reduce"]
    for row, factor in zip(rows, (3 / 4, 3 / 4, 3 / 4, 2 * 15 / 16)):
        assert row["message_bytes"] == eight_mib
        assert row["algbw_gbps"] == pytest.approx(eight_mib / 100e-6 / 1e9) == pytest.approx(83.886, rel=1e-4)
        assert row["busbw_factor"] == pytest.approx(factor)
        assert row["busbw_gbps"] == pytest.approx(83.886 * factor, rel=1e-4)
    assert [(r["link"], r["link_gb_s"]) for r in rows] == [("NVLink 4", 450.0)] * 3 + [(None, None)]


def test_a_lake_written_before_interconnects_still_answers(tmp_path):
    import shutil

    from tracekit.lake.reader import connect_lake

    lake = tmp_path / "lake"
    assert invoke_cli("load", *RTX, "--lake", lake).exit_code == 0
    shutil.rmtree(lake / "interconnects")  # as a lake of the tracekit before it has none
    con = connect_lake(lake)
    try:
        rows = con.execute("SELECT DISTINCT link, link_gb_s FROM collective_bandwidth").fetchall()
    finally:
        con.close()
    assert rows == [("PCIe 4.0 x16", 31.5)]


def test_gpu_idle_says_why_work_queued_behind_another_stream_has_no_fix(bw_db):
    """The 128-rank job's rank 0 idles 171 ms a step with its next kernel already queued, waiting
    for a send/recv on another stream: no named change moves that, and the finding says so once."""
    import tracekit

    found = tracekit.findings(db=bw_db, rule="gpu_idle", params={"trace": "rank0_of128_sendrecv_without_comms_args"})
    queued = found[found["title"].str.contains("the next work was already queued")]
    assert len(queued) == 1
    row = queued.iloc[0]
    assert row["title"].startswith("GPU idle 171273.2 µs per step")
    assert not isinstance(row["whatif"], str) and row["saving_us_per_step"] != row["saving_us_per_step"]
    assert row["detail"].endswith("; no fix replayed: the work waited on another stream or an event, not on the CPU, "
                                  "and what to change there the trace does not name")
    assert row["detail"].count("no fix replayed") == 1
