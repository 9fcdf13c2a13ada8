"""`tracekit load`, `query` and `schema`: traces into DuckDB, answers out."""

import dataclasses
import os
import sys
import threading
import time
from pathlib import Path

import click

from tracekit.cli import echo_line, lake_option, wait_option
from tracekit.errors import QueryError, TracekitError
from tracekit.outputs.formats import FORMATS  # the names alone: a load renders no table

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
    command = click.option("--escape-formulas/--no-escape-formulas", default=True, show_default=True,
                           help="csv and tsv: put a ' before a text cell that starts with = + - @, a tab or a "
                                "carriage return, so a spreadsheet shows it instead of running it as a formula "
                                "(numbers are left as they are).")(command)
    return command


def check_output_file(output, fmt, force, database=None, lake=None):
    """Refuses, before any work, an -o that would overwrite the database, write into the lake, or
    replace a file of another format."""
    from tracekit.outputs.output_guard import JSON, TEXT, check_output
    if output:
        kind = {"json": JSON, "parquet": "parquet"}.get(fmt, TEXT)
        check_output(output, kind, what=fmt, database=database, lake=lake, force=force)


def output_format(fmt, output):
    """The format -f and -o ask for together (see tracekit.outputs.output_format)."""
    from tracekit.outputs.output_format import format_for_output
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


def emit(rows, fmt, output, columns=None, escape_formulas=True, keys=None):
    """Prints `rows` (a tracekit.analysis.rows.Rows) in `fmt`, or writes them to the file `output`;
    `escape_formulas`: see output_options; `keys`: the columns a table fitted to the terminal keeps."""
    from tracekit.outputs.render import render, write
    if columns:
        rows = rows.select(columns)
    if output:
        write(rows, fmt, output, escape_formulas)
        click.echo(f"wrote {len(rows.rows)} row(s) to {output}", err=True)
    else:
        click.echo(render(rows, fmt, terminal_width(), escape_formulas, keys), nl=False)


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
                self.bar.label, self.bar.width = _fitted(f"loading {self.finished}/{len(self.sizes)} done, ",
                                                         Path(path).name)
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


# What click's bar line holds besides its label and bar: "  [", "]  " and "100%  00:00:05", and the
# terminal's last column left free (a line that fills it wraps, and each redraw leaves a line behind).
_BAR_LINE_EXTRA = 21
_BAR_WIDTH = (10, 36)  # the bar's least and most


def _fitted(label, name):
    """(label, bar width) for a bar line that fits the terminal of standard error: the file name
    whole, else cut with …, else left out; then the bar as wide as the rest leaves room for."""
    columns = _stderr_columns()
    room = columns - _BAR_LINE_EXTRA - _BAR_WIDTH[0]
    cut = name if len(name) <= room - len(label) else name[:max(room - len(label) - 1, 0)] + "…"
    label = label + cut if len(cut) >= 8 else label.rstrip(", ")
    return label, max(1, min(_BAR_WIDTH[1], columns - _BAR_LINE_EXTRA - len(label)))


def _stderr_columns():
    """The width of the terminal the bar is drawn on (standard error), COLUMNS first as click does."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 80


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
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database file (created if missing) [default: tracekit.duckdb].")
@click.option("--lake", type=click.Path(file_okay=False), metavar="DIR",
              help="Write into this Parquet lake (a folder, made if missing) instead of a database: each file is "
                   "converted and published on its own, so any number of loads may write to it at once.")
@click.option("--replace", is_flag=True, help="Reload traces already loaded (same content or same file).")
@click.option("--lenient", is_flag=True,
              help="Load what can be read from a truncated or partly malformed trace, and say what was dropped.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N",
              help="Load N files at once [default: 2 for several files under 256 MB on two cores or more, else 1].")
@wait_option
def load(paths, db, lake, replace, lenient, jobs):
    """Load trace files, folders or globs (.json, .json.gz) into a DuckDB database, or a Parquet lake.

    Each file loads in one transaction: it loads completely or leaves the database
    as it was. Files with content already loaded are skipped (see --replace). The
    last line names the database written to. Ctrl-C or SIGTERM stops the load at once,
    saying what was loaded (exit 130). With --lake, each file's tables become Parquet
    files, published whole or not at all.
    """
    from tracekit.cli.load_end import loaded_any, remove_database, settle, stop_line, stops
    from tracekit.ingest.load_batch import database_line, failure_summary, load_batch
    from tracekit.ingest.load_stop import LoadStop
    from tracekit.ingest.loader import expand_paths

    if db is not None and lake is not None:
        raise click.UsageError("give --db or --lake, not both")
    db = db or "tracekit.duckdb"
    files = expand_paths(paths)
    created = lake is None and not Path(db).exists()
    progress = _Progress(files)
    stop = LoadStop()

    def reported(path, outcome):
        # A file the stop kept out gets no line: the load's last line sums them up.
        if not stops(outcome):
            progress.clear_line()
            _report(path, outcome)
            progress.file_done(path)

    options = dict(replace=replace, lenient=lenient, progress=progress, on_outcome=reported, stop=stop, workers=jobs)
    with stop.on_signals():
        try:
            if lake is not None:
                from tracekit.lake import load_many
                batch = load_many(files, lake, **options)
            else:
                batch = load_batch(db, files, remove_if_empty=False, **options)
        finally:
            progress.close(finished=not stop.requested)
        if lake is None:
            for path, result in settle(db, batch.outcomes):
                _report(path, result)  # its COMMIT went through after all: its line was held back
            if created and not loaded_any(batch.outcomes):
                remove_database(db)  # nothing loaded: leave no empty database behind
    if stop.requested:
        line, status = stop_line(batch.outcomes, stop.reason)
        echo_line(line, err=True)
        click.get_current_context().exit(status)
    if batch.results:
        _say(database_line(batch))
    if len(batch.failures) == 1 and len(batch.files) == 1:
        click.get_current_context().exit(1)  # its one error line has been printed
    if batch.failures:
        raise TracekitError(failure_summary(batch))


def _report(path, outcome):
    """Prints one line about a file's load."""
    if isinstance(outcome, TracekitError):
        echo_line(f"Error: {outcome}", err=True)
    elif outcome.status == "skipped":
        _say(f"skipped {path}: {outcome.message}")
    else:
        _say(f"loaded {outcome.trace}: {outcome.events} events, {outcome.kernels} kernels "
             f"from {path} in {outcome.seconds:.2f} s{_dropped_note(outcome)}{_empty_note(outcome)}")


def _say(line):
    """Prints a line of the load's report on stdout; once its reader has gone (`| head -1`, `| grep
    -q`), the loads go on and the rest of the report goes nowhere: the files are the work, not the lines."""
    try:
        echo_line(line)
    except BrokenPipeError:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, sys.stdout.fileno())  # what stdout still holds is flushed there at exit too
        os.close(nowhere)


def _empty_note(result):
    # A profiler whose schedule never reached an active step writes a valid trace of nothing: loaded
    # (it is no error), but said, so that no one queries it for rows it cannot hold.
    return "; it holds no events: every query of it returns no rows" if result.events == 0 else ""


def _dropped_note(result):
    """'; dropped 2 events: 1 with no ph, 1 cut off by truncation (the last 50 bytes)'."""
    from tracekit.ingest.loader import TRUNCATED

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
    params = {}
    for name, value in pairs:
        if name in params:
            raise click.UsageError(f"-p {name} is given twice")
        params[name] = value
    return params


@click.command()
@click.argument("name", required=False)
@click.option("--sql", metavar="SQL|-|@FILE",
              help="Run this SQL instead of a named query: the SQL itself, - to read it from standard input, "
                   "or @FILE.sql to read it from a file.")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("-p", "--param", "params", nargs=2, multiple=True, metavar="NAME VALUE",
              help="A parameter: $NAME in the named query's SQL or in --sql's (repeatable).")
@click.option("--list", "list_queries", is_flag=True, help="List the named queries and exit.")
@click.option("--allow-files", is_flag=True,
              help="Let --sql read your own files (CSV, Parquet, JSON) to join with the traces; it still never writes.")
@lake_option
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="What runs the query: spark runs it on Apache Spark over --lake, translated from DuckDB's "
                   "SQL (pip install 'tracekit[spark]').")
@click.option("--master", metavar="URL",
              help="Spark's master for --engine spark: spark://HOST:7077, yarn, k8s://... [default: local[*]].")
@output_options
@wait_option
def query(name, sql, db, params, list_queries, allow_files, lake, engine, master, fmt, force, output, columns,
          escape_formulas):
    """Run a named query (queries/*.sql), an .sql file or --sql SQL, read-only, and print the rows.

    With no --db and no tracekit.duckdb here, it runs on the bundled sample traces;
    --lake DIR runs it on a Parquet lake, and --engine spark runs it there on Apache
    Spark (same SQL, same rows). --sql is one SELECT that sees the trace database and
    nothing else (see --allow-files);
    -p NAME VALUE gives its $NAME, as text DuckDB casts to the type the SQL needs.
    A table fits the terminal (or COLUMNS); piped, it shows every value whole.
    """
    from tracekit.cli import connect_source, source_to_read
    from tracekit.analysis.named_queries import fetch_rows, named_sql

    if list_queries and (name is not None or sql is not None):
        raise click.UsageError("give --list or a query, not both")
    fmt = output_format(fmt, output)
    if list_queries:
        check_output_file(output, fmt, force)
        emit(_query_list(), fmt, output, columns, escape_formulas, keys=("query", "question"))
        return
    sql_text = _sql_to_run(name, sql)
    params = _params(params)
    keys = _named_keys(name) if sql_text is None else None
    if _on_spark(engine, lake, master, db, allow_files):
        check_output_file(output, fmt, force, lake=lake)
        emit(_spark_rows(lake, master, name, sql_text, params), fmt, output, columns, escape_formulas, keys)
        return
    path = source_to_read(db, lake, "running on")
    check_output_file(output, fmt, force, database=path, lake=lake)
    con = connect_source(path, lake, allow_files=allow_files)
    try:
        sql, bound = (named_sql(name, params, con) if sql_text is None
                      else (sql_text.text, params or None))
        try:
            if fmt == "parquet":
                # Only here: the Parquet writer imports the duckdb package (its relation API), 0.03 s
                from tracekit.outputs.parquet_out import write_query

                count = write_query(con, sql, bound, output, columns)
                click.echo(f"wrote {count} row(s) to {output}", err=True)
                return
            rows = fetch_rows(con, sql, bound)
        except QueryError as exc:
            if sql_text is None:
                raise
            raise QueryError(sql_text.blame(str(exc))) from None
    finally:
        con.close()
    emit(rows, fmt, output, columns, escape_formulas, keys)


def _named_keys(name):
    """The key columns the named query `name` declares (its `-- keys:` line)."""
    from tracekit.analysis.named_queries import get_query
    return get_query(name).keys


def _on_spark(engine, lake, master, db, allow_files):
    """True when the query runs on Spark; refuses the options that do not go together."""
    if master is not None and engine != "spark":
        raise click.UsageError("--master is Spark's: add --engine spark")
    if lake is not None and db is not None:
        raise click.UsageError("give --db or --lake, not both")
    if engine != "spark":
        return False
    if lake is None:
        raise click.UsageError("--engine spark reads a lake: give --lake DIR")
    if allow_files:
        raise click.UsageError("--allow-files is DuckDB's: with --engine spark a query sees the lake alone")
    return True


def _spark_rows(lake, master, name, sql_text, params):
    """The rows of the named query (or of `sql_text`), run by Spark over the lake."""
    from tracekit.spark import query_lake

    if sql_text is None:
        return query_lake(lake, name, params=params, master=master)
    try:
        return query_lake(lake, sql=sql_text.text, params=params, master=master)
    except QueryError as exc:
        raise QueryError(sql_text.blame(str(exc))) from None


def _query_list():
    from tracekit.analysis.named_queries import named_queries
    from tracekit.analysis.rows import Rows
    return Rows(["query", "question", "params"],
                [(q.name, q.question, ", ".join(f"{k}={d if d is not None else 'NULL'}" for k, (d, _) in q.params.items()))
                 for q in named_queries().values()])


def _sql_to_run(name, sql):
    """The SqlText to run (from --sql, stdin, an @file or an .sql path), or None for a named query."""
    from tracekit.analysis.sql_text import looks_like_sql_file, read_sql_file, sql_from

    if name is not None and sql is not None:
        raise click.UsageError("give a query NAME or --sql SQL, not both")
    if name is None and sql is None:
        raise click.UsageError("give a query NAME or --sql SQL (tracekit query --list shows the names)")
    if sql is not None:
        return sql_from(sql)
    return read_sql_file(name) if looks_like_sql_file(name) else None


@click.command()
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@lake_option
@wait_option
def schema(db, lake):
    """Print every table and view a query can read: the documented views (the SQL contract) with
    their columns, the hta_* tables once `tracekit hta` ran, and the storage tables."""
    from tracekit.cli import connect_source, source_to_read
    from tracekit.analysis.schema_listing import schema_text

    path = source_to_read(db, lake, "listing")
    con = connect_source(path, lake)
    try:
        click.echo(schema_text(con), nl=False)
    finally:
        con.close()


@click.command()
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@lake_option
@click.option("--counts", is_flag=True,
              help="Count the views' rows too (each runs its query: seconds on a big trace).")
@output_options
@wait_option
def tables(db, lake, counts, fmt, force, output, columns, escape_formulas):
    """List every table and view a query can read, a line each: its kind, its rows (tables; views
    with --counts) and what it holds. `tracekit schema` gives each one's columns."""
    from tracekit.cli import connect_source, source_to_read
    from tracekit.analysis.schema_listing import table_rows
    from tracekit.analysis.rows import Rows

    fmt = output_format(fmt, output)
    path = source_to_read(db, lake, "listing")
    check_output_file(output, fmt, force, database=None if lake else path, lake=lake)
    con = connect_source(path, lake)
    try:
        rows = Rows(["name", "kind", "rows", "about"], table_rows(con, count_views=counts))
    finally:
        con.close()
    emit(rows, fmt, output, columns, escape_formulas)


COMMANDS = [load, query, schema, tables]
