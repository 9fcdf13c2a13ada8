"""Keeps the database's kernel_classes and kernel_rules tables in step with classify.py."""

from tracekit.classify import class_rows, rule_rows

_CLASS_COLUMNS = "(name, kernel_class, gemm_class, math_unit, rule, trace_id)"


def store_classes(con, trace_id):
    """Classifies the kernel names of one trace."""
    names = [row[0] for row in con.execute(
        "SELECT DISTINCT name FROM kernel_rows WHERE trace_id = ? ORDER BY name", [trace_id]).fetchall()]
    rows = [(*row, trace_id) for row in class_rows(names)]
    if rows:
        con.executemany(f"INSERT INTO kernel_classes {_CLASS_COLUMNS} VALUES (?, ?, ?, ?, ?, ?)", rows)


def sync_rules(con):
    """When classify.py's rules differ from the stored ones (a newer tracekit), stores them and
    classifies every trace's kernels again, so old traces and new ones are classified alike."""
    current = rule_rows()
    stored = [tuple(row) for row in con.execute("SELECT * FROM kernel_rules ORDER BY rule_order").fetchall()]
    if stored == current:
        return
    con.execute("DELETE FROM kernel_rules")
    con.executemany(f"INSERT INTO kernel_rules VALUES ({', '.join('?' * len(current[0]))})", current)
    con.execute("DELETE FROM kernel_classes")
    for (trace_id,) in con.execute("SELECT trace_id FROM trace_files ORDER BY trace_id").fetchall():
        store_classes(con, trace_id)
