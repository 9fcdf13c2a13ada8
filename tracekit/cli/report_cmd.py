"""`tracekit report`: the comparative table, charts and findings as one HTML page or markdown."""

import click

from tracekit.cli import lake_option, wait_option
from tracekit.errors import TracekitError

DEFAULT_HTML = "report.html"
FORMATS = ("html", "markdown")


@click.command()
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help=f"Write to this file [default: {DEFAULT_HTML} for html, standard output for markdown].")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS),
              help="html: one self-contained page; markdown: table and findings "
                   "[default: html, or what -o's extension says: .html, .md].")
@click.option("--force", is_flag=True, help="Let -o replace an existing file that holds another format.")
@lake_option
@wait_option
def report(db, output, fmt, force, lake):
    """Write a report comparing the loaded traces: table, charts and findings.

    The HTML page is one file that opens offline (inline CSS and SVG, no scripts).
    With no --db and no tracekit.duckdb here, it reports on the bundled sample traces.
    """
    from tracekit.cli import database_to_read
    from tracekit.outputs.output_format import format_for_output
    from tracekit.outputs.output_guard import HTML, TEXT, check_output
    from tracekit.outputs.report import render

    fmt = format_for_output(fmt, output, default="html", allowed=FORMATS)
    if lake is not None and db is not None:
        raise click.UsageError("give --db or --lake, not both")
    path, is_samples = database_to_read(db, "reporting on") if lake is None else (None, False)
    target = output or (DEFAULT_HTML if fmt == "html" else None)
    if target:
        check_output(target, HTML if fmt == "html" else TEXT, what=fmt, database=path, lake=lake, force=force)
    data = _report_data(path, is_samples, lake)
    text = render(data, fmt)
    if target is None:
        click.echo(text, nl=False)
        return
    try:
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise TracekitError(f"{target}: cannot write ({exc.strerror})") from None
    click.echo(f"wrote {target}: {len(data.summary)} trace(s), {len(text) // 1024} KiB", err=True)


def _report_data(path, is_samples, lake):
    from tracekit.outputs.report.data import collect, load

    if lake is None:
        return load(None if is_samples else path)
    from tracekit.lake import connect_lake
    con = connect_lake(lake)
    try:
        return collect(con, str(lake))
    finally:
        con.close()


COMMANDS = [report]
