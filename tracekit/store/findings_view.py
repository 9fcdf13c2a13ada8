"""The `findings` view: every finding rule (queries/findings/*.sql) at its parameters' defaults,
as one SELECT. The findings engine (tracekit.analysis.findings_engine) runs the same rules with
the user's parameters and replays their fixes; the view holds the rules' rows alone."""

import re
from importlib import resources

from tracekit.store.sql_header import header_params


def rule_texts():
    """{rule id: SQL text} of every finding rule installed (the queries.findings package), by id."""
    folder = resources.files("tracekit.queries").joinpath("findings")
    return {entry.name[:-4]: entry.read_text(encoding="utf-8")
            for entry in sorted(folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(".sql")}


def findings_view_sql():
    """One SELECT over every rule with its default parameters: the `findings` view."""
    parts = []
    for sql in rule_texts().values():
        for key, default in sorted(header_params(sql).items(), key=lambda item: -len(item[0])):
            sql = re.sub(rf"\${key}\b", "NULL" if default is None else _literal(default), sql)
        body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).rstrip().rstrip(";")
        parts.append(f"SELECT * FROM ({body})")
    return "\nUNION ALL\n".join(parts)


def _literal(text):
    return text if re.fullmatch(r"-?\d+(\.\d+)?", text) else "'" + text.replace("'", "''") + "'"
