"""Runs `tracekit load ... --lake LAKE` and signals its own process when the load of one file
reaches a chosen point: how tests/test_lake_faults.py and tests/test_lake_safety.py stop a real
load into a lake at a known moment.

    python tests/interrupt_lake.py POINT TRACE SIGNAL load PATH... --lake LAKE

POINT, for the file of trace TRACE (its file's name without .json or .json.gz):
  read         half of its bytes have been read (it is being converted)
  written      its Parquet files are in its staging folder, not yet published
  published:N  N of its partition folders (a replaced trace's: files) have been renamed into the lake
               (trace_files is the last)
  shared:N     the load is making the lake: DuckDB has written the Nth shared table's file, not yet
               renamed into place (TRACE is not looked at)
SIGNAL: SIGINT, SIGTERM, or SIGKILL (the process dies there and then); or FILL: the disk that
holds the lake is filled up there (to its last byte, by LAKE/../filler), and the load goes on.
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import tracekit.cli.analysis_cmd as analysis_cmd
import tracekit.lake.publish as publish
import tracekit.lake.writer as writer
from tracekit.command import main
from tracekit.ingest.loader import trace_name_for
from tracekit.lake.layout import decode_name


def fill_disk(lake):
    """Fills the disk of `lake` to the last byte with one file beside the lake."""
    filler = Path(lake).resolve().parent / "filler"
    stats = os.statvfs(filler.parent)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        try:
            os.posix_fallocate(fd, 0, stats.f_bavail * stats.f_frsize)
        except OSError:
            pass
        # What fallocate left (tmpfs keeps a few pages aside): a block at a time.
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
    finally:
        os.close(fd)


def install(point, name, action, lake):
    once = threading.Lock()

    def fire(trace):
        if (trace == name or point.startswith("shared:")) and once.acquire(blocking=False):
            if action == "FILL":
                fill_disk(lake)
                return
            os.kill(os.getpid(), getattr(signal, action))
            time.sleep(0.1)  # time for the main thread to run the handler, so the stop is in force

    progress, write_trace, rename = analysis_cmd._FileProgress.__call__, writer.write_trace, publish._rename_in
    put_in_place = writer._put_in_place
    renamed, shared = [], []

    def on_read(self, position):
        progress(self, position)
        if point == "read" and position >= self.size / 2:
            fire(trace_name_for(self.path))

    def on_written(con, trace_id, trace, sha256, staging):
        write_trace(con, trace_id, trace, sha256, staging)
        if point == "written":
            fire(trace)

    def on_rename(source, target):
        rename(source, target)
        renamed.append(target)
        if point == f"published:{len(renamed)}":
            # A new trace's partition folder, or a replaced one's file
            fire(decode_name(target.name if target.name.startswith("trace=") else target.parent.name))

    def on_shared(scratch, target):
        shared.append(target)
        if point == f"shared:{len(shared)}":
            fire(None)
        put_in_place(scratch, target)

    analysis_cmd._FileProgress.__call__ = on_read
    writer.write_trace, publish._rename_in, writer._put_in_place = on_written, on_rename, on_shared


if __name__ == "__main__":
    point, name, action, *args = sys.argv[1:]
    install(point, name, action, args[args.index("--lake") + 1])
    sys.argv = ["tracekit", *args]
    main()
