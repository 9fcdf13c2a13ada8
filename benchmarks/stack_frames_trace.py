"""The cost of source lines (docs/source-lines.md) on a trace with many user frames.

    python benchmarks/stack_frames_trace.py capture /tmp/many.json   # needs torch; ~1 min, 470 MB
    gzip /tmp/many.json && tracekit load --db /tmp/many.duckdb /tmp/many.json.gz
    python benchmarks/stack_frames_trace.py time /tmp/many.duckdb

`capture` profiles, with the Python stack, a loop of 150,000 calls of two small user functions around
small torch ops: 1.8 M events, 300,029 python_function (all the user's) and 1.5 M ops. `time` reruns
the op tree's statements (stage 1 of the derivation) on the database's last trace and prints the
time of the source-line statements against the rest.
"""

import sys
import time


def capture(path):
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(8)

    def scale(t):
        return t * 1.0001

    def layer(t):
        return scale(t) + 1

    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(150_000):
            x = layer(x)
    prof.export_chrome_trace(path)


def time_frames(db):
    import duckdb

    from tracekit.store.database import split_statements, sql_resource

    con = duckdb.connect(db)
    trace_id = con.execute("SELECT max(trace_id) FROM trace_files").fetchone()[0]
    spent = {"source lines": 0.0, "rest of stage 1": 0.0}
    for statement in split_statements(sql_resource("derive_1_ops.sql")):
        if statement.startswith("INSERT"):
            continue  # the rows are there already
        start = time.perf_counter()
        con.execute(statement, {"trace_id": trace_id} if "$trace_id" in statement else None)
        frames = any(table in statement for table in ("_user_frame", "_frame_sweep", "_op_frames"))
        spent["source lines" if frames else "rest of stage 1"] += time.perf_counter() - start
    ops = con.execute("SELECT count(*) FROM _op_frames").fetchone()[0]
    print(f"source lines {spent['source lines']:.2f} s ({ops:,} ops with a frame); "
          f"rest of stage 1 {spent['rest of stage 1']:.2f} s")


if __name__ == "__main__":
    {"capture": capture, "time": time_frames}[sys.argv[1]](sys.argv[2])
