"""The findings engine on real H200 captures: each rule's finding, its fix, and its predicted
saving against the saving measured by capturing the fix (tests/data/h200, sample_traces)."""

import gzip
import json
import re

import pytest

from conftest import SAMPLE_TRACES, TEST_DATA, invoke_cli
from tracekit.store.database import connect, connect_for_queries
from tracekit.analysis.findings_engine import FINDING_COLUMNS, SEVERITIES, UNSAVED_UNSAID, rules, run_findings
from tracekit.store.findings_view import findings_view_sql
from tracekit.ingest.loader import load_file

H200 = TEST_DATA / "h200"
# Each "before" capture with its fix, captured on the same GPU at the same shape, and the fix to
# replay where the capture's is not the finding's own (the math backend's is a fused backend; the
# capture allowed TF32).
FIXES = {"hidden_copy": [("samples/naive", "samples/naive_inplace", None), ("fp32/naive", "fp32/naive_inplace", None)],
         "simt_gemm": [("fp32/naive", "fp32_tf32/naive", None), ("fp32/naive_inplace", "fp32_tf32/naive_inplace", None),
                       ("fp32/sdpa_math", "fp32_tf32/sdpa_math", "tensor-cores"),
                       ("samples/sdpa_math", "samples/sdpa_flash", None)],
         # the article's own fix: the naive attention, out of place or in place, as SDPA (flash)
         "unfused_attention": [("samples/naive", "samples/sdpa_flash", None),
                               ("samples/naive_inplace", "samples/sdpa_flash", None)]}
# The captures these tests read (loops, fixes and side_streams have their own tests and databases).
FOLDERS = ("fp32", "fp32_tf32", "hd128", "train_bf16", "train_fp32")


def _name(path):
    return path.replace("/", "_")


@pytest.fixture(scope="module")
def h200_db(tmp_path_factory):
    """The sample traces and tests/data/h200, each trace named folder_variant (samples_naive, ...)."""
    path = tmp_path_factory.mktemp("findings") / "h200.duckdb"
    con = connect(path)
    files = [("samples", p) for p in sorted(SAMPLE_TRACES.glob("*.json.gz"))]
    files += [(folder, p) for folder in FOLDERS for p in sorted((H200 / folder).glob("*.json.gz"))]
    for folder, file in files:
        assert load_file(con, file).status == "loaded"
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [f"{folder}_{file.name[:-8]}", str(file.resolve())])
    con.close()
    return path


@pytest.fixture(scope="module")
def found(h200_db):
    con = connect_for_queries(h200_db)
    try:
        frame = run_findings(con)
        frame.attrs["loaded"] = {row[0] for row in con.execute("SELECT trace FROM traces").fetchall()}
        return frame
    finally:
        con.close()


def _none(found, trace, *rules):
    """True when no finding of `rules` is on `trace`, a trace that is loaded (a renamed or missing
    one would find nothing too)."""
    assert trace in found.attrs["loaded"], f"{trace} is not loaded"
    return found[(found["trace"] == trace) & found["rule"].isin(rules)].empty


def _gpu_us_per_step(db, trace):
    con = connect_for_queries(db)
    try:
        return con.execute("SELECT gpu_us_per_step FROM step_totals WHERE trace = ?", [trace]).fetchone()[0]
    finally:
        con.close()


def _one(found, trace, rule):
    rows = found[(found["trace"] == trace) & (found["rule"] == rule)]
    assert len(rows) == 1, found[["trace", "rule", "title"]].to_string()
    return rows.iloc[0]


@pytest.mark.parametrize("rule, before, after, fix", [(r, *pair) for r, pairs in FIXES.items() for pair in pairs])
def test_predicted_saving_is_within_25pct_of_the_measured_fix(h200_db, found, rule, before, after, fix):
    from tracekit.replay.savings import TraceReplay

    finding = _one(found, _name(before), rule)
    predicted = finding["saving_us_per_step"]
    if fix:
        con = connect_for_queries(h200_db)
        try:
            predicted = TraceReplay(con, _name(before)).saving(fix).saving_us
        finally:
            con.close()
    measured = _gpu_us_per_step(h200_db, _name(before)) - _gpu_us_per_step(h200_db, _name(after))
    assert measured > 0 and abs(predicted - measured) <= 0.25 * measured, (predicted, measured)
    # The fix's trace no longer has the finding.
    assert _none(found, _name(after), rule)


def test_hidden_copy_names_the_op_the_bytes_and_the_chain(found):
    row = _one(found, "samples_naive", "hidden_copy")
    assert row["title"] == "1 Memcpy DtoD of 512 MiB per step from aten::masked_fill"
    assert "aten::masked_fill → aten::clone → aten::copy_" in row["detail"]
    assert row["fix"] == "use masked_fill_ (in place) instead of masked_fill"
    assert row["severity"] == "high"
    evidence = row["evidence"]
    assert len(evidence) == 5 and {e["source"] for e in evidence} == {"memcpy"}
    assert all(e["name"].startswith("Memcpy DtoD") and e["dur_ns"] > 200_000 for e in evidence)


def test_hidden_copy_in_training_tells_the_forward_copy_from_the_backward_formulas(found):
    """masked_fill's backward calls masked_fill again: that copy is PyTorch's own, which no change
    to the module removes, so it is info with no saving, apart from the forward's. The CPU bounds
    this fp32 step (launching): replayed, dropping the forward's copies would not shorten it."""
    rows = found[(found["trace"] == "train_fp32_train_naive") & (found["rule"] == "hidden_copy")]
    by_title = {row["title"]: row for _, row in rows.iterrows()}
    forward = by_title["4 Memcpy DtoD of 8 MiB per step from aten::masked_fill"]  # 4 layers
    backward = by_title["4 Memcpy DtoD of 8 MiB per step from aten::masked_fill in autograd's MaskedFillBackward0"]
    assert forward["fix"] == "use masked_fill_ (in place) instead of masked_fill" and forward["estimate_us_per_step"] > 0
    assert forward["whatif"] == "drop-copies:aten::masked_fill" and 0 <= forward["saving_us_per_step"] < 10
    assert backward["severity"] == "info" and backward["saving_us_per_step"] != backward["saving_us_per_step"]
    assert not isinstance(backward["whatif"], str)  # no fix to replay
    assert backward["fix"].startswith("none in the module: PyTorch's backward formula (MaskedFillBackward0)")
    assert backward["detail"].endswith("; no fix replayed: a copy PyTorch's own backward formula makes: no change to "
                                       "the model's code removes it")


def test_every_finding_without_a_saving_says_why(found):
    """A NULL saving is never left unexplained: a fix that could not be replayed says why, and a
    finding that names no fix says so, in its rule's words (occupancy is not time, a one-time cost)."""
    unsaved = found[found["saving_us_per_step"].isna()]
    assert set(unsaved["rule"]) >= {"low_occupancy", "cold_start", "hidden_copy"}
    assert unsaved["detail"].str.contains("; no fix replayed: |replayed saving unknown: ").all()
    occupancy = unsaved[unsaved["rule"] == "low_occupancy"]["detail"]
    assert occupancy.str.endswith("; no fix replayed: occupancy is not time: a low figure is by design in many fast "
                                  "kernels (Tensor Core GEMMs among them); time the kernel against another configuration").all()
    assert not found[found["saving_us_per_step"].notna()]["detail"].str.contains("no fix replayed").any()
    # each rule whose rows name no fix says why in its own words (an `unsaved:` line), once a row
    assert not unsaved["detail"].str.contains(UNSAVED_UNSAID).any()
    assert (unsaved["detail"].str.count("no fix replayed") <= 1).all()


def test_hidden_copy_in_a_training_loop_predicts_the_in_place_fix_and_is_gone_after_it(loops_db):
    """On the H200 loop (no per-step sync): the finding's saving is the forward copy's, which the
    in-place fix saved (128.8 µs a step measured without the profiler); the fixed trace keeps only
    the backward formula's copy, as info, with no advice to use the in-place form."""
    import tracekit

    found = tracekit.findings(db=loops_db, rule="hidden_copy")
    naive = found[(found["trace"] == "train_naive") & found["saving_us_per_step"].notna()]
    assert len(naive) == 1 and naive.iloc[0]["saving_us_per_step"] == pytest.approx(128.8, rel=0.25)
    fixed = found[found["trace"] == "train_inplace"]
    assert list(fixed["severity"]) == ["info"] and "masked_fill_" not in fixed.iloc[0]["fix"]


def test_simt_gemm_says_the_math_backend_upcasts(found):
    row = _one(found, "samples_sdpa_math", "simt_gemm")  # bf16 inputs, fp32 GEMMs inside math SDPA
    assert "fused backend" in row["fix"] and "_scaled_dot_product_attention_math" in row["detail"]
    assert row["saving_us_per_step"] > 0


def test_simt_gemm_on_fp32_attention_says_to_run_it_in_bf16_for_flash(found):
    """fp32 inputs to SDPA's math backend: flash and cuDNN take none, so "a fused backend" would be
    the memory-efficient kernel at the SIMT GEMMs' pace; the fix the replay runs (fuse-attention, at
    the roofline) is flash's, in bf16."""
    row = _one(found, "fp32_sdpa_math", "simt_gemm")
    assert row["fix"].startswith("run attention in bf16") and "flash or cuDNN" in row["fix"]
    assert row["whatif"] == "fuse-attention" and row["saving_us_per_step"] > 0


def test_simt_gemm_finds_fp32_training_and_not_bf16_training(found):
    """The fp32 loop launches 2.8 ms of kernels in a 17.9 ms step: replayed, Tensor Cores save its
    GPU time but not its step, which the CPU bounds, so the finding is low and says why."""
    row = _one(found, "train_fp32_train_sdpa_default", "simt_gemm")
    assert "allow_tf32" in row["fix"] and row["estimate_us_per_step"] > 1000
    assert row["severity"] == "low" and row["saving_us_per_step"] == 0 and "the step's time is held by other work" in row["detail"]
    assert _none(found, "train_bf16_train_sdpa_default", "simt_gemm")


@pytest.mark.parametrize("trace", ["samples_sdpa_flash", "samples_sdpa_cudnn", "samples_naive_inplace"])
def test_the_article_fixes_have_no_copy_or_simt_finding(found, trace):
    assert _none(found, trace, "hidden_copy", "simt_gemm")


def test_findings_are_ranked_by_saving_then_severity(found):
    """Then each trace's fixes together, at the end."""
    assert list(found.columns) == list(FINDING_COLUMNS)
    together = (found["rule"] == "all_fixes").tolist()
    assert any(together) and together == sorted(together)
    savings = found.loc[found["rule"] != "all_fixes", "saving_us_per_step"].tolist()
    known = [s for s in savings if s == s and s is not None]
    assert known == sorted(known, reverse=True)
    assert set(found["severity"]) <= set(SEVERITIES)


@pytest.mark.parametrize("rule", sorted(rules()))
def test_every_rule_says_what_why_fix_and_saving(rule):
    r = rules()[rule]
    assert r.detects and r.why and r.fix and r.saving
    assert "trace" in r.params, "every rule takes -p trace"


def test_findings_write_times_in_microseconds_as_the_report_does(found):
    """A person reads titles and details beside the report and whatif: a time says µs, never "us"."""
    texts = [t for t in found["title"].tolist() + found["detail"].tolist() if isinstance(t, str)]
    assert len({r for r, t, d in zip(found["rule"], found["title"], found["detail"]) if "µs" in f"{t} {d}"}) >= 6
    assert [t for t in texts if re.search(r"\bus\b", t)] == []


def test_the_findings_view_holds_what_the_engine_finds(h200_db, found):
    con = connect_for_queries(h200_db)
    try:
        rows = con.execute("SELECT trace, rule, title FROM findings").fetchall()
    finally:
        con.close()
    rules_rows = found[found["rule"] != "all_fixes"]
    assert sorted(rows) == sorted(rules_rows[["trace", "rule", "title"]].itertuples(index=False, name=None))
    assert "UNION ALL" in findings_view_sql()


def test_cli_lists_findings_for_one_trace_and_rule(h200_db):
    result = invoke_cli("findings", "--db", h200_db, "-p", "trace", "fp32_naive", "--rule", "simt_gemm", "-f", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["trace"], r["rule"]) for r in rows] == [("fp32_naive", "simt_gemm")]
    assert "evidence" not in rows[0]
    with_evidence = json.loads(invoke_cli("findings", "--db", h200_db, "-p", "trace", "fp32_naive",
                                          "--rule", "simt_gemm", "-f", "json", "--evidence").output)
    assert len(with_evidence[0]["evidence"]) == 10  # the 10 SIMT GEMMs of its 5 steady steps


def test_cli_thresholds_are_parameters(h200_db):
    result = invoke_cli("findings", "--db", h200_db, "--rule", "hidden_copy", "-p", "min_bytes", str(16 << 20), "-f", "csv")
    assert result.exit_code == 0, result.output
    assert "train_fp32_train_naive" not in result.output and "samples_naive" in result.output


@pytest.mark.parametrize("args, message", [
    (["--rule", "nope"], "no finding rule 'nope'"),
    (["-p", "colour", "red"], "no finding rule takes colour"),
])
def test_cli_mistakes_are_one_line_errors(h200_db, args, message):
    result = invoke_cli("findings", "--db", h200_db, *args)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [result.output.strip()] and message in result.output


def test_cli_lists_the_rules():
    result = invoke_cli("findings", "--list", "-f", "csv")
    assert result.exit_code == 0 and "hidden_copy" in result.output and "simt_gemm" in result.output


def test_python_api_returns_the_same_rows(h200_db, found):
    import tracekit
    frame = tracekit.findings(db=h200_db, trace="samples_naive")
    assert set(frame["trace"]) == {"samples_naive"}
    assert set(frame["rule"]) == set(found[found["trace"] == "samples_naive"]["rule"])


def _kernel(db, trace, name_like):
    con = connect_for_queries(db)
    try:
        return con.execute("SELECT theoretical_occupancy_pct, occupancy_limiter, est_occupancy_pct FROM kernels "
                           "WHERE trace = ? AND name LIKE ? LIMIT 1", [trace, name_like]).fetchone()
    finally:
        con.close()


def test_theoretical_occupancy_of_flash_is_the_article_13pct_limited_by_registers(h200_db):
    # Head dim 64: Kineto says 13%; 255 registers per thread let 2 blocks of 4 warps in: 8 of 64 warps.
    assert _kernel(h200_db, "samples_sdpa_flash", "%flash_fwd_kernel%") == (12.5, "registers", 13.0)
    # Head dim 128: 64 KiB of shared memory per block, where Kineto writes 0 (stored NULL); ours stands.
    assert _kernel(h200_db, "hd128_sdpa_flash", "%flash_fwd_kernel%") == (12.5, "registers", None)


def test_theoretical_occupancy_agrees_with_kineto_where_the_grid_fills_the_gpu(h200_db):
    # The memory-efficient kernel: 128 registers, 4 warps, 18.5 KiB: Kineto's 25% is ours.
    assert _kernel(h200_db, "samples_sdpa_efficient", "fmha_cutlassF%") == (25.0, "registers", 25.0)


def test_device_limits_come_from_the_trace_and_the_architecture_table(h200_db):
    con = connect_for_queries(h200_db)
    try:
        row = con.execute("SELECT arch, max_warps_per_sm, max_blocks_per_sm, registers_per_sm, shared_memory_per_sm, "
                          "reserved_shared_memory_per_block, source FROM device_limits "
                          "WHERE trace = 'samples_sdpa_flash'").fetchone()
    finally:
        con.close()
    assert row == ("sm_90", 64, 32, 65536, 233472, 1024, "deviceProperties")


def test_low_occupancy_names_the_limiter_and_kineto_gap(found):
    row = _one(found, "hd128_sdpa_flash", "low_occupancy")
    assert "12.5% theoretical occupancy, limited by registers" in row["title"]
    assert "none (it writes 0" in row["detail"] and row["severity"] == "info"
    assert row["saving_us_per_step"] is None or row["saving_us_per_step"] != row["saving_us_per_step"]
    simt = found[(found["trace"] == "fp32_naive") & (found["rule"] == "low_occupancy")]
    assert not simt.empty and set(simt["severity"]) == {"low"}  # CUDA-core GEMMs: not by design


def test_low_occupancy_of_a_collectives_kernel_asks_for_no_change_to_nccl(tmp_path):
    # the public RTX 4090 rank's all-reduce: NCCL's block per channel runs at 6.2% by design
    con = connect(tmp_path / "nccl.duckdb")
    load_file(con, TEST_DATA / "foreign" / "rtx4090_tp2_rank0_nccl_allreduce.json.gz")
    con.close()
    con = connect_for_queries(tmp_path / "nccl.duckdb")
    try:
        row = run_findings(con, rule="low_occupancy").iloc[0]
    finally:
        con.close()
    assert row["title"].startswith("ncclDevKernel_AllReduce_Sum_f32_RING_LL(")
    assert row["title"].endswith("runs at 6.2% theoretical occupancy, limited by shared memory")
    assert row["severity"] == "info"
    assert "a collective's kernel, a block per channel by design: its time is the transfer and the wait for the " \
           "other ranks, not its occupancy" in row["detail"]
    assert row["fix"].startswith("nothing in the kernel to change: look at what the collective moves and waits for")
    assert "fewer pipeline stages" not in row["fix"]


def test_launch_bound_finds_the_training_steps(found):
    row = _one(found, "train_fp32_train_sdpa_default", "launch_bound")
    assert row["title"] == "The GPU is busy 16% of each step's CPU span: 2.8 ms of 17.9 ms"
    assert row["detail"].startswith("196 kernels per step over 7 steady step(s)")
    assert "CUDA graph" in row["fix"] and row["severity"] == "high"
    # The rule's bound: the step's CPU span less its GPU busy time; replayed from a CUDA graph, the
    # traced step saves less: the step's first launches and its syncs stay. Without the profiler's
    # cost (its ops recorded at about 8 µs each) the loop launches faster, and the graph saves less
    # again: 3.6 ms of the 10.4 the traced loop would.
    assert row["estimate_us_per_step"] == pytest.approx(17882.0 - 2789.9, rel=1e-3)
    assert row["whatif"] == "cuda-graph:1000" and 0.5 * row["estimate_us_per_step"] \
        < row["traced_saving_us_per_step"] < row["estimate_us_per_step"]
    assert 0.2 * row["traced_saving_us_per_step"] < row["saving_us_per_step"] < 0.5 * row["traced_saving_us_per_step"]
    assert [e["name"] for e in row["evidence"]] == [f"ProfilerStep#{n}" for n in range(1, 8)]
    # One big attention call per step is not launch-bound, however short the step.
    samples = sorted(t for t in found.attrs["loaded"] if t.startswith("samples_"))
    assert len(samples) == 8 and all(_none(found, t, "launch_bound") for t in samples)


def test_cold_start_names_cudnn_plan_and_torch_compile(found):
    cudnn = _one(found, "samples_sdpa_cudnn", "cold_start")
    assert cudnn["title"].endswith(": cuDNN") and cudnn["severity"] == "high"
    assert "aten::_scaled_dot_product_cudnn_attention alone spends" in cudnn["detail"]
    flex = _one(found, "samples_flex", "cold_start")
    assert flex["title"].endswith(": torch.compile") and "dynamo alone spends" in flex["detail"]
    assert "dynamic=False" in flex["fix"]
    # sdpa_default dispatched to cuDNN after sdpa_cudnn cached the plan: its first call is cheap.
    assert _none(found, "samples_sdpa_default", "cold_start")


def test_gemm_kernels_carry_their_flops_and_share_of_the_peak(h200_db):
    con = connect_for_queries(h200_db)
    try:
        rows = con.execute("SELECT flops, achieved_tflops, dur_us, peak_tflops, pct_of_peak FROM kernels "
                           "WHERE trace = 'samples_naive' AND kernel_class = 'gemm'").fetchall()
        others = con.execute("SELECT DISTINCT work_family, peak_tflops FROM kernels WHERE trace = 'samples_naive' "
                             "AND kernel_class <> 'gemm' AND flops IS NOT NULL ORDER BY 1").fetchall()
    finally:
        con.close()
    # Q·Kᵀ and P·V of B=4, H=16, S=2048, D=64: 2·64·2048·2048·64 FLOPs each, bf16 on the H200's 989.5.
    assert len(rows) == 12 and {r[0] for r in rows} == {2.0 * 64 * 2048 * 2048 * 64}
    for flops, tflops, dur_us, peak, pct in rows:
        assert tflops == pytest.approx(flops / dur_us / 1e6) and peak == 989.5
        assert pct == pytest.approx(100 * tflops / peak) and 5 < pct < 60
    # The softmax, mask and scaling kernels carry their own work, against the CUDA cores' 67 TFLOP/s.
    assert others == [("elementwise", 67.0), ("softmax", 67.0)]


def _attention_kernels(db, trace):
    con = connect_for_queries(db)
    try:
        return con.execute("SELECT cpu_op, flops, achieved_tflops, dur_us, peak_tflops, pct_of_peak FROM kernels "
                           "WHERE trace = ? AND cpu_op LIKE 'aten::\\_%attention%' ESCAPE '\\' ORDER BY ts_us",
                           [trace]).fetchall()
    finally:
        con.close()


def _causal_attention_flops(b, h, s, d, passes):
    """Q·Kᵀ and P·V (forward) or the five matmuls of the backward over the s(s+1)/2 pairs a causal mask keeps."""
    return 2.0 * b * h * s * (s + 1) / 2 * (d + d if passes == "forward" else 3 * d + 2 * d)


@pytest.mark.parametrize("trace, d", [("samples_sdpa_flash", 64), ("samples_sdpa_efficient", 64),
                                      ("samples_sdpa_cudnn", 64), ("hd128_sdpa_flash", 128)])
def test_fused_attention_kernels_carry_the_flops_the_causal_mask_keeps(h200_db, trace, d):
    rows = _attention_kernels(h200_db, trace)
    assert len(rows) == 6 and {r[1] for r in rows} == {_causal_attention_flops(4, 16, 2048, d, "forward")}
    for _, flops, tflops, dur_us, peak, pct in rows:
        assert tflops == pytest.approx(flops / dur_us / 1e6) and peak == 989.5 and 5 < pct < 60


def test_training_attention_splits_a_backward_call_over_its_kernels_by_their_time(h200_db):
    # train_bf16: B=8, H=4, S=256, D=64; cuDNN's backward launches dO·O and a dQ conversion beside
    # its main kernel: the call's FLOPs are split over the three by their time.
    con = connect_for_queries(h200_db)
    try:
        forward = con.execute("SELECT DISTINCT flops FROM kernels WHERE trace = 'train_bf16_train_sdpa_default' "
                              "AND cpu_op = 'aten::_cudnn_attention_forward'").fetchall()
        calls = con.execute("SELECT count(*), sum(flops), list(dur_us), list(flops) FROM kernels "
                            "WHERE trace = 'train_bf16_train_sdpa_default' AND cpu_op = 'aten::_cudnn_attention_backward' "
                            "GROUP BY cpu_op_id").fetchall()
    finally:
        con.close()
    assert forward == [(_causal_attention_flops(8, 4, 256, 64, "forward"),)]
    assert len(calls) == 32
    for kernels, total, durations, shares in calls:
        assert kernels == 3 and total == pytest.approx(_causal_attention_flops(8, 4, 256, 64, "backward"))
        assert [s / total for s in shares] == pytest.approx([d / sum(durations) for d in durations])


def test_attention_flops_are_null_when_the_trace_does_not_say_whether_it_is_causal(tmp_path):
    # A trace recorded without Concrete Inputs (torch < 2.1 has none): is_causal is unknown, so the
    # FLOPs are too, rather than a guess that could be off by 2x.
    with gzip.open(SAMPLE_TRACES / "sdpa_flash.json.gz", "rt") as f:
        trace = json.load(f)
    for event in trace["traceEvents"]:
        event.get("args", {}).pop("Concrete Inputs", None)
    stripped = tmp_path / "no_concrete_inputs.json"
    stripped.write_text(json.dumps(trace))
    db = tmp_path / "t.duckdb"
    con = connect(db)
    assert load_file(con, stripped).status == "loaded"
    con.close()
    rows = _attention_kernels(db, "no_concrete_inputs")
    assert len(rows) == 6 and {r[1] for r in rows} == {None}


def test_findings_for_a_trace_not_loaded_is_the_error_query_gives(h200_db):
    # An empty table would read as "no problems": a typo must say what is loaded instead.
    query = invoke_cli("query", "top_kernels", "--db", h200_db, "-p", "trace", "samples_naiv")
    findings = invoke_cli("findings", "--db", h200_db, "-p", "trace", "samples_naiv")
    assert findings.exit_code == query.exit_code == 1
    assert findings.output == query.output
    assert findings.output.startswith("Error: no trace named 'samples_naiv' (loaded: ")
    assert len(findings.output.splitlines()) == 1
