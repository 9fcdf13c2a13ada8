"""Which format an output is written in: `-f`, else the extension of `-o FILE`, else the default.

`-o g.parquet` writes Parquet and `-o g.csv` CSV with no `-f`; a `-f` that names another format
than the file's extension (`-f csv -o g.parquet`) is refused rather than writing a file whose name
lies about its content. A name with no known extension takes `-f` or the default.
"""

from pathlib import Path

from tracekit.errors import TracekitError

EXTENSION_FORMATS = {
    ".csv": "csv", ".tsv": "tsv", ".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson",
    ".md": "markdown", ".markdown": "markdown", ".parquet": "parquet", ".html": "html", ".htm": "html",
}
# Formats that only make sense in a file.
BINARY_FORMATS = ("parquet",)


def format_for_output(fmt, output, *, default, allowed):
    """The format to write: `fmt` (from -f, None when not given) or the one `output`'s extension
    names, else `default`. Raises TracekitError when they disagree, when the extension names a
    format this command cannot write (`allowed`), or when a binary format would go to a terminal."""
    by_name = EXTENSION_FORMATS.get(Path(output).suffix.lower()) if output else None
    if by_name is not None and by_name not in allowed:
        raise TracekitError(f"{output}: this command cannot write {by_name} "
                            f"(it writes {', '.join(allowed)}); give a file name to match")
    if fmt is not None and by_name is not None and fmt != by_name:
        raise TracekitError(f"-f {fmt} but {output} is named as {by_name}: "
                            f"drop -f, or give a file name {_fitting_name(fmt, output)}")
    chosen = fmt or by_name or default
    if chosen in BINARY_FORMATS and not output:
        raise TracekitError(f"{chosen} is binary: give a file with -o FILE")
    return chosen


def _fitting_name(fmt, output):
    names = [ext for ext, f in EXTENSION_FORMATS.items() if f == fmt]
    return f"ending in {' or '.join(names)}" if names else f"not ending in {Path(output).suffix}"
