"""`tracekit load`, `query` and `schema`: traces into DuckDB, answers out."""

import dataclasses
import sys
import threading
import time
from pathlib import Path

import click

from tracekit.errors import TracekitError

FORMATS = ("table", "csv", "json", "markdown", "parquet")
# Loads shorter than this finish before a progress bar would help.
PROGRESS_AFTER_S = 1.0


def output_options(command):
    """The options every command that prints rows shares."""
    command = click.option("-o", "--output", type=click.Path(dir_okay=False),
                           help="Write to this file instead of standard output.")(command)
    command = click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="table",
                           show_default=True, help="Output format (parquet needs -o).")(command)
    return command


def emit(frame, fmt, output):
    from tracekit.render import render, write
    if output:
        write(frame, fmt, output)
        click.echo(f"wrote {len(frame)} row(s) to {output}", err=True)
    else:
        click.echo(render(frame, fmt), nl=False)


# A file's share of its bar spent reading its bytes; the rest is deriving the tables and the commit.
READ_SHARE = 0.6


class _Progress:
    """One bar for a whole load, over the bytes of all its files, shown once it has run a second:
    `loading 3/32 rank3.json` with the ETA click computes. A file's bytes count as read, then as
    derived, so the bar reaches its end when the last commit does."""

    def __init__(self, paths):
        self.sizes = {str(p): Path(p).stat().st_size if Path(p).is_file() else 0 for p in paths}
        self.total = sum(self.sizes.values()) or 1
        self.done = {path: 0.0 for path in self.sizes}
        self.finished = 0
        self.started, self.bar, self.shown = time.monotonic(), None, 0
        self.lock = threading.Lock()
        # Redrawn in place on a terminal; elsewhere (a log, a pipe) it would print a line per update.
        self.on_terminal = sys.stderr.isatty()

    def __call__(self, path):
        """The progress object load_file is given for `path`."""
        return _FileProgress(self, str(path))

    def advance(self, path, fraction):
        with self.lock:
            self.done[path] = max(self.done[path], min(fraction, 1.0) * self.sizes[path])
            if self.bar is None and time.monotonic() - self.started > PROGRESS_AFTER_S and self.on_terminal:
                self.bar = click.progressbar(length=self.total, file=click.get_text_stream("stderr"),
                                             show_eta=True, show_percent=True)
                self.bar.__enter__()
            if self.bar is not None:
                position = int(sum(self.done.values()))
                self.bar.label = f"loading {self.finished}/{len(self.sizes)} done, {Path(path).name}"
                self.bar.update(position - self.shown)
                self.shown = position

    def clear_line(self):
        """Rubs out the bar, so a line printed now starts at the left edge; it is redrawn after."""
        if self.bar is not None:
            click.echo("\r\033[K", nl=False, err=True)

    def file_done(self, path):
        with self.lock:
            self.finished += 1
        self.advance(str(path), 1.0)

    def close(self):
        if self.bar is not None:
            self.bar.update(self.total - self.shown)
            self.bar.__exit__(None, None, None)


class _FileProgress:
    def __init__(self, load, path):
        self.load, self.path = load, path
        self.size = load.sizes.get(path) or 1

    def __call__(self, position):
        """Bytes of the file read so far."""
        self.load.advance(self.path, READ_SHARE * position / self.size)

    def deriving(self, done, total):
        self.load.advance(self.path, READ_SHARE + (1 - READ_SHARE) * done / total)


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--db", default="tracekit.duckdb", show_default=True, type=click.Path(dir_okay=False),
              help="Database file (created if missing).")
@click.option("--replace", is_flag=True, help="Reload traces already loaded (same content or same file).")
@click.option("--lenient", is_flag=True,
              help="Load what can be read from a truncated or partly malformed trace, and say what was dropped.")
def load(paths, db, replace, lenient):
    """Load trace files, folders or globs (.json, .json.gz) into a DuckDB database.

    Each file loads in one transaction: it loads completely or leaves the database
    as it was. Files with content already loaded are skipped (see --replace).
    """
    from tracekit.database import connect
    from tracekit.loader import expand_paths, load_files

    files = expand_paths(paths)
    created = not Path(db).exists()
    con = connect(db)
    progress = _Progress(files)
    failed = []
    try:
        for path, outcome in load_files(con, files, replace=replace, lenient=lenient, progress=progress):
            progress.clear_line()
            if not _report(path, outcome, progress):
                failed.append(path)
            progress.file_done(path)
    finally:
        progress.close()
        con.close()
    if created and len(failed) == len(files):
        _remove_database(db)  # nothing loaded: leave no empty database behind
    if len(failed) == 1 and len(files) == 1:
        click.get_current_context().exit(1)  # its one error line has been printed
    if failed:
        names = ", ".join(Path(path).name for path in failed[:5]) + (", ..." if len(failed) > 5 else "")
        loaded = len(files) - len(failed)
        where = f"the other {loaded} are in {db}" if loaded else "nothing was loaded"
        raise TracekitError(f"{len(failed)} of {len(files)} files failed to load ({names}); {where}")


def _report(path, outcome, progress):
    """Prints one line about a file's load; returns False when it failed."""
    if isinstance(outcome, TracekitError):
        click.echo(f"Error: {outcome}", err=True)
        return False
    if outcome.status == "skipped":
        click.echo(f"skipped {path}: {outcome.message}")
        return True
    click.echo(f"loaded {outcome.trace}: {outcome.events} events, {outcome.kernels} kernels "
               f"from {path} in {outcome.seconds:.2f} s{_dropped_note(outcome)}")
    return True


def _dropped_note(result):
    """'; dropped 2 events: 1 with no ph, 1 cut off by truncation (the last 50 bytes)'."""
    from tracekit.loader import TRUNCATED

    if result.junk_bytes:
        return f"; left out {result.junk_bytes} bytes of junk after the trace" + _dropped_note(
            dataclasses.replace(result, junk_bytes=0))
    if not result.dropped:
        return "; its event array never ends properly: loaded up to its last event, nothing dropped" \
            if result.truncated else ""
    total = sum(result.dropped.values())
    reasons = [f"{count} {why} (the last {result.cut_bytes} bytes)" if why == TRUNCATED else f"{count} with {why}"
               for why, count in result.dropped.items()]
    return f"; dropped {total} event{'s' if total != 1 else ''}: {', '.join(reasons)}"


def _remove_database(db):
    for leftover in (Path(db), Path(f"{db}.wal")):
        if leftover.exists():
            leftover.unlink()


def _params(pairs):
    return {name: value for name, value in pairs}


@click.command()
@click.argument("name", required=False)
@click.option("--sql", help="Run this SQL instead of a named query.")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("-p", "--param", "params", nargs=2, multiple=True, metavar="NAME VALUE",
              help="A parameter of the named query ($NAME in its SQL).")
@click.option("--list", "list_queries", is_flag=True, help="List the named queries and exit.")
@output_options
def query(name, sql, db, params, list_queries, fmt, output):
    """Run a named query (queries/*.sql) or --sql SQL, read-only, and print the rows.

    With no --db and no tracekit.duckdb here, it runs on the bundled sample traces.
    """
    from tracekit.cli import database_to_read
    from tracekit.database import connect
    from tracekit.named_queries import named_queries, run_named, run_sql

    if list_queries:
        import pandas as pd
        rows = [{"query": q.name, "question": q.question,
                 "params": ", ".join(f"{k}={d if d is not None else 'NULL'}" for k, (d, _) in q.params.items())}
                for q in named_queries().values()]
        emit(pd.DataFrame(rows), fmt, output)
        return
    if (name is None) == (sql is None):
        raise click.UsageError("give a query NAME or --sql SQL (tracekit query --list shows the names)")
    if sql is not None and params:
        raise click.UsageError("-p parameters go with a named query, not --sql")
    path, _ = database_to_read(db, "running on")
    con = connect(path, read_only=True)
    try:
        frame = run_named(con, name, _params(params)) if name else run_sql(con, sql)
    finally:
        con.close()
    emit(frame, fmt, output)


@click.command()
def schema():
    """Print the documented views (the SQL contract) and their columns."""
    from tracekit.database import schema_doc
    click.echo(schema_doc(), nl=False)


COMMANDS = [load, query, schema]
