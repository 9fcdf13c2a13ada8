"""The loader leaves out of its two CASEs of name patterns (kernel classes, work models) the patterns
no name of the trace could match, told by texts each match must contain
(tracekit.store.pattern_literals). Left out wrongly, a kernel or an op would take a later rule:
checked against DuckDB's own matching (RE2, as the loader runs the patterns) on every kernel and op
name of the samples, the foreign traces and the H200 loops."""

import duckdb
import pytest

from tracekit.store.classify import MAX_CLASSIFIED_CHARS, RULES
from tracekit.store.pattern_literals import could_match, needed_texts
from tracekit.store.work_models import rules as work_rules

KERNEL_PATTERNS = [rule.pattern for rule in RULES]
OP_PATTERNS = [row["op"] for row in work_rules()]


def _names(db, sql):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [row[0] for row in con.execute(sql).fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def names(sample_db, foreign_db, loops_db):
    """(kernel name heads, op names) of three databases of real traces."""
    kernels, ops = set(), set()
    for db in (sample_db, foreign_db, loops_db):
        kernels.update(_names(db, f"SELECT DISTINCT left(name, {MAX_CLASSIFIED_CHARS}) FROM kernel_rows"))
        ops.update(_names(db, "SELECT DISTINCT name FROM cpu_op_rows WHERE name IS NOT NULL"))
    return sorted(kernels), sorted(ops)


def _matched(names, patterns, function, flags):
    """{(name, pattern number)} DuckDB matches."""
    con = duckdb.connect()
    con.execute("CREATE TABLE n AS SELECT unnest(?) AS name", [names])
    con.execute("CREATE TABLE p AS SELECT unnest(?) AS pattern, generate_subscripts(?, 1) AS number",
                [patterns, patterns])
    return set(con.execute(f"SELECT name, number FROM n, p WHERE {function}(name, pattern{flags})").fetchall())


@pytest.mark.parametrize("kind", ["kernels", "ops"])
def test_no_pattern_a_name_matches_is_left_out_for_it(names, kind):
    names = names[0] if kind == "kernels" else names[1]
    patterns, function, flags, caseless = ((KERNEL_PATTERNS, "regexp_matches", ", 'i'", True) if kind == "kernels"
                                           else (OP_PATTERNS, "regexp_full_match", "", False))
    matched = _matched(names, patterns, function, flags)
    assert len(matched) > (100 if kind == "kernels" else 50)  # enough pairs for the test to mean something
    left_out = [(name, patterns[number - 1]) for name, number in matched
                if number not in could_match(patterns, [name], ignore_case=caseless)]
    assert left_out == []
    # and the sieve does sieve: a trace's names keep a fraction of the patterns
    kept = could_match(patterns, names[:40], ignore_case=caseless)
    assert len(kept) < 0.8 * len(patterns)


def test_the_texts_a_match_needs():
    assert needed_texts(r"^memset\b|fillbuffer", True) == (frozenset({"memset", "fillbuffer"}),)
    # each set stands on its own: a name needs a text of every one
    assert needed_texts("aten::(cudnn|miopen)_convolution(_transpose)?", False) == (
        frozenset({"aten::"}), frozenset({"cudnn", "miopen"}), frozenset({"_convolution"}))
    # an optional part needs nothing; a case-sensitive group inside a caseless pattern is folded too
    assert needed_texts("x(abc)?", False) == (frozenset({"x"}),)
    assert needed_texts("(?-i:Conv)(?-i:[A-Z0-9_])", True) == (frozenset({"conv"}),)
    # where nothing can be told, the pattern is kept: no text, RE2's own syntax, a letter beyond ASCII
    assert needed_texts(r"(^|[^a-z])\d+", True) is None
    assert needed_texts(r"\pL+gemm", True) is None
    assert needed_texts("ſgemm|fft", True) is None


def test_a_name_beyond_ascii_keeps_every_pattern():
    # RE2 folds the long s (ſ) to s without case: "ſimt" is a match of "simt" that "simt" is not in
    assert duckdb.connect().execute("SELECT regexp_matches('ſimt_sgemm', 'simt', 'i')").fetchone()[0]
    assert could_match(KERNEL_PATTERNS, ["ſimt_sgemm"], ignore_case=True) == set(range(1, len(RULES) + 1))
    assert could_match(KERNEL_PATTERNS, ["simt_sgemm"], ignore_case=True) < set(range(1, len(RULES) + 1))
