"""`tracekit report`: the comparative table, charts and findings as one HTML page or markdown."""

import click

from tracekit.cli import wait_option
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
@wait_option
def report(db, output, fmt, force):
    """Write a report comparing the loaded traces: table, charts and findings.

    The HTML page is one file that opens offline (inline CSS and SVG, no scripts).
    With no --db and no tracekit.duckdb here, it reports on the bundled sample traces.
    """
    from tracekit.cli import database_to_read
    from tracekit.outputs.output_format import format_for_output
    from tracekit.outputs.output_guard import HTML, TEXT, check_output
    from tracekit.outputs.report import render
    from tracekit.outputs.report.data import load

    fmt = format_for_output(fmt, output, default="html", allowed=FORMATS)
    path, is_samples = database_to_read(db, "reporting on")
    target = output or (DEFAULT_HTML if fmt == "html" else None)
    if target:
        check_output(target, HTML if fmt == "html" else TEXT, what=fmt, database=path, force=force)
    data = load(None if is_samples else path)
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


COMMANDS = [report]
