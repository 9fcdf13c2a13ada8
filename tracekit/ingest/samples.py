"""The bundled sample traces, and a database of them built once and cached.

`tracekit query` with no database at hand runs on this, so a new user sees real
answers at once.
"""

import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path

from tracekit.version import __version__
from tracekit.store.cache_folder import cache_dir, unusable_cache


def sample_trace_paths():
    """The bundled sample traces (real H200 captures), sorted by name."""
    folder = resources.files("tracekit.sample_traces")
    return sorted(Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".json.gz"))


def _fingerprint():
    """Changes whenever the traces, the schema or the classification rules change."""
    import duckdb

    # A database file is tied to the DuckDB that wrote it: another version gets its own.
    digest = hashlib.sha256(f"{__version__} duckdb {duckdb.__version__}".encode())
    for path in sample_trace_paths():
        digest.update(path.name.encode())
        digest.update(str(path.stat().st_size).encode())
    # Everything that decides what a load writes: the ingest and store code and the schema files.
    package = Path(resources.files("tracekit"))
    sources = sorted([*package.glob("ingest/*.py"), *package.glob("store/**/*.*")])
    for source in sources:
        if source.suffix in (".py", ".sql", ".csv"):
            digest.update(source.relative_to(package).as_posix().encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def sample_database():
    """Path of a database holding the sample traces, building it on first use."""
    target = cache_dir() / f"samples-{_fingerprint()}.duckdb"
    if target.exists():
        return target  # the loader is imported only to build it: `tracekit query` starts faster
    from tracekit.store.database import connect
    from tracekit.errors import DatabaseError
    from tracekit.ingest.loader import load_file

    scratch = None
    try:
        handle, scratch = tempfile.mkstemp(dir=target.parent, prefix=".samples-", suffix=".duckdb")
        os.close(handle)
        os.unlink(scratch)
        con = connect(scratch)
        try:
            for path in sample_trace_paths():
                load_file(con, path)
        finally:
            con.close()
        # A rename is atomic: a concurrent first use sees either no file or a complete one.
        os.replace(scratch, target)
    except OSError as exc:
        raise unusable_cache(target.parent, exc.strerror or type(exc).__name__) from None
    except DatabaseError:
        # Its message names the scratch file, which is ours, not the user's.
        raise unusable_cache(target.parent, "the sample database cannot be written there") from None
    finally:
        for leftover in (scratch, f"{scratch}.wal"):
            if leftover and os.path.exists(leftover):
                os.unlink(leftover)
    return target


def resolve_db(db=None):
    """(path, is_samples): the given database, ./tracekit.duckdb, or else the bundled samples."""
    from tracekit.store.database import DEFAULT_DB

    if db is not None:
        return Path(db), False
    if Path(DEFAULT_DB).exists():
        return Path(DEFAULT_DB), False
    return sample_database(), True
