"""`tracekit load`, `query` and `schema`: traces into DuckDB, answers out."""

import dataclasses
import sys
import threading
import time
from pathlib import Path

import click

from tracekit.errors import TracekitError
from tracekit.render import FORMATS  # light: the renderer imports neither duckdb nor pandas

# Loads shorter than this finish before a progress bar would help.
PROGRESS_AFTER_S = 1.0


def _column_list(ctx, param, value):
    if value is None:
        return None
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        raise click.BadParameter("give column names separated by commas, as in --columns trace,step")
    return names


def output_options(command):
    """The options every command that prints rows shares."""
    command = click.option("--columns", callback=_column_list, metavar="A,B,...",
                           help="Only these columns of the result, in this order.")(command)
    command = click.option("-o", "--output", type=click.Path(dir_okay=False),
                           help="Write to this file instead of standard output; its extension (.csv .tsv .json "
                                ".ndjson .md .html .parquet) picks the format unless -f gives it.")(command)
    command = click.option("-f", "--format", "fmt", type=click.Choice(FORMATS),
                           help="Output format [default: table, or what -o's extension says]; "
                                "parquet needs -o.")(command)
    command = click.option("--force", is_flag=True,
                           help="Let -o replace an existing file that holds another format.")(command)
    return command


def check_output_file(output, fmt, force, database=None):
    """Refuses, before any work, an -o that would overwrite the database or a file of another format."""
    from tracekit.output_guard import JSON, TEXT, check_output
    if output:
        kind = {"json": JSON, "parquet": "parquet"}.get(fmt, TEXT)
        check_output(output, kind, what=fmt, database=database, force=force)


def output_format(fmt, output):
    """The format -f and -o ask for together (see tracekit.output_format)."""
    from tracekit.output_format import format_for_output
    return format_for_output(fmt, output, default="table", allowed=FORMATS)


def terminal_width():
    """The width a table is fitted to: COLUMNS, else the terminal's. None, so that nothing is cut,
    when standard output is not a terminal (a pipe, a file) and COLUMNS is unset."""
    import os
    import shutil

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        on_terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        on_terminal = False
    return shutil.get_terminal_size().columns if on_terminal else None


def emit(rows, fmt, output, columns=None):
    """Prints `rows` (a tracekit.rows.Rows) in `fmt`, or writes them to the file `output`."""
    from tracekit.render import render, write
    if columns:
        rows = rows.select(columns)
    if output:
        write(rows, fmt, output)
        click.echo(f"wrote {len(rows.rows)} row(s) to {output}", err=True)
    else:
        click.echo(render(rows, fmt, terminal_width()), nl=False)


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

    def close(self, finished=True):
        """Fills the bar to its end, or, for a load that was stopped part way, rubs it out."""
        if self.bar is None:
            return
        if not finished:
            click.echo("\r\033[K\033[?25h", nl=False, err=True)  # the bar rubbed out, the cursor shown again
            return
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
    Ctrl-C or SIGTERM stops the load at once, saying what was loaded (exit 130).
    """
    from tracekit.cli.load_end import loaded_any, remove_database, settle, stop_line
    from tracekit.load_stop import LoadStop

    stop = LoadStop()
    with stop.on_signals():
        files, outcomes, created = _load_each(paths, db, replace, lenient, stop)
        for path, result in settle(db, outcomes):
            _report(path, result, None)  # its COMMIT went through after all: its line was held back
        if created and not loaded_any(outcomes):
            remove_database(db)  # nothing loaded: leave no empty database behind
    if stop.requested:
        line, status = stop_line(outcomes, stop.reason)
        click.echo(line, err=True)
        click.get_current_context().exit(status)
    failed = [path for path, outcome in outcomes if isinstance(outcome, TracekitError)]
    if len(failed) == 1 and len(files) == 1:
        click.get_current_context().exit(1)  # its one error line has been printed
    if failed:
        names = ", ".join(Path(path).name for path in failed[:5]) + (", ..." if len(failed) > 5 else "")
        loaded = len(files) - len(failed)
        where = f"the other {loaded} are in {db}" if loaded else "nothing was loaded"
        raise TracekitError(f"{len(failed)} of {len(files)} files failed to load ({names}); {where}")


def _load_each(paths, db, replace, lenient, stop):
    """Loads the files, printing a line for each; returns (files, [(path, outcome)], whether the
    database was created). A file the stop kept out gets no line: the load's last line sums them up."""
    from tracekit.cli.load_end import stops
    from tracekit.database import connect
    from tracekit.loader import expand_paths, load_files

    files = expand_paths(paths)
    created = not Path(db).exists()
    con = connect(db)
    progress = _Progress(files)
    outcomes = []
    try:
        for path, outcome in load_files(con, files, replace=replace, lenient=lenient, progress=progress, stop=stop):
            outcomes.append((path, outcome))
            if not stops(outcome):
                progress.clear_line()
                _report(path, outcome, progress)
                progress.file_done(path)
    finally:
        progress.close(finished=not stop.requested)
        con.close()
    return files, outcomes, created


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
@click.option("--allow-files", is_flag=True,
              help="Let --sql read your own files (CSV, Parquet, JSON) to join with the traces; it still never writes.")
@output_options
def query(name, sql, db, params, list_queries, allow_files, fmt, force, output, columns):
    """Run a named query (queries/*.sql) or --sql SQL, read-only, and print the rows.

    With no --db and no tracekit.duckdb here, it runs on the bundled sample traces.
    --sql is one SELECT that sees the trace database and nothing else (see --allow-files).
    A table fits the terminal (or COLUMNS); piped, it shows every value whole.
    """
    from tracekit.cli import database_to_read
    from tracekit.database import connect_for_queries
    from tracekit.named_queries import fetch_rows, named_sql, write_parquet

    fmt = output_format(fmt, output)
    if list_queries:
        check_output_file(output, fmt, force)
        emit(_query_list(), fmt, output, columns)
        return
    if (name is None) == (sql is None):
        raise click.UsageError("give a query NAME or --sql SQL (tracekit query --list shows the names)")
    if sql is not None and params:
        raise click.UsageError("-p parameters go with a named query, not --sql")
    sql, bound = named_sql(name, _params(params)) if name else (sql, None)
    path, _ = database_to_read(db, "running on")
    check_output_file(output, fmt, force, database=path)
    con = connect_for_queries(path, allow_files=allow_files)
    try:
        if fmt == "parquet":
            count = write_parquet(con, sql, bound, output, columns)
            click.echo(f"wrote {count} row(s) to {output}", err=True)
            return
        rows = fetch_rows(con, sql, bound)
    finally:
        con.close()
    emit(rows, fmt, output, columns)


def _query_list():
    from tracekit.named_queries import named_queries
    from tracekit.rows import Rows
    return Rows(["query", "question", "params"],
                [(q.name, q.question, ", ".join(f"{k}={d if d is not None else 'NULL'}" for k, (d, _) in q.params.items()))
                 for q in named_queries().values()])


@click.command()
def schema():
    """Print the documented views (the SQL contract) and their columns."""
    from tracekit.database import schema_doc
    click.echo(schema_doc(), nl=False)


COMMANDS = [load, query, schema]
