"""What `tracekit schema` and `tracekit tables` print: every table and view of a database that a
query can read (`tables`: a line each, with its row count).

First the documented views (the contract, from views.sql), then the named queries (each a view
too: tracekit.store.query_relations), then the tables `tracekit hta` stored, then the storage
tables the views read. A name starting with `_` is tracekit's own.
"""

import re
import textwrap

from tracekit.store.database import schema_doc
from tracekit.store.hta_schema import TABLE_DOCS

_WIDTH = 100


def _columns_by_relation(con):
    """{table or view name: [(column, type), ...]} of the database in use, in column order."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main' "
        "ORDER BY table_name, ordinal_position").fetchall()
    found = {}
    for table, column, data_type in rows:
        found.setdefault(table, []).append((column, data_type))
    return found


def _documented_names(doc):
    """The names of the views schema_doc documents (`kernels: ...`, `kernel_rules (a table): ...`)."""
    return {line.split(":")[0].split(" ")[0] for line in doc.splitlines() if line and not line.startswith(" ")}


def _block(name, about, columns):
    """`name: about` and its columns as `column TYPE, ...`, wrapped between columns."""
    lines, line = [], "  "
    for n, (column, data_type) in enumerate(columns):
        item = f"{column} {data_type}" + ("," if n < len(columns) - 1 else "")
        if len(line) + len(item) > _WIDTH and line.strip():
            lines.append(line.rstrip())
            line = "  "
        line += item + " "
    lines.append(line.rstrip())
    return "\n".join([f"{name}: {about}" if about else f"{name}:"] + lines)


def _named_query_questions(relations):
    """{name: the question it answers} of the named queries that are relations of the database."""
    from tracekit.analysis.named_queries import named_queries

    return {name: query.question for name, query in named_queries().items() if name in relations}


NAMED_QUERIES_HEADING = ("# Named queries, each a view too (FROM summary; FROM summary(trace := 'naive') for its "
                         "parameters, as `tracekit query NAME -p` names them):")


def relation_names(con):
    """Every table and view a query can read, tracekit's private ones (`_...`) left out, sorted."""
    return [name for name in sorted(_columns_by_relation(con)) if not name.startswith("_")]


def describe(con, name):
    """What `tracekit schema` says of one table or view; None when the database has no such one."""
    relations = _columns_by_relation(con)
    if name not in relations or name.startswith("_"):
        return None
    doc = schema_doc()
    for block in doc.split("\n\n"):
        if block.split(":")[0].split(" ")[0] == name:
            return block.rstrip("\n") + "\n"
    about = _named_query_questions(relations).get(name) or TABLE_DOCS.get(name, "")
    return _block(name, about, relations[name]) + "\n"


def schema_text(con):
    """Every relation a query on `con`'s database can read, documented where tracekit documents it."""
    doc = schema_doc()
    relations = _columns_by_relation(con)
    questions = _named_query_questions(relations)
    others = sorted(name for name in relations if name not in _documented_names(doc) and not name.startswith("_"))
    named = [name for name in others if name in questions]
    hta = [name for name in others if name.startswith("hta_")]
    storage = [name for name in others if name not in hta and name not in questions]
    parts = [doc.rstrip("\n")]
    if named:
        parts.append(textwrap.fill(NAMED_QUERIES_HEADING, _WIDTH, subsequent_indent="# "))
        parts += [_block(name, questions[name], relations[name]) for name in named]
    if hta:
        parts.append("# Tables `tracekit hta` stored (column TYPE):")
        parts += [_block(name, TABLE_DOCS.get(name, ""), relations[name]) for name in hta]
    if storage:
        parts.append(textwrap.fill("# Storage tables the views read (column TYPE): query the views above, "
                                   "whose columns are the contract; these may change between versions.", _WIDTH,
                                   subsequent_indent="# "))
        parts += [_block(name, "", relations[name]) for name in storage]
    return "\n\n".join(parts) + "\n"


def table_rows(con, count_views=False):
    """(name, kind, rows, about) of every relation a query can read: the documented views first
    (in the order schema_doc gives them), then the tables `tracekit hta` stored, then the storage
    tables. rows: a table's row count; a view's only with `count_views` (a view runs its query to
    be counted: critical_path and findings take seconds on a big trace), else None."""
    doc = schema_doc()
    kinds = dict(con.execute(
        "SELECT table_name, CASE WHEN table_type = 'VIEW' THEN 'view' ELSE 'table' END FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_schema = 'main'").fetchall())
    about = {}
    for block in doc.split("\n\n"):
        name = block.split(":")[0].split(" ")[0]
        about[name] = _first_sentence(block)
    names = [n for n in relation_names(con)]
    documented = [n for n in about if n in names]
    questions = {n: q for n, q in _named_query_questions(names).items() if n not in about}
    about.update(questions)
    named = sorted(questions)
    hta = sorted(n for n in names if n not in about and n.startswith("hta_"))
    storage = sorted(n for n in names if n not in about and not n.startswith("hta_"))
    rows = []
    for name in documented + named + hta + storage:
        kind = kinds.get(name, "view")
        count = None
        if kind == "table" or count_views:
            count = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
        what = about.get(name) or TABLE_DOCS.get(name, "") or "storage: query the views, whose columns are the contract"
        rows.append((name, kind, count, what))
    return rows


def _first_sentence(block):
    """The first sentence of a documented view's description (its lines before the columns')."""
    lines = block.split("\n")
    text = lines[0].split(":", 1)[1] if ":" in lines[0] else ""
    for line in lines[1:]:
        if re.match(r"^  \w+(, \w+)*:", line):
            break
        text += " " + line.strip()
    text = " ".join(text.split())
    end = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", text)
    return text[:end.start()] if end else text
