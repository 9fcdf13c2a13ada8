"""tracekit: make GPU profiler traces of attention answerable with SQL.

The analysis half (load, query) needs only duckdb and pandas; torch is
imported by the capture half alone.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "load", "query"]


def __getattr__(name):
    # Lazy, so `import tracekit` (and `tracekit capture` on a GPU box without duckdb) stays light.
    if name in ("load", "query"):
        from tracekit import api
        return getattr(api, name)
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
