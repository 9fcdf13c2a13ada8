"""Memory: Kineto's [memory] events loaded (memory_events), over time (memory_timeline), and each
step's peak with what held it (memory_steps, memory_peak_blocks), against the CPU captures of
tests/data/cpu/memory (see its README) and the foreign traces that carry memory events.

On the CPU there is no torch.cuda.max_memory_allocated to compare with: the expected peaks are
counted by hand from the shapes (each score matrix is B*H*S*S fp32 values, the output B*H*S*D).
capture/memory_check.py makes the same comparison against max_memory_allocated on a GPU.
"""

import gzip
import json

import pytest

from conftest import TEST_DATA, db_rows, invoke_cli
from memory_checks import peaks_from_json

MEMORY = TEST_DATA / "cpu" / "memory"
FOREIGN_WITH_MEMORY = [TEST_DATA / "foreign" / "windows_cnn_cpu_ops_cuda_memory_events.json.gz",
                       TEST_DATA / "foreign" / "cpu_only_linear_train_step.json.gz"]
NAIVE_VARIANTS = ["naive", "naive_inplace", "naive_mul_inplace"]


@pytest.fixture(scope="module")
def memory_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("memory") / "memory.duckdb"
    result = invoke_cli("load", MEMORY, *FOREIGN_WITH_MEMORY, "--db", db)
    assert result.exit_code == 0, result.output
    return db


def _shape(variant):
    meta = json.loads(gzip.decompress((MEMORY / f"{variant}.json.gz").read_bytes()))["tracekit"]
    assert meta["dtype"] == "fp32" and meta["profile_memory"] is True
    fp32 = 4
    score = meta["batch"] * meta["heads"] * meta["seq_len"] ** 2 * fp32
    out = meta["batch"] * meta["heads"] * meta["seq_len"] * meta["head_dim"] * fp32
    return score, out


def _steps(db, trace):
    return db_rows(db, "SELECT step, start_allocated_bytes, peak_allocated_bytes, peak_over_start_bytes, allocated_bytes"
                       f" FROM memory_steps WHERE trace = '{trace}' ORDER BY step")


@pytest.mark.parametrize("variant", NAIVE_VARIANTS)
def test_each_steps_peak_is_the_hand_count_of_its_matrices(memory_db, variant):
    """Every variant holds two score matrices at its peak (softmax's output beside the scores it
    reads) and the output: neither in-place change lowers the peak. Steps after the first start
    with the previous step's output still held (the capture keeps it to check it)."""
    score, out = _shape(variant)
    assert (score, out) == (524288, 65536)  # B=1 H=2 S=256 D=32
    peak_over_start = 2 * score + out
    # Bytes allocated in a step: the scores out of bmm, and one more matrix for each op that is
    # not in place (scores * scale; masked_fill's clone), softmax's, the output, and the scale as
    # a 0-dim double (8 bytes) cast to float (4 bytes).
    matrices = {"naive": 4, "naive_inplace": 3, "naive_mul_inplace": 2}[variant]
    allocated = matrices * score + out + 8 + 4
    expected = [(0, 0, peak_over_start, peak_over_start, allocated)]
    expected += [(step, out, out + peak_over_start, peak_over_start, allocated) for step in (1, 2, 3)]
    assert _steps(memory_db, variant) == expected


def test_the_fused_kernel_never_holds_a_score_matrix(memory_db):
    score, out = _shape("sdpa_flash")
    for step, _, _, over_start, _ in _steps(memory_db, "sdpa_flash"):
        assert out <= over_start < score, step
    math_over_start = {row[3] for row in _steps(memory_db, "sdpa_math")}
    assert min(math_over_start) > 2 * score  # the math backend's where() adds a mask-sized tensor


@pytest.mark.parametrize("path", sorted(MEMORY.glob("*.json.gz")) + FOREIGN_WITH_MEMORY, ids=lambda p: p.name)
def test_memory_steps_match_the_traces_own_totals(memory_db, path):
    trace = path.name.removesuffix(".json.gz")
    got = db_rows(memory_db, "SELECT step, device, start_allocated_bytes, peak_allocated_bytes, peak_reserved_bytes"
                             f" FROM memory_steps WHERE trace = '{trace}' ORDER BY step NULLS FIRST, device")
    assert got == peaks_from_json(path)


def test_a_gpu_trace_reserves_and_starts_with_memory_the_profiler_did_not_see(memory_db):
    """The Windows CNN trace (CUDA device 0) begins with 1,415,680 bytes allocated before profiling:
    no block the trace saw accounts for them."""
    row = db_rows(memory_db, "SELECT step, device_type, device, events, start_allocated_bytes, peak_allocated_bytes,"
                             " peak_reserved_bytes, peak_op, unattributed_bytes FROM memory_steps"
                             " WHERE trace = 'windows_cnn_cpu_ops_cuda_memory_events'")
    assert row == [(None, "cuda", 0, 22, 1415680, 2366976, 4194304, "aten::clamp_min", 1415680)]


def test_the_blocks_live_at_the_peak_add_up_to_it_and_name_their_ops(memory_db):
    sums = db_rows(memory_db, """
        SELECT s.trace, s.step, s.peak_allocated_bytes, sum(b.bytes) + any_value(s.unattributed_bytes), count(*),
               any_value(s.live_blocks)
        FROM memory_steps s JOIN memory_peak_blocks b ON b.trace = s.trace AND b.step IS NOT DISTINCT FROM s.step
                                                     AND b.device = s.device
        GROUP BY s.trace, s.step, s.peak_allocated_bytes""")
    assert len(sums) == 30  # 7 captures x 4 steps, and the two foreign traces taken whole
    for trace, step, peak, blocks_and_unseen, blocks, live in sums:
        assert blocks_and_unseen == peak and blocks == live, (trace, step)
    blocks = db_rows(memory_db, "SELECT block_rank, bytes, allocated_step, cpu_op_path, source FROM memory_peak_blocks"
                                " WHERE trace = 'naive' AND step = 2 ORDER BY block_rank")
    assert blocks == [
        (1, 524288, 2, "aten::masked_fill → aten::clone → aten::empty_like → aten::empty", None),
        (2, 524288, 2, "aten::softmax → aten::_softmax", None),
        (3, 65536, 1, "aten::matmul → aten::bmm", None),  # the previous step's output, still held
        (4, 65536, 2, "aten::matmul → aten::bmm", None)]
    live = db_rows(memory_db, "SELECT trace, live_at_peak FROM memory_steps WHERE step = 1 AND trace LIKE 'naive%'"
                              " ORDER BY trace")
    assert live == [
        ("naive", "0.5 MiB by aten::masked_fill → aten::clone → aten::empty_like → aten::empty; "
                  "0.5 MiB by aten::softmax → aten::_softmax; 0.06 MiB by aten::matmul → aten::bmm"),
        ("naive_inplace", "0.5 MiB by aten::mul; 0.5 MiB by aten::softmax → aten::_softmax; 0.06 MiB by aten::matmul → aten::bmm"),
        ("naive_mul_inplace", "0.5 MiB by aten::matmul → aten::bmm; 0.5 MiB by aten::softmax → aten::_softmax; "
                              "0.06 MiB by aten::matmul → aten::bmm")]


def test_memory_events_pair_each_allocation_with_its_free(memory_db):
    rows = db_rows(memory_db, """
        SELECT step, action, count(*), sum(bytes), count(freed_us), count(cpu_op), min(total_reserved_bytes)
        FROM memory_events WHERE trace = 'naive_mul_inplace' AND step = 2 GROUP BY ALL ORDER BY action""")
    # Five allocations, four freed in the step; the output (65,536 bytes) lives on into the next.
    # The previous step's output is freed here, so five frees; the CPU reserves nothing (NULL).
    assert rows == [(2, "alloc", 5, 1114124, 5, 5, None), (2, "free", 5, -1114124, 0, 5, None)]
    unfreed = db_rows(memory_db, "SELECT step, bytes FROM memory_events WHERE trace = 'naive_mul_inplace'"
                                 " AND action = 'alloc' AND freed_us IS NULL")
    assert unfreed == [(3, 65536)]  # the last step's output, held when profiling stopped


def test_the_timeline_is_the_running_total_per_device(memory_db):
    rows = db_rows(memory_db, "SELECT device_type, count(*), max(allocated_bytes), count(reserved_bytes), max(reserved_mib)"
                              " FROM memory_timeline WHERE trace LIKE 'windows%' GROUP BY ALL")
    assert rows == [("cuda", 22, 2366976, 22, 4.0)]
    steps = db_rows(memory_db, "SELECT count(*), count(step) FROM memory_timeline WHERE trace = 'naive'")
    assert steps == [(55, 55)]


def test_summary_gives_the_steady_peak_and_null_without_memory_events(memory_db, sample_db):
    result = invoke_cli("query", "summary", "--db", memory_db, "-f", "json")
    assert result.exit_code == 0, result.output
    peaks = {row["trace"]: row["peak_mib"] for row in json.loads(result.output)}
    # 1,179,648 bytes; the linear step's CPU peak 434,184; the CNN's GPU peak 2,366,976
    assert peaks == {"naive": 1.13, "naive_inplace": 1.13, "naive_mul_inplace": 1.13, "sdpa_math": 1.5,
                     "sdpa_flash": 0.27, "held_scores": 1.5, "held_scores_inplace": 1.06,
                     "cpu_only_linear_train_step": 0.41,
                     "windows_cnn_cpu_ops_cuda_memory_events": 2.26}
    result = invoke_cli("query", "summary", "--db", sample_db, "-f", "json")
    assert result.exit_code == 0, result.output
    assert {row["peak_mib"] for row in json.loads(result.output)} == {None}


def test_a_trace_without_memory_events_has_no_memory_rows(sample_db):
    assert db_rows(sample_db, "SELECT count(*) FROM memory_events") == [(0,)]
    assert db_rows(sample_db, "SELECT count(*) FROM memory_steps") == [(0,)]


def test_damaged_memory_events_load_with_what_they_hold(tmp_path):
    import make_bad_corpus

    path = tmp_path / "odd_memory_events.json"
    path.write_bytes(make_bad_corpus.odd_memory_events())
    db = tmp_path / "odd.duckdb"
    result = invoke_cli("load", path, "--db", db)
    assert result.exit_code == 0, result.output
    first = db_rows(db, "SELECT action, addr IS NULL, bytes, total_allocated_bytes, device_type, cpu_op"
                        " FROM memory_events ORDER BY ts_us, addr LIMIT 4")
    assert first == [(None, False, None, 524288, "cpu", "aten::bmm"),  # Bytes "many"
                     (None, True, None, None, None, "tracekit.forward.naive_mul_inplace"),  # no args at all
                     ("alloc", True, 4, 524300, "cpu", "aten::empty_strided"),  # no Addr: never paired
                     ("free", False, -4, None, "cpu", "aten::mul_")]  # Total Allocated null
    stray = db_rows(db, "SELECT action, bytes, freed_us FROM memory_events WHERE addr = 12345")
    assert stray == [("free", -64, None)]
    steps = db_rows(db, "SELECT step, start_allocated_bytes, peak_allocated_bytes, live_blocks, unattributed_bytes"
                        " FROM memory_steps ORDER BY step")
    # Step 0's first event lost its bytes: its start is unknown, and the scores that event
    # allocated are no block, so the peak holds 524,288 bytes no block accounts for.
    assert steps == [(0, None, 1114112, 2, 524288)] + [(step, 65536, 1179648, 4, 0) for step in (1, 2, 3)]


def test_the_report_has_a_memory_section_only_where_traces_have_memory_events(memory_db, sample_db, tmp_path):
    result = invoke_cli("report", "--db", memory_db, "-f", "markdown")
    assert result.exit_code == 0, result.output
    section = result.output.split("## Memory\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| naive")]
    # steady step 1 (the first of the highest peak): 1,179,648 bytes, 1,114,112 over the start
    assert rows[0].startswith("| naive | 1 | cpu | 1.125 MiB | 1.062 MiB | 2.063 MiB | 0.5 MiB by aten::masked_fill")
    assert "| windows_cnn_cpu_ops_cuda_memory_events | whole trace | cuda:0 | 2.257 MiB | 0.907 MiB |" in section
    assert "| peak MiB |" in result.output.splitlines()[6]  # the summary table's column
    html = tmp_path / "report.html"
    assert invoke_cli("report", "--db", memory_db, "-o", html).exit_code == 0
    assert '<section id="memory"><h2>Memory</h2>' in html.read_text()
    result = invoke_cli("report", "--db", sample_db, "-f", "markdown")
    assert result.exit_code == 0 and "## Memory" not in result.output and "peak MiB" not in result.output


def test_held_scores_peak_three_matrices_and_masked_fill_in_place_lowers_it(memory_db):
    """capture_held_scores.py keeps the scores in a variable while masked_fill's copy goes to
    softmax: three score matrices at the peak; with masked_fill_ two and the output."""
    score, out = 524288, 65536
    assert {row[1:4] for row in _steps(memory_db, "held_scores")} == {(0, 3 * score, 3 * score)}
    assert {row[1:4] for row in _steps(memory_db, "held_scores_inplace")} == {(0, 2 * score + out, 2 * score + out)}


def _peak_copy(db, *params):
    result = invoke_cli("findings", "--db", db, "--rule", "peak_copy", "--evidence", "-f", "json", *params)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_peak_copy_finds_the_copy_held_beside_its_original_and_only_there(memory_db):
    found = _peak_copy(memory_db)
    assert [(f["trace"], f["severity"], f["title"]) for f in found] == [
        ("held_scores", "high", "The CPU memory peak holds a 0.5 MiB copy from aten::masked_fill beside the tensor it copied")]
    finding = found[0]
    assert finding["detail"] == ("In 3 of 3 steady step(s) the peak (1.5 MiB) holds 0.5 MiB (33%) made by aten::masked_fill"
                                 " → aten::clone → aten::empty_like → aten::empty, and a block of the same size allocated before it"
                                 "; no fix replayed: the copy costs memory, not time: it raises the step's peak, which a "
                                 "replay of time does not measure")
    assert finding["fix"] == "use masked_fill_ (in place) instead of masked_fill"
    assert finding["saving_us_per_step"] is None and finding["whatif"] is None
    ops = db_rows(memory_db, "SELECT op_id, name FROM cpu_ops WHERE trace = 'held_scores' AND step > 0 AND name = 'aten::empty'"
                             " AND parent = 'aten::empty_like' ORDER BY op_id")
    assert [(e["cpu_op_id"], e["name"]) for e in finding["evidence"]] == ops and len(ops) == 3
    # naive's clone is at its peak too, but mul's output it copied was freed first: no finding
    assert _peak_copy(memory_db, "-p", "trace", "naive") == []
    assert _peak_copy(memory_db, "-p", "min_peak_pct", "34") == []  # the copy is 33% of the peak


def test_with_the_stack_the_blocks_at_the_peak_name_the_users_line(tmp_path):
    """tests/data/cpu/memory_stack: the naive capture with memory events and the Python stack. The
    same peak as without the stack, each block naming the frame of the user's code that allocated
    it, as the trace's python_function events have it (forward's first line)."""
    db = tmp_path / "stack.duckdb"
    assert invoke_cli("load", TEST_DATA / "cpu" / "memory_stack", "--db", db).exit_code == 0
    trace = gzip.decompress((TEST_DATA / "cpu" / "memory_stack" / "naive.json.gz").read_bytes()).decode()
    frame = "capture/variants.py(53): forward"
    assert f'"name": "{frame}"' in trace
    steps = db_rows(db, "SELECT step, peak_over_start_bytes FROM memory_steps ORDER BY step")
    assert steps == [(step, 2 * 524288 + 65536) for step in range(4)]
    blocks = db_rows(db, "SELECT block_rank, bytes, cpu_op_path, source FROM memory_peak_blocks WHERE step = 2"
                         " ORDER BY block_rank")
    assert [row[:3] for row in blocks] == [
        (1, 524288, "aten::masked_fill → aten::clone → aten::empty_like → aten::empty"),
        (2, 524288, "aten::softmax → aten::_softmax"), (3, 65536, "aten::matmul → aten::bmm"),
        (4, 65536, "aten::matmul → aten::bmm")]
    assert {row[3] for row in blocks} == {"capture/variants.py:53 in forward"}
