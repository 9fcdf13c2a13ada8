"""What the profiler cost the CPU per op it recorded, estimated from the trace itself.

Kineto stamps an op's start at the end of its enter callback and its end at the start of its exit
callback, so part of each op's cost shows between two ops that C++ calls back to back: the gap
from one child's end to the next child's start inside the same ATen op (aten::linear's aten::t
then aten::addmm, aten::t's aten::transpose...) is the first child's exit callback and the
second's enter callback (RecordFunction, the inputs' shapes, CUPTI's correlation ids), with next to
no work of the program's own between them. That gap is the host's pace under the profiler, read
in the trace: 1.5-2.9 µs on the host of tests/data/h200/fixes, 0.7-1.2 µs on that of
tests/data/h200/item_rounds, where a recorded op cost 6.3-9.1 µs and 1.9-6.2. The rest of an op's
cost (its callbacks' share inside its span and before its parent's next child, CUPTI's callbacks
on each CUDA call it makes, recorded or not) does not show apart from the op's own work; it comes
out at about COST_PER_GAP gaps an op on both hosts.
"""

# µs a recorded op costs per µs of the median gap between back-to-back C++ siblings: on the 19
# CPU-bound captures of two H200 hosts (tests/data/h200/fixes, item_rounds), traced less unprofiled
# step per recorded op over that gap runs 2.7-6.4, median 4.0 (benchmarks/profiler_cost.py).
COST_PER_GAP = 4.0
MIN_GAPS = 10  # fewer gaps than this and the median is one op's, not the host's

# Each gap between consecutive children of one ATen op on one thread, in the steady steps.
_SIBLING_GAPS = """
WITH gaps AS (
    SELECT o.ts_us - lag(o.ts_us + o.dur_us) OVER (PARTITION BY o.pid, o.tid, o.parent_id ORDER BY o.ts_us) AS gap_us
    FROM cpu_ops o JOIN steady_steps USING (trace, step)
    WHERE o.trace = $trace AND o.parent LIKE 'aten::%'
)
SELECT median(gap_us), count(gap_us) FROM gaps WHERE gap_us >= 0
"""


def sibling_gap_us(con, trace):
    """(median µs between back-to-back ops inside an ATen op in the steady steps, how many gaps);
    the median None where there are fewer than MIN_GAPS."""
    median, count = con.execute(_SIBLING_GAPS, {"trace": trace}).fetchone()
    return (median if count >= MIN_GAPS else None), count


def cost_per_op_us(con, trace):
    """The profiler's estimated cost per recorded op of `trace`, µs (COST_PER_GAP gaps), or None
    where the trace shows too few gaps to tell."""
    gap, _ = sibling_gap_us(con, trace)
    return None if gap is None else COST_PER_GAP * gap
