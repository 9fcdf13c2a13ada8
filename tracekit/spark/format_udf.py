"""DuckDB's format(), for Spark: a Python UDF that writes `{}` and `{:.1f}` fields as DuckDB's fmt does.

Spark's format_string is Java's printf: `%.1f` rounds half up from the shortest decimal form of a
double (0.25 gives 0.3, 2.675 gives 2.68), where fmt rounds the double's exact binary value, ties
to even (0.2, 2.67); and `%s` of a double writes 1.0E7 where fmt writes 10000000.0. Python's
format rounds and writes doubles as fmt does, so the finding rules' titles and details come out
letter for letter the same.

Not Python's str.format, though: its fields reach any attribute or item of a value
(`{0.__class__.__new__.__globals__[sys].modules[os].environ[SECRET]}` reads the worker's
environment), and a width is unbounded (`{:>300000000}` is a 300 MB string, which killed the JVM
that took it). The template is read here, field by field, into the subset of fmt's syntax below,
and each field's value is written by Python's format() with that field's spec alone:

- a field is `{}` (the next value) or `{N}` (value N, counted from 0; the two are not mixed, as
  fmt refuses), then optionally `:` and a spec;
- a spec is `[[fill]align][sign][0][width][.precision][type]`, or a grouping `,` or `_` then
  `[.precision][type]` (DuckDB reads a grouping only first: `{:,}`, `{:,.2f}`): align `<`, `>` or
  `^` (`0` pads only without one: fmt ignores `<` there where Python pads on the right), sign `+`,
  `-` or a space, type `d`, `f` or `s`; a precision needs type `f` or `s` (without a type fmt
  writes 1e20 to 2 digits as 1.0e+20, Python as 1e+20);
- a width or precision is at most WIDEST, and a result at most LONGEST characters;
- `{{` and `}}` are a `{` and a `}`.

Anything else (a name, an attribute or an item in a field, a width from another value, another
type) is a ValueError that says what is wrong. tracekit's SQL uses `{}`, `{:.0f}`, `{:.1f}` and
`{:.3f}`; tests/test_spark_sandbox.py checks each spec above against DuckDB's own format().
Numbers, text and booleans come out as DuckDB writes them; other values (dates, lists) as Python
writes them.

Spark pickles this module's function by value to run it on its executors, so it imports the
standard library only.
"""

import math
import re
from decimal import Decimal

UDF_NAME = "tk_format"
WIDEST = 1000
LONGEST = 1_000_000

_SPEC = re.compile(r"(?:(?P<grouping>[,_])|(?P<fill>(?:[^{}]?[<>^])?)(?P<sign>[-+ ]?)(?P<zero>0?)(?P<width>\d*))"
                   r"(?:\.(?P<precision>\d+))?(?P<type>[dfs]?)")
_SPECS = ("[[fill]align][sign][0][width][.precision][type], or a grouping (, or _) then [.precision][type]; "
          "type d, f or s")


def duckdb_format(template, *values):
    """format(template, values...) as DuckDB computes it: NULL when any value is NULL."""
    if template is None or any(value is None for value in values):
        return None
    written, length = [], 0
    for piece in parse(template, len(values)):
        text = piece if isinstance(piece, str) else _field(values, *piece)
        length += len(text)
        if length > LONGEST:
            raise ValueError(f"format(): the result is longer than {LONGEST:,} characters")
        written.append(text)
    return "".join(written)


def parse(template, count):
    """The pieces of `template`, for `count` values: text, and (value index, spec, the field as
    written) for each field. A ValueError, saying why, for what the module's doc does not list."""
    pieces, text, i, automatic, numbered = [], [], 0, 0, 0
    while i < len(template):
        char = template[i]
        if template.startswith(("{{", "}}"), i):
            text.append(char)
            i += 2
            continue
        if char == "}":
            raise ValueError("format(): a '}' without its '{' (write }} for a '}' itself)")
        if char != "{":
            text.append(char)
            i += 1
            continue
        end = template.find("}", i)
        if end < 0:
            raise ValueError("format(): a '{' without its '}' (write {{ for a '{' itself)")
        field = template[i:end + 1]
        name, _, spec = field[1:-1].partition(":")
        if "{" in spec:
            raise ValueError("format(): a field takes its width or precision from a value ({:>{}}), "
                             "which Spark's format() does not")
        if name and not name.isdecimal():
            raise ValueError(f"format(): the field {field} looks up a name, an attribute or an item: "
                             "a field is {} or {N} (N counts the values from 0), then :spec")
        numbered += bool(name)
        automatic += not name
        if numbered and automatic:
            raise ValueError("format(): the fields mix {} and {N}, which DuckDB refuses too")
        index = int(name) if name else automatic - 1
        if index >= count:
            raise ValueError(f"format(): the field {field} has no value (format() was given {count})")
        _check_spec(spec, field)
        if text:
            pieces.append("".join(text))
            text = []
        pieces.append((index, spec, field))
        i = end + 1
    if text:
        pieces.append("".join(text))
    return pieces


def _check_spec(spec, field):
    found = _SPEC.fullmatch(spec)
    if found is None or (found["fill"] and found["zero"]):
        raise ValueError(f"format(): the field {field} has a spec Spark's format() does not write; "
                         f"a spec may give {_SPECS}")
    if found["precision"] and found["type"] not in ("f", "s"):
        raise ValueError(f"format(): the field {field} gives a precision without type f or s "
                         "(e.g. {:.1f} for a number, {:.3s} for text)")
    for part in ("width", "precision"):
        if found[part] and int(found[part]) > WIDEST:
            raise ValueError(f"format(): the field {field} has a {part} over {WIDEST}, the most Spark's "
                             "format() writes")


def _field(values, index, spec, field):
    value = values[index]
    parts = _SPEC.fullmatch(spec).groupdict()
    if isinstance(value, bool):
        value = int(value) if parts["type"] == "d" else ("true" if value else "false")
    elif isinstance(value, Decimal):
        value = float(value)  # DuckDB writes a DECIMAL as its double: 100.00 as 100.0
    elif not isinstance(value, (int, float, str)):
        value = str(value)
    if isinstance(value, str):
        parts["grouping"] = ""  # fmt groups digits only, and writes text as it is
    if isinstance(value, float) and not math.isfinite(value) and not parts["fill"]:
        # fmt writes nan and inf as text, on the left, padded with the 0 too: 'nan00000' for {:08}
        parts["fill"], parts["zero"] = ("0<" if parts["zero"] else "<"), ""
    spec = "".join(part if key != "precision" else f".{part}" for key, part in parts.items() if part)
    try:
        return format(value, spec)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"format(): the field {field} does not fit a value of type {type(value).__name__} "
                         f"({exc})") from None
