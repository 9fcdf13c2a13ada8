"""tracekit's version, in a module of its own: every layer records it (a database's schema_info, a
lake's meta, the report's footer), and none may import it from the package itself, whose top is the
Python API (tracekit.load, tracekit.query, ...) and so above them all."""

__version__ = "0.1.0"
