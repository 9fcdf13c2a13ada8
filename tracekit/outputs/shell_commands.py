"""The dot commands of `tracekit shell`, as DuckDB's shell has them: .mode, .timer, .maxrows,
.output, .once, .read, .tables, .schema, .help and .quit."""

import re
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import TracekitError

# A .read file that reads itself, or two that read each other, stop here.
MAX_READ_DEPTH = 16
HELP = """\
Statements are SQL SELECTs ending with ;  (one per query, several per line run in order),
or EXPLAIN [ANALYZE] of one. Named queries are tables too: FROM summary, FROM top_kernels("limit" := 3).
.tables [PATTERN]  list the tables, views and named queries a query can read (those LIKE PATTERN)
.schema [NAME]     describe every table and view, or one
.mode [FORMAT]     show or set the output format: {formats}
.maxrows [N]       show or set how many rows a table shows: more are elided in the middle (0: all)
.timer on|off      print how long each statement took
.output [FILE]     send results to FILE (never over the database or a file of another kind); alone: back here
.once FILE         send the next statement's result to FILE (as .output does), then back here
.read FILE         run the statements and commands of FILE (UTF-8)
.help              this help
.quit              leave (also .exit, or Ctrl-D)
Tab completes table, view, column and named query names, and these commands.
The database is read-only: the shell runs only SELECT (WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)."""
COMMANDS = (".tables", ".schema", ".mode", ".maxrows", ".timer", ".output", ".once", ".read", ".help", ".quit",
            ".exit")


def run_command(shell, line):
    """Runs the dot command `line`; "quit" when it ends the shell. Its errors are the shell's."""
    command, _, argument = line.partition(" ")
    argument = argument.strip()
    if command in (".quit", ".exit", ".q"):
        return "quit"
    try:
        if command == ".read":
            return read_file(shell, argument)
        handler = _HANDLERS.get(command)
        if handler is None:
            raise TracekitError(f"unknown command {command} (.help lists the commands)")
        handler(shell, argument)
    except TracekitError as exc:
        shell.fail(str(exc))
    return None


def _help(shell, _argument):
    shell.io.say(HELP.format(formats=", ".join(shell.io.formats)))


def _tables(shell, pattern):
    """The names a query can read; with a PATTERN, those its LIKE takes (`%` any run, `_` one
    character), as DuckDB's and sqlite's `.tables ?PATTERN?` do."""
    from tracekit.analysis.schema_listing import relation_names

    like = re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern), re.S)

    def names(con):
        return in_columns([name for name in relation_names(con) if not pattern or like.fullmatch(name)])

    shell.io.say(_with_connection(shell, names))


def _schema(shell, name):
    from tracekit.analysis.schema_listing import describe, schema_text

    def text(con):
        if not name:
            return schema_text(con)
        described = describe(con, name)
        if described is None:
            raise TracekitError(f"no table or view named {name!r} (.tables lists them)")
        return described

    shell.io.say(_with_connection(shell, text).rstrip("\n"))


def _mode(shell, fmt):
    if not fmt:
        shell.io.say(f"output format: {shell.fmt}")
    elif fmt in shell.io.formats:
        shell.fmt = fmt
    else:
        raise TracekitError(f"unknown format {fmt!r} (choose from {', '.join(shell.io.formats)})")


def _max_rows(shell, argument):
    if not argument:
        shown = shell.max_rows or "all"
        shell.io.say(f"maxrows: {shown} (a table with more rows shows the first and last halves around …)")
        return
    if not argument.isdigit():
        raise TracekitError(f".maxrows takes a whole number of rows, 0 for all (got {argument!r})")
    shell.max_rows = int(argument)


def _timer(shell, argument):
    if argument.lower() in ("on", "off"):
        shell.timer = argument.lower() == "on"
    elif not argument:
        shell.io.say(f"timer: {'on' if shell.timer else 'off'}")
    else:
        raise TracekitError(f".timer takes on or off (got {argument!r})")


@dataclass
class OutputFile:
    """Where .output sends results: a file opened once, each result written after the last.
    `once`: .once's, closed after the next statement (those of the next line, when it has several)."""

    name: str
    handle: object
    once: bool = False

    def write(self, text):
        try:
            self.handle.write(text)
            self.handle.flush()
        except OSError as exc:
            raise TracekitError(f"{self.name}: cannot write ({exc.strerror})") from None

    def close(self):
        self.handle.close()


def _output(shell, argument):
    shell.close_output()
    if argument:  # alone: back to the terminal
        _open_output(shell, _unquoted(argument))


def _once(shell, argument):
    """As DuckDB's .once: it ends an .output, and after the next statement results come back here."""
    shell.close_output()
    if not argument:
        raise TracekitError(".once takes a file: .once FILE")
    _open_output(shell, _unquoted(argument), once=True)


def _open_output(shell, name, once=False):
    from tracekit.outputs.output_guard import HTML, JSON, TEXT, check_output

    kind = {"json": JSON, "ndjson": JSON, "html": HTML}.get(shell.fmt, TEXT)
    try:
        check_output(name, kind, what=shell.fmt, database=shell.path)
    except TracekitError as exc:  # the guard speaks of -o, the shell's is .output
        raise TracekitError(str(exc).replace("another -o", "another .output FILE")
                            .replace("(give another .output FILE, or --force)", "(give another .output FILE)")) from None
    try:
        handle = open(name, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise TracekitError(f"{name}: cannot write ({exc.strerror})") from None
    shell.output = OutputFile(name, handle, once)


def read_file(shell, argument):
    """Runs every line of the file `argument` as if typed (a statement cut off at its end runs as
    it is); an error names the file and the line its statement starts on."""
    name = _unquoted(argument)
    if not name:
        raise TracekitError(".read takes a file: .read FILE")
    if shell.depth >= MAX_READ_DEPTH:
        raise TracekitError(f"{name}: .read nests {MAX_READ_DEPTH} files deep (does a file read itself?)")
    lines = _file_lines(name)
    saved = (shell.buffer, shell.where, shell.started_at)
    shell.buffer, shell.depth = [], shell.depth + 1
    try:
        for number, line in enumerate(lines, 1):
            shell.where = (name, number)
            if shell.feed(line) == "quit":
                return "quit"
        shell.finish()
    finally:
        shell.buffer, shell.where, shell.started_at = saved
        shell.depth -= 1
    return None


def _file_lines(name):
    try:
        text = Path(name).read_text(encoding="utf-8").lstrip("\ufeff")
        # lines end at \n alone (\r\n read as one), as piped input's do: splitlines() would also
        # end them at U+2028, U+0085 or \x1c inside a string literal, changing the SQL
        return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    except FileNotFoundError:
        raise TracekitError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise TracekitError(f"{name}: is a folder, not a file of SQL") from None
    except UnicodeDecodeError as exc:
        raise TracekitError(f"{name}: not UTF-8 text (byte {exc.start} is not UTF-8)") from None
    except OSError as exc:
        raise TracekitError(f"{name}: cannot be read ({exc.strerror})") from None


def _unquoted(argument):
    """A file name as typed, with the quotes around it (for a name with spaces) taken off."""
    if len(argument) >= 2 and argument[0] == argument[-1] and argument[0] in "'\"":
        return argument[1:-1]
    return argument


def _with_connection(shell, use):
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(shell.path, allow_files=shell.allow_files)
    try:
        return use(con)
    finally:
        con.close()


def in_columns(names, width=100):
    """Names laid out in columns across `width` characters, as sqlite's .tables does."""
    if not names:
        return "(no tables)"
    cell = max(len(name) for name in names) + 2
    per_line = max(1, width // cell)
    rows = [names[i:i + per_line] for i in range(0, len(names), per_line)]
    return "\n".join("".join(name.ljust(cell) for name in row).rstrip() for row in rows)


_HANDLERS = {".help": _help, ".tables": _tables, ".schema": _schema, ".mode": _mode, ".maxrows": _max_rows,
             ".timer": _timer, ".output": _output, ".once": _once}
