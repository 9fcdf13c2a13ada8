"""tracekit: make GPU profiler traces of attention answerable with SQL.

The analysis half (load, query) needs only duckdb and pandas; torch is
imported by the capture half alone.
"""

from tracekit.version import __version__

__all__ = ["__version__", "load", "query", "findings", "diff", "whatif", "report", "export", "schema", "hta",
           "hta_diff", "open"]
# The API's names, and the function of tracekit.api each stands for (open is not the builtin's).
_API = {"load": "load", "query": "query", "findings": "findings", "diff": "diff", "whatif": "whatif", "report": "report",
        "export": "export", "schema": "schema", "hta": "hta", "hta_diff": "hta_diff", "open": "open_trace"}


def _serve_source_checkout():
    # pyproject maps tracekit.capture/.queries/.sample_traces to top-level folders; run from a
    # source checkout (the repo root on sys.path before the installed package) they must still import.
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "queries" / "__init__.py").is_file():
        __path__.append(str(root))


_serve_source_checkout()


def __getattr__(name):
    # Lazy, so `import tracekit` (and `tracekit capture` on a GPU box without duckdb) stays light.
    if name in _API:
        from tracekit import api
        return getattr(api, _API[name])
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
