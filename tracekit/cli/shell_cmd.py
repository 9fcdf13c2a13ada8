"""`tracekit shell`: an interactive, read-only SQL prompt over the database (or harlequin on it)."""

import shutil
import subprocess
import sys

import click

from tracekit.cli import wait_option
from tracekit.errors import TracekitError

TEXT_FORMATS = ("table", "box", "line", "csv", "tsv", "json", "ndjson", "markdown", "html")  # sql_shell's


@click.command()
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("--allow-files", is_flag=True,
              help="Let queries read your own files (CSV, Parquet, JSON) to join with the traces; never write.")
@click.option("-f", "--format", "fmt", type=click.Choice(TEXT_FORMATS), default="table", show_default=True,
              help="Output format to start with (.mode changes it).")
@click.option("--harlequin", is_flag=True,
              help="Open the database read-only in harlequin, the terminal SQL IDE, instead (pip install harlequin).")
@wait_option
def shell(db, allow_files, fmt, harlequin):
    """Query the database interactively, as in DuckDB's shell: SQL SELECTs ending with `;`
    (EXPLAIN [ANALYZE] too; named queries are tables: FROM summary), and .tables, .schema NAME,
    .mode FORMAT, .maxrows N, .timer on, .output FILE, .once FILE, .read FILE, .help, .quit.

    Read-only and sandboxed as `tracekit query --sql` is. Each statement opens the database
    for itself, so a load in another terminal can run between statements. At a terminal,
    lines are edited with readline, kept in ~/.tracekit_history, and Tab completes names;
    piped in, it runs the statements it reads and exits 1 if any failed.
    """
    from tracekit.cli import database_to_read
    from tracekit.store.database import connect_for_queries

    path, _ = database_to_read(db, "querying")
    if harlequin:
        _open_harlequin(path)
        return
    connect_for_queries(path).close()  # a database that cannot be read says so before any prompt
    errors = _run_shell(path, allow_files, fmt)
    if errors and not sys.stdin.isatty():
        click.get_current_context().exit(1)


def _run_shell(path, allow_files, fmt):
    """Runs the prompt until .quit or end of input; returns how many statements failed."""
    from tracekit.cli.analysis_cmd import terminal_width
    from tracekit.outputs.sql_shell import Shell, ShellIO, stream_reader, terminal_reader

    interactive = sys.stdin.isatty()
    if interactive:
        read, save = terminal_reader(complete=_completer(path, allow_files))
        click.echo(f"tracekit shell on {path} (read-only). .help for help, .quit to leave.")
    else:
        read, save = stream_reader(sys.stdin), (lambda: None)
    io = ShellIO(write=lambda text: click.echo(text, nl=False), say=click.echo,
                 warn=lambda text: click.echo(text, err=True), read=read, width=terminal_width, formats=TEXT_FORMATS)
    session = Shell(path, io, allow_files=allow_files, fmt=fmt)
    try:
        while True:
            try:
                return session.run()
            except KeyboardInterrupt:
                session.interrupt()
                click.echo("\n(Ctrl-C drops the statement being typed; .quit or Ctrl-D leaves)", err=True)
    finally:
        save()


def _completer(path, allow_files):
    """Tab's candidates, the database's names read at the first Tab."""
    from tracekit.outputs.shell_complete import Completer, database_words
    from tracekit.store.database import connect_for_queries

    def words():
        con = connect_for_queries(path, allow_files=allow_files)
        try:
            return database_words(con)
        finally:
            con.close()

    return Completer(words)


def _open_harlequin(path):
    """harlequin, read-only, on the database; its exit status is the command's."""
    program = shutil.which("harlequin")
    if program is None:
        raise TracekitError("harlequin is not installed (pip install harlequin), or leave out --harlequin "
                            "for tracekit's own shell")
    click.echo(f"harlequin on {path}, read-only (it is not sandboxed: its SQL may read other files)", err=True)
    code = subprocess.call([program, "--read-only", str(path)])
    if code:
        click.get_current_context().exit(code)


COMMANDS = [shell]
