"""What a file holds, read from its first bytes: the magic numbers of binary formats (DuckDB,
SQLite, gzip, Parquet, images, archives, ...); otherwise UTF-8 without NUL bytes is text, and text
that opens with `{` or `[` is JSON, with `<html` or `<!doctype html` HTML (after any comments),
with `<?xml` XML. JSON, plain or gzipped, whose first bytes hold a `"traceEvents"` key is a trace:
no output replaces one unasked (it is what a database was loaded from, not an earlier output).

Opening a database refuses a file that holds something else (tracekit.store.database), and an
output refuses to replace one (tracekit.outputs.output_guard).
"""

import codecs
import re
import zlib

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
    (0, b"BZh", "bzip2 data"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"\x04\x22\x4d\x18", "lz4 data"),
    (257, b"ustar", "a tar archive"),
)
TEXT, JSON, HTML, XML = "text", "JSON", "HTML", "an XML document"
TRACE, GZIPPED_TRACE = "a trace (Kineto's JSON)", "a gzipped trace (Kineto's JSON)"
_TRACE_KEY = re.compile(rb'"traceEvents"\s*:')
_COMMENTS = re.compile(r"(\s*<!--.*?-->)+", re.S)


def sniff(path):
    """What the existing file at `path` holds: one of _MAGIC's descriptions, TEXT, JSON, HTML,
    "binary data", or None when it is empty."""
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if not head:
        return None
    for offset, magic, what in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return GZIPPED_TRACE if what == "gzip data" and _TRACE_KEY.search(_gunzipped_start(path)) else what
    try:
        # Not final: the sample may end inside a character.
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "binary data"
    if "\x00" in text:
        return "binary data"
    start = text.lstrip("\ufeff \t\r\n")
    if start[:1] in ("{", "["):
        return TRACE if _TRACE_KEY.search(head) else JSON
    start = _COMMENTS.sub("", start, count=1).lstrip().lower() if start.startswith("<!--") else start.lower()
    if start.startswith(("<!doctype html", "<html")):
        return HTML
    if start.startswith("<?xml"):
        return XML
    return TEXT


def _gunzipped_start(path):
    """The first bytes a gzip file decompresses to (b"" where they cannot be read)."""
    with open(path, "rb") as handle:
        decompress = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = b""
        while len(out) < _SNIFF_BYTES:
            block = handle.read(16384)
            if not block:
                break
            try:
                out += decompress.decompress(block, _SNIFF_BYTES - len(out))
            except zlib.error:
                break
            if decompress.unconsumed_tail or decompress.eof:
                break
    return out
