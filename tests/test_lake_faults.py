"""A lake under faults and company: a load killed (kill -9) in the middle of publishing a trace, or
stopped (Ctrl-C, SIGTERM) while converting it, or failing inside the writer, leaves no part of the
trace visible, and the next load removes what it left; two processes load into one lake at once,
and the lake's lock lets exactly one of them have a name."""

import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SAMPLE_TRACES, invoke_cli
from load_runs import TRACEKIT, build_traces, environment, leftovers
from lake_checks import PER_TRACE_TABLES, lake_state, same_rows, traces_in

INTERRUPT_LAKE = [sys.executable, str(ROOT / "tests" / "interrupt_lake.py")]


def stopped_at(point, trace, signal_name, paths, lake, tmp_path):
    return subprocess.run([*INTERRUPT_LAKE, point, trace, signal_name, "load", *map(str, paths), "--lake", str(lake),
                           "-j", "1"], capture_output=True, text=True, env=environment(tmp_path), timeout=120)


@pytest.fixture
def lake(tmp_path):
    """A lake holding the naive sample."""
    folder = tmp_path / "lake"
    assert invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", folder).exit_code == 0
    return folder


def partitions_of(lake, trace):
    return sorted(table for table in PER_TRACE_TABLES if (lake / table / f"trace={trace}").exists())


@pytest.mark.parametrize("renamed", [1, 5, 9])
def test_kill_9_mid_publication_shows_nothing_and_the_next_load_cleans_up(lake, tmp_path, renamed):
    run = stopped_at(f"published:{renamed}", "sdpa_math", "SIGKILL", [SAMPLE_TRACES / "sdpa_math.json.gz"], lake,
                     tmp_path)
    assert run.returncode == -9, run.stderr
    # Its partitions are there but trace_files' (the last of ten): no reader sees any of it.
    assert len(partitions_of(lake, "sdpa_math")) == renamed and "trace_files" not in partitions_of(lake, "sdpa_math")
    assert len(list((lake / "_staging").iterdir())) == 1
    assert traces_in(lake) == {"naive": 517}
    from tracekit.lake import connect_lake
    con = connect_lake(lake)
    assert con.execute("SELECT count(DISTINCT trace_id) FROM event_rows").fetchone() == (1,)
    con.close()

    # The next load, of another file, removes what the dead one left; then the file loads whole.
    assert invoke_cli("load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake).exit_code == 0
    assert partitions_of(lake, "sdpa_math") == [] and list((lake / "_staging").iterdir()) == []
    assert invoke_cli("load", SAMPLE_TRACES / "sdpa_math.json.gz", "--lake", lake).exit_code == 0
    assert traces_in(lake) == {"naive": 517, "flex": 3272, "sdpa_math": 1077}
    assert partitions_of(lake, "sdpa_math") == sorted(PER_TRACE_TABLES)


@pytest.mark.parametrize("point, signal_name", [("read", "SIGINT"), ("written", "SIGTERM")])
def test_a_stop_before_publication_loads_nothing_and_leaves_nothing(lake, tmp_path, point, signal_name):
    paths = build_traces(tmp_path / "big", 2, 4)  # 4 MB: a read long enough to stop half way
    before = lake_state(lake)
    run = stopped_at(point, "t_00", signal_name, paths, lake, tmp_path)
    assert run.returncode == 130, run.stdout + run.stderr
    assert run.stderr.strip() == f"interrupted: nothing of {paths[0]} was loaded, nor of the 1 file after it"
    assert lake_state(lake) == before
    assert leftovers(tmp_path) == []


def test_a_stop_during_publication_lets_it_finish(lake, tmp_path):
    run = stopped_at("published:3", "sdpa_math", "SIGINT", [SAMPLE_TRACES / "sdpa_math.json.gz"], lake, tmp_path)
    assert run.returncode == 130
    assert run.stdout.startswith("loaded sdpa_math: 1077 events")
    assert traces_in(lake) == {"naive": 517, "sdpa_math": 1077}
    assert list((lake / "_staging").iterdir()) == []


def test_an_error_inside_the_writer_leaves_the_lake_as_it_was(lake, monkeypatch):
    import tracekit.lake.publish as publish
    import tracekit.lake.writer as writer
    from tracekit.lake import load_many

    write_trace, rename = writer.write_trace, publish._rename_in

    def fails_half_way(con, trace_id, trace, sha256, staging):
        staging.file("event_rows", trace).write_bytes(b"half")
        raise OSError(28, "No space left on device", str(staging.folder))

    before = lake_state(lake)
    monkeypatch.setattr(writer, "write_trace", fails_half_way)
    batch = load_many([SAMPLE_TRACES / "flex.json.gz"], lake)
    assert [str(e) for _, e in batch.failures] == [f"{SAMPLE_TRACES / 'flex.json.gz'}: the disk is full "
                                                  f"(no space left in {lake})"]
    assert lake_state(lake) == before

    renamed = []

    def fails_at_the_fourth(source, target):
        if len(renamed) == 3:
            raise OSError(5, "Input/output error")
        rename(source, target)
        renamed.append(target)

    monkeypatch.setattr(writer, "write_trace", write_trace)
    monkeypatch.setattr(publish, "_rename_in", fails_at_the_fourth)
    batch = load_many([SAMPLE_TRACES / "flex.json.gz"], lake)
    assert re.fullmatch(r".*flex\.json\.gz: cannot write to the lake .* \(Input/output error\)",
                        str(batch.failures[0][1]))
    assert len(renamed) == 3 and lake_state(lake) == before


def test_two_processes_load_one_lake_at_once(tmp_path, sample_db):
    from tracekit.analysis.named_queries import fetch_rows, named_sql
    from tracekit.lake import connect_lake
    from tracekit.store.database import connect_for_queries

    lake = tmp_path / "lake"
    files = sorted(SAMPLE_TRACES.glob("*.json.gz"))
    runs = [subprocess.Popen([*TRACEKIT, "load", *map(str, half), "--lake", str(lake), "-j", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(tmp_path))
            for half in (files[0::2], files[1::2])]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert sum(out.count("\nloaded ") + out.startswith("loaded ") for out, _ in outputs) == 8
    lake_con, db_con = connect_lake(lake), connect_for_queries(sample_db)
    for name in ("summary", "memcpy", "occupancy"):
        db, other = fetch_rows(db_con, *named_sql(name)), fetch_rows(lake_con, *named_sql(name))
        same_rows(db.rows, other.rows)
    assert list((lake / "_staging").iterdir()) == []


@pytest.mark.parametrize("same_content", [True, False])
def test_two_processes_with_one_name_one_of_them_has_it(tmp_path, same_content):
    """The same trace name from two processes at once: one loads it, the other skips (same
    content) or takes the next free name (other content); never two traces of one name, nor a mix
    of both."""
    built = build_traces(tmp_path / "built", 2, 2)
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder, source in zip(folders, (built[0], built[0] if same_content else built[1])):
        folder.mkdir()
        shutil.copy(source, folder / "rank0.json")
    lake = tmp_path / "lake"
    assert invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake).exit_code == 0
    runs = [subprocess.Popen([*TRACEKIT, "load", str(folder / "rank0.json"), "--lake", str(lake)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(tmp_path))
            for folder in folders]
    outputs = [run.communicate(timeout=120) for run in runs]
    codes = sorted(run.returncode for run in runs)
    said = " ".join(out + err for out, err in outputs)
    assert codes == [0, 0] and said.count("loaded rank0:") == 1
    if same_content:
        assert "same content as trace 'rank0'" in said
    else:
        assert said.count("loaded rank0-2:") == 1
    names = {"naive", "rank0"} | (set() if same_content else {"rank0-2"})
    assert set(traces_in(lake)) == names
    assert all(len(list((lake / table).iterdir())) == len(names) for table in PER_TRACE_TABLES)


def test_lake_write_errors_name_the_lake_not_a_staging_folder(tmp_path, monkeypatch):
    """DuckDB's COPY cannot write a table's Parquet file (a folder is in its place): each file's
    error names the file and the lake, not the writer's staging folder, with two files at once."""
    import tracekit.lake.writer as writer
    from tracekit.lake import load_many

    write_trace = writer.write_trace

    def taken(con, trace_id, trace, sha256, staging):
        staging.file("kernel_rows", trace).mkdir()
        write_trace(con, trace_id, trace, sha256, staging)

    monkeypatch.setattr(writer, "write_trace", taken)
    files = [SAMPLE_TRACES / "naive.json.gz", SAMPLE_TRACES / "flex.json.gz"]
    lake = tmp_path / "lake"
    batch = load_many(files, lake, workers=2)
    assert [str(path) for path, _ in batch.failures] == [str(f) for f in files]
    for path, error in batch.failures:
        assert str(error).startswith(f"{path}: cannot write to the lake {lake} (IO Error: ")
        assert "_staging" not in str(error)
