"""`tracekit open` and `export`: hand traces, and tracekit's findings, to ui.perfetto.dev."""

import click

from tracekit.cli import wait_option
from tracekit.errors import QueryError


@click.command("open")
@click.argument("trace_file", required=False, type=click.Path(dir_okay=False))
@click.option("--trace", "trace_name", help="A loaded trace, by name (see the traces view).")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database for --trace [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("--port", type=click.IntRange(1, 65535), default=9001, show_default=True,
              help="Loopback port. The Perfetto UI fetches local traces from 9001 only; another port is for scripts.")
@click.option("--no-browser", is_flag=True, help="Print the URL instead of opening a browser.")
@wait_option
def open_command(trace_file, trace_name, db, port, no_browser):
    """Serve one trace to ui.perfetto.dev on 127.0.0.1 and open it there.

    Only that file is served, to the Perfetto UI's origin, until the UI has fetched
    it (or Ctrl-C); then it says what it served. A file that is not a trace is refused.
    The file is opened once and the bytes checked are the bytes served. --trace serves the
    trace as it was loaded: its file while that holds the same bytes (SHA-256) and the load
    dropped none of its events (--lenient), else, saying so, the trace rebuilt from the database.
    """
    from tracekit.outputs.perfetto_server import open_in_perfetto

    if trace_file is not None and trace_name is not None:
        raise click.UsageError("give a TRACE_FILE or --trace NAME, not both")
    if trace_file is None and trace_name is None:
        raise click.UsageError("give a TRACE_FILE or --trace NAME")
    trace = trace_file
    if trace_name is not None:
        from tracekit.cli import database_to_read
        from tracekit.outputs.served_trace import open_loaded_trace
        path, _ = database_to_read(db, "opening from")
        trace = open_loaded_trace(trace_name, path)
    open_in_perfetto(trace, port=port, browser=not no_browser, echo=click.echo)


@click.command("export")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("--trace", "trace_name", help="Export this loaded trace, whole.")
@click.option("--sql", metavar="SQL|-|@FILE",
              help="Export the events this query selects (SELECT * FROM events WHERE ...): the SQL itself, "
                   "- to read it from standard input, or @FILE.sql.")
@click.option("--findings", is_flag=True,
              help="Add a 'tracekit findings' process: a track per finding rule (see `tracekit findings`), "
                   "a slice over each event a finding rests on, the finding in its args.")
@click.option("--allow-files", is_flag=True, help="Let --sql read your own files too; it still never writes.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="The trace to write (.json or .json.gz).")
@click.option("--force", is_flag=True, help="Let -o replace an existing file that holds another format.")
@click.option("--lake", type=click.Path(file_okay=False), metavar="DIR",
              help="Write the database's traces (all, or --trace's) into this Parquet lake instead, "
                   "as `tracekit load --lake` would.")
@click.option("--replace", is_flag=True, help="With --lake: replace a trace of the same name in the lake.")
@wait_option
def export_command(db, trace_name, sql, findings, allow_files, output, force, lake, replace):
    """Write a Chrome JSON trace (for Perfetto, or to load again) from the database,
    or with --lake its traces' tables into a Parquet lake.

    Slices that partially overlap on a thread track are moved to an extra track,
    so Perfetto shows every one; nesting is kept.
    """
    if lake is not None:
        if output is not None or sql is not None or findings:
            raise click.UsageError("--lake writes traces whole: give no -o, --sql or --findings with it")
        return _export_to_lake(db, lake, trace_name, replace)
    if output is None:
        raise click.UsageError("give -o FILE (the trace to write), or --lake DIR")
    from tracekit.cli import database_to_read
    from tracekit.store.database import connect_for_queries
    from tracekit.outputs.trace_export import export
    from tracekit.outputs.output_guard import JSON, check_output
    from tracekit.analysis.sql_text import sql_from

    if trace_name is not None and sql is not None:
        raise click.UsageError("give --trace NAME or --sql SQL, not both")
    if trace_name is None and sql is None:
        raise click.UsageError("give --trace NAME or --sql SQL")
    sql_text = sql_from(sql) if sql is not None else None
    path, _ = database_to_read(db, "exporting from")
    gzipped = output.endswith(".gz")
    check_output(output, "gzip" if gzipped else JSON, what="a .json.gz trace" if gzipped else "a JSON trace",
                 database=path, force=force)
    con = connect_for_queries(path, allow_files=allow_files)
    try:
        written, count, moved = export(con, output, trace=trace_name, sql=sql_text and sql_text.text,
                                       findings=findings)
    except QueryError as exc:
        raise QueryError(sql_text.blame(str(exc)) if sql_text else str(exc)) from None
    finally:
        con.close()
    note = f"; {moved} partially overlapping slice(s) moved to extra tracks" if moved else ""
    # on stderr, as every command says what it wrote to a file: stdout is for what a command answers
    click.echo(f"wrote {count} events to {written}{note}", err=True)


def _export_to_lake(db, lake, trace_name, replace):
    from tracekit.cli import database_to_read, echo_line
    from tracekit.errors import TracekitError
    from tracekit.ingest.load_batch import database_line, failure_summary
    from tracekit.lake import export_database

    def reported(name, outcome):
        if isinstance(outcome, TracekitError):
            echo_line(f"Error: {outcome}", err=True)
        elif outcome.status == "skipped":
            echo_line(f"skipped {name}: {outcome.message}")
        else:
            echo_line(f"exported {name}: {outcome.events} events, {outcome.kernels} kernels")

    path, _ = database_to_read(db, "exporting from")
    batch = export_database(path, lake, traces=[trace_name] if trace_name else None, replace=replace,
                            on_outcome=reported)
    if batch.results:
        echo_line(database_line(batch))
    if batch.failures:
        raise TracekitError(failure_summary(batch).replace("failed to load", "failed to export"))


COMMANDS = [open_command, export_command]
