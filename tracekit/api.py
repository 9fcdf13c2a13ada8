"""The Python API: what the CLI does, one call each, returning pandas DataFrames."""

from pathlib import Path

from tracekit.database import DEFAULT_DB, connect, connect_for_queries


def resolve_db(db=None):
    """(path, is_samples): the given database, ./tracekit.duckdb, or else the bundled samples."""
    if db is not None:
        return Path(db), False
    if Path(DEFAULT_DB).exists():
        return Path(DEFAULT_DB), False
    from tracekit.samples import sample_database
    return sample_database(), True


def query(name=None, *, sql=None, db=None, params=None, allow_files=False):
    """Runs a named query (or `sql`, one SELECT) read-only and returns a DataFrame.

    With no `db` and no tracekit.duckdb in the working directory it runs on the
    bundled sample traces: `tracekit.query("summary")`.

    The query sees the trace database and nothing else, as `tracekit query` does:
    no other file, no ATTACH, no COPY. `allow_files=True` lets it read files too
    (`read_csv('mine.csv')`, `'runs.parquet'`) to join with the traces; it still
    never writes. Off by default, so SQL passed on from someone else stays inside.
    """
    from tracekit.named_queries import run_named, run_sql
    if (name is None) == (sql is None):
        raise ValueError("give a query name or sql=, not both")
    path, _ = resolve_db(db)
    con = connect_for_queries(path, allow_files=allow_files)
    try:
        return run_named(con, name, params) if name is not None else run_sql(con, sql)
    finally:
        con.close()


def load(paths, *, db=DEFAULT_DB, replace=False, lenient=False):
    """Loads trace files, folders or globs into `db`; returns one LoadResult per file."""
    from tracekit.loader import expand_paths, load_files
    if isinstance(paths, (str, Path)):
        paths = [paths]
    con = connect(db)
    try:
        results = []
        for _, outcome in load_files(con, expand_paths([str(p) for p in paths]), replace=replace, lenient=lenient):
            if isinstance(outcome, Exception):
                raise outcome
            results.append(outcome)
        return results
    finally:
        con.close()


def findings(*, db=None, trace=None, rule=None, params=None):
    """What the finding rules see (as `tracekit findings`): a DataFrame of trace, rule, severity,
    title, detail, fix, saving_us_per_step and evidence (a list of the events each rests on),
    ranked by saving. `params` sets rules' thresholds by name."""
    from tracekit.findings_engine import run_findings
    path, _ = resolve_db(db)
    con = connect_for_queries(path)
    try:
        return run_findings(con, trace=trace, rule=rule, params=params)
    finally:
        con.close()


def diff(a, b, *, db=None, by="class", fail_on=(), top=10):
    """Compares trace `b` against baseline `a` (as `tracekit diff`); returns a tracekit.compare.DiffResult
    with per-step figures and intervals, the attribution, the findings' change and the verdict.
    `a` and `b` are trace names in `db`, or two trace files, loaded into a temporary database."""
    import tempfile

    from tracekit.compare import diff as run_diff

    if Path(a).is_file() and Path(b).is_file():
        with tempfile.TemporaryDirectory(prefix="tracekit-diff-") as folder:
            results = load([a, b], db=Path(folder) / "diff.duckdb")
            names = [r.trace for r in results]
            con = connect_for_queries(Path(folder) / "diff.duckdb")
            try:
                return run_diff(con, names[0], names[-1], by=by, fail_on=fail_on, top=top)
            finally:
                con.close()
    path, _ = resolve_db(db)
    con = connect_for_queries(path)
    try:
        return run_diff(con, a, b, by=by, fail_on=fail_on, top=top)
    finally:
        con.close()
