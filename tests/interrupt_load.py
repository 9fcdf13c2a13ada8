"""Runs `tracekit load ...` and sends its own process a signal when the load of one file reaches a
chosen point: how tests/test_interrupts.py interrupts a real load at a known moment.

    python tests/interrupt_load.py POINT FILE SIGNAL load PATH... --db DB

POINT, for the file whose name is FILE:
  read       half of its bytes have been read (DuckDB is parsing them)
  derive     half of its derive statements have run
  commit     its trace is published and its COMMIT comes next (the signal is handled first)
  committing its COMMIT has begun (the signal comes 5 ms into it, from another thread)
  committed  its COMMIT is done
The time the signal was sent goes to the file named by $INTERRUPT_LOG, so a test can tell how long
the load took to end after it.
"""

import os
import signal
import sys
import threading
import time

import tracekit.cli.analysis_cmd as analysis_cmd
import tracekit.ingest.loader as loader
from tracekit.command import main


def _send(sig, wait_s=0.0):
    with open(os.environ["INTERRUPT_LOG"], "w") as log:
        log.write(repr(time.time()))
    os.kill(os.getpid(), sig)
    time.sleep(wait_s)  # time for the main thread to run the handler, so the stop is in force


def install(point, name, sig):
    once = threading.Lock()

    def fire(path, wait_s=0.0):
        if os.path.basename(str(path)) == name and once.acquire(blocking=False):
            _send(sig, wait_s)

    progress, deriving, publish, commit = (analysis_cmd._FileProgress.__call__, analysis_cmd._FileProgress.deriving,
                                           loader.publish, loader.commit)

    def on_read(self, position):
        progress(self, position)
        if point == "read" and position >= self.size / 2:
            fire(self.path)

    def on_derive(self, done, total):
        deriving(self, done, total)
        if (point == "derive" and done == total // 2) or (point == "committed" and done == total):
            fire(self.path)

    def on_publish(con, path, *args):
        result = publish(con, path, *args)
        if point == "commit":
            fire(path, wait_s=0.1)
        return result

    def on_commit(con, path, *args):
        if point == "committing":
            threading.Timer(0.005, fire, args=(path,)).start()
        return commit(con, path, *args)

    analysis_cmd._FileProgress.__call__, analysis_cmd._FileProgress.deriving = on_read, on_derive
    loader.publish, loader.commit = on_publish, on_commit


if __name__ == "__main__":
    point, name, signal_name, *args = sys.argv[1:]
    install(point, name, getattr(signal, signal_name))
    sys.argv = ["tracekit", *args]
    main()
