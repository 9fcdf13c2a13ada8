"""Reading the graphs of a database's traces while the finding rules run: both are SQL, and each
alone leaves one of the two cores idle for much of its time (a window over one thread's calls or
one stream's items runs on one core), so reading the graphs beside the rules takes seconds off
`findings` on a big trace.

The graphs are read on a cursor of their own (its own temporary tables), in a thread; DuckDB runs
the two connections' queries at once. Which traces' fixes will be replayed is known only once the
rules have run: until then every trace asked for is read in turn, then only those wanted.
"""

import threading

from tracekit.errors import TracekitError
from tracekit.replay.job import Jobs


class GraphPrefetch:
    """The jobs (replay.job) of `traces`, read on `cursor` (a second connection to `con`'s
    database: store.database.second_connections) in a thread from the moment it is made.
    `jobs_for(wanted)` stops it reading any other trace and hands over what it read, the rest to be
    read on `con`; `stop()` ends it where nothing is wanted (no finding to replay, or the rules
    failed)."""

    def __init__(self, cursor, con, traces):
        self._con = con
        self._cursor = cursor
        self._traces = list(traces)
        self._wanted = None  # None: every trace in turn; a set once the rules have said
        self._reading = None  # the trace being read now
        self._lock = threading.Lock()
        self._read = {}  # trace -> its Job, or the TracekitError that reading it raised
        self._thread = threading.Thread(target=self._run, name="tracekit-graph-prefetch", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            jobs = Jobs(self._cursor)
            for trace in self._traces:
                with self._lock:
                    if self._wanted is not None and trace not in self._wanted:
                        continue
                    self._reading = trace
                try:
                    self._read[trace] = jobs.of(trace)
                except TracekitError as exc:
                    self._read[trace] = exc
        except Exception:  # noqa: BLE001: stopped, or a failure the caller meets again reading that trace itself
            pass
        finally:
            with self._lock:
                self._reading = None

    def jobs_for(self, wanted):
        """A Jobs-like reader (`.of(trace)`) of the jobs of `wanted`: the prefetched ones as read,
        any other read on the caller's connection."""
        self._finish(set(wanted))
        return _Prefetched(self._read, self._con)

    def stop(self):
        self._finish(set())

    def _finish(self, wanted):
        with self._lock:
            self._wanted = wanted
            if self._reading is not None and self._reading not in wanted:
                self._cursor.interrupt()
        self._thread.join()
        self._cursor.close()


class _Prefetched:
    def __init__(self, read, con):
        self._read, self._con, self._jobs = read, con, None

    def of(self, trace):
        found = self._read.get(trace)
        if isinstance(found, TracekitError):
            raise found
        if found is not None:
            return found
        if self._jobs is None:
            self._jobs = Jobs(self._con)
        return self._jobs.of(trace)
