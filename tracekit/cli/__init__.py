"""The `tracekit` command line: parses options, calls the library, renders.

Only this package imports click. Library modules are imported inside each
command, so `tracekit query` never pays for (or needs) torch, and `tracekit
capture` runs on a GPU machine without duckdb.
"""

import functools
import gc
import math
import re
import sys

import click

from tracekit.version import __version__
from tracekit.errors import TracekitError, is_interrupt
from tracekit.outputs.safe_text import printable


# Each module holds one family of commands and lists them in COMMANDS. A command's module is
# imported when the command runs (all of them for --help): a load does not pay for the others.
COMMAND_MODULES = {"load": "analysis_cmd", "query": "analysis_cmd", "schema": "analysis_cmd", "tables": "analysis_cmd",
                   "capture": "capture_cmd", "shell": "shell_cmd", "findings": "findings_cmd", "diff": "diff_cmd",
                   "open": "perfetto_cmd", "export": "perfetto_cmd", "hta": "hta_cmd", "report": "report_cmd",
                   "whatif": "whatif_cmd"}


class TracekitGroup(click.Group):
    """Turns every user mistake into one `Error: ...` line: exit 2 for usage, 1 otherwise; and
    imports each command's module when the command is asked for."""

    def list_commands(self, ctx):
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx, name):
        if name in COMMAND_MODULES and name not in self.commands:
            from importlib import import_module
            for command in import_module(f"tracekit.cli.{COMMAND_MODULES[name]}").COMMANDS:
                self.add_command(command)
        return super().get_command(ctx, name)

    def main(self, args=None, prog_name=None, **extra):
        extra.pop("standalone_mode", None)
        try:
            result = super().main(args=args, prog_name=prog_name or "tracekit",
                                  standalone_mode=False, **extra)
        except click.UsageError as exc:
            echo_line(f"Error: {exc.format_message()}", err=True)
            sys.exit(2)
        except (TracekitError, click.ClickException) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            echo_line(f"Error: {message}", err=True)
            sys.exit(1)
        except click.Abort as exc:
            if is_interrupt(exc.__context__):  # click's word for Ctrl-C
                _interrupted()
            click.echo("Aborted.", err=True)
            sys.exit(1)
        except Exception as exc:
            if is_interrupt(exc):  # DuckDB's, for a statement Ctrl-C stopped
                _interrupted()
            raise
        sys.exit(result if isinstance(result, int) else 0)


def _interrupted():
    """Ctrl-C: one line, and the shell's status for a command SIGINT ended (128 + 2). A reading
    command wrote nothing it must undo: its files are written whole or not at all."""
    echo_line("interrupted", err=True)
    sys.exit(130)



def echo_line(line, err=False):
    """Prints one line about a file or a trace: its names are anyone's, and a newline or an ESC in
    one must not start a line of its own (a fake `loaded ...`) or drive the terminal."""
    click.echo(printable(line), err=err)


@click.group(cls=TracekitGroup)
@click.version_option(__version__, prog_name="tracekit")
def cli():
    """Make GPU profiler traces of attention answerable with SQL."""


def database_to_read(db, doing):
    """The database a reading command uses, saying so when it falls back to the bundled samples."""
    from tracekit.ingest.samples import resolve_db
    path, is_samples = resolve_db(db)
    if is_samples:
        click.echo(f"(no --db and no tracekit.duckdb here: {doing} the bundled sample traces)", err=True)
    return path, is_samples


def lake_option(command):
    """--lake DIR: read a Parquet lake (tracekit.lake) instead of a database."""
    return click.option("--lake", type=click.Path(file_okay=False), metavar="DIR",
                        help="Read this Parquet lake (tracekit load --lake) instead of a database.")(command)


def source_to_read(db, lake, doing):
    """The database a reading command uses (see database_to_read), or None when --lake gives a lake."""
    if lake is None:
        return database_to_read(db, doing)[0]
    if db is not None:
        raise click.UsageError("give --db or --lake, not both")
    return None


def connect_source(path, lake, *, allow_files=False):
    """A read-only connection for queries to the lake, when --lake gives one, else to database `path`."""
    if lake is not None:
        from tracekit.lake import connect_lake
        return connect_lake(lake, allow_files=allow_files)
    from tracekit.store.database import connect_for_queries
    return connect_for_queries(path, allow_files=allow_files)


# How long a command waits for a database another process holds (tracekit.store.database.waiting_for_lock);
# the API's default is tracekit.store.database.DEFAULT_LOCK_WAIT_S, the same.
LOCK_WAIT_S = 30


def wait_option(command):
    """--wait SECONDS: how long the command waits, saying so on stderr, for a database that another
    process (a load) holds, before it gives up."""
    @functools.wraps(command)
    def run(*args, wait, **kwargs):
        from tracekit.store.database import waiting_for_lock
        with waiting_for_lock(wait, on_wait=lambda message: click.echo(message, err=True)):
            return command(*args, **kwargs)

    return click.option("--wait", type=_SECONDS, default=LOCK_WAIT_S, show_default=True,
                        metavar="SECONDS",
                        help="Wait this long for a database another process (a load) holds.")(run)


class _Seconds(click.ParamType):
    """A wait in seconds, from 0 to a day, written as numbers are in SQL: click's FloatRange takes
    what float() takes, nan, inf, '1_0' and other scripts' digits ('٣') among them."""

    name = "seconds"
    _TEXT = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        elif isinstance(value, str) and self._TEXT.fullmatch(value.strip()):
            seconds = float(value)
        else:
            self.fail(f"{value} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_WAIT_S:
            self.fail(f"{value} is not a number of seconds from 0 to {MAX_WAIT_S} (a day)", param, ctx)
        return seconds


MAX_WAIT_S = 86400
_SECONDS = _Seconds()


def all_commands():
    """{name: command} of every command, each module imported."""
    for name in COMMAND_MODULES:
        cli.get_command(None, name)
    return dict(cli.commands)


def main():
    try:
        cli()
    except KeyboardInterrupt:  # Ctrl-C before a command began (its imports): TracekitGroup.main's others
        _interrupted()
    finally:
        # Python's last garbage collection at exit walks every object the imports made (DuckDB's
        # Python layer alone is tens of thousands), to free what the process is about to give
        # back whole: frozen, they are left to the OS, 0.01 s of every command. Only here, in
        # the command's own process: a test's CliRunner goes on and collects as usual.
        gc.freeze()


if __name__ == "__main__":
    main()
