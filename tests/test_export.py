"""`tracekit export`: round trips, what Perfetto's JSON importer relies on, and the findings track."""

import gzip
import json
import re
from collections import Counter

import pytest
from click.testing import CliRunner

from conftest import CPU_TRACE, SAMPLE_TRACES, TEST_DATA
from tracekit.cli import cli
from tracekit.store.database import connect
from tracekit.outputs.trace_export import export
from tracekit.analysis.findings_engine import run_findings
from tracekit.outputs.findings_track import FINDINGS_PID
from tracekit.ingest.loader import load_file
from tracekit.ingest.track_layout import OVERLAP_TRACKS_KEY

VARIANTS = sorted(p.name[: -len(".json.gz")] for p in SAMPLE_TRACES.glob("*.json.gz"))
ROW_SQL = ("SELECT e.cat, e.name, e.ph, e.ts_ns, e.dur_ns, e.pid, e.tid, e.id, e.bp, e.s, e.args "
           "FROM event_rows e JOIN trace_files f USING (trace_id) WHERE f.trace = ?")


def event_rows(con, trace):
    """The stored rows of a trace, args parsed so that key order and spacing don't matter."""
    return Counter((c, n, ph, ts, dur, pid, tid, i, bp, s, json.dumps(json.loads(a), sort_keys=True) if a else None)
                   for c, n, ph, ts, dur, pid, tid, i, bp, s, a in con.execute(ROW_SQL, [trace]).fetchall())


def read_events(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


@pytest.fixture(scope="module")
def exported(sample_db, tmp_path_factory):
    """Every sample trace exported whole, and with findings, then loaded into a second database."""
    folder = tmp_path_factory.mktemp("exports")
    con = connect(sample_db, read_only=True)
    results = {}
    (folder / "plain").mkdir()
    for variant in VARIANTS:
        plain = export(con, folder / "plain" / f"{variant}.json.gz", trace=variant)
        with_findings = export(con, folder / f"{variant}.findings.json", trace=variant, findings=True)
        results[variant] = {"plain": plain, "findings": with_findings}
    con.close()
    reloaded = connect(folder / "reloaded.duckdb")
    for variant in VARIANTS:
        assert load_file(reloaded, results[variant]["plain"][0]).status == "loaded"
    reloaded.close()
    return folder, results


# What a reload must give back of each trace: every op's place in its thread's nesting, the op
# that launched each kernel, copy and fill, and the chain of ops that caused it.
NESTING = {
    "cpu_ops": "SELECT name, ts_us, dur_us, pid, tid, depth, parent, step, op_path FROM cpu_ops WHERE trace = ?",
    "kernels": "SELECT k.name, k.ts_us, k.cpu_op, k.step, o.op_path FROM kernels k"
               " LEFT JOIN cpu_ops o ON o.trace = k.trace AND o.op_id = k.cpu_op_id WHERE k.trace = ?",
    "memcpy": "SELECT m.name, m.ts_us, m.kind, o.name, o.op_path FROM memcpy m"
              " LEFT JOIN cpu_ops o ON o.trace = m.trace AND o.op_id = m.cpu_op_id WHERE m.trace = ?",
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_round_trip_gives_back_the_same_rows_and_nesting(exported, sample_db, variant):
    folder, _ = exported
    original = connect(sample_db, read_only=True)
    reloaded = connect(folder / "reloaded.duckdb", read_only=True)
    try:
        # Slices moved to extra tracks (for Perfetto) are back on their threads: every row as it was.
        assert event_rows(reloaded, variant) == event_rows(original, variant)
        for view, sql in NESTING.items():
            before = Counter(original.execute(sql, [variant]).fetchall())
            assert Counter(reloaded.execute(sql, [variant]).fetchall()) == before, view
            assert sum(before.values()) > 0 or view == "memcpy", view
        for view in ("kernels", "memcpy", "cpu_ops", "runtime", "steps", "gpu_busy"):
            sql = f"SELECT count(*) FROM {view} WHERE trace = ?"
            assert reloaded.execute(sql, [variant]).fetchone() == original.execute(sql, [variant]).fetchone(), view
        # The header too, but for traceName (the export's own file is another): no key added or lost.
        header = "SELECT json_remove(header, '$.traceName'), metadata FROM trace_files WHERE trace = ?"
        assert reloaded.execute(header, [variant]).fetchone() == original.execute(header, [variant]).fetchone()
    finally:
        original.close()
        reloaded.close()


def test_flex_has_real_partial_overlaps_that_get_moved(exported):
    _, results = exported
    assert results["flex"]["plain"][2] == 23
    assert all(results[v]["plain"][2] == 0 for v in VARIANTS if v != "flex")
    # The file names the tracks it added, so a reload puts their slices back.
    with gzip.open(results["flex"]["plain"][0], "rt") as f:
        lanes = json.load(f)[OVERLAP_TRACKS_KEY]
    assert lanes and all(lane["track"].startswith(f"{lane['tid']} overlap ") for lane in lanes)


def test_an_export_writes_no_header_key_a_reload_reads_as_events(tmp_path):
    # A database from before two traceEvents keys were refused may hold the second in its header.
    db = tmp_path / "t.duckdb"
    con = connect(db)
    load_file(con, SAMPLE_TRACES / "sdpa_flash.json.gz")
    con.execute("UPDATE trace_files SET header = json_merge_patch(header, $extra)",
                {"extra": json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 1, "pid": 1, "tid": 1}],
                                      OVERLAP_TRACKS_KEY: [{"pid": "1", "track": "1", "tid": "2"}]})})
    export(con, tmp_path / "out.json", trace="sdpa_flash")
    con.close()
    text = (tmp_path / "out.json").read_text()
    assert text.count('"traceEvents"') == 1 and OVERLAP_TRACKS_KEY not in text
    assert len(json.loads(text)["traceEvents"]) == 242


def _no_partial_overlaps(events):
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + max(e["dur"], 0)))
    for slices in tracks.values():
        slices.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end in slices:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                return False
            open_ends.append(end)
    return True


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kind", ["plain", "findings"])
def test_what_perfettos_json_importer_relies_on(exported, variant, kind):
    path = exported[1][variant][kind][0]
    events = read_events(path)
    for e in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(e), e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float))
    assert _no_partial_overlaps(events)
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    kernel_tracks = {(e["pid"], e["tid"]) for e in events if e.get("cat") == "kernel"}
    assert kernel_tracks <= named_threads
    # Flow arrows (launch → kernel) come through as written, unpaired ones included.
    def flows(trace_events):
        return Counter((e["id"], e["ph"], e["ts"], e.get("bp")) for e in trace_events if e.get("cat") == "ac2g")
    original = read_events(SAMPLE_TRACES / f"{variant}.json.gz")
    assert flows(events) == flows(original)
    paired = {i for i, ph, _, _ in flows(events) if ph == "f"} & {i for i, ph, _, _ in flows(events) if ph == "s"}
    assert len(paired) >= len([e for e in events if e.get("cat") == "kernel"]) > 0


def test_timestamps_keep_their_nanosecond_fraction(exported):
    text = gzip.open(exported[1]["naive"]["plain"][0], "rt").read()
    assert '"name": "ProfilerStep#0", "pid": 480, "tid": 480, "ts": 5405973117101.569, "dur": 143949.790' in text


def _findings_track(variant, exported):
    """The exported findings process of a variant: {track name: [slices]}, tracks in their tid order."""
    events = [e for e in read_events(exported[1][variant]["findings"][0]) if e["pid"] == FINDINGS_PID]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    tracks = {names[tid]: [] for tid in sorted(names)}
    for e in events:
        if e["ph"] == "X":
            assert e["cat"] == "tracekit_finding"
            tracks[names[e["tid"]]].append(e)
    return tracks


@pytest.fixture(scope="module")
def engine(sample_db):
    con = connect(sample_db, read_only=True)
    try:
        return run_findings(con)
    finally:
        con.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_findings_track_has_a_track_per_rule_in_the_engines_order(exported, engine, variant):
    tracks = _findings_track(variant, exported)
    rows = engine[(engine["trace"] == variant) & (engine["rule"] != "all_fixes")]  # no event to draw
    assert list(tracks) == list(dict.fromkeys(rows["rule"]))  # tid 1 is the rule of the biggest saving
    for rule, slices in tracks.items():
        expected = rows[rows["rule"] == rule]
        assert len(slices) == sum(len(evidence) for evidence in expected["evidence"])
        assert {s["args"]["title"] for s in slices} == set(expected["title"])
        assert all(s["args"]["rule"] == rule and s["args"]["fix"] and s["args"]["detail"] for s in slices)


def test_findings_track_marks_each_steady_naive_memcpy_with_the_finding(exported, engine):
    copies = _findings_track("naive", exported)["hidden_copy"]
    (row,) = engine[(engine["trace"] == "naive") & (engine["rule"] == "hidden_copy")].itertuples()
    assert len(copies) == 5  # one per copy of the 5 steady steps; step 0 is cold
    for copy in copies:
        assert copy["name"] == "Memcpy DtoD (Device -> Device)"
        assert copy["args"]["title"] == "1 Memcpy DtoD of 512 MiB per step from aten::masked_fill"
        assert copy["args"]["severity"] == "high" and copy["args"]["source"] == "memcpy"
        assert copy["args"]["fix"] == "use masked_fill_ (in place) instead of masked_fill"
        assert copy["args"]["saving_us_per_step"] == pytest.approx(row.saving_us_per_step)
    # Each slice lies exactly over one of the trace's own copies, all but the first step's.
    memcpys = sorted((e["ts"], e["dur"]) for e in read_events(exported[1]["naive"]["findings"][0])
                     if e.get("cat") == "gpu_memcpy")
    assert sorted((c["ts"], c["dur"]) for c in copies) == memcpys[1:]
    assert "hidden_copy" not in _findings_track("naive_inplace", exported)


def test_findings_track_marks_every_simt_gemm_of_the_math_backend(exported):
    gemms = _findings_track("sdpa_math", exported)["simt_gemm"]
    assert len(gemms) == 10  # 2 per steady step
    assert all("_ffma_" in g["name"] and g["args"]["severity"] == "high" for g in gemms)
    assert all(g["args"]["saving_us_per_step"] > 0 and "fused backend" in g["args"]["fix"] for g in gemms)
    kernels = {(e["ts"], e["dur"], e["name"]) for e in read_events(exported[1]["sdpa_math"]["findings"][0])
               if e.get("cat") == "kernel"}
    assert {(g["ts"], g["dur"], g["name"]) for g in gemms} <= kernels
    assert "simt_gemm" not in _findings_track("sdpa_flash", exported)


def test_findings_track_puts_cudnns_cold_start_on_its_first_call(exported):
    slices = _findings_track("sdpa_cudnn", exported)["cold_start"]
    assert all(s["args"]["title"].endswith(": cuDNN") and s["args"]["saving_us_per_step"] is None for s in slices)
    calls = sorted((e["ts"], e["dur"]) for e in read_events(SAMPLE_TRACES / "sdpa_cudnn.json.gz")
                   if e["name"] == "aten::_scaled_dot_product_cudnn_attention")
    (first_call,) = [s for s in slices if s["name"] == "aten::_scaled_dot_product_cudnn_attention"]
    assert (first_call["ts"], first_call["dur"]) == pytest.approx(calls[0], abs=0.001)
    assert first_call["dur"] == pytest.approx(869337.529, abs=0.001)


def test_a_trace_without_findings_gets_no_findings_track(tmp_path):
    db = tmp_path / "cpu.duckdb"
    con = connect(db)
    assert load_file(con, CPU_TRACE).status == "loaded"
    assert run_findings(con).empty  # the premise: no rule finds anything in this CPU-only capture
    plain = export(con, tmp_path / "plain.json", trace="naive_cpu")
    with_findings = export(con, tmp_path / "findings.json", trace="naive_cpu", findings=True)
    con.close()
    assert with_findings[1] == plain[1]
    assert not [e for e in read_events(with_findings[0]) if e["pid"] == FINDINGS_PID]


def test_traces_exported_together_share_one_track_per_rule(tmp_path):
    # Two ranks of one job (their own pids): rank 0 has SIMT GEMMs and a low-occupancy NCCL kernel,
    # rank 1 only the latter; its track is the same track for both.
    db = tmp_path / "ranks.duckdb"
    con = connect(db)
    for rank in (0, 1):
        trace_file = TEST_DATA / "foreign" / f"rtx4090_tp2_rank{rank}_nccl_allreduce.json.gz"
        assert load_file(con, trace_file).status == "loaded"
    found = run_findings(con)
    path, _, _ = export(con, tmp_path / "ranks.json", sql="SELECT * FROM events WHERE cat = 'cpu_op'", findings=True)
    con.close()
    events = [e for e in read_events(path) if e["pid"] == FINDINGS_PID]
    # One track per rule, in the engine's ranking (slices that overlap on one go to a lane beside it).
    names = [(e["tid"], e["args"]["name"]) for e in events
             if e["name"] == "thread_name" and isinstance(e["tid"], int)]
    rules = list(dict.fromkeys(found["rule"]))
    assert names == list(enumerate(rules, start=1))
    assert {"simt_gemm", "low_occupancy"} <= set(rules)
    track_of = dict((rule, track) for track, rule in names)
    on_track = {(e["args"]["rule"], e["args"]["trace"]) for e in events if e["ph"] == "X"}
    assert on_track == set(zip(found["rule"], found["trace"]))
    # The NCCL kernel's low occupancy on both ranks is one track; only rank 0 has SIMT GEMMs.
    assert {("low_occupancy", f"rtx4090_tp2_rank{r}_nccl_allreduce") for r in (0, 1)} <= on_track
    assert ("simt_gemm", "rtx4090_tp2_rank1_nccl_allreduce") not in on_track
    assert {e["tid"] for e in events if e["ph"] == "X" and e["args"]["rule"] == "low_occupancy"} <= {
        track_of["low_occupancy"], f"{track_of['low_occupancy']} overlap 1"}


def test_export_of_an_sql_selection_keeps_track_names(sample_db, tmp_path):
    out = tmp_path / "big_kernels.json"
    sql = "SELECT * FROM events WHERE trace = 'sdpa_math' AND cat = 'kernel' AND dur_us > 50"
    result = CliRunner().invoke(cli, ["export", "--db", str(sample_db), "--sql", sql, "-o", str(out)])
    assert result.exit_code == 0, result.output
    events = read_events(out)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 48 and all(e["dur"] > 50 for e in kernels)
    names = {(e["name"], e["args"].get("name")) for e in events if e["ph"] == "M"}
    assert ("thread_name", "stream 7 ") in names and ("process_name", "python3") in names
    reloaded = tmp_path / "r.duckdb"
    assert CliRunner().invoke(cli, ["load", str(out), "--db", str(reloaded)]).exit_code == 0
    con = connect(reloaded, read_only=True)
    assert con.execute("SELECT count(*), min(dur_us) > 50 FROM kernels").fetchone() == (48, True)
    con.close()


@pytest.mark.parametrize("args, message", [
    (["--sql", "SELECT 1 AS x"], "the SQL must select events"),
    (["--sql", "SELECT * FROM nowhere"], "nowhere"),
    (["--trace", "no_such_trace"], "no trace named 'no_such_trace'"),
])
def test_export_errors_are_one_line(sample_db, tmp_path, args, message):
    result = CliRunner().invoke(cli, ["export", "--db", str(sample_db), *args, "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 1
    assert message in result.output and len(result.output.strip().splitlines()) == 1
