"""`tracekit load`, `query` and `schema`: traces into DuckDB, answers out."""

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


class _Progress:
    """A progress bar for one file, shown only once its load has taken a second."""

    def __init__(self, path):
        self.path, self.total = path, Path(path).stat().st_size if Path(path).is_file() else 0
        self.started, self.bar, self.done = time.monotonic(), None, 0

    def __call__(self, position):
        if self.bar is None and time.monotonic() - self.started > PROGRESS_AFTER_S and self.total:
            self.bar = click.progressbar(length=self.total, label=f"loading {Path(self.path).name}",
                                         file=click.get_text_stream("stderr"))
            self.bar.__enter__()
        if self.bar is not None:
            self.bar.update(position - self.done)
            self.done = position

    def close(self):
        if self.bar is not None:
            self.bar.update(self.total - self.done)
            self.bar.__exit__(None, None, None)


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
    from tracekit.loader import expand_paths

    files = expand_paths(paths)
    created = not Path(db).exists()
    con = connect(db)
    try:
        failed = [path for path in files if not _load_one(con, path, replace, lenient)]
    finally:
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


def _load_one(con, path, replace, lenient):
    """Loads one file and prints one line about it; returns False when it failed."""
    from tracekit.loader import load_file

    progress = _Progress(path)
    started = time.monotonic()
    try:
        result = load_file(con, path, replace=replace, lenient=lenient, progress=progress)
    except TracekitError as exc:
        click.echo(f"Error: {exc}", err=True)
        return False
    finally:
        progress.close()
    seconds = time.monotonic() - started
    if result.status == "skipped":
        click.echo(f"skipped {path}: {result.message}")
        return True
    click.echo(f"loaded {result.trace}: {result.events} events, {result.kernels} kernels "
               f"from {path} in {seconds:.2f} s{_dropped_note(result)}")
    return True


def _dropped_note(result):
    """'; dropped 2 events: 1 with no ph, 1 cut off by truncation (the last 50 bytes)'."""
    from tracekit.loader import TRUNCATED

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
