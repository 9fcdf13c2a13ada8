"""The plain-text table, fitted to a terminal's width by keeping the columns that matter.

A named query declares its key columns (`-- keys:` in its header; `tracekit findings` its own):
the columns a reader needs to read a row at all. Given a width, in this order:

1. kernel names (a column named `kernel` or `..._kernel`) are shortened as the report shortens
   them (tracekit.analysis.kernel_names.short_kernel_names: distinct names stay distinct);
2. the key columns are kept, numbers whole and text widened evenly from MIN_CUT characters up to
   KEY_READABLE where there is room (on a terminal too narrow even for that, the last keys go);
3. a column that repeats a kept column's values is left out (summary's `variant` is its `trace`);
4. the other columns are added, left to right, where they fit whole;
5. the room left widens the key text columns to their whole values, then shows the other text
   columns that fit at NON_KEY_MIN_CUT characters, cut with `…`.

Numbers are never cut: a cut number would be a wrong number, so a numeric column that does not fit
is left out whole, and the footer names the columns left out. Without a width (a pipe or a file)
every value is shown whole; without keys (ad hoc SQL) the first column is the key.

`box` draws the same table in lines, as DuckDB's `.mode box` does (its frame and rules are fitted
to the width with it).
"""

import unicodedata
from dataclasses import dataclass

from tracekit.analysis.kernel_names import short_kernel_names
from tracekit.analysis.cells import text
from tracekit.outputs.safe_text import printable

GAP = 2
# A boxed table puts ` │ ` between columns and `│ `, ` │` at its edges.
BOX_GAP, BOX_EDGES = 3, 4
# A text column cut below this many characters (or its header's width) tells nothing.
MIN_CUT = 8
# A key text column gets this much (or its whole values) before any other column is added.
KEY_READABLE = 32
# Another text column is shown cut only where it keeps this many characters: less tells nothing.
NON_KEY_MIN_CUT = 12
# Kernel names are first shortened to at most this many characters, as the report's labels are.
SHORT_KERNEL_CHARS = 48  # tracekit.outputs.report.units.SHORT_KERNEL_CHARS
ELLIPSIS = "…"


def _one_line(value):
    """A cell on one line: control characters escaped, line breaks and tabs too (`\\n`, `\\t`), as
    `-f line` shows them: 'a\\rb' and 'a b' are different values and look it."""
    return printable(text(value))


def cells_wide(value):
    """How many terminal cells `value` takes: two for a wide character (CJK, most emoji), none for
    a combining one; len() counts characters, and a row of wide ones overflowed the terminal."""
    if value.isascii():
        return len(value)
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in value)


def _cut(value, width):
    """`value` in at most `width` cells: cut, with `…` at its end, where it is wider."""
    if cells_wide(value) <= width:
        return value
    kept, used = [], 0
    for ch in value:
        ch_width = cells_wide(ch)
        if used + ch_width > width - 1:
            break
        kept.append(ch)
        used += ch_width
    return "".join(kept) + ELLIPSIS


def _padded(value, width, right=False):
    fill = " " * max(width - cells_wide(value), 0)
    return fill + value if right else value + fill


def is_kernel_column(name):
    return name == "kernel" or name.endswith("_kernel")


@dataclass
class _Column:
    header: str
    values: list      # the cells' text, whole (kernel names: shortened to SHORT_KERNEL_CHARS once fitted)
    numeric: bool
    key: bool
    kernel: bool      # holds kernel names (not numbers)
    width: int = 0    # as shown; 0 while left out
    full: list = None  # a kernel column's names before they were shortened

    @property
    def natural(self):
        return max([cells_wide(self.header)] + [cells_wide(v) for v in self.values])

    def floor(self, least):
        """The narrowest this column is shown: whole if a number, else cut to `least` (or its header)."""
        return self.natural if self.numeric else min(self.natural, max(cells_wide(self.header), least))

    def cells(self):
        if self.full is not None and self.natural > self.width:
            short = short_kernel_names(self.full, self.width)
            return [short.get(v, v) for v in self.full]
        return [_cut(v, self.width) for v in self.values]


def table(rows, width=None, keys=None, max_rows=None, whole="-f line", box=False):
    """`rows` (a Rows) as an aligned text table with a `(N rows)` footer, fitted to `width`
    keeping the columns `keys` (names; others are left out or cut first). `max_rows`: more rows
    than this show the first and last halves around a `…` line, as DuckDB's shell does (None: every
    row). `whole`: what the footer says shows a cut table whole. `box`: drawn in box lines."""
    keys = set(keys or ()) & set(rows.columns) or set(rows.columns[:1])
    count = len(rows.rows)
    kept, elided_at = rows.rows, None
    if max_rows is not None and count > max(max_rows, 1):
        elided_at = (max_rows + 1) // 2
        kept = rows.rows[:elided_at] + rows.rows[count - max_rows // 2:]
    columns = [_Column(_one_line(c), [_one_line(r[i]) for r in kept], num, c in keys,
                       is_kernel_column(c) and not num)
               for i, (c, num) in enumerate(zip(rows.columns, rows.numeric()))]
    gap, edges = (BOX_GAP, BOX_EDGES) if box else (GAP, 0)
    fits = width is None or _need([c.natural for c in columns], gap) + edges <= width
    notes = [] if fits else _fit(columns, width - edges, gap)
    for column in columns:
        column.width = column.width or (column.natural if not notes else 0)
    shown = [c for c in columns if c.width]

    def aligned(values):
        return [_padded(v, c.width, right=c.numeric) for v, c in zip(values, shown)]

    lines = [aligned(values) for values in zip(*(c.cells() for c in shown))]
    if elided_at is not None:  # the rows left out
        lines.insert(elided_at, aligned([ELLIPSIS] * len(shown)))
    body = (_boxed if box else _plain)(aligned([c.header for c in shown]), lines, shown)
    footer = f"{count} row{'s' if count != 1 else ''}"
    if elided_at is not None:
        footer += f", {len(kept)} shown"
    if notes:
        footer += f"; to fit {width} columns: {'; '.join(notes)}; {whole} shows all"
    return "\n".join(body + [f"({footer})"]) + "\n"


def _plain(header, lines, shown):
    """The header, a rule of dashes under each column, and the rows, two spaces apart."""
    def line(cells):
        return "  ".join(cells).rstrip()

    return [line(header), "  ".join("-" * c.width for c in shown)] + [line(cells) for cells in lines]


def _boxed(header, lines, shown):
    """The header and rows framed in box lines, as DuckDB's (and SQLite's) `.mode box` draws them."""
    def rule(left, middle, right):
        return left + middle.join("─" * (c.width + 2) for c in shown) + right

    def line(cells):
        return "│ " + " │ ".join(cells) + " │"

    return [rule("┌", "┬", "┐"), line(header), rule("├", "┼", "┤"), *map(line, lines), rule("└", "┴", "┘")]


def _need(widths, gap=GAP):
    return sum(widths) + gap * (len(widths) - 1)


def _fit(columns, width, gap=GAP):
    """Sets each column's width (0: left out) for `width` characters, `gap` between two columns;
    returns the footer's notes."""
    for column in columns:
        if column.kernel and column.natural > SHORT_KERNEL_CHARS:
            short = short_kernel_names(column.values, SHORT_KERNEL_CHARS)
            column.full, column.values = column.values, [short.get(v, v) for v in column.values]
    keys = [c for c in columns if c.key]
    while len(keys) > 1 and _need([c.floor(MIN_CUT) for c in keys], gap) > width:
        keys.pop()  # a terminal too narrow even for the keys: the last ones go
    for column in keys:
        column.width = column.floor(MIN_CUT)
    room = _widen([c for c in keys if not c.numeric], width - _need([c.width for c in keys], gap), KEY_READABLE)
    others = [c for c in columns if not c.key]
    repeats = [c for c in others if c.values and any(k.values == c.values for k in keys)]
    for column in others:
        if column not in repeats and column.natural + gap <= room:
            column.width, room = column.natural, room - column.natural - gap
    room = _widen([c for c in keys if not c.numeric], room)
    for column in others:
        least = column.floor(NON_KEY_MIN_CUT)
        if not column.width and not column.numeric and column not in repeats and least + gap <= room:
            column.width, room = least, room - least - gap
    _widen([c for c in others if c.width and not c.numeric], room)
    return _notes(columns, repeats)


def _widen(columns, room, most=None):
    """Grows `columns` towards their natural width (or `most`) with `room` characters, evenly
    (water-filling under one common cap); returns the room left."""
    if not columns or room <= 0:
        return room
    budget = room + sum(c.width for c in columns)

    def used(cap):
        return sum(min(c.natural, max(c.width, cap)) for c in columns)

    low, high = 0, max(c.natural for c in columns) if most is None else most
    while low < high:  # the largest cap that fits the budget: used() grows with the cap
        middle = (low + high + 1) // 2
        low, high = (middle, high) if used(middle) <= budget else (low, middle - 1)
    for column in columns:
        column.width = min(column.natural, max(column.width, low))
    return budget - sum(c.width for c in columns)


def _notes(columns, repeats):
    shown = [c for c in columns if c.width]
    notes = []
    left_out = [_left_out_name(c, shown, repeats) for c in columns if not c.width]
    if left_out:
        notes.append(f"{len(shown)} of {len(columns)} columns shown, left out: {', '.join(left_out)}")
    if any(c.full is not None for c in shown):
        notes.append("kernel names shortened")
    if any(cells_wide(v) > c.width for c in shown if c.full is None for v in c.values):
        notes.append(f"long values cut with {ELLIPSIS}")
    return notes


def _left_out_name(column, shown, repeats):
    same = [k.header for k in shown if column in repeats and k.values == column.values]
    return f"{column.header} (= {same[0]})" if same else column.header
