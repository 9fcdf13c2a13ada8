"""Finding loaded traces by name or pattern."""

import fnmatch
import glob

from tracekit.errors import TracekitError
from tracekit.store.sql_sandbox import require_text


def trace_row(con, name):
    """(trace, path) of loaded trace `name`; raises, naming the loaded traces, when there is none."""
    require_text(name, f"the trace name {name!r}", hint="")  # DuckDB cannot take it: no loaded trace has it
    row = con.execute("SELECT trace, path FROM trace_files WHERE trace = ?", [name]).fetchone()
    if row is None:
        names = [r[0] for r in con.execute("SELECT trace FROM trace_files ORDER BY trace").fetchall()]
        raise no_such_trace(name, names)
    return row


def no_such_trace(name, names):
    """The error for a trace `name` that is not among the loaded `names` (sorted)."""
    return TracekitError(f"no trace named {name!r} (loaded: {_shown(names)})")


def _shown(names):
    return ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "") or "none"


def traces_of(con, side):
    """The loaded traces a side of a comparison names: a trace name, a glob of names (`rerun_*`),
    or a list of names; sorted for a glob, in the given order for a list."""
    if not isinstance(side, str):
        if not side:
            raise TracekitError("a side of the comparison names no trace")
        return [trace_row(con, name)[0] for name in side]
    names = [r[0] for r in con.execute("SELECT trace FROM trace_files ORDER BY trace").fetchall()]
    if side in names or not glob.has_magic(side):
        return [trace_row(con, side)[0]]
    matched = [name for name in names if fnmatch.fnmatchcase(name, side)]
    if not matched:
        raise TracekitError(f"no trace matches {side!r} (loaded: {_shown(names)})")
    return matched
