"""Keeps the database's kernel_classes and kernel_rules tables in step with classify.py.

The loader classifies a trace's kernels in DuckDB, with the stored rules: its regular
expressions are RE2's, which run in time linear in the name (Python's backtracking `re` can take
the square of it: `gemm\\w*_ffma` on `gemmgemmgemm...`), and only a name's first
MAX_CLASSIFIED_CHARS are looked at, as classify() does, so a 100 MB name costs what a short one does.
"""

from tracekit.store.classify import MAX_CLASSIFIED_CHARS, RULES, rule_rows
from tracekit.store.knowledge import insert_rows
from tracekit.store.pattern_literals import MAX_NAMES_TO_SIFT, could_match

_CLASS_COLUMNS = "(name, kernel_class, gemm_class, math_unit, rule, trace_id)"


def _first_rule(kept):
    """SQL for the order of the first rule whose pattern matches `head` (NULL when none does), each
    pattern a constant, compiled once per statement: of the rules numbered in `kept` alone."""
    cases = " ".join(f"WHEN regexp_matches(head, '{rule.pattern.replace(chr(39), chr(39) * 2)}', 'i') THEN {order}"
                     for order, rule in enumerate(RULES, start=1) if order in kept)
    return f"CASE {cases} END" if cases else "CAST(NULL AS INTEGER)"


def classify_sql(kept):
    """The statement that classifies a trace's kernel names by the rules numbered in `kept`."""
    return (f"INSERT INTO kernel_classes {_CLASS_COLUMNS}"
            " SELECT k.name, r.kernel_class, r.gemm_class, r.math_unit, r.why, $trace_id"
            f" FROM (SELECT name, {_first_rule(kept)} AS rule_order"
            f"       FROM (SELECT DISTINCT name, left(name, {MAX_CLASSIFIED_CHARS}) AS head"
            "              FROM kernel_rows WHERE trace_id = $trace_id)) k"
            " LEFT JOIN kernel_rules r USING (rule_order)")


def store_classes(con, trace_id):
    """Classifies the kernel names of one trace, by the rules whose patterns could match one of its
    names (tracekit.store.pattern_literals): DuckDB binds each rule's pattern every time, 7 ms for
    all 57, whether a name takes it or not."""
    heads = [row[0] for row in con.execute(
        f"SELECT DISTINCT left(name, {MAX_CLASSIFIED_CHARS}) FROM kernel_rows WHERE trace_id = $trace_id"
        f" LIMIT {MAX_NAMES_TO_SIFT + 1}", {"trace_id": trace_id}).fetchall()]
    patterns = [rule.pattern for rule in RULES]
    kept = set(range(1, len(RULES) + 1)) if len(heads) > MAX_NAMES_TO_SIFT \
        else could_match(patterns, heads, ignore_case=True)
    con.execute(classify_sql(kept), {"trace_id": trace_id})


def sync_rules(con):
    """When classify.py's rules differ from the stored ones (a newer tracekit), stores them and
    classifies every trace's kernels again, so old traces and new ones are classified alike."""
    current = rule_rows()
    stored = [tuple(row) for row in con.execute("SELECT * FROM kernel_rules ORDER BY rule_order").fetchall()]
    if stored == current:
        return
    con.execute("DELETE FROM kernel_rules")
    insert_rows(con, "kernel_rules", current)
    con.execute("DELETE FROM kernel_classes")
    for (trace_id,) in con.execute("SELECT trace_id FROM trace_files ORDER BY trace_id").fetchall():
        store_classes(con, trace_id)
