"""DuckDB's engine, for the modules that only run SQL and fetch rows (execute, fetchall, cursor,
interrupt, close) and catch its errors.

`import duckdb` imports DuckDB's Python layer with its engine: the relation API (`con.sql`,
`con.table`, `.df()` of a relation), the expression builder, the Arrow sources, and its version
looked up through importlib.metadata. That is 0.05 CPU-s, a sixth of a small trace's `tracekit
load` as a command, none of it used on the way from a trace file to a database. The engine
underneath, `_duckdb`, is what connects, executes and fetches, and its connection class and
errors are the very ones the package exports, so a module that uses the relation API imports
`duckdb` itself: that completes every connection, these included (the package adds its methods
to the one connection class).
"""

try:
    import _duckdb as duckdb  # noqa: F401 - what the modules of the load path import
except ImportError:  # a DuckDB whose engine module is named otherwise: the package, whole
    import duckdb  # noqa: F401
