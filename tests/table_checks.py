"""What the query output tests hold tracekit's output against: DuckDB's own rows and values."""

import math
from decimal import Decimal

import duckdb


def duckdb_rows(db, sql, params=None):
    """(columns, rows) as DuckDB itself returns them, to hold tracekit's output against."""
    con = duckdb.connect(str(db), read_only=db != ":memory:")
    try:
        cursor = con.execute(sql, params) if params else con.execute(sql)
        return [d[0] for d in cursor.description], cursor.fetchall()
    finally:
        con.close()


def same(parsed, expected):
    """A value read back from text or JSON equals DuckDB's, exactly (NaN and NULL as read back)."""
    if expected is None:
        return parsed in (None, "")
    if isinstance(expected, float):
        return parsed is not None and (float(parsed) == expected or math.isnan(expected) and math.isnan(float(parsed)))
    if isinstance(expected, int) and not isinstance(expected, bool):
        return int(parsed) == expected
    if isinstance(expected, Decimal):
        return Decimal(str(parsed)) == expected
    return parsed == expected


def fitted_table(output):
    """(header, rows of cells, footer) of a table, cut into columns at the dashes of its rule line."""
    import re

    lines = output.rstrip("\n").splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]

    def cells(line):
        return [line[start:end + (0 if i < len(spans) - 1 else len(line))].strip()
                for i, (start, end) in enumerate(spans)]
    return cells(lines[0]), [cells(line) for line in lines[2:-1]], lines[-1]


def check_fitted(output, columns, expected, keys, width):
    """A table fitted to `width` holds every key column, each number whole, text whole or cut with
    …, kernel names shortened distinctly, and a footer naming each column left out. Returns the
    header shown."""
    import re

    from tracekit.analysis.cells import text

    lines = output.splitlines()
    header, rows, footer = fitted_table(output)
    assert all(len(line) <= width for line in lines[:-1]), output
    assert [c for c in columns if c in header] == header, "columns keep their order"
    assert set(keys) <= set(header), (keys, header)
    left_out = [c for c in columns if c not in header]
    if left_out:
        assert f"{len(header)} of {len(columns)} columns shown, left out: " in footer
        assert all(re.search(rf"\b{re.escape(c)}\b", footer) for c in left_out), footer
    assert len(rows) == len(expected)
    for name in header:
        at, shown_at = columns.index(name), header.index(name)
        whole = [text(row[at]) for row in expected]
        cells = [row[shown_at] for row in rows]
        if name == "kernel" or name.endswith("_kernel"):
            _check_kernel_names(whole, cells)
            continue
        for cell, value, want in zip(cells, whole, (row[at] for row in expected)):
            if isinstance(want, str):
                assert cell == value or (cell.endswith("…") and value.startswith(cell[:-1])), (cell, value)
            else:
                assert same(cell, want), (name, cell, want)   # numbers never cut
    return header


def _check_kernel_names(whole, cells):
    """Shortened kernel names: one short name per kernel, no two kernels alike, each piece between
    the …s taken from the kernel's name (scopes such as at::native:: left out)."""
    import re

    shown = {}
    for name, cell in zip(whole, cells):
        assert shown.setdefault(name, cell) == cell, "a kernel is shown one way"
    assert len(set(shown.values())) == len(shown), "different kernels read differently"
    for name, cell in shown.items():
        plain = re.sub(r"(?:\(anonymous namespace\)::|\b\w+::)+", "", name)
        for piece in cell.split("…"):
            assert re.fullmatch(r"#\d+", piece) or piece in name or piece in plain, (piece, name)
