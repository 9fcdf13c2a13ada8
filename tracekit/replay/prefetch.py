"""Reading the graphs of a database's traces while the finding rules run, and then while the fixes
of the traces read before them are planned and replayed: all of it is SQL or a sweep on one core
at a time (a window over one thread's calls or one stream's items runs on one core, and a small
trace's graph is mostly DuckDB planning its views), so a thread of its own reading the graphs
keeps the second core busy: seconds off `findings` on a big trace, and on a folder of small ones.

The graphs are read on a cursor of their own (its own temporary tables), in a thread; DuckDB runs
the two connections' queries at once. Which traces' fixes will be replayed is known only once the
rules have run: until then every trace asked for is read in turn, then only those wanted, in the
order they are replayed. The replaying thread takes each graph as it is asked for; where the next
one is still being read, it reads another wanted trace itself meanwhile, from the far end of the
list, rather than wait.
"""

import threading

from tracekit.errors import TracekitError
from tracekit.replay.job import Jobs
from tracekit.store.database import second_connections
from tracekit.store.engine import duckdb

# Graphs read and not yet replayed, at most: each is held in memory until its trace is replayed
# (a trace of a million events makes a graph of hundreds of MB), and a thread far ahead of the
# replays saves no more time than one a few traces ahead.
READ_AHEAD = 4


def graphs_read_meanwhile(con, trace=None):
    """A GraphPrefetch of `trace` (None: every loaded trace, biggest first), started now; None where
    there is none, or a second connection would not see what `con` sees."""
    if not hasattr(con, "cursor"):
        return None
    traces = [row[0] for row in con.execute(
        "SELECT trace FROM traces WHERE $trace IS NULL OR trace = $trace ORDER BY events DESC, trace",
        {"trace": trace}).fetchall()]
    if not traces:
        return None
    make_connection = second_connections(con)
    return GraphPrefetch(make_connection, con, traces) if make_connection else None


class GraphPrefetch:
    """The jobs (replay.job) of `traces`, read in a thread from the moment it is made, on a
    connection of its own that `make_connection` makes there (store.database.second_connections).
    `jobs_for(wanted)` stops it reading any other trace and hands over a reader of the wanted ones,
    which it goes on reading in that order; `stop()` ends it (no finding to replay, the rules
    failed, or the replays are done)."""

    def __init__(self, make_connection, con, traces):
        self._con = con
        self._cursor = None  # the thread's own, made and closed there
        self._order = list(traces)  # what the thread reads, in turn
        self._wanted = None  # None: every trace in turn; a set once the rules have said
        self._taken = set()  # traces a reader (the thread or the replaying one) has begun
        self._reading = None  # the thread's trace now
        self._read = {}  # trace -> its Job, or the TracekitError that reading it raised: not yet handed over
        self._changed = threading.Condition()
        self._failure = None  # what broke the thread other than the database: the caller's to see
        self._finished = False  # the thread reads no more
        self._thread = threading.Thread(target=self._run, args=(make_connection,), name="tracekit-graph-prefetch",
                                        daemon=True)
        self._thread.start()

    def _run(self, make_connection):
        try:
            cursor = make_connection()
            with self._changed:
                self._cursor = cursor
            jobs = Jobs(cursor)
            while (trace := self._next_to_read()) is not None:
                try:
                    found = jobs.of(trace)
                except TracekitError as exc:
                    found = exc
                except duckdb.Error:
                    # interrupted, as no longer wanted; or a failure the caller meets again reading it itself
                    found = None
                self._keep(trace, found)
        except duckdb.Error:
            pass  # interrupted before a trace was read; the caller reads what it wants itself
        except Exception as exc:  # noqa: BLE001: not lost: jobs_for raises it in the caller's thread
            self._failure = exc
        finally:
            with self._changed:
                self._reading = None
                self._order = []
                self._finished = True
                if self._cursor is not None:
                    self._cursor.close()
                self._changed.notify_all()

    def _next_to_read(self):
        """The next trace for the thread to read (taken), once fewer than READ_AHEAD wait to be
        replayed; None when none is left."""
        with self._changed:
            self._reading = None
            while True:
                left = [t for t in self._order if t not in self._taken
                        and (self._wanted is None or t in self._wanted)]
                if not left:
                    return None
                if len(self._read) < READ_AHEAD:
                    self._taken.add(left[0])
                    self._reading = left[0]
                    return left[0]
                self._changed.wait()

    def _keep(self, trace, found):
        """Keeps what reading `trace` found (a Job holds each rank a job's trace brings: those
        need no reading of their own); None: nothing, the trace is for whoever asks to read."""
        with self._changed:
            if found is None:
                self._taken.discard(trace)
            else:
                self._store(trace, found)
            self._changed.notify_all()

    def _store(self, trace, found):
        # (the lock held) a job's every wanted rank is read with it
        if isinstance(found, TracekitError):
            self._read[trace] = found
            return
        for rank in found.traces:
            if rank == trace or self._wanted is None or rank in self._wanted:
                self._read.setdefault(rank, found)
                self._taken.add(rank)

    def jobs_for(self, wanted):
        """A Jobs-like reader (`.of(trace)`) of the jobs of `wanted` (in the order they will be
        asked for): read by the thread, or by the caller where the thread has not begun them."""
        with self._changed:
            wanted = list(dict.fromkeys(wanted))
            self._wanted = set(wanted) if self._wanted is None else self._wanted & set(wanted)
            self._order = [t for t in wanted if t in self._wanted]
            for trace in [t for t in self._read if t not in self._wanted]:
                del self._read[trace]  # read before the rules said: not replayed
            self._interrupt_unwanted()
            self._changed.notify_all()
        if self._failure is not None:
            raise self._failure
        return _Prefetched(self, self._con)

    def stop(self):
        """Ends the reading (at once where it is reading a trace), keeping nothing; again is a no-op."""
        with self._changed:
            self._wanted = set()
            self._order = []
            self._read.clear()
            self._changed.notify_all()
        # An interrupt that comes between two of a read's queries is lost: again until it ends.
        while self._thread.is_alive():
            with self._changed:
                self._interrupt_unwanted()
            self._thread.join(0.05)

    def _interrupt_unwanted(self):
        if self._reading is not None and self._cursor is not None and self._wanted is not None \
                and self._reading not in self._wanted:
            self._cursor.interrupt()

    def _take(self, trace, read_here):
        """The job of `trace`: as the thread read it, or read with `read_here` (a function of a
        trace) where the thread has not begun it; while the thread reads it, another wanted trace
        the thread has not begun is read here meanwhile."""
        with self._changed:
            while True:
                if self._failure is not None:
                    raise self._failure
                if trace in self._read:
                    found = self._read.pop(trace)
                    self._changed.notify_all()
                    if isinstance(found, TracekitError):
                        raise found
                    return found
                if trace not in self._taken or self._finished:
                    self._taken.add(trace)
                    break
                meanwhile = next((t for t in reversed(self._order) if t not in self._taken), None)
                if meanwhile is None:
                    self._changed.wait()
                    continue
                self._taken.add(meanwhile)
                self._changed.release()
                try:
                    try:
                        found = read_here(meanwhile)
                    except TracekitError as exc:
                        found = exc
                finally:
                    self._changed.acquire()
                self._store(meanwhile, found)
        return read_here(trace)


class _Prefetched:
    def __init__(self, prefetch, con):
        self._prefetch, self._con, self._jobs = prefetch, con, None

    def of(self, trace):
        return self._prefetch._take(trace, self._read_here)

    def _read_here(self, trace):
        if self._jobs is None:
            self._jobs = Jobs(self._con)
        return self._jobs.of(trace)
