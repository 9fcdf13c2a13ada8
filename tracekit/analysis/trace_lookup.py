"""Finding the file behind a loaded trace's name."""

from pathlib import Path

from tracekit.errors import TracekitError


def trace_row(con, name):
    """(trace, path) of loaded trace `name`; raises, naming the loaded traces, when there is none."""
    row = con.execute("SELECT trace, path FROM trace_files WHERE trace = ?", [name]).fetchone()
    if row is None:
        names = [r[0] for r in con.execute("SELECT trace FROM trace_files ORDER BY trace").fetchall()]
        raise no_such_trace(name, names)
    return row


def no_such_trace(name, names):
    """The error for a trace `name` that is not among the loaded `names` (sorted)."""
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return TracekitError(f"no trace named {name!r} (loaded: {shown or 'none'})")


def file_for_trace(name, db=None):
    """The original file of loaded trace `name`, or (when it is gone) one rebuilt from the database."""
    from tracekit.api import resolve_db
    from tracekit.store.database import connect

    path, _ = resolve_db(db)
    con = connect(path, read_only=True)
    try:
        _, original = trace_row(con, name)
        if original and Path(original).is_file():
            return Path(original)
        from tracekit.outputs.trace_export import rebuild_trace
        return rebuild_trace(con, name)
    finally:
        con.close()
