"""Tab completion for `tracekit shell`: table, view and column names, named queries (views too),
SQL keywords, the dot commands, and file names after .read, .output and .once.

`Completer(words)` answers `complete(text, before)`: the candidates for the word `text`, where
`before` is the line up to it; `install` hands it to readline. The names come from the database
once, at the first Tab (database_words), so a prompt that never completes opens nothing.
"""

import glob
import os

from tracekit.outputs.shell_commands import COMMANDS

# Where a word ends for readline: not at `.`, so `.mo` and `k.na` are one word each.
DELIMS = " \t\n;,()=<>+-*/|'\"!"
_FILE_COMMANDS = (".read", ".output", ".once")


class Completer:
    """Candidates for a word being typed; `words()` gives (relations, columns, keywords) when first needed."""

    def __init__(self, words):
        self._words = words
        self._known = None

    def __call__(self, text, before):
        stripped = before.strip()
        if not stripped and text.startswith("."):
            return sorted(c for c in COMMANDS if c.startswith(text))
        if stripped in _FILE_COMMANDS:
            return _file_names(text)
        relations, columns, keywords = self._names()
        if stripped == ".schema":
            return _starting(relations, text)
        if "." in text:  # alias.column or table.column
            qualifier, _, part = text.rpartition(".")
            return [f"{qualifier}.{c}" for c in _starting(columns, part)]
        found = _starting(relations | columns, text)
        found += [_in_case(k, text) for k in _starting(keywords, text.upper())]
        return sorted(set(found))

    def _names(self):
        if self._known is None:
            try:
                self._known = self._words()
            except Exception:  # noqa: BLE001  a database locked by a load: complete nothing, never fail
                return set(), set(), set()
        return self._known


def database_words(con):
    """(relations, columns, keywords) a query on `con` can name: the tables and views (named
    queries among them), their columns, and DuckDB's keywords."""
    from tracekit.analysis.schema_listing import relation_names

    relations = set(relation_names(con))
    columns = {row[0] for row in con.execute(
        "SELECT DISTINCT column_name FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main' AND table_name NOT LIKE '\\_%' ESCAPE '\\'"
    ).fetchall()}
    keywords = {row[0].upper() for row in con.execute("SELECT keyword_name FROM duckdb_keywords()").fetchall()}
    return relations, columns, keywords


def _starting(names, text):
    return sorted(name for name in names if name.startswith(text))


def _in_case(keyword, text):
    """A keyword completed in the case its first letters were typed in (sel → select)."""
    return keyword.lower() if text and text == text.lower() and text != text.upper() else keyword


def _file_names(text):
    found = []
    for path in glob.glob(glob.escape(os.path.expanduser(text)) + "*"):
        found.append(path + "/" if os.path.isdir(path) else path)
    return sorted(found)


def install(readline, complete):
    """Makes Tab call `complete(text, before)` at readline's prompt."""
    matches = []

    def completer(text, state):
        if state == 0:
            before = readline.get_line_buffer()[:readline.get_begidx()]
            matches[:] = complete(text, before)
        return matches[state] if state < len(matches) else None

    readline.set_completer(completer)
    readline.set_completer_delims(DELIMS)
    if "libedit" in (readline.__doc__ or ""):  # macOS's Python: another way to bind Tab
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
