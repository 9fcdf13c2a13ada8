"""Real `tracekit load` processes for the fault tests (interrupts, kill -9, full disks): traces to
load, the process run with a temp folder of its own, and what its database holds afterwards."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, db_rows

TRACEKIT = [sys.executable, "-m", "tracekit"]
INTERRUPT_LOAD = [sys.executable, str(ROOT / "tests" / "interrupt_load.py")]
INTERRUPT_READING = [sys.executable, str(ROOT / "tests" / "interrupt_reading.py")]


def build_traces(folder, count, size_mb):
    """`count` distinct Kineto traces of about `size_mb` MB each, built from the sample traces by
    benchmarks/build_trace.py (0.1 s per 5 MB): folder/t_00.json, t_01.json, ..."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(ROOT / "benchmarks" / "build_trace.py"), "--size", str(size_mb), "--steps", "30",
               "--out", str(folder / "t.json")]
    if count > 1:
        command += ["--count", str(count)]
    subprocess.run(command, check=True, capture_output=True)
    return sorted(folder.glob("t*.json"))


def environment(tmp_path, **extra):
    """The environment of a load whose temp folders go to a folder of the test's own, to be
    checked for leftovers."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT), **{k: str(v) for k, v in extra.items()}}


def leftovers(tmp_path):
    """What the loads left in their temp folder (FIFOs, folders)."""
    return sorted(p.name for p in (tmp_path / "scratch").iterdir())


def traces_in(db):
    """{trace name: file path} of the traces in database `db` (empty when it does not exist)."""
    if not Path(db).exists():
        return {}
    return dict(db_rows(db, "SELECT trace, path FROM trace_files"))


def a_second():
    """The time a stopped load has to end: a second, stretched on a machine whose cores are
    oversubscribed (the suite runs beside other work), as everything there is."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def load(args, tmp_path, timeout=60):
    return subprocess.run([*TRACEKIT, "load", *map(str, args)], capture_output=True, text=True,
                          env=environment(tmp_path), timeout=timeout)
