"""One load of many files into a database, as `tracekit load` and `tracekit.load()` run it.

Every file that can load does, each in its own transaction; the ones that fail are collected,
not raised, so a bad file among good ones costs only itself. A database this load created and
nothing went into is removed, so a failed first load leaves nothing behind.
"""

from dataclasses import dataclass, field
from pathlib import Path

from tracekit.store.engine import duckdb
from tracekit.errors import TracekitError

# How many failed files a summary names.
NAMED_FAILURES = 5


@dataclass
class LoadBatch:
    """What a load did: the results of the files loaded or skipped, the errors of those that
    failed (path, error), and how many traces the database holds afterwards."""

    db: Path
    files: list
    results: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    outcomes: list = field(default_factory=list)  # (path, result or error), in the order given
    traces_held: int = None

    @property
    def loaded(self):
        return sum(result.status == "loaded" for result in self.results)

    @property
    def skipped(self):
        return sum(result.status == "skipped" for result in self.results)

    def add(self, path, outcome):
        """Files one file's outcome: its LoadResult, or the TracekitError it failed with."""
        self.outcomes.append((path, outcome))
        if isinstance(outcome, TracekitError):
            self.failures.append((path, outcome))
        else:
            self.results.append(outcome)


def load_batch(db, files, *, replace=False, lenient=False, progress=None, on_outcome=None, stop=None,
               remove_if_empty=True, workers=None):
    """Loads `files` (loader.expand_paths of the files, folders and globs given) into `db`;
    returns a LoadBatch.

    `on_outcome(path, result or error)` sees each file as it finishes, in the order given;
    `progress`, `stop` (a LoadStop) and `workers` are load_files' own. The CLI removes an empty new database
    itself (remove_if_empty=False), once it knows whether an interrupted COMMIT went through."""
    from tracekit.store.database import connect
    from tracekit.ingest.loader import load_files, passed_over

    batch = LoadBatch(Path(db), list(files))
    created = not batch.db.exists()
    con = connect(db)
    try:
        for path, outcome in load_files(con, batch.files, replace=replace, lenient=lenient, progress=progress,
                                        stop=stop, workers=workers):
            outcome = passed_over(files, path, outcome)
            batch.add(path, outcome)
            if on_outcome is not None:
                on_outcome(path, outcome)
        try:
            batch.traces_held = con.execute("SELECT count(*) FROM trace_files").fetchone()[0]
        except duckdb.Error:
            pass  # a connection DuckDB gave up on (an interrupt, a full disk): the count is unknown

    finally:
        con.close()
    if remove_if_empty and created and not batch.results:
        _remove_database(batch.db)
    return batch


def database_line(batch):
    """'into /abs/tracekit.duckdb: 8 loaded, 1 skipped; it holds 9 traces': where a load wrote."""
    counts = ", ".join(part for part in (f"{batch.loaded} loaded" if batch.loaded else "",
                                         f"{batch.skipped} skipped" if batch.skipped else "") if part)
    if batch.traces_held is None:
        return f"{'into' if batch.loaded else 'nothing new for'} {batch.db.resolve()}: {counts}"
    held = f"{batch.traces_held} trace{'s' if batch.traces_held != 1 else ''}"
    return f"{'into' if batch.loaded else 'nothing new for'} {batch.db.resolve()}: {counts}; it holds {held}"


def failure_summary(batch, *, with_reasons=False):
    """'2 of 10 files failed to load (a.json, b.json); the other 8 are in tracekit.duckdb', each
    failure's own message after its name `with_reasons` (the CLI has printed them already)."""
    shown = batch.failures[:NAMED_FAILURES]
    if with_reasons:
        names = "; ".join(str(error) for _, error in shown)
    else:
        names = ", ".join(Path(path).name for path, _ in shown)
    names += ", ..." if len(batch.failures) > NAMED_FAILURES else ""
    good = len(batch.files) - len(batch.failures)
    where = ("nothing was loaded" if not good else f"the other one is in {batch.db}" if good == 1
             else f"the other {good} are in {batch.db}")
    return f"{len(batch.failures)} of {len(batch.files)} files failed to load ({names}); {where}"


def _remove_database(db):
    for leftover in (Path(db), Path(f"{db}.wal")):
        if leftover.exists():
            leftover.unlink()
