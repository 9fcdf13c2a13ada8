"""One value as text, exactly: the rules every output format shares.

- Integers print in full; DECIMALs with all their digits (`1733221234567890.123`).
- Floats print as Python's repr, the shortest text that reads back as the same double (a FLOAT's,
  as the same 32-bit float), so two
  different values never print alike; written out in full rather than with an exponent from 1e16 up
  (`10000000000000000.0`), and keeping `.0` so a float still reads as one. NaN and the infinities
  print `nan`, `inf`, `-inf` in text and `null` in JSON.
- NULL is blank in text formats and `null` in JSON.
- Booleans are `true`/`false`; times ISO 8601; blobs base64; lists, structs and maps compact JSON.
"""

import base64
import json
import math
import re
import struct
from datetime import date, time
from decimal import Decimal


class Float32(float):
    """A DuckDB FLOAT (REAL) value, which Python holds as the double nearest it: shown as the
    shortest text that reads back as the same 32-bit float (`1.1`, as DuckDB shows it, not
    `1.100000023841858`, the double's)."""

    def __repr__(self):
        value = float(self)
        if math.isfinite(value):
            single = struct.pack("<f", value)
            for digits in range(1, 10):  # 9 significant digits always read back as the same float
                text = f"{value:.{digits}g}"
                try:
                    if struct.pack("<f", float(text)) == single:
                        return repr(float(text))
                except OverflowError:  # rounded past the largest float (3.4028235e38)
                    continue
        return float.__repr__(value)

    __str__ = __repr__


class JsonText(str):
    """A DuckDB JSON value, as the text DuckDB holds: shown as is in text formats, parsed and
    written again (strictly) in JSON ones, as DuckDB's JSON may hold NaN or Infinity."""


# Python reads, renders and writes JSON by recursion, a level at a time: a value nested deeper
# than this (args 1,000 levels deep) stays the text it is, which every format can show.
MAX_JSON_DEPTH = 100
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def nests_too_deep(text):
    """True when the JSON `text` nests objects and lists deeper than MAX_JSON_DEPTH."""
    if text.count("{") + text.count("[") <= MAX_JSON_DEPTH:
        return False  # cheap: too few brackets to nest that deep
    depth = deepest = 0
    for token in _JSON_TOKEN.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest > MAX_JSON_DEPTH


def json_cell(text):
    """A JSON cell as the objects it holds, or as its text when it nests too deep for Python."""
    return text if nests_too_deep(text) else json.loads(text)


def float_text(value):
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    if "e" in text and abs(value) >= 1:
        text = format(Decimal(text), "f") + ".0"  # 1e+16 -> 10000000000000000.0, the same digits
    return text


def decimal_text(value):
    # Positional, all digits; str() would write 1E-7 for small ones. A JSON number of absurd
    # exponent (1e400) keeps its exponent rather than printing 400 zeros.
    exponent = value.as_tuple().exponent
    return format(value, "f") if isinstance(exponent, int) and abs(exponent) <= 40 else str(value)


def _blob_text(value):
    return base64.b64encode(bytes(value)).decode("ascii")


def text(value):
    """`value` as text for table, csv, tsv, markdown, line and html cells."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _blob_text(value)
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, (list, tuple, dict)):
        return json_value(value, compact=True)
    return str(value)


def _parse_json(raw):
    return json.loads(raw, parse_float=Decimal, parse_constant=lambda _: None)


def json_value(value, compact=False):
    """`value` as strict JSON (RFC 8259): NaN and infinities are null, numbers keep every digit."""
    comma, colon = (",", ":") if compact else (", ", ": ")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_text(value) if math.isfinite(value) else "null"
    if isinstance(value, Decimal):
        return decimal_text(value) if value.is_finite() else "null"
    if isinstance(value, JsonText):
        if nests_too_deep(value):
            return json.dumps(str(value), ensure_ascii=False)  # its text, whole: see MAX_JSON_DEPTH
        try:
            return json_value(_parse_json(value), compact)
        except ValueError:
            return json.dumps(str(value), ensure_ascii=False)  # not JSON after all: keep it as text
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}{colon}{json_value(v, compact)}" for k, v in value.items())
        return "{" + comma.join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + comma.join(json_value(v, compact) for v in value) + "]"
    return json.dumps(text(value), ensure_ascii=False)


def is_number(value):
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)
