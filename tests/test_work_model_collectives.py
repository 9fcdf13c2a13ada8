"""The work of a collective kernel (NCCL, RCCL) in the kernels view: the bytes NCCL's bus model
says each rank moves over its link (the message's bytes × nccl-tests' busbw factor), the additions
of a reduction, and a roofline at the link's speed, bound 'network'. Counted by hand from the comms
args Kineto writes on the kernels of real traces."""

import pytest

from conftest import TEST_DATA, db_dicts as _rows
from tracekit.ingest.loader import load_file
from tracekit.store.database import connect

FOREIGN = TEST_DATA / "foreign"
RTX1 = FOREIGN / "rtx4090_tp2_rank1_nccl_allreduce.json.gz"
A100 = TEST_DATA / "nccl" / "a100_pg509_rank0_of2_nccl_allreduce_broadcast.json.gz"
NO_ARGS = TEST_DATA / "nccl" / "rank0_of128_sendrecv_without_comms_args.json.gz"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("collective_work") / "work.duckdb"
    con = connect(path)
    for file in (RTX1, A100, NO_ARGS):
        assert load_file(con, file).status == "loaded", file
    con.close()
    return path


def test_a100_all_reduce_by_hand(db):
    # ncclKernel_AllReduce_RING_LL_Sum_float at 4458676566435.246 µs: In msg nelems 6,637,568,
    # Float, Group size 2 (the kernel's own args), 2,160.803 µs.
    [row] = _rows(db, "SELECT * FROM kernels WHERE trace LIKE 'a100%' AND abs(ts_us - 4458676566435.246) < 0.001")
    message = 6637568 * 4                        # 26,550,272 B
    bus = message * 2 * (2 - 1) / 2              # all_reduce's factor 2(n-1)/n, n = 2: 1
    adds = 6637568 * (2 - 1) / 2                 # the group's (n-1)·N additions, a half each
    assert (row["work_family"], row["work_source"], row["work_missing"]) == ("collective", "comms args", None)
    assert (row["bytes"], row["flops"], row["model_flops"], row["flops_dtype"]) == (bus, adds, adds, "Float")
    # NVLink 3 (an A100 not named PCIe), 300 GB/s a direction: 26,550,272 B in 88.50 µs; the
    # additions at the A100's 19.5 FP32 TFLOP/s take 0.17 µs
    assert row["roofline_us"] == pytest.approx(bus / 300e3) == pytest.approx(88.5009, rel=1e-5)
    assert row["bound"] == "network"
    assert row["pct_of_roofline"] == pytest.approx(100 * 88.5009 / 2160.803, rel=1e-5)


def test_broadcast_moves_its_message_and_adds_nothing(db):
    rows = _rows(db, "SELECT k.flops, k.bytes, k.roofline_us, k.bound FROM kernels k "
                     "WHERE k.trace LIKE 'a100%' AND k.name LIKE 'ncclKernel_Broadcast%' ORDER BY ts_us")
    # per step: 53,120 Float (212,480 B) and 53 Long (424 B), broadcast's factor 1
    assert [(r["flops"], r["bytes"]) for r in rows] == [(0.0, 212480.0), (0.0, 424.0)] * 3
    assert [r["bound"] for r in rows] == ["network"] * 6
    assert rows[0]["roofline_us"] == pytest.approx(212480 / 300e3)


def test_all_of_the_a100_ranks_collective_time_is_modelled(db):
    [row] = _rows(db, "SELECT count(*) AS n, count(*) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL) AS modelled "
                      "FROM kernels WHERE trace LIKE 'a100%' AND kernel_class = 'communication'")
    assert row == {"n": 21, "modelled": 21}


def test_rtx4090_work_and_roofline_across_pcie(db):
    # 100 Float elements, a group of 2: 400 B across PCIe 4.0 x16 (31.5 GB/s a direction,
    # knowledge/interconnects.csv) and 50 additions at the RTX 4090's 82.6 FP32 TFLOPS: the link
    # bounds it, 400 / 31.5e3 µs
    [row] = _rows(db, "SELECT flops, bytes, roofline_us, bound, work_missing FROM kernels "
                      "WHERE trace LIKE 'rtx4090%' AND kernel_class = 'communication'")
    assert row == {"flops": 50.0, "bytes": 400.0, "roofline_us": pytest.approx(400 / 31.5e3), "bound": "network",
                   "work_missing": None}


def test_no_comms_args_no_work_and_it_says_why(db):
    rows = _rows(db, "SELECT flops, bytes, work_family, work_source, work_missing FROM kernels "
                     "WHERE trace LIKE 'rank0_of128%' AND kernel_class = 'communication'")
    assert len(rows) == 10
    assert {tuple(r.values()) for r in rows} == {(None, None, "collective", None, "no message size (comms args)")}


def test_factors_of_the_collectives_no_real_trace_here_holds(tmp_path):
    # all_gather, reduce_scatter and all_to_all with sizes, and a group larger than its host: a
    # built trace (tests/trace_builder.py) on a host of 4 H200s, as tests/test_collective_bw.py's.
    import trace_builder as tb

    events = [tb.step(1, 0, 10000),
              tb.collective_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", 100, 100.0, 1, "_allgather_base",
                                 1048576, 4194304, 4),
              tb.collective_kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*)", 300, 100.0, 2,
                                 "_reduce_scatter_base", 4194304, 1048576, 4),
              tb.collective_kernel("ncclDevKernel_SendRecv(ncclDevComm*)", 500, 100.0, 3, "all_to_allv", 4194304, 4194304, 4),
              tb.collective_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", 700, 100.0, 4, "allreduce",
                                 4194304, 4194304, 16)]
    path = tb.write(tmp_path, "built_collectives", tb.trace(events, devices=[dict(tb.H200, id=i) for i in range(4)]))
    con = connect(tmp_path / "built.duckdb")
    assert load_file(con, path).status == "loaded"
    con.close()
    rows = _rows(tmp_path / "built.duckdb", "SELECT flops, bytes, roofline_us, bound FROM kernels ORDER BY ts_us")
    whole = 4194304 * 2                          # 8 MiB of bf16: the gathered output, the scattered input
    # all_gather and all_to_all move 3/4 of it a rank and add nothing; reduce_scatter moves as
    # much and adds 3/4 of its 4,194,304 elements; NVLink 4, 450 GB/s a direction
    assert rows[:3] == [{"flops": f, "bytes": whole * 3 / 4, "roofline_us": pytest.approx(whole * 3 / 4 / 450e3),
                         "bound": "network"} for f in (0.0, 4194304 * 3 / 4, 0.0)]
    # all_reduce in a group of 16 on a host of 4: 2·15/16 of it a rank, but across hosts, over a
    # network no trace names: work known, no roofline
    assert rows[3] == {"flops": 4194304 * 15 / 16, "bytes": whole * 2 * 15 / 16, "roofline_us": None, "bound": None}


def test_the_recommenders_fbgemm_ops_by_hand(db):
    # FloatToFP8RowwiseQuantized(x [1492704, 256] fp32): a row maximum and a scale per element; x
    # read, each row written as 256 FP8 bytes and an 8-byte scale. FP8RowwiseQuantizedToFloat(q
    # [1638400, 264] uint8): a multiply per element, [1638400, 256] fp32 written. Each summed over
    # its op's kernels, per call.
    rows = _rows(db, """
        SELECT k.cpu_op, sum(k.flops) AS flops, sum(k.bytes) AS bytes
        FROM kernels k JOIN cpu_ops o ON o.trace = k.trace AND o.op_id = k.cpu_op_id
        WHERE k.trace LIKE 'rank0_of128%' AND k.cpu_op IN ('fbgemm::FloatToFP8RowwiseQuantized',
                                                           'fbgemm::FP8RowwiseQuantizedToFloat')
        GROUP BY k.cpu_op, k.cpu_op_id ORDER BY k.cpu_op, min(k.ts_us)""")
    quantize = {"cpu_op": "fbgemm::FloatToFP8RowwiseQuantized", "flops": pytest.approx(2 * 1492704 * 256),
                "bytes": pytest.approx(1492704 * 256 * 4 + 1492704 * 264)}
    dequantize = {"cpu_op": "fbgemm::FP8RowwiseQuantizedToFloat", "flops": pytest.approx(1638400 * 256),
                  "bytes": pytest.approx(1638400 * 264 + 1638400 * 256 * 4)}
    assert rows == [dequantize] * 2 + [quantize] * 2
    # the embeddings' permutation, [2048, 186588] fp32 read and written, forward and backward
    pooled = _rows(db, "SELECT DISTINCT k.cpu_op, k.work_family FROM kernels k WHERE k.trace LIKE 'rank0_of128%' "
                       "AND k.cpu_op LIKE '%ermute%ooled%' ORDER BY 1")
    assert [r["work_family"] for r in pooled] == ["copy", "copy"]
    # the table-batched lookup says why it has no work: its tables' widths are tensor values
    assert _rows(db, "SELECT DISTINCT work_missing FROM kernels WHERE trace LIKE 'rank0_of128%' "
                     "AND cpu_op = 'fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function'") == \
        [{"work_missing": "no formula for its op"}]
