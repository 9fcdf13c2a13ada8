"""The guarded blocks of the derive_*.sql files (tracekit.store.guarded_sql)."""

import pytest

from tracekit.store.guarded_sql import guarded_statements

SQL = """
CREATE TABLE a AS SELECT 1;
-- @if EXISTS (SELECT 1 FROM a)
-- a comment inside the block
INSERT INTO a SELECT 2;
INSERT INTO a SELECT 3;
-- @else
CREATE TABLE b (x INTEGER);
-- @end
DROP TABLE a;
"""


def test_each_statement_carries_its_blocks_condition_and_part():
    assert guarded_statements(SQL) == [
        (None, None, "CREATE TABLE a AS SELECT 1"),
        ("EXISTS (SELECT 1 FROM a)", True, "INSERT INTO a SELECT 2"),
        ("EXISTS (SELECT 1 FROM a)", True, "INSERT INTO a SELECT 3"),
        ("EXISTS (SELECT 1 FROM a)", False, "CREATE TABLE b (x INTEGER)"),
        (None, None, "DROP TABLE a"),
    ]


@pytest.mark.parametrize("sql", ["-- @if x\nSELECT 1;\n-- @if y\nSELECT 2;\n-- @end\n-- @end\n",
                                 "-- @else\nSELECT 1;\n", "-- @end\n", "-- @if\nSELECT 1;\n-- @end\n",
                                 "-- @if x\nSELECT 1;\n", "-- @if x\n-- @else\n-- @else\n-- @end\n"])
def test_a_misplaced_directive_is_refused(sql):
    with pytest.raises(ValueError):
        guarded_statements(sql)
