"""The output formats a query can be written in: the names alone, for the command line's options,
which must not import the renderer (a load prints no table)."""

FORMATS = ("table", "box", "line", "csv", "tsv", "json", "ndjson", "markdown", "html", "parquet")
