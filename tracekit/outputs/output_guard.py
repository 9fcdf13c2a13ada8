"""Before an output file is written: never over the database being read, never over a file of
another format (unless forced).

What a file holds is read from its first bytes: the magic numbers of binary formats (DuckDB,
SQLite, gzip, Parquet, images, archives, ...); otherwise UTF-8 without NUL bytes is text, and text
that opens with `{` or `[` is JSON, with `<html` or `<!doctype html` HTML. A text output may
replace plain text or its own kind (JSON over JSON); a binary one only its own format.
"""

import codecs
import os
from pathlib import Path

from tracekit.errors import TracekitError

_SNIFF_BYTES = 8192
# (offset, magic, what the file is), binary formats that an output might be pointed at by mistake.
_MAGIC = (
    (8, b"DUCK", "a DuckDB database"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (0, b"\x1f\x8b", "gzip data"),
    (0, b"PAR1", "a Parquet file"),
    (0, b"ARROW1", "an Arrow file"),
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF8", "a GIF image"),
    (0, b"%PDF-", "a PDF document"),
    (0, b"PK\x03\x04", "a zip archive"),
    (0, b"\x7fELF", "an executable"),
    (0, b"\x28\xb5\x2f\xfd", "zstd data"),
    (0, b"\xfd7zXZ\x00", "xz data"),
)
TEXT, JSON, HTML = "text", "JSON", "HTML"
# What each kind of output may replace: plain text is anyone's; a known format only its own.
_REPLACES = {TEXT: {TEXT}, JSON: {TEXT, JSON}, HTML: {TEXT, HTML},
             "parquet": {"a Parquet file"}, "gzip": {"gzip data"}}


def sniff(path):
    """What the existing file at `path` holds: one of _MAGIC's descriptions, TEXT, JSON, HTML,
    "binary data", or None when it is empty."""
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if not head:
        return None
    for offset, magic, what in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return what
    try:
        # Not final: the sample may end inside a character.
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "binary data"
    if "\x00" in text:
        return "binary data"
    start = text.lstrip("\ufeff \t\r\n")[:15].lower()
    if start[:1] in ("{", "["):
        return JSON
    if start.startswith(("<!doctype html", "<html")):
        return HTML
    return TEXT


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
