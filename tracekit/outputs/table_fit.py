"""The plain-text table, fitted to a terminal's width.

Given a width, text columns are cut with `…` (never below their header or MIN_CUT characters) and
the columns that still do not fit are left out from the right, with a footer saying so. Numbers are
never cut: a cut number would be a wrong number, so a numeric column that does not fit is left out
whole. Without a width (a pipe or a file) every value is shown whole.
"""

from tracekit.outputs.cells import text
from tracekit.outputs.safe_text import printable

GAP = 2
# A text column cut below this many characters (or its header's width) tells nothing.
MIN_CUT = 8
ELLIPSIS = "…"


def _one_line(value):
    """A cell on one line: line breaks and tabs as spaces, other control characters escaped."""
    return printable(text(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " "))


def _shown_columns(floors, width):
    """How many leading columns fit `width` at their narrowest (at least one)."""
    used, count = 0, 0
    for floor in floors:
        need = floor + (GAP if count else 0)
        if count and used + need > width:
            break
        used, count = used + need, count + 1
    return count


def _fit_widths(natural, floors, numeric, width):
    """Widths for the shown columns: numbers whole, text columns grown evenly from their floors
    towards their natural width with the room left (water-filling under one common cap)."""
    room = width - GAP * (len(natural) - 1) - sum(n for n, num in zip(natural, numeric) if num)
    texts = [(n, f) for n, f, num in zip(natural, floors, numeric) if not num]

    def used(cap):
        return sum(min(n, max(f, cap)) for n, f in texts)

    low, high = 0, max([n for n, _ in texts], default=0)
    while low < high:  # the largest cap that fits the room: used() grows with the cap
        middle = (low + high + 1) // 2
        low, high = (middle, high) if used(middle) <= room else (low, middle - 1)
    return [n if num else min(n, max(f, low)) for n, f, num in zip(natural, floors, numeric)]


def _cut(value, width):
    return value if len(value) <= width else value[: max(width - 1, 0)] + ELLIPSIS


def table(rows, width=None, max_rows=None, whole="-f line"):
    """`rows` (a Rows) as an aligned text table with a `(N rows)` footer, fitted to `width`.
    `max_rows`: more rows than this show the first and last halves around a `…` line, as DuckDB's
    shell does (None: every row). `whole`: what the footer says shows a cut table whole."""
    header = [_one_line(c) for c in rows.columns]
    cells = [[_one_line(v) for v in row] for row in rows.rows]
    numeric = rows.numeric()
    count = len(cells)
    if max_rows is not None and count > max(max_rows, 1):
        cells = cells[:(max_rows + 1) // 2] + [None] + cells[count - max_rows // 2:]
    kept = [r for r in cells if r is not None]
    natural = [max([len(h)] + [len(r[i]) for r in kept]) for i, h in enumerate(header)]
    shown, widths = len(header), natural
    if width is not None and sum(natural) + GAP * (len(natural) - 1) > width:
        floors = [n if num else min(n, max(len(h), MIN_CUT)) for n, h, num in zip(natural, header, numeric)]
        shown = _shown_columns(floors, width)
        widths = _fit_widths(natural[:shown], floors[:shown], numeric[:shown], width)

    def line(values):
        if values is None:  # the rows left out
            values = [ELLIPSIS] * len(widths)
        return "  ".join(_cut(v, w).rjust(w) if num else _cut(v, w).ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    body = [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in cells]
    cut = any(len(r[i]) > widths[i] for r in kept for i in range(shown))
    footer = _footer(count, shown, len(header), cut, width, whole)
    if len(kept) < count:
        footer = footer.replace(f"{count} rows", f"{count} rows, {len(kept)} shown", 1)
    return "\n".join(body + [footer]) + "\n"


def _footer(count, shown, total, cut, width, whole="-f line"):
    notes = [f"{count} row{'s' if count != 1 else ''}"]
    if shown < total:
        notes.append(f"{shown} of {total} columns shown")
    if cut:
        notes.append(f"long values cut with {ELLIPSIS}")
    if shown < total or cut:
        notes[-1] += f" to fit {width} columns"
        notes.append(f"{whole} shows all")
    return f"({'; '.join(notes)})"
