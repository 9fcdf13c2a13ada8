"""`tracekit export`: round trips, what Perfetto's JSON importer relies on, and the findings track."""

import gzip
import json
import re
import shutil
from collections import Counter

import pytest
from click.testing import CliRunner

from conftest import SAMPLE_TRACES
from tracekit.cli import cli
from tracekit.database import connect
from tracekit.trace_export import export
from tracekit.loader import load_file
from tracekit.track_layout import OVERLAP_TRACKS_KEY

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


def _findings(variant, exported):
    return [e for e in read_events(exported[1][variant]["findings"][0]) if e.get("cat") == "tracekit_finding"]


def test_findings_mark_every_naive_memcpy_with_its_cause(exported):
    found = _findings("naive", exported)
    assert len(found) == 6
    assert all(f["name"] == "Memcpy DtoD 512 MiB ← aten::masked_fill → aten::clone → aten::copy_" for f in found)
    assert found[0]["args"]["finding"].startswith("6 Memcpy DtoD from aten::masked_fill")
    assert _findings("naive_inplace", exported) == []


def test_findings_mark_every_simt_gemm_of_the_math_backend(exported):
    found = _findings("sdpa_math", exported)
    assert len(found) == 12
    assert all("_ffma_" in f["args"]["kernel"] for f in found)
    assert "12 GEMMs ran as FP32 SIMT" in found[0]["args"]["finding"]


def test_findings_mark_cudnns_plan_build(exported):
    (plan,) = _findings("sdpa_cudnn", exported)
    assert plan["name"].startswith("cuDNN plan build: first call 869.3 ms")
    assert plan["dur"] == pytest.approx(869337.529, abs=0.001)
    assert plan["args"]["plan_ms"] > 100


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


def test_open_rebuilds_a_trace_whose_file_is_gone(tmp_path, monkeypatch):
    from tracekit.trace_lookup import file_for_trace

    monkeypatch.setenv("TRACEKIT_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "sdpa_flash.json.gz"
    shutil.copy(SAMPLE_TRACES / "sdpa_flash.json.gz", copy)
    db = tmp_path / "t.duckdb"
    con = connect(db)
    load_file(con, copy)
    con.close()
    assert file_for_trace("sdpa_flash", db) == copy
    copy.unlink()
    rebuilt = file_for_trace("sdpa_flash", db)
    assert rebuilt.exists() and rebuilt != copy
    assert len(read_events(rebuilt)) == len(read_events(SAMPLE_TRACES / "sdpa_flash.json.gz"))
