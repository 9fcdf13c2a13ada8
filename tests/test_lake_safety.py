"""A lake holds as a database does (issue [13]): nothing outside it is ever removed or written
through a link inside it; a load killed (kill -9) while it makes the lake, or while it replaces a
trace, leaves a lake that reads the old trace or the new one; readers during a --replace never
fail; a full disk is one line that says what is in the lake; -o never writes into the lake a
command reads; a damaged lake says which trace is damaged; a lake in a folder of traces is not
read as traces. Real processes, real signals, a real tmpfs."""

import gzip
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, SAMPLE_TRACES, invoke_cli
from load_runs import TRACEKIT, environment
from lake_checks import PER_TRACE_TABLES, lake_state, traces_in

INTERRUPT_LAKE = [sys.executable, str(ROOT / "tests" / "interrupt_lake.py")]
NAIVE_EVENTS, FLEX_EVENTS = 517, 3272


def run_lake(args, tmp_path, timeout=120):
    return subprocess.run([*TRACEKIT, *map(str, args)], capture_output=True, text=True, env=environment(tmp_path),
                          timeout=timeout)


def interrupted(point, trace, action, args, tmp_path):
    return subprocess.run([*INTERRUPT_LAKE, point, trace, action, *map(str, args)], capture_output=True, text=True,
                          env=environment(tmp_path), timeout=120)


def all_files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def lake(tmp_path):
    """A lake holding trace `x`, loaded from tmp/src/x.json.gz (the naive sample's bytes)."""
    source = tmp_path / "src" / "x.json.gz"
    source.parent.mkdir()
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", source)
    folder = tmp_path / "lake"
    assert invoke_cli("load", source, "--lake", folder).exit_code == 0
    return folder


@pytest.fixture
def victim(tmp_path):
    """A folder of someone else's, that a link in the lake points to."""
    folder = tmp_path / "victim"
    (folder / "sub").mkdir(parents=True)
    (folder / "keep.txt").write_text("mine")
    (folder / "sub" / "lock").write_text("mine too")
    return folder


@pytest.mark.parametrize("own", ["_staging", "_content", "event_rows", "_content/replaced"])
def test_a_link_where_the_lake_keeps_a_folder_is_an_error_and_nothing_outside_is_touched(lake, victim, tmp_path,
                                                                                          own):
    before = all_files(victim)
    if (lake / own).exists():
        shutil.rmtree(lake / own)
    (lake / own).symlink_to(victim)
    source = lake.parent / "src" / "x.json.gz"
    shutil.copy(SAMPLE_TRACES / "flex.json.gz", source)
    run = run_lake(["load", source, "--lake", lake, "--replace"], tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    said = run.stdout + run.stderr
    assert f"{lake / own}: is a symbolic link where the lake keeps a folder of its own" in said, said
    assert "Traceback" not in said
    assert all_files(victim) == before and (victim / "keep.txt").read_text() == "mine"


def test_a_link_for_the_lock_file_is_refused(lake, victim, tmp_path):
    (lake / "_lock").unlink()
    (lake / "_lock").symlink_to(victim / "keep.txt")
    run = run_lake(["load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake], tmp_path)
    assert run.returncode == 1 and (victim / "keep.txt").read_text() == "mine"
    assert f"{lake / '_lock'}: is a symbolic link where the lake keeps its lock file" in run.stderr


def test_links_inside_the_lakes_folders_are_removed_as_links_never_followed(lake, victim, tmp_path):
    """A link in _staging, or a partition that is a link, is a leftover: the link goes, what it
    points to stays."""
    before = all_files(victim)
    (lake / "_staging" / ("0" * 32)).symlink_to(victim)
    (lake / "kernel_rows" / "trace=ghost").symlink_to(victim)
    run = run_lake(["load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake], tmp_path)
    assert run.returncode == 0, run.stderr
    assert not os.path.lexists(lake / "_staging" / ("0" * 32)) and not os.path.lexists(lake / "kernel_rows" / "trace=ghost")
    assert all_files(victim) == before


def test_links_for_a_replace_note_or_a_dead_writers_lock_are_never_followed(lake, victim, tmp_path):
    """The note a --replace leaves (_content/replaced/trace=x) and the lock file of a dead writer's
    staging folder, each a link to a path outside the lake: no file is made or touched there."""
    (lake / "_content" / "replaced").mkdir(parents=True, exist_ok=True)
    (lake / "_content" / "replaced" / "trace=x").symlink_to(victim / "made_by_the_note")
    dead = lake / "_staging" / ("1" * 32)
    dead.mkdir(parents=True)
    (dead / "lock").symlink_to(victim / "made_by_the_lock")
    os.utime(victim / "keep.txt", (1_600_000_000, 1_600_000_000))
    (lake / "_content" / "replaced" / "trace=y").symlink_to(victim / "keep.txt")
    before = all_files(victim)
    run = run_lake(["load", lake.parent / "src" / "x.json.gz", "--lake", lake, "--replace"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert all_files(victim) == before and os.stat(victim / "keep.txt").st_mtime == 1_600_000_000
    assert not os.path.lexists(dead) and not os.path.islink(lake / "_content" / "replaced" / "trace=x")
    assert traces_in(lake) == {"x": NAIVE_EVENTS}


def test_a_lake_without_its_trace_files_folder_is_damaged_and_nothing_is_removed(lake, tmp_path):
    """Read as it was, such a lake held no trace, and the next load removed every partition as a
    dead writer's."""
    shutil.move(lake / "trace_files", tmp_path / "trace_files")
    before = all_files(lake)
    said = (f"Error: {lake}: is damaged: its trace_files folder is missing while collective_rows holds the "
            "partitions of 1 trace (was it copied in part?); put trace_files back, or load the traces into a new lake")
    for args in (["query", "--sql", "SELECT count(*) FROM traces", "--lake", lake],
                 ["load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake]):
        run = run_lake(args, tmp_path)
        assert run.returncode == 1 and run.stderr.strip() == said, run.stderr
    assert all_files(lake) == before
    shutil.move(tmp_path / "trace_files", lake / "trace_files")
    assert traces_in(lake) == {"x": NAIVE_EVENTS}


@pytest.mark.parametrize("shared", [1, 3])
def test_kill_9_while_a_first_load_makes_the_lake(tmp_path, shared):
    lake = tmp_path / "lake"
    run = interrupted(f"shared:{shared}", "-", "SIGKILL", ["load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake],
                      tmp_path)
    assert run.returncode == -9, run.stderr
    half_written = [p for p in lake.rglob(".*.parquet")]
    assert len(half_written) == 1  # DuckDB's file, written in full, never renamed into place
    loaded = run_lake(["load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake], tmp_path)
    assert loaded.returncode == 0 and loaded.stdout.startswith("loaded naive: 517 events"), loaded.stderr
    assert list(lake.rglob(".*.parquet")) == []
    query = run_lake(["query", "summary", "--lake", lake, "-f", "csv", "--columns", "trace,kernels_per_step"], tmp_path)
    assert query.returncode == 0 and query.stdout.splitlines() == ["trace,kernels_per_step", "naive,5.0"], query.stderr


def test_a_dot_file_beside_a_shared_table_is_never_read(lake):
    """What a writer killed in DuckDB's COPY leaves: a partial file (here, 10 bytes)."""
    (lake / "gpu_specs" / ".0123.parquet").write_bytes(b"PAR1\0\0PAR1")
    assert traces_in(lake) == {"x": NAIVE_EVENTS}


# A trace's generation is published by renaming one file per per-trace table, trace_files last.
PUBLISHED = len(PER_TRACE_TABLES)


@pytest.mark.parametrize("point", ["written", "published:1", f"published:{PUBLISHED - 1}", f"published:{PUBLISHED}"])
def test_kill_9_during_a_replace_leaves_the_old_trace_or_the_new(lake, tmp_path, point):
    source = lake.parent / "src" / "x.json.gz"
    shutil.copy(SAMPLE_TRACES / "flex.json.gz", source)
    run = interrupted(point, "x", "SIGKILL", ["load", source, "--lake", lake, "--replace"], tmp_path)
    renamed = int(point.split(":")[1]) if ":" in point else 0
    assert run.returncode == -9, run.stderr
    expected = FLEX_EVENTS if renamed == PUBLISHED else NAIVE_EVENTS
    assert traces_in(lake) == {"x": expected}
    # The next load (of another file) removes what the dead replacer left, but the generation a
    # reader may still read; past SUPERSEDED_KEPT_S that goes too.
    # The loads after the kill need no process of their own: the killed one was.
    assert invoke_cli("load", SAMPLE_TRACES / "sdpa_flash.json.gz", "--lake", lake).exit_code == 0
    assert traces_in(lake) == {"x": expected, "sdpa_flash": 242}
    files = {table: sorted(os.listdir(lake / table / "trace=x")) for table in PER_TRACE_TABLES}
    assert all(len(names) == (2 if renamed == PUBLISHED else 1) for names in files.values()), files
    from tracekit.lake.publish import SUPERSEDED_KEPT_S
    note = lake / "_content" / "replaced" / "trace=x"
    assert note.exists() == (renamed > 0)
    if not note.exists():
        return
    long_ago = time.time() - SUPERSEDED_KEPT_S - 1
    os.utime(note, (long_ago, long_ago))
    assert invoke_cli("load", SAMPLE_TRACES / "sdpa_math.json.gz", "--lake", lake).exit_code == 0
    assert all(len(os.listdir(lake / table / "trace=x")) == 1 for table in PER_TRACE_TABLES)
    assert not note.exists() and traces_in(lake)["x"] == expected
    # And the file loads whole again.
    again = invoke_cli("load", source, "--lake", lake, "--replace")
    assert again.exit_code == 0 and traces_in(lake)["x"] == FLEX_EVENTS


def test_readers_during_replaces_get_the_old_trace_or_the_new(lake, tmp_path):
    """A process replaces trace x over and over, flipping its content, while this one opens the
    lake and queries it: every query answers, with one content or the other, whole. Three
    replaces (each content published at least once) and ten reads made wholly while one was
    running (a read opens the lake anew, about half a second) are the case; more rounds repeat it."""
    from tracekit.lake import connect_lake

    source = lake.parent / "src" / "x.json.gz"
    contents = [(SAMPLE_TRACES / "naive.json.gz").read_bytes(), (SAMPLE_TRACES / "flex.json.gz").read_bytes()]
    stop, replacing, replaces, errors = threading.Event(), threading.Event(), [], []

    def replace_loop():
        for turn in range(1, 200):
            if stop.is_set():
                return
            source.write_bytes(contents[turn % 2])
            replacing.set()
            run = run_lake(["load", source, "--lake", lake, "--replace"], tmp_path)
            replacing.clear()
            (replaces if run.returncode == 0 else errors).append(run.stderr)

    writer = threading.Thread(target=replace_loop)
    writer.start()
    seen, during = [], 0
    try:
        deadline = time.monotonic() + 120
        while (len(replaces) < 3 or during < 10) and time.monotonic() < deadline and not errors:
            started_during = replacing.is_set()
            con = connect_lake(lake)
            try:
                seen.append(con.execute("SELECT t.events, (SELECT count(*) FROM event_rows), "
                                        "(SELECT count(*) FROM kernels) FROM traces t").fetchone())
            finally:
                con.close()
            during += started_during and replacing.is_set()  # the whole read inside a replace
    finally:
        stop.set()
        writer.join()
    assert errors == [] and len(replaces) >= 3 and during >= 10, (errors, len(replaces), during)
    # The event count of each trace (naive, flex) with its rows, never a mix.
    whole = {NAIVE_EVENTS: None, FLEX_EVENTS: None}
    for events, rows, kernels in seen:
        assert events in whole
        assert whole.setdefault(events, (rows, kernels)) in (None, (rows, kernels))
        whole[events] = (rows, kernels)
    assert all(value is not None for value in whole.values()), seen  # both contents were seen


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A 16 MB tmpfs (root only: skipped with the reason elsewhere)."""
    mount_point = tmp_path_factory.mktemp("disk")
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def test_a_full_disk_while_the_lake_is_made_is_one_line(small_disk, tmp_path):
    for entry in small_disk.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    lake = small_disk / "lake"
    run = interrupted("shared:1", "-", "FILL", ["load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake], tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.splitlines() == [f"Error: {lake}: the disk is full (no space left in {lake}): "
                                       "nothing was loaded; free some space and load again"], run.stderr
    (small_disk / "filler").unlink()
    loaded = run_lake(["load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake], tmp_path)
    assert loaded.returncode == 0 and traces_in(lake) == {"naive": NAIVE_EVENTS}, loaded.stderr


def test_a_full_disk_right_after_publication_says_the_trace_is_in(small_disk, tmp_path):
    for entry in small_disk.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    lake = small_disk / "lake"
    assert run_lake(["load", SAMPLE_TRACES / "sdpa_flash.json.gz", "--lake", lake], tmp_path).returncode == 0
    run = interrupted("published:10", "naive", "FILL", ["load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake],
                      tmp_path)
    (small_disk / "filler").unlink()
    assert run.returncode == 0 and run.stdout.startswith("loaded naive: 517 events"), run.stdout + run.stderr
    assert traces_in(lake) == {"sdpa_flash": 242, "naive": NAIVE_EVENTS}
    again = run_lake(["load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake], tmp_path)
    assert "same content as trace 'naive'" in again.stdout


@pytest.mark.parametrize("inside", ["_tracekit.json", "trace_files/trace=x/PART", "link"])
def test_query_o_never_writes_into_the_lake_it_reads(lake, tmp_path, inside):
    part = next((lake / "trace_files" / "trace=x").iterdir())
    target = lake / inside.replace("PART", part.name)
    if inside == "link":
        target = tmp_path / "out.parquet"
        target.symlink_to(part)
    before = lake_state(lake)
    for command in (["query", "summary"], ["findings"]):
        run = invoke_cli(*command, "--lake", lake, "-o", target, "--force")
        assert run.exit_code == 1
        assert run.output.strip() == f"Error: {target}: is inside the lake this command reads ({lake}); give another -o"
    assert lake_state(lake) == before and traces_in(lake) == {"x": NAIVE_EVENTS}


def test_a_trace_missing_a_partition_file_is_named_and_a_replace_mends_it(lake):
    part = next((lake / "kernel_rows" / "trace=x").iterdir())
    part.unlink()
    run = invoke_cli("query", "summary", "--lake", lake)
    assert run.exit_code == 1
    assert run.output.strip() == (f"Error: {lake}: trace 'x' is damaged: its kernel_rows partition lacks {part.name}; "
                                  "load its file again with --replace")
    assert invoke_cli("load", lake.parent / "src" / "x.json.gz", "--lake", lake, "--replace").exit_code == 0
    assert traces_in(lake) == {"x": NAIVE_EVENTS}


def test_a_table_folder_that_is_a_file_is_one_line(lake, tmp_path):
    shutil.rmtree(lake / "step_rows")
    (lake / "step_rows").write_text("not a folder")
    for args in (["query", "summary", "--lake", lake], ["load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake]):
        run = run_lake(args, tmp_path)
        assert run.returncode == 1 and "Traceback" not in run.stderr
        assert run.stderr.strip().splitlines()[-1] == (f"Error: {lake / 'step_rows'}: is a file where the lake keeps a "
                                                       "folder; the lake is damaged (was it copied in part?)")


def test_a_lake_inside_a_folder_of_traces_is_not_read_as_traces(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", folder / "naive.json.gz")
    shutil.copy(SAMPLE_TRACES / "flex.json.gz", folder / "flex.json.gz")
    for _ in range(2):  # the second time the lake is inside the folder: both are skipped, exit 0
        run = invoke_cli("load", folder, "--lake", folder / "lake")
        assert run.exit_code == 0, run.output
    assert run.output.count("same content as trace") == 2
    assert traces_in(folder / "lake") == {"naive": NAIVE_EVENTS, "flex": FLEX_EVENTS}
    db = invoke_cli("load", folder, "--db", tmp_path / "t.duckdb")
    assert db.exit_code == 0 and db.output.count("loaded ") == 2
    alone = invoke_cli("load", folder / "lake", "--db", tmp_path / "t.duckdb")
    assert alone.exit_code == 1
    assert f"{folder / 'lake'}: a tracekit lake, not a folder of traces: query it with --lake" in alone.output


def test_a_gzip_trace_with_a_lake_beside_it_loads(tmp_path):
    """The walk passes over the lake's folders only: a trace beside them, and in a folder named
    like a table, still loads."""
    folder = tmp_path / "traces" / "kernel_rows"
    folder.mkdir(parents=True)
    (folder / "t.json.gz").write_bytes(gzip.compress(gzip.decompress((SAMPLE_TRACES / "naive.json.gz").read_bytes())))
    assert invoke_cli("load", folder.parent, "--lake", tmp_path / "traces" / "lake").exit_code == 0
    assert invoke_cli("load", folder.parent, "--db", tmp_path / "t.duckdb").output.startswith("loaded t:")


def test_a_reader_that_opened_before_a_replace_reads_on_after_it(lake, tmp_path):
    """The replace also takes out `other`, which holds the new content under another name (a
    database's rule): the connection opened before still reads both old traces whole, a new one
    sees the new x alone, and what was superseded goes SUPERSEDED_KEPT_S later."""
    from tracekit.lake import connect_lake
    from tracekit.lake.publish import SUPERSEDED_KEPT_S

    other = lake.parent / "src" / "other.json.gz"
    shutil.copy(SAMPLE_TRACES / "flex.json.gz", other)
    assert invoke_cli("load", other, "--lake", lake).exit_code == 0
    before = connect_lake(lake)
    sql = "SELECT t.trace, count(*) FROM event_rows e JOIN trace_files t USING (trace_id) GROUP BY ALL ORDER BY 1"
    old_rows = before.execute(sql).fetchall()
    shutil.copy(SAMPLE_TRACES / "flex.json.gz", lake.parent / "src" / "x.json.gz")
    replaced = run_lake(["load", lake.parent / "src" / "x.json.gz", "--lake", lake, "--replace"], tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert before.execute(sql).fetchall() == old_rows  # its snapshot's files are all still there
    before.close()
    assert traces_in(lake) == {"x": FLEX_EVENTS}
    long_ago = time.time() - SUPERSEDED_KEPT_S - 1
    for note in (lake / "_content" / "replaced").iterdir():
        os.utime(note, (long_ago, long_ago))
    assert run_lake(["load", SAMPLE_TRACES / "sdpa_flash.json.gz", "--lake", lake], tmp_path).returncode == 0
    assert not any((lake / table / "trace=other").exists() for table in PER_TRACE_TABLES)
    assert all(len(os.listdir(lake / table / "trace=x")) == 1 for table in PER_TRACE_TABLES)
    assert traces_in(lake) == {"x": FLEX_EVENTS, "sdpa_flash": 242}


def test_a_trace_name_too_long_for_a_lakes_folders_says_so(tmp_path):
    """A hundred spaces make a 300-byte partition folder (%20 each): the OS's 'File name too long'
    said nothing of why, where a database loads the same file."""
    source = tmp_path / (" " * 100 + ".json.gz")
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", source)
    run = run_lake(["load", source, "--lake", tmp_path / "lake"], tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip() == (f"Error: {source}: its trace's name is too long for a folder of the lake "
                                  f"{tmp_path / 'lake'} (trace=NAME, each character but letters, digits, '.', '_' "
                                  "and '-' as %XX: a file system takes 255 bytes); rename the file, or load it into "
                                  "a database (--db)")
    assert run_lake(["load", source, "--db", tmp_path / "t.duckdb"], tmp_path).returncode == 0


def test_a_part_file_that_is_a_link_is_damage_and_a_replace_mends_it(lake, tmp_path):
    """Spark read through a part file linked to a file outside the lake (DuckDB's sandbox refused it
    with a misleading message): no reader follows it now."""
    part = next((lake / "kernel_rows" / "trace=x").iterdir())
    outside = tmp_path / "outside.parquet"
    shutil.move(part, outside)
    part.symlink_to(outside)
    run = invoke_cli("query", "summary", "--lake", lake)
    assert run.exit_code == 1 and run.output.strip() == (
        f"Error: {lake}: trace 'x' is damaged: its kernel_rows file {part.name} is a symbolic link; tracekit does "
        "not follow links inside a lake (load its file again with --replace)")
    assert invoke_cli("load", lake.parent / "src" / "x.json.gz", "--lake", lake, "--replace").exit_code == 0
    assert traces_in(lake) == {"x": NAIVE_EVENTS} and outside.exists()


@pytest.mark.parametrize("gone", ["trace_files/trace=x", "trace_files/*"])
def test_partitions_whose_trace_files_partition_went_are_kept_not_swept(lake, tmp_path, gone):
    """Not a dead writer's leftovers (their files name a staging folder nobody holds): a trace whose
    trace_files partition was removed by hand, or not copied, lost every other partition to the next
    load. Kept, the trace comes back with its trace_files partition."""
    import glob

    for path in glob.glob(str(lake / gone)):
        shutil.move(path, tmp_path / "trace_files_x")
    kept = {table: sorted(os.listdir(lake / table / "trace=x")) for table in PER_TRACE_TABLES if table != "trace_files"}
    run = run_lake(["load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake], tmp_path)
    assert run.returncode == 0, run.stderr
    assert {table: sorted(os.listdir(lake / table / "trace=x")) for table in kept} == kept
    assert traces_in(lake) == {"flex": FLEX_EVENTS}
    shutil.move(tmp_path / "trace_files_x", lake / "trace_files" / "trace=x")
    assert traces_in(lake) == {"flex": FLEX_EVENTS, "x": NAIVE_EVENTS}
