"""A disk that fills up during a real `tracekit load`, before the COMMIT and at it: one line
(`Error: FILE: the disk is full ...`), exit 1, and the database as it was. The disk is a 20 MB tmpfs,
mounted for the test (root only: skipped with the reason elsewhere)."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import SAMPLE_TRACES
from load_runs import build_traces, leftovers, load, traces_in

DISK_BYTES = 20 << 20


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A 20 MB tmpfs, emptied before each use."""
    mount_point = tmp_path_factory.mktemp("disk")
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    """A 60 MB trace: its database (16 MB) does not fit beside a small one on the 20 MB disk."""
    return build_traces(tmp_path_factory.mktemp("big"), 1, 60)[0].resolve()


def fill(disk, leave_bytes):
    """Fills `disk` up to `leave_bytes` of free space with one file; returns that file."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as sink:
        os.posix_fallocate(sink.fileno(), 0, free - leave_bytes)
    return filler


def empty(disk):
    for entry in disk.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def assert_one_disk_full_line(run, disk, first, after=0):
    assert run.returncode == 1, run.stdout + run.stderr
    nor = f", nor of the {after} file{'s' if after != 1 else ''} after it" if after else ""
    assert run.stderr.splitlines() == [f"Error: {first}: the disk is full (no space left in {disk}): nothing of it"
                                       f" was loaded{nor}; free some space and load again"]


def test_a_disk_full_before_the_commit_leaves_no_new_database(small_disk, big_trace, tmp_path):
    # 1 MB free: the events, written to the database as they are read, fill it.
    empty(small_disk)
    db = small_disk / "t.duckdb"
    filler = fill(small_disk, 1 << 20)
    run = load([big_trace, "--db", db], tmp_path)
    assert_one_disk_full_line(run, small_disk, big_trace)
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # nothing loaded: no database left
    assert leftovers(tmp_path) == []
    filler.unlink()


def test_a_disk_full_at_the_commit_leaves_the_database_as_it_was(small_disk, big_trace, tmp_path):
    # 12 MB free: the trace is written, and DuckDB's COMMIT (a checkpoint, for this much) runs out
    # of room; DuckDB then gives up on the database, which, reopened, tells what was committed.
    empty(small_disk)
    db = small_disk / "t.duckdb"
    assert load([SAMPLE_TRACES / "sdpa_flash.json.gz", "--db", db], tmp_path).returncode == 0
    before = traces_in(db)
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(big_trace, folder / "a_big.json")
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", folder / "b_small.json.gz")
    filler = fill(small_disk, 12 << 20)
    run = load([folder, "--db", db], tmp_path)
    filler.unlink()
    # The small file may commit beside the big one (its line says so) or be stopped with it.
    loaded = dict(re.findall(r"^loaded (\S+): .* from (\S+) in ", run.stdout, re.M))
    assert set(loaded) <= {"b_small"}
    assert_one_disk_full_line(run, small_disk, folder / "a_big.json", after=0 if loaded else 1)
    assert traces_in(db) == {**before, **loaded}
    assert leftovers(tmp_path) == []
