"""`tracekit shell`: a read-only SQL prompt over a trace database.

Each statement runs as `tracekit query --sql` runs it: one SELECT, on a connection of its own
opened for it (connect_for_queries: read-only, sandboxed) and closed after it, so a load in
another terminal is never locked out between statements and the next statement sees what it
loaded. Statements end with `;`, several on a line run in order; lines starting with `.` are
the shell's own commands. At a terminal, readline edits lines and keeps their history.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from tracekit.errors import TracekitError

PROMPT, CONTINUED = "tracekit> ", "     ...> "
HISTORY_FILE = "~/.tracekit_history"
HISTORY_LINES = 1000
HELP = """\
Statements are SQL SELECTs ending with ;  (one per query, several per line run in order).
.tables          list the tables and views a query can read
.schema [NAME]   describe every table and view, or one
.mode [FORMAT]   show or set the output format: {formats}
.help            this help
.quit            leave (also .exit, or Ctrl-D)
The database is read-only: the shell runs only SELECT (WITH, DESCRIBE, SHOW, SUMMARIZE)."""


@dataclass
class ShellIO:
    """How the shell talks: `show(rows, fmt)` prints a result (tracekit.outputs.rows.Rows), `say(text)` a line on stdout,
    `warn(text)` a line on stderr; `read(prompt)` returns the next line, or None at the end."""

    show: callable
    say: callable
    warn: callable
    read: callable
    formats: tuple = ("table", "csv", "json", "markdown")


@dataclass
class Shell:
    """The shell's state: which database, what a query may read, the output format, errors seen."""

    path: Path
    io: ShellIO
    allow_files: bool = False
    fmt: str = "table"
    errors: int = 0
    buffer: list = field(default_factory=list)

    def run(self):
        """Reads and runs until .quit or the end of the input; returns the number of failed statements."""
        while True:
            line = self.io.read(CONTINUED if self.buffer else PROMPT)
            if line is None:
                if "".join(self.buffer).strip():
                    self._run_sql("\n".join(self.buffer))  # the last statement may lack its `;`
                return self.errors
            if not self.buffer and line.strip().startswith("."):
                if self._dot(line.strip()) == "quit":
                    return self.errors
                continue
            self.buffer.append(line)
            text = "\n".join(self.buffer)
            if ends_statement(text):
                self.buffer = []
                self._run_sql(text)

    def interrupt(self):
        """Ctrl-C at the prompt: drop the statement being typed."""
        self.buffer = []

    def _fail(self, message):
        self.errors += 1
        self.io.warn(f"Error: {message}")

    def _run_sql(self, text):
        from tracekit.store.database import connect_for_queries
        from tracekit.analysis.named_queries import fetch_rows

        for statement in split_statements(text):
            try:
                con = connect_for_queries(self.path, allow_files=self.allow_files)
                try:
                    frame = fetch_rows(con, statement)
                finally:
                    con.close()
                self.io.show(frame, self.fmt)
            except TracekitError as exc:
                self._fail(str(exc))
            except KeyboardInterrupt:
                self._fail("interrupted")

    def _dot(self, line):
        command, _, argument = line.partition(" ")
        argument = argument.strip()
        if command in (".quit", ".exit", ".q"):
            return "quit"
        try:
            if command == ".help":
                self.io.say(HELP.format(formats=", ".join(self.io.formats)))
            elif command == ".tables":
                self._with_connection(lambda con: self.io.say(_in_columns(_relation_names(con))))
            elif command == ".schema":
                self._with_connection(lambda con: self.io.say(_schema(con, argument).rstrip("\n")))
            elif command == ".mode":
                self._mode(argument)
            else:
                raise TracekitError(f"unknown command {command} (.help lists the commands)")
        except TracekitError as exc:
            self._fail(str(exc))
        return None

    def _mode(self, fmt):
        if not fmt:
            self.io.say(f"output format: {self.fmt}")
        elif fmt in self.io.formats:
            self.fmt = fmt
        else:
            raise TracekitError(f"unknown format {fmt!r} (choose from {', '.join(self.io.formats)})")

    def _with_connection(self, use):
        from tracekit.store.database import connect_for_queries
        con = connect_for_queries(self.path, allow_files=self.allow_files)
        try:
            use(con)
        finally:
            con.close()


def ends_statement(text):
    """True when `text` ends with a `;` that is SQL's, not inside a string or a comment."""
    raw = text.encode()  # DuckDB's tokens start at byte offsets, not characters ('é', 'µ')
    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(text) if kind != duckdb.token_type.comment]
    if not tokens:
        return False
    pos, kind = tokens[-1]
    return kind == duckdb.token_type.operator and raw[pos:pos + 1] == b";"


def split_statements(text):
    """The statements of `text`, to run in order; text DuckDB cannot split is run whole, so that
    its syntax error is the one reported."""
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error:
        return [text]
    return [statement.query for statement in statements] or [text]


def _relation_names(con):
    from tracekit.analysis.schema_listing import relation_names
    return relation_names(con)


def _schema(con, name):
    from tracekit.analysis.schema_listing import describe, schema_text
    if not name:
        return schema_text(con)
    described = describe(con, name)
    if described is None:
        raise TracekitError(f"no table or view named {name!r} (.tables lists them)")
    return described


def _in_columns(names, width=100):
    """Names laid out in columns across `width` characters, as sqlite's .tables does."""
    if not names:
        return "(no tables)"
    cell = max(len(name) for name in names) + 2
    per_line = max(1, width // cell)
    rows = [names[i:i + per_line] for i in range(0, len(names), per_line)]
    return "\n".join("".join(name.ljust(cell) for name in row).rstrip() for row in rows)


def terminal_reader(history=HISTORY_FILE):
    """A `read(prompt)` for a terminal: readline editing, history kept in `history` across sessions.
    Returns (read, save): call save() when the shell ends."""
    import readline

    path = Path(os.path.expanduser(history))
    try:
        readline.read_history_file(path)
    except OSError:
        pass  # no history yet (or unreadable): start afresh
    readline.set_history_length(HISTORY_LINES)

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
