"""Finding a loaded trace by its name."""

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
