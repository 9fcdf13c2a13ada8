"""`tracekit open`: hand a trace to ui.perfetto.dev."""

import click

from tracekit.errors import TracekitError


@click.command("open")
@click.argument("trace_file", required=False, type=click.Path(dir_okay=False))
@click.option("--trace", "trace_name", help="A loaded trace, by name (see the traces view).")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database for --trace [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("--port", type=click.IntRange(1, 65535), default=9001, show_default=True,
              help="Loopback port (Perfetto's UI allows 9001 for local traces).")
@click.option("--no-browser", is_flag=True, help="Print the URL instead of opening a browser.")
def open_command(trace_file, trace_name, db, port, no_browser):
    """Serve one trace to ui.perfetto.dev on 127.0.0.1 and open it there.

    Only that file is served, to the Perfetto UI's origin, until the UI has fetched
    it (or Ctrl-C).
    """
    from tracekit.perfetto_server import open_in_perfetto

    if (trace_file is None) == (trace_name is None):
        raise click.UsageError("give a TRACE_FILE or --trace NAME")
    if trace_name is not None:
        from tracekit.trace_lookup import file_for_trace
        trace_file = file_for_trace(trace_name, db)
    open_in_perfetto(trace_file, port=port, browser=not no_browser, echo=click.echo)


COMMANDS = [open_command]
