"""How `tracekit load` ends when it was stopped part way (Ctrl-C, SIGTERM, a full disk): one line
that says what of the load is in the database, and the exit status."""

from pathlib import Path

from tracekit.errors import DiskFullError, LoadInterrupted

# A shell's status for a command ended by Ctrl-C (128 + SIGINT); SIGTERM gets it too.
INTERRUPTED_STATUS = 130


def stops(outcome):
    """Whether `outcome` is a file the stop kept out of the database, or the one that stopped the
    load (a full disk, a COMMIT DuckDB gave up on): the load's last line speaks of it."""
    return isinstance(outcome, (LoadInterrupted, DiskFullError)) or getattr(outcome, "unsettled", None) is not None


def settle(db, outcomes):
    """Asks the database, reopened, whether the COMMITs DuckDB could not vouch for (it gives up on a
    database whose disk filled up) went through: such a file becomes loaded, or surely not. Returns
    the (path, LoadResult) of those that went through."""
    from tracekit.store.database import connect
    from tracekit.errors import TracekitError
    from tracekit.ingest.load_publish import is_committed

    doubtful = [i for i, (_, outcome) in enumerate(outcomes) if getattr(outcome, "unsettled", None) is not None]
    if not doubtful:
        return []
    try:
        con = connect(db, read_only=True)
    except TracekitError:
        return []  # it cannot be read now: the load's last line says so
    went_through = []
    try:
        for i in doubtful:
            path, error = outcomes[i]
            if is_committed(con, error.unsettled):
                outcomes[i] = (path, error.unsettled)
                went_through.append(outcomes[i])
            else:
                error.unsettled = None
    finally:
        con.close()
    return went_through


def stop_line(outcomes, reason):
    """(the line, the exit status) of a load stopped by `reason`: a signal's name, or the error
    (a full disk) after which nothing more could load."""
    by_signal = isinstance(reason, str)
    status = INTERRUPTED_STATUS if by_signal else 1
    first = next((i for i, (_, outcome) in enumerate(outcomes) if stops(outcome)), None)
    if first is None:
        why = "interrupted" if by_signal else f"Error: {reason.problem}"
        return f"{why}: every file was done, as listed above", status
    path, outcome = outcomes[first]
    later = outcomes[first + 1:]
    # A file after it may have been committed beside it (its line says so): only the others are named.
    rest = sum(1 for _, other in later if stops(other))
    others = f"the {_files(rest)} after it" if rest == len(later) else f"{rest} of the {_files(len(later))} after it"
    nor = f", nor of {others}" if rest else ""
    if getattr(outcome, "unsettled", None) is not None:
        after = f"; nothing of {others} was loaded" if rest else ""
        return f"Error: {outcome}: whether it was loaded is unknown, the database cannot be read now{after}", status
    if not by_signal:
        advice = "; free some space and load again" if isinstance(reason, DiskFullError) else ""
        return f"Error: {path}: {reason.problem}: nothing of it was loaded{nor}{advice}", status
    before = outcomes[first - 1][1] if first else None
    if not getattr(outcome, "started", True) and getattr(before, "status", None) == "loaded":
        return f"{outcomes[first - 1][0]} was loaded; stopped before the rest ({_files(rest + 1)})", status
    return f"interrupted: nothing of {path} was loaded{nor}", status


def loaded_any(outcomes):
    """Whether any file is, or may be, in the database."""
    return any(getattr(outcome, "status", None) == "loaded" or getattr(outcome, "unsettled", None) is not None
               for _, outcome in outcomes)


def _files(count):
    return f"{count} file{'s' if count != 1 else ''}"


def remove_database(db):
    for leftover in (Path(db), Path(f"{db}.wal")):
        if leftover.exists():
            leftover.unlink()
