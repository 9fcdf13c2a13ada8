"""tracekit: make GPU profiler traces of attention answerable with SQL.

The analysis half (load, query) needs only duckdb and pandas; torch is
imported by the capture half alone.
"""

__version__ = "0.1.0"
