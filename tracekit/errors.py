"""Typed errors. Each message says what is wrong and, where it helps, what to do."""

from tracekit.internal_paths import hide_internal_paths


class TracekitError(Exception):
    """A user-facing problem: the CLI prints it as one line and exits 1."""


class TraceFileError(TracekitError):
    """A trace file cannot be read as a trace. The problem never names a path of tracekit's own
    making (a load's FIFO, a lake's staging folder): it shows `path` in its place."""

    # The LoadResult of a COMMIT that failed where the database could not then be asked whether it
    # went through (DuckDB gives up on a database whose disk filled up): reopened, it will say.
    unsettled = None

    def __init__(self, path, problem):
        self.path = str(path)
        self.problem = problem = hide_internal_paths(problem, path)
        super().__init__(f"{path}: {problem}")


class NotATrace(TraceFileError):
    """A JSON file that is no trace at all (an object without a traceEvents array): among a folder's
    files, a companion (timings, a manifest of one's own), which a folder's load passes over."""


class DatabaseError(TracekitError):
    """The database cannot be opened or changed."""


class DatabaseLocked(DatabaseError):
    """Another process (a load, most often) holds the database's lock."""


class QueryError(TracekitError):
    """A named query is unknown or an SQL statement failed."""


class CaptureError(TracekitError):
    """Nothing could be captured."""


class LoadInterrupted(TraceFileError):
    """A load stopped (Ctrl-C, SIGTERM, or a full disk met by another file) before its file was
    committed: nothing of the file is in the database. `started`: whether its load had begun."""

    def __init__(self, path, started=True):
        self.started = started
        super().__init__(path, "interrupted: nothing of it was loaded")


class DiskFullError(TraceFileError):
    """The disk filled up while a file loaded. `folder` is where space ran out."""

    def __init__(self, path, folder):
        self.folder = folder
        super().__init__(path, f"the disk is full (no space left in {folder})")


class LoadError(TracekitError):
    """Some files of a load failed and the others loaded: `.results` holds the LoadResults of the
    files loaded or skipped, `.failures` the (path, error) of each file that failed."""

    def __init__(self, message, results, failures):
        super().__init__(message)
        self.results = results
        self.failures = failures


def is_interrupt(exc):
    """Whether `exc` is Ctrl-C: Python's KeyboardInterrupt, or what DuckDB raises for a statement a
    SIGINT stopped (a RuntimeError, "Query interrupted", or its InterruptException)."""
    return (isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "InterruptException"
            or (isinstance(exc, RuntimeError) and str(exc).startswith("Query interrupted")))
