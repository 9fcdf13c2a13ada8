"""A new database starts as a copy of an empty one with this tracekit's schema, built once and
cached: creating the tables, knowledge tables, views and named queries' macros takes 0.2-0.3 s,
most of a small trace's `tracekit load` into a new database; a copy of the 3 MB file takes a few ms.

The copy is only a head start: `ensure_schema` runs on every open as before; it finds the copy's
schema_digest current and has nothing to do, or brings it up to date the way it does any database
(knowledge rows, kernel rules). The template is named by that digest. Anything that fails here
(no cache folder, a full disk, a file that appeared meanwhile) leaves the path alone, and the
database is made the usual way.
"""

import os
import secrets
import shutil
import tempfile
from pathlib import Path

from tracekit.store.engine import duckdb
from tracekit.errors import TracekitError
from tracekit.store.cache_folder import cache_dir


def start_from_template(path, schema_name, build):
    """Puts a copy of the cached empty database `schema_name` at `path` when nothing is there,
    made by `build(con, path)` on first use; never raises. The caller, the database module, names
    the schema and builds it: this module does not import it back."""
    if path == ":memory:" or os.path.lexists(path) or os.path.lexists(f"{path}.wal"):
        return
    try:
        template = _template(schema_name, build)
        _copy_new(template, Path(path))
    except (OSError, duckdb.Error, TracekitError):
        pass


def _template(schema_name, build):
    """The cached empty database of this schema and DuckDB version."""
    # DuckDB's version in the name too: an older DuckDB cannot open a newer one's file.
    target = cache_dir() / f"{schema_name}-duckdb{duckdb.__version__}.duckdb"
    if not target.exists():
        _build(target, build)
    return target


def _build(target, build):
    handle, scratch = tempfile.mkstemp(dir=target.parent, prefix=".schema-", suffix=".duckdb")
    os.close(handle)
    os.unlink(scratch)
    try:
        con = duckdb.connect(scratch)
        try:
            build(con, scratch)
        finally:
            con.close()
        os.replace(scratch, target)  # atomic: a concurrent first use sees no file or a whole one
    finally:
        for leftover in (scratch, f"{scratch}.wal"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _copy_new(template, path):
    """Copies `template` to `path` unless something is there by then: the copy is written beside
    it and linked into place, which fails rather than replace a file another process has made."""
    scratch = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new"
    # Made as DuckDB makes a database (mode 0666 less the umask), not as mkstemp does (0600).
    os.close(os.open(scratch, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        shutil.copyfile(template, scratch)
        os.link(scratch, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(scratch)
