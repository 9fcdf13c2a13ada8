"""Runs `tracekit load ... --lake LAKE` and signals its own process when the load of one file
reaches a chosen point: how tests/test_lake_faults.py stops a real load into a lake at a known moment.

    python tests/interrupt_lake.py POINT TRACE SIGNAL load PATH... --lake LAKE

POINT, for the file of trace TRACE (its file's name without .json or .json.gz):
  read         half of its bytes have been read (it is being converted)
  written      its Parquet files are in its staging folder, not yet published
  published:N  N of its partition folders have been renamed into the lake (trace_files is the last)
SIGNAL: SIGINT, SIGTERM, or SIGKILL (the process dies there and then).
"""

import os
import signal
import sys
import threading
import time

import tracekit.cli.analysis_cmd as analysis_cmd
import tracekit.lake.publish as publish
import tracekit.lake.writer as writer
from tracekit.cli import main
from tracekit.ingest.loader import trace_name_for
from tracekit.lake.layout import decode_name


def install(point, name, sig):
    once = threading.Lock()

    def fire(trace):
        if trace == name and once.acquire(blocking=False):
            os.kill(os.getpid(), sig)
            time.sleep(0.1)  # time for the main thread to run the handler, so the stop is in force

    progress, write_trace, rename = analysis_cmd._FileProgress.__call__, writer.write_trace, publish._rename_partition
    renamed = []

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
            fire(decode_name(target.name))

    analysis_cmd._FileProgress.__call__ = on_read
    writer.write_trace, publish._rename_partition = on_written, on_rename


if __name__ == "__main__":
    point, name, signal_name, *args = sys.argv[1:]
    install(point, name, getattr(signal, signal_name))
    sys.argv = ["tracekit", *args]
    main()
