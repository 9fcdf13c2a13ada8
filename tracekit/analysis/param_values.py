"""A parameter's value (`-p NAME VALUE`), checked once for named queries and finding rules alike.

What a parameter holds follows from its name, as the headers of queries/*.sql and
queries/findings/*.sql name them: `trace` is a trace's name; a name ending in `_us`, `_ms` or
`_pct` is a time or a share (any number of 0 or more; a share at most 100); every other one counts
something (steps, kernels, bytes, rows: a whole number of 0 or more, `limit` 1 or more). A value
that is not one is a one-line error naming the parameter, before any SQL runs.
"""

import math
import re

from tracekit.errors import QueryError
from tracekit.store.sql_sandbox import require_text

_TEXT = frozenset({"trace"})
_LEAST = {"limit": 1}
# The queries cast a count to INTEGER: above this DuckDB's cast fails (with the whole SQL in its error).
_MOST_COUNT = 2**31 - 1
# A number as SQL writes one: ASCII digits (Python's float() also takes '١٢', '1_0' and ' 5 ').
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.ASCII | re.IGNORECASE)


def checked(name, value):
    """`value` (text as given, or the header's default) as int, float or str for parameter `name`;
    None stays None (the SQL's NULL: no filter)."""
    if isinstance(value, str):
        require_text(value, f"-p {name}", hint="")  # bytes that are not UTF-8, which no SQL value can hold
    if value is None or name in _TEXT:
        return value
    number = _number(name, value)
    if name.endswith(("_us", "_ms", "_pct")):
        if number < 0:
            raise QueryError(f"-p {name} must be 0 or more (got {value!r})")
        if name.endswith("_pct") and number > 100:
            raise QueryError(f"-p {name} is a percent: from 0 to 100 (got {value!r})")
        return int(number) if number.is_integer() else number
    if not number.is_integer():
        raise QueryError(f"-p {name} counts something: a whole number (got {value!r})")
    if number < _LEAST.get(name, 0):
        raise QueryError(f"-p {name} must be {_LEAST.get(name, 0)} or more (got {value!r})")
    if number > _MOST_COUNT:
        raise QueryError(f"-p {name} must be at most {_MOST_COUNT} (got {value!r})")
    return int(number)


def as_sql_text(value):
    """A checked value as the text DuckDB casts to the type the SQL needs (1e3 as 1000)."""
    return value if value is None or isinstance(value, str) else repr(value)


def _number(name, value):
    if isinstance(value, bool):
        raise QueryError(f"-p {name} takes a number (got {value!r})")
    if isinstance(value, str) and not _NUMBER.fullmatch(value):
        raise QueryError(f"-p {name} takes a number (got {value!r})")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise QueryError(f"-p {name} takes a number (got {value!r})") from None
    if not math.isfinite(number):
        raise QueryError(f"-p {name} takes a finite number (got {value!r})")
    return number
