"""Stopping a load part way: Ctrl-C, SIGTERM or a full disk end every file's load within a moment,
and leave no doubt about which files were committed.

A stop interrupts the DuckDB query each load is running (the read of the events through the FIFOs,
a derive statement), no file starts after it, and no COMMIT begins after it. A COMMIT already under
way is let finish (a fraction of a second: the events and tables are written by then), so a file is
either wholly in the database, and its load says so, or not in it at all.
"""

import os
import signal
import threading
from contextlib import contextmanager

from tracekit.errors import LoadInterrupted

# DuckDB's interrupt only reaches a query that is running: one asked for between two statements is
# lost. So a stop asks again, this often, until the loads have let go of their connections.
REPEAT_INTERRUPT_S = 0.05
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class LoadStop:
    """Tells the loads of one `load_files` call to stop; `request` may be called from any thread,
    a signal handler included. `reason` is what stopped them: a signal's name or a DiskFullError."""

    def __init__(self):
        # Reentrant: a signal handler runs `request` in the main thread, perhaps inside `interruptible`.
        self._lock = threading.RLock()
        self._interruptible = set()  # connections running statements a stop may interrupt
        self._finished = threading.Event()
        self._repeater = None
        self.reason = None

    @property
    def requested(self):
        return self.reason is not None

    def request(self, reason):
        """Stops the loads: interrupts their running queries now and again until they end."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self._interrupt_all()
            if self._repeater is None and not self._finished.is_set():
                self._repeater = threading.Thread(target=self._keep_interrupting, daemon=True)
                self._repeater.start()

    def check(self, path, started=True):
        """Raises LoadInterrupted for `path` once a stop has been asked for."""
        if self.requested:
            raise LoadInterrupted(path, started)

    @contextmanager
    def interruptible(self, con, path):
        """Statements on `con` within this block end at a stop (raising DuckDB's interrupt error);
        none starts once a stop has been asked for."""
        with self._lock:
            self.check(path)
            self._interruptible.add(con)
        try:
            yield
        finally:
            with self._lock:
                self._interruptible.discard(con)

    def finish(self):
        """The loads are over: the repeated interrupts end."""
        self._finished.set()

    def _interrupt_all(self):
        for con in self._interruptible:
            con.interrupt()

    def _keep_interrupting(self):
        while not self._finished.wait(REPEAT_INTERRUPT_S):
            with self._lock:
                self._interrupt_all()

    @contextmanager
    def on_signals(self, signals=STOP_SIGNALS):
        """Within this block, SIGINT and SIGTERM stop the loads (instead of raising
        KeyboardInterrupt wherever the main thread happens to be, or ending the process at once)."""
        if threading.current_thread() is not threading.main_thread():
            yield self  # only the main thread may set signal handlers; the caller's stay in force
            return
        # Python runs a handler in the main thread, and only once that thread runs Python code: one
        # blocked waiting for a load in another thread would wait for the load to end when the
        # signal lands on another thread. The wakeup fd hears of the signal at once, from any thread.
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in signals}
        previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        watcher = threading.Thread(target=self._watch, args=(read_end, set(signals)), daemon=True)
        watcher.start()
        try:
            yield self
        finally:
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(write_end)  # the watcher reads the end of the pipe and stops
            watcher.join()
            os.close(read_end)

    def _watch(self, read_end, signals):
        while True:
            try:
                received = os.read(read_end, 64)
            except InterruptedError:
                continue
            if not received:
                return
            for number in received:
                if number in signals:
                    self.request(signal.Signals(number).name)

    def _on_signal(self, signum, frame):
        self.request(signal.Signals(signum).name)
