"""`tracekit load`: file forms, names, content hashes, folders and a CPU-only trace."""

import gzip
import json
import shutil

import pytest

from conftest import CPU_TRACE, SAMPLE_TRACES, TEST_DATA, db_rows, invoke_cli, read_trace, read_until_closed


invoke = invoke_cli


def write_json(path, value, *, compress=False):
    text = json.dumps(value, indent=1)
    if compress:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def test_loading_a_folder_loads_every_trace_and_passes_over_the_manifest(fresh_db):
    result = invoke("load", SAMPLE_TRACES, "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert result.output.count("loaded ") == 8
    assert "manifest" not in result.output
    assert db_rows(fresh_db, "SELECT count(*) FROM traces") == [(8,)]


def test_a_folders_json_files_that_are_no_traces_are_passed_over_but_one_named_is_an_error(fresh_db, tmp_path):
    # a capture's folder holds its timings beside its traces (tests/data/h200/prefetch: truth.json)
    folder = tmp_path / "capture"
    folder.mkdir()
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", folder / "naive.json.gz")
    (folder / "timings.json").write_text('{"naive": [1180.5, 1179.2]}')
    result = invoke("load", folder, "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"loaded naive: 517 events, 30 kernels from {folder / 'naive.json.gz'} in "
        + result.output.split(" in ")[1].splitlines()[0],
        f"skipped {folder / 'timings.json'}: passed over: a JSON object without a traceEvents array: "
        "not a Chrome/Kineto trace",
        f"into {fresh_db}: 1 loaded, 1 skipped; it holds 1 trace"]
    named = invoke("load", folder / "timings.json", "--db", fresh_db)
    assert named.exit_code == 1
    assert named.output.strip() == (f"Error: {folder / 'timings.json'}: a JSON object without a traceEvents "
                                    "array: not a Chrome/Kineto trace")
    # the folder and the file named on its own as well: the user called it a trace
    both = invoke("load", folder, folder / "timings.json", "--db", fresh_db)
    assert both.exit_code == 1 and "Error: 1 of 2 files failed to load (timings.json)" in both.output


def test_the_same_content_twice_is_skipped_and_replace_reloads_it(fresh_db):
    naive = SAMPLE_TRACES / "naive.json.gz"
    assert invoke("load", naive, "--db", fresh_db).exit_code == 0
    again = invoke("load", naive, "--db", fresh_db)
    assert again.exit_code == 0 and "skipped" in again.output and "same content as trace 'naive'" in again.output
    replaced = invoke("load", naive, "--db", fresh_db, "--replace")
    assert replaced.exit_code == 0 and "loaded naive:" in replaced.output
    assert db_rows(fresh_db, "SELECT trace, events FROM traces") == [("naive", 517)]
    assert db_rows(fresh_db, "SELECT count(*) FROM kernels") == [(30,)]


def test_plain_json_has_the_same_content_hash_as_its_gzip(fresh_db, tmp_path):
    plain = tmp_path / "naive.json"
    with gzip.open(SAMPLE_TRACES / "naive.json.gz", "rb") as src:
        plain.write_bytes(src.read())
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", fresh_db).exit_code == 0
    second = invoke("load", plain, "--db", fresh_db)
    assert "skipped" in second.output


def test_colliding_names_are_made_unique(fresh_db, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(CPU_TRACE, other / "naive.json.gz")
    result = invoke("load", SAMPLE_TRACES / "naive.json.gz", other / "naive.json.gz", "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert db_rows(fresh_db, "SELECT trace, device_name FROM traces ORDER BY trace") == [
        ("naive", "NVIDIA H200"), ("naive-2", None)]


def test_a_plain_chrome_array_loads(fresh_db, tmp_path):
    events = read_trace(SAMPLE_TRACES / "sdpa_flash.json.gz")["traceEvents"]
    path = write_json(tmp_path / "flash_array.json", events)
    result = invoke("load", path, "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert db_rows(fresh_db, "SELECT events, device_name, metadata FROM traces") == [(len(events), None, None)]
    assert db_rows(fresh_db, "SELECT count(*), max(est_occupancy_pct) FROM kernels") == [(6, 13.0)]


def test_a_chrome_array_without_its_closing_bracket_loads(fresh_db, tmp_path):
    # The Chrome trace format lets a writer leave the closing ] off.
    events = read_trace(SAMPLE_TRACES / "sdpa_flash.json.gz")["traceEvents"]
    text = json.dumps(events, indent=1).rstrip()
    assert text.endswith("]")
    path = tmp_path / "open_array.json"
    path.write_text(text[:-1].rstrip() + ",\n")
    result = invoke("load", path, "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert db_rows(fresh_db, "SELECT events FROM traces") == [(len(events),)]


def test_keys_after_the_event_array_are_read(fresh_db, tmp_path):
    trace = read_trace(SAMPLE_TRACES / "sdpa_cudnn.json.gz")
    reordered = {"traceEvents": trace["traceEvents"], "deviceProperties": trace["deviceProperties"],
                 "tracekit": trace["tracekit"], "traceName": "a ] tricky [ name"}
    path = write_json(tmp_path / "reordered.json.gz", reordered, compress=True)
    result = invoke("load", path, "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert db_rows(fresh_db, "SELECT device_name, variant, events FROM traces") == [
        ("NVIDIA H200", "sdpa_cudnn", len(trace["traceEvents"]))]
    assert db_rows(fresh_db, "SELECT header->>'traceName' FROM trace_files") == [("a ] tricky [ name",)]


def test_a_cpu_only_trace_loads_with_steps_and_ops_but_no_gpu_work(fresh_db):
    result = invoke("load", CPU_TRACE, "--db", fresh_db)
    assert result.exit_code == 0, result.output
    assert "293 events, 0 kernels" in result.output
    assert db_rows(fresh_db, "SELECT device_name, variant FROM traces") == [(None, "naive")]
    assert db_rows(fresh_db, "SELECT count(*) FROM steps") == [(6,)]
    assert db_rows(fresh_db, "SELECT count(*) FROM cpu_ops WHERE name = 'aten::masked_fill'") == [(6,)]
    summary = json.loads(invoke("query", "summary", "--db", fresh_db, "-f", "json").output)
    assert summary[0]["kernels_per_step"] == 0 and summary[0]["cpu_us_per_step"] > 0


def test_globs_expand(fresh_db):
    result = invoke("load", str(SAMPLE_TRACES / "sdpa_*.json.gz"), "--db", fresh_db)
    assert result.exit_code == 0
    assert db_rows(fresh_db, "SELECT count(*) FROM traces") == [(5,)]


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file"),
    (b"not json at all", "not JSON"),
    (b'{"schemaVersion": 1, "other": []}', "a JSON object without a traceEvents array"),
])
def test_bad_files_fail_cleanly_and_leave_the_database_unchanged(fresh_db, tmp_path, content, problem):
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", fresh_db).exit_code == 0
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    result = invoke("load", bad, "--db", fresh_db)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert result.output.startswith(f"Error: {bad}: {problem}")
    assert "Traceback" not in result.output
    assert db_rows(fresh_db, "SELECT trace FROM traces") == [("naive",)]
    assert db_rows(fresh_db, "SELECT count(*) FROM events") == [(517,)]


def test_a_path_that_does_not_exist(fresh_db, tmp_path):
    result = invoke("load", tmp_path / "missing.json.gz", "--db", fresh_db)
    assert result.exit_code == 1
    assert "missing.json.gz: no such file" in result.output


def test_a_load_reports_its_progress_to_the_end_of_the_commit(fresh_db):
    # The progress bar covers reading, deriving and committing: the last step is reported once the
    # trace is committed, and bytes read never run past the file.
    from tracekit.store.database import connect
    from tracekit.ingest.loader import load_file

    class Recorder:
        def __init__(self):
            self.read, self.steps = [], []

        def __call__(self, position):
            self.read.append(position)

        def deriving(self, done, total):
            self.steps.append((done, total))

    seen = Recorder()
    con = connect(fresh_db)
    try:
        path = SAMPLE_TRACES / "sdpa_math.json.gz"
        load_file(con, path, progress=seen)
        committed = con.execute("SELECT count(*) FROM trace_files").fetchone()[0]
    finally:
        con.close()
    assert committed == 1
    assert seen.read and max(seen.read) <= path.stat().st_size
    done, total = zip(*seen.steps)
    assert list(done) == list(range(1, total[0] + 1)) and set(total) == {total[0]}


def test_the_progress_bar_fits_a_narrow_terminal(tmp_path):
    """In a 50-column terminal each redraw of the bar fits one line: a line that filled or passed the
    width wrapped, and every redraw left a stale line behind (issue [16] item 5). A pseudo-terminal
    as standard error; the H200 loops take longer than the second before the bar shows."""
    import fcntl
    import os
    import pty
    import re
    import struct
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen([sys.executable, "-m", "tracekit", "load", str(TEST_DATA / "h200" / "loops"),
                                "--db", str(tmp_path / "t.duckdb"), "--jobs", "1"],
                               stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    output = read_until_closed(leader)
    assert process.wait(timeout=300) == 0
    drawn = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", part) for part in re.split(r"[\r\n]", output.decode())]
    bars = [part for part in drawn if "loading " in part and "[" in part]
    assert bars, output.decode()[-500:]
    assert max(len(part) for part in drawn) < 50, max(drawn, key=len)


def test_a_load_imports_duckdbs_engine_alone_and_no_pandas_pyarrow_or_torch(tmp_path):
    """The load path runs SQL and fetches rows: DuckDB's Python layer (its relation API, a sixth of
    a small trace's load as a command), pandas, numpy, pyarrow and torch stay out of the process."""
    import subprocess
    import sys

    db = tmp_path / "t.duckdb"
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracekit.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['load', {str(TEST_DATA / 'h200' / 'loops' / 'infer_inplace.json.gz')!r},"
        f" '--db', {str(db)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in ('duckdb', 'pandas', 'numpy', 'pyarrow', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert db_rows(db, "SELECT count(*) FROM kernels") == [(42,)]


def test_a_reader_that_stops_reading_does_not_stop_the_load(tmp_path):
    """`tracekit load DIR | head -1`: once head has its line and goes, the loads go on (they stopped
    at the next line printed, with exit status 1 and nothing said)."""
    import subprocess
    import sys

    db = tmp_path / "piped.duckdb"
    load = subprocess.Popen([sys.executable, "-m", "tracekit", "load", str(SAMPLE_TRACES), "--db", str(db), "-j", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    first = load.stdout.readline()
    load.stdout.close()  # as head does after its line
    assert load.wait(timeout=300) == 0 and first.startswith(b"loaded ")
    assert load.stderr.read() == b""
    assert db_rows(db, "SELECT count(*) FROM traces") == [(8,)]


def test_a_copy_of_negative_size_is_of_unknown_size_and_an_anomaly(fresh_db, tmp_path):
    """A hand-edited or corrupt `"bytes": -5` was summed into the copies' bytes (3 GiB - 512 MiB - 5)."""
    trace = read_trace(SAMPLE_TRACES / "naive.json.gz")
    copy = next(e for e in trace["traceEvents"] if e.get("cat") == "gpu_memcpy")
    copy["args"]["bytes"] = -5
    path = write_json(tmp_path / "negative_copy.json", trace)
    assert invoke("load", path, "--db", fresh_db).exit_code == 0
    copies = json.loads(invoke("query", "memcpy", "-p", "trace", "negative_copy", "--db", fresh_db, "-f", "json").output)
    assert [(c["memcpy_count"], c["unknown_size_copies"], c["memcpy_bytes"]) for c in copies] == [(6, 1, 5 * 2**29)]
    odd = json.loads(invoke("query", "anomalies", "-p", "trace", "negative_copy", "--db", fresh_db, "-f", "json").output)
    assert [(a["oddity"], a["events"]) for a in odd if a["oddity"] == "negative size"] == [("negative size", 1)]
