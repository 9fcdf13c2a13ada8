"""Runs a reading `tracekit` command and sends its own process SIGINT while the finding rules'
statements run: how tests/test_interrupts.py interrupts `findings` and `report` at a known moment,
on a machine of any speed (a timed signal from outside finds a fast machine's command done).

    python tests/interrupt_reading.py findings --db DB
"""

import os
import signal
import sys
import threading

import tracekit.analysis.findings_engine as findings_engine
from tracekit.command import main


def install():
    found_by = findings_engine._found_by

    def signalled_meanwhile(con, selected, given):
        # from another thread, 5 ms in: the main thread is inside DuckDB then, as under a user's Ctrl-C
        threading.Timer(0.005, os.kill, args=(os.getpid(), signal.SIGINT)).start()
        return found_by(con, selected, given)

    findings_engine._found_by = signalled_meanwhile


if __name__ == "__main__":
    install()
    sys.argv = ["tracekit", *sys.argv[1:]]
    main()
