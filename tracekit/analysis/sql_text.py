"""Where ad hoc SQL comes from: the command line, standard input (`-`) or a file (`@file.sql`).

The SQL read is the SQL given: nothing is pasted into it. Values reach it as DuckDB `$name`
parameters (see named_queries.run_sql), and its errors name the file it came from.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import QueryError

STDIN = "-"
FILE_PREFIX = "@"
SQL_SUFFIX = ".sql"


@dataclass
class SqlText:
    """SQL and where it came from: a file's path, "standard input", or None when given inline."""

    text: str
    source: str = None

    def blame(self, message):
        """`message` about this SQL, led by the file it came from (if it came from one)."""
        return f"{self.source}: {message}" if self.source else message


def looks_like_sql_file(name):
    """True for a query name that is a path to an .sql file (named queries never end in .sql)."""
    return name is not None and name.lower().endswith(SQL_SUFFIX)


def sql_from(spec, stdin=None):
    """The SqlText an --sql value stands for: `-` reads `stdin` (sys.stdin by default),
    `@PATH` reads that file, anything else is the SQL itself."""
    if spec == STDIN:
        stream = stdin if stdin is not None else sys.stdin
        text = stream.read()
        if not text.strip():
            raise QueryError("standard input: no SQL came (--sql - reads the query from standard input)")
        return SqlText(text, "standard input")
    if spec.startswith(FILE_PREFIX) and len(spec) > 1:
        return read_sql_file(spec[1:])
    return SqlText(spec)


def read_sql_file(path):
    """The SqlText of an .sql file; a missing, unreadable or empty file is one clear QueryError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QueryError(f"{path}: no such file (give the path of a file of SQL)") from None
    except IsADirectoryError:
        raise QueryError(f"{path}: is a folder, not a file of SQL") from None
    except UnicodeDecodeError:
        raise QueryError(f"{path}: not a text file (SQL files are read as UTF-8)") from None
    except OSError as exc:
        raise QueryError(f"{path}: cannot be read ({exc.strerror})") from None
    if not text.strip():
        raise QueryError(f"{path}: the file is empty: it should hold one SELECT")
    return SqlText(text, str(path))
