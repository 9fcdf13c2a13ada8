"""Before an output file is written: never over the database being read, never over a file of
another format (unless forced).

What a file holds is read from its first bytes (tracekit.store.file_kind). A text output may
replace plain text or its own kind (JSON over JSON); a binary one only its own format.
"""

import os
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.store.file_kind import HTML, JSON, TEXT, sniff

# What each kind of output may replace: plain text is anyone's; a known format only its own.
_REPLACES = {TEXT: {TEXT}, JSON: {TEXT, JSON}, HTML: {TEXT, HTML},
             "parquet": {"a Parquet file"}, "gzip": {"gzip data"}}


def _database_files(database):
    base = Path(database)
    return [base, Path(f"{base}.wal")]


def _is_same(path, other):
    if path.resolve() == other.resolve():
        return True
    try:
        return os.path.samefile(path, other)  # a hard link to it, say
    except OSError:
        return False


def _inside(path, folder):
    """Whether `path` is `folder` or lies below it, links resolved (a file: URI's folder too)."""
    text = str(folder)
    if "://" in text and not text.startswith("file:"):
        return False  # a lake on another file system (hdfs://, s3a://): no local file is in it
    if text.startswith("file:"):
        from urllib.parse import unquote, urlsplit
        text = unquote(urlsplit(text).path)
    resolved, inner = Path(text).resolve(), Path(path).resolve()
    return inner == resolved or resolved in inner.parents


def check_output(output, kind, *, what, database=None, lake=None, force=False):
    """Raises TracekitError when writing `kind` (a _REPLACES key) to `output` would overwrite the
    database being read (or its WAL) or a file in the lake being read, whatever `force` says, or, without `force`, an existing
    file that holds something else. `what` names the output format in the message ("csv")."""
    path = Path(output)
    if lake is not None and _inside(path, lake):
        raise TracekitError(f"{output}: is inside the lake this command reads ({lake}); give another -o")
    if database is not None:
        for used in _database_files(database):
            if _is_same(path, used):
                role = "the database" if used == Path(database) else f"the database's {used.suffix} file"
                raise TracekitError(f"{output}: is {role} this command reads ({database}); give another -o")
    if not path.is_file():
        return  # new, or a device such as /dev/stdout: nothing to lose
    try:
        holds = sniff(path)
    except OSError as exc:
        raise TracekitError(f"{output}: cannot be read to check what it holds ({exc.strerror})") from None
    if holds is None or holds in _REPLACES[kind] or force:
        return
    raise TracekitError(f"{output}: exists and holds {holds}, not {what}; tracekit does not overwrite it "
                        "(give another -o, or --force)")
