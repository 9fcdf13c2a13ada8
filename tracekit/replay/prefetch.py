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
from tracekit.store.database import second_connections
from tracekit.store.engine import duckdb

# Below this many events a trace's graph reads in a fraction of a second: reading it beside the
# rules saves little, and reading one whose findings turn out to have no fix is work thrown away.
MIN_EVENTS = 100_000


def graphs_read_meanwhile(con, trace=None):
    """A GraphPrefetch of the big traces (MIN_EVENTS or more) among `trace` (None: every loaded
    trace), started now; None where there is none, or a second connection would not see what
    `con` sees."""
    if not hasattr(con, "cursor"):
        return None
    traces = [row[0] for row in con.execute(
        "SELECT trace FROM traces WHERE events >= $least AND ($trace IS NULL OR trace = $trace) ORDER BY trace",
        {"least": MIN_EVENTS, "trace": trace}).fetchall()]
    if not traces:
        return None
    make_connection = second_connections(con)
    return GraphPrefetch(make_connection, con, traces) if make_connection else None


class GraphPrefetch:
    """The jobs (replay.job) of `traces`, read in a thread from the moment it is made, on a
    connection of its own that `make_connection` makes there (store.database.second_connections).
    `jobs_for(wanted)` stops it reading any other trace and hands over what it read, the rest to be
    read on `con`; `stop()` ends it where nothing is wanted (no finding to replay, or the rules
    failed)."""

    def __init__(self, make_connection, con, traces):
        self._con = con
        self._cursor = None  # the thread's own, made and closed there
        self._traces = list(traces)
        self._wanted = None  # None: every trace in turn; a set once the rules have said
        self._reading = None  # the trace being read now
        self._lock = threading.Lock()
        self._read = {}  # trace -> its Job, or the TracekitError that reading it raised
        self._failure = None  # what broke the thread other than the database: the caller's to see
        self._thread = threading.Thread(target=self._run, args=(make_connection,), name="tracekit-graph-prefetch",
                                        daemon=True)
        self._thread.start()

    def _run(self, make_connection):
        try:
            cursor = make_connection()
            with self._lock:
                self._cursor = cursor
            jobs = Jobs(cursor)
            for trace in self._traces:
                with self._lock:
                    if self._wanted is not None and trace not in self._wanted:
                        continue
                    self._reading = trace
                try:
                    self._read[trace] = jobs.of(trace)
                except TracekitError as exc:
                    self._read[trace] = exc
                except duckdb.Error:
                    # interrupted, as no longer wanted; or a failure the caller meets again reading it itself
                    continue
        except duckdb.Error:
            pass  # interrupted before a trace was read; the caller reads what it wants itself
        except Exception as exc:  # noqa: BLE001: not lost: jobs_for raises it in the caller's thread
            self._failure = exc
        finally:
            with self._lock:
                self._reading = None
                if self._cursor is not None:
                    self._cursor.close()

    def jobs_for(self, wanted):
        """A Jobs-like reader (`.of(trace)`) of the jobs of `wanted`: the prefetched ones as read,
        any other read on the caller's connection."""
        self._finish(set(wanted))
        if self._failure is not None:
            raise self._failure
        return _Prefetched(self._read, self._con)

    def stop(self):
        """Ends the reading (at once where it is reading a trace), keeping nothing; again is a no-op."""
        self._finish(set())

    def _finish(self, wanted):
        with self._lock:
            self._wanted = wanted if self._wanted is None else self._wanted & wanted
        # An interrupt that comes between two of a read's queries is lost: again until it ends.
        while self._thread.is_alive():
            with self._lock:
                if self._reading is not None and self._reading not in self._wanted:
                    self._cursor.interrupt()
            self._thread.join(0.05)


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
