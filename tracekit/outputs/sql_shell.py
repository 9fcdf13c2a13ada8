"""`tracekit shell`: a read-only SQL prompt over a trace database, made like DuckDB's shell.

Each statement runs as `tracekit query --sql` runs it: one SELECT (or EXPLAIN [ANALYZE] of one),
on a connection of its own opened for it (connect_for_queries: read-only, sandboxed) and closed
after it, so a load in another terminal is never locked out between statements and the next
statement sees what it loaded. Statements end with `;`, several on a line run in order; lines
starting with `.` are the shell's own commands (tracekit.outputs.shell_commands). At a terminal,
readline edits lines, keeps their history and completes names (tracekit.outputs.shell_complete).
"""

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from tracekit.errors import TracekitError, is_interrupt
from tracekit.store.sql_sandbox import require_text
from tracekit.outputs.render import FORMATS

PROMPT, CONTINUED = "tracekit> ", "     ...> "
HISTORY_FILE = "~/.tracekit_history"
HISTORY_LINES = 1000
TEXT_FORMATS = tuple(fmt for fmt in FORMATS if fmt != "parquet")
# As DuckDB's shell: a longer table shows its first and last 20 rows around a `…` line.
DEFAULT_MAX_ROWS = 40


@dataclass
class ShellIO:
    """How the shell talks: `write(text)` prints a result as it is, `say(text)` a line on stdout,
    `warn(text)` a line on stderr; `read(prompt)` returns the next line, or None at the end;
    `width()` the terminal's width to fit a table to (None: every value whole)."""

    write: callable
    say: callable
    warn: callable
    read: callable
    width: callable = lambda: None
    formats: tuple = TEXT_FORMATS


@dataclass
class Shell:
    """The shell's state: which database, what a query may read, how results are shown and where,
    errors seen, and the statement being typed (with where it started, in a .read file)."""

    path: Path
    io: ShellIO
    allow_files: bool = False
    fmt: str = "table"
    max_rows: int = DEFAULT_MAX_ROWS
    timer: bool = False
    output: object = None  # tracekit.outputs.shell_commands.OutputFile while .output (.once) sends results to a file
    errors: int = 0
    buffer: list = field(default_factory=list)
    where: tuple = None  # (file, line) of the line being run, inside .read
    started_at: tuple = None  # where the statement in the buffer started
    depth: int = 0  # .read files being read, one inside the other

    def run(self):
        """Reads and runs until .quit or the end of the input; returns the number of failed statements."""
        try:
            while True:
                line = self.io.read(CONTINUED if self.buffer else PROMPT)
                if line is None:
                    self.finish()
                    return self.errors
                if self.feed(line) == "quit":
                    return self.errors
        finally:
            self.close_output()

    def feed(self, line):
        """Takes one line: a dot command, or SQL run once its statement ends; "quit" for .quit."""
        from tracekit.outputs.shell_commands import run_command

        try:
            require_text(line, "the line")
        except TracekitError as exc:
            self.fail(str(exc), self.where)  # dropped: the statement it belongs to would not parse
            return None
        if line.strip().startswith(".") and not has_sql("\n".join(self.buffer)):
            self.buffer = []  # comments before a command: nothing to run
            return run_command(self, line.strip())
        if not has_sql("\n".join(self.buffer)):
            self.started_at = self.where  # an error names the statement's first line, not a blank or comment before it
        self.buffer.append(line)
        text = "\n".join(self.buffer)
        if ends_statement(text):
            self.buffer = []
            self._run_sql(text)
        return None

    def finish(self):
        """At the end of the input (or of a .read file): the last statement may lack its `;`."""
        text, self.buffer = "\n".join(self.buffer), []
        if has_sql(text):
            self._run_sql(text)

    def interrupt(self):
        """Ctrl-C at the prompt: drop the statement being typed."""
        self.buffer = []

    def fail(self, message, where=None):
        """Counts a failure and says it; inside a .read file, naming the file and line."""
        self.errors += 1
        where = where or self.where
        self.io.warn(f"Error: {where[0]}:{where[1]}: {message}" if where else f"Error: {message}")

    def close_output(self):
        if self.output is not None:
            self.output.close()
            self.output = None

    def _run_sql(self, text):
        for statement in split_statements(text):
            try:
                clock = _Clock()
                rows = self._fetch(statement)
                spent = clock.spent()
                self._show(rows)
                if self.timer:
                    self.io.say(spent)
            except TracekitError as exc:
                self.fail(str(exc), self.started_at)
            except KeyboardInterrupt:
                self.fail("interrupted", self.started_at)
            except RuntimeError as exc:  # DuckDB's word for a statement Ctrl-C stopped
                if not is_interrupt(exc):
                    raise
                self.fail("interrupted", self.started_at)
        if self.output is not None and self.output.once:
            self.close_output()

    def _fetch(self, statement):
        from tracekit.analysis.named_queries import fetch_rows
        from tracekit.store.database import connect_for_queries

        con = connect_for_queries(self.path, allow_files=self.allow_files)
        try:
            return fetch_rows(con, statement)
        finally:
            con.close()

    def _show(self, rows):
        from tracekit.outputs.render import render

        if self.output is not None:  # a file gets every row, every value whole
            self.output.write(render(rows, self.fmt))
            return
        self.io.write(render(rows, self.fmt, self.io.width(), max_rows=self.max_rows or None, whole=".mode line"))


class _Clock:
    """What `.timer on` prints: wall time and this process's CPU time (DuckDB's threads' too),
    from opening the database to the last row fetched (rendering aside), as DuckDB's shell says it."""

    def __init__(self):
        self.real, self.cpu = time.perf_counter(), os.times()

    def spent(self):
        now = os.times()
        return (f"Run Time (s): real {time.perf_counter() - self.real:.3f} user {now.user - self.cpu.user:.3f} "
                f"sys {now.system - self.cpu.system:.3f}")


def ends_statement(text):
    """True when `text` ends with a `;` that is SQL's, not inside a string or a comment."""
    raw = text.encode()  # DuckDB's tokens start at byte offsets, not characters ('é', 'µ')
    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(text) if kind != duckdb.token_type.comment]
    if not tokens:
        return False
    pos, kind = tokens[-1]
    return kind == duckdb.token_type.operator and raw[pos:pos + 1] == b";"


def has_sql(text):
    """Whether `text` holds anything but comments and blanks."""
    return any(kind != duckdb.token_type.comment for _, kind in duckdb.tokenize(text)) if text.strip() else False


def split_statements(text):
    """The statements of `text`, to run in order; text DuckDB cannot split is run whole, so that
    its syntax error is the one reported."""
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error:
        return [text]
    return [statement.query for statement in statements] or [text]


def terminal_reader(history=HISTORY_FILE, complete=None):
    """A `read(prompt)` for a terminal: readline editing, history kept in `history` across sessions,
    Tab completing with `complete(text, line)` (a list of candidates) when given.
    Returns (read, save): call save() when the shell ends."""
    import readline

    path = Path(os.path.expanduser(history))
    try:
        readline.read_history_file(path)
    except OSError:
        pass  # no history yet (or unreadable): start afresh
    readline.set_history_length(HISTORY_LINES)
    if complete is not None:
        from tracekit.outputs.shell_complete import install
        install(readline, complete)

    def read(prompt):
        try:
            return input(prompt)
        except EOFError:
            print()
            return None

    def save():
        try:
            readline.write_history_file(path)
        except OSError:
            pass  # a read-only home must not stop the shell from closing

    return read, save


def stream_reader(stream):
    """A `read(prompt)` for piped input: no prompt, lines as they come."""
    def read(_prompt):
        line = stream.readline()
        return None if line == "" else line.rstrip("\n")
    return read
