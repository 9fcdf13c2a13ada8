"""Blocks of a derive_*.sql file that run only where the trace has something for them.

    -- @if EXISTS (SELECT 1 FROM _mem)
    INSERT INTO memory_rows ...;
    -- @else
    CREATE OR REPLACE TEMP TABLE ... ;
    -- @end

The loader selects the condition (an SQL expression, `$trace_id` allowed) just before the block's
first statement and runs the block's statements, or the `@else` part's, accordingly. Each statement
of a derivation costs DuckDB 1-10 ms to plan even when it finds no rows, most of a small trace's
load: a trace without Python stacks, allocator events or collectives skips the statements that
would find none. A block's statements must leave the tables later statements read as the
skipped ones would have: empty, made by the `@else` part or before the block. Blocks do not nest.
"""

import re

from tracekit.store.database import split_statements

_DIRECTIVE = re.compile(r"^\s*--\s*@(if|else|end)\b(.*)$")


def guarded_statements(sql):
    """[(condition, runs_if, statement)] of `sql` in order: `condition` None for a statement outside
    any block; otherwise the statement runs where `condition` is `runs_if` (True in the `@if` part,
    False in the `@else` part). Statements are split as split_statements splits them."""
    steps, part, condition, runs_if = [], [], None, None

    def close_part():
        steps.extend((condition, runs_if, statement) for statement in split_statements("\n".join(part)))
        part.clear()

    for number, line in enumerate(sql.splitlines(), start=1):
        directive = _DIRECTIVE.match(line)
        if directive is None:
            part.append(line)
            continue
        kind, rest = directive.group(1), directive.group(2).strip()
        expected = {"if": condition is None, "else": runs_if is True, "end": condition is not None}[kind]
        if not expected or (kind == "if") != bool(rest):
            raise ValueError(f"line {number}: a misplaced `-- @{kind}` (blocks are `-- @if CONDITION` ... "
                             "[`-- @else` ...] `-- @end`, not nested)")
        close_part()
        condition, runs_if = {"if": (rest, True), "else": (condition, False), "end": (None, None)}[kind]
    if condition is not None:
        raise ValueError(f"an `-- @if {condition}` block without its `-- @end`")
    close_part()
    return steps
