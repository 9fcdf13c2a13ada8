"""What the lake tests check a lake with: its files, the traces a reader sees, rows compared."""

import math
from pathlib import Path

import pandas as pd

PER_TRACE_TABLES = ["trace_files", "collective_rows", "cpu_op_rows", "event_rows", "gpu_busy_rows", "kernel_classes", "kernel_rows",
                    "memory_rows", "runtime_rows", "step_rows", "transfer_rows"]


def lake_state(lake):
    """Every file in the lake with its size, but the writers' lock file (a failed load must leave
    exactly this as it was)."""
    return sorted((str(p.relative_to(lake)), p.stat().st_size) for p in Path(lake).rglob("*")
                  if p.is_file() and p.name != "_lock")


def same_rows(left, right):
    """Rows equal value for value, floats to 1e-12."""
    assert len(left) == len(right)
    for a, b in zip(left, right):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            if x is pd.NA or y is pd.NA:  # a NULL in a column pandas holds as a nullable integer
                assert x is y, (a, b)
            elif isinstance(x, float) and isinstance(y, float):
                assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-9) or (math.isnan(x) and math.isnan(y)), (a, b)
            else:
                assert x == y, (a, b)


def traces_in(lake):
    """{trace: events} of the traces a reader sees in `lake`."""
    from tracekit.lake import connect_lake

    con = connect_lake(lake)
    try:
        return dict(con.execute("SELECT trace, events FROM traces").fetchall())
    finally:
        con.close()
