"""A trace's dependency graph as arrays, read with SQL from the database's views and tables.

Two kinds of node, each in its lane's order:
- items: GPU work on a stream (kind, name, duration), each with the call that launched it; and a
  CPU backend's (gloo) collective on its worker thread, launched by its c10d op (_cp_items);
- calls: runtime calls on a CPU thread, and for a CPU collective its c10d op and its caller's idle
  stretch waiting for it (a call that waited for an item: view _cp_waits), each with the CPU time before it on its thread (`gap`,
  the thread's own work since its previous call) and, for a call that synchronised, the item it
  waited for and how long after that item's end it returned (`tail`); for a call after a handoff
  (its thread waited for another's: _HANDOFFS), that thread's call and the lag after it.
Edges: an item starts after its launch call started (plus the latency the trace shows) and after
the item before it on its stream ended (plus the gap the trace shows); a call starts its `gap`
after the call before it on its thread returned; a synchronising call returns no earlier than its
item's end plus `tail`; a call after a handoff starts no earlier than its lag after the other
thread's call, its gap the lag at most; an item after a stream wait, likewise after the other
stream's item.
"""

from dataclasses import dataclass, field

import numpy as np

from tracekit.replay.tensor_core_model import rows_aligned_sql

# Items and calls numbered in their lanes' order; every link is an index (-1: none), computed here.
_NODES = """
CREATE OR REPLACE TEMP TABLE _replay_items AS
-- n: the items in (device, stream, place) order, from each lane's count of items (place runs 1 to
-- the count on each): a sort of the lanes, not of every item with its kernel name
WITH mine AS (
    SELECT * FROM _cp_items WHERE trace_id = $trace_id
), lanes AS (
    SELECT device, stream, row_number() OVER (ORDER BY device, stream) - 1 AS lane,
           coalesce(sum(count(*)) OVER (ORDER BY device, stream ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM mine GROUP BY device, stream
)
SELECT CAST(l.before + m.place - 1 AS BIGINT) AS n, l.lane, m.*
FROM mine m JOIN lanes l ON l.device = m.device AND l.stream = m.stream;
CREATE OR REPLACE TEMP TABLE _replay_calls AS
SELECT row_number() OVER (ORDER BY r.pid, r.tid, r.ts_ns, r.dur_ns, r.correlation) - 1 AS n,
       dense_rank() OVER (ORDER BY r.pid, r.tid) - 1 AS lane, r.*,
       lag(r.ts_ns + r.dur_ns) OVER (PARTITION BY r.pid, r.tid ORDER BY r.ts_ns, r.dur_ns, r.correlation) AS prev_end_ns
FROM (SELECT trace_id, name, ts_ns, dur_ns, pid, tid, correlation, cpu_op_id FROM runtime_rows
      UNION ALL
      -- a CPU collective's enqueue, its launch (a c10d op, which may enqueue several: once)
      SELECT trace_id, launch_name, launch_ns, launch_end_ns - launch_ns, pid, launch_tid, correlation, launch_op_id
      FROM _cp_cpu_collectives
      QUALIFY row_number() OVER (PARTITION BY trace_id, launch_op_id ORDER BY ts_ns, op_id) = 1
      UNION ALL
      -- and its caller's idle stretch waiting for it, as _cp_waits has it
      SELECT trace_id, concat('wait for ', name), wait_from_ns, resumed_ns - wait_from_ns, pid, launch_tid, NULL,
             resumed_op_id
      FROM _cp_cpu_collectives WHERE resumed_ns IS NOT NULL) r
WHERE r.trace_id = $trace_id AND r.ts_ns IS NOT NULL;
"""

_ITEMS = """
SELECT i.lane, i.kind, i.name, coalesce(i.op_path, '') AS op_path, i.end_ns - i.ts_ns AS dur, i.ts_ns AS ts, coalesce(i.step, -1) AS step,
       CASE WHEN i.prev_end_ns IS NULL THEN 0 ELSE greatest(i.ts_ns - i.prev_end_ns, 0) END AS gap,
       coalesce(c.n, -1) AS launch, CASE WHEN c.n IS NULL THEN 0 ELSE greatest(i.ts_ns - c.ts_ns, 0) END AS latency,
       coalesce(i.waited_for = 'launch', false) AS idle_before,
       coalesce(i.math_unit, '') AS math_unit, coalesce(i.copy_kind, '') AS copy_kind, coalesce(i.bytes, -1) AS bytes,
       -- fp32 on a GPU without TF32 (Volta, Turing, MI200): the peak autocast's bf16 or fp16 would reach
       coalesce(CAST(round(greatest(i.flops / (CASE i.flops_dtype WHEN 'float' THEN coalesce(sp.tf32_tflops, sp.bf16_tflops, sp.fp16_tflops)
                                                                  WHEN 'c10::BFloat16' THEN sp.bf16_tflops
                                                                  WHEN 'c10::Half' THEN sp.fp16_tflops END * 1e3),
                                    i.bytes / (sp.memory_tb_s * 1e3))) AS BIGINT), -1) AS roofline,
       -- its FLOPs alone at the 16-bit Tensor Core peak, whatever its dtype: a fused attention kernel
       -- takes 16-bit inputs and keeps no scores in memory (-1: FLOPs unknown; -2: the GPU's peak)
       CASE WHEN i.flops IS NULL THEN -1 WHEN coalesce(sp.bf16_tflops, sp.fp16_tflops) IS NULL THEN -2
            ELSE CAST(round(i.flops / (coalesce(sp.bf16_tflops, sp.fp16_tflops) * 1e3)) AS BIGINT) END AS half_peak_ns,
       coalesce(w.call_key, '') AS call_key, coalesce(w.transfer_ns, -1) AS transfer,
       -- what the Tensor Core model takes of a GEMM on the SIMT cores (replay.tensor_core_model)
       coalesce(CASE WHEN i.math_unit = 'simt' THEN i.flops END, -1) AS flops,
       coalesce(CASE WHEN i.math_unit = 'simt' THEN CAST(round(i.flops / (sp.bf16_tflops * 1e3)) AS BIGINT) END, -1)
           AS bf16_peak_ns,
       coalesce(CASE WHEN i.flops_dtype = 'float' THEN a.aligned_4 ELSE a.aligned_8 END, true) AS aligned
FROM _replay_items i
-- a GEMM is aligned where its op's matrices make rows cuBLAS's aligned kernels take (fp32 on TF32:
-- 4-byte elements; else 2), replay.tensor_core_model (unknown shapes: taken as aligned, as the
-- roofline takes them)
LEFT JOIN (SELECT op_id, """ + rows_aligned_sql("input_dims", 2) + """ AS aligned_8,
                  """ + rows_aligned_sql("input_dims", 4) + """ AS aligned_4
           FROM cpu_op_rows
           WHERE trace_id = (SELECT any_value(trace_id) FROM _replay_items)
             AND op_id IN (SELECT launch_op_id FROM _replay_items WHERE math_unit = 'simt')) a ON a.op_id = i.launch_op_id
-- each side joined holds one row an item at most, so no item is repeated: the first call of a
-- correlation id, the trace's one row of specs, the first collective match of a kernel (a
-- dedup after the joins would carry every item's name and op path through a hash table)
LEFT JOIN (SELECT correlation, min(n) AS n, arg_min(ts_ns, n) AS ts_ns FROM _replay_calls
           WHERE correlation IS NOT NULL GROUP BY correlation) c ON c.correlation = i.correlation
LEFT JOIN _trace_specs sp ON sp.trace_id = i.trace_id
LEFT JOIN (SELECT * FROM {rank_waits}
           QUALIFY row_number() OVER (PARTITION BY trace_id, device, stream, correlation ORDER BY call_key) = 1) w
     ON w.trace_id = i.trace_id AND w.device = i.device AND w.stream = i.stream AND w.correlation = i.correlation
ORDER BY i.n
"""

_CALLS = """
SELECT c.lane, c.name, c.ts_ns AS ts, c.dur_ns AS dur,
       CASE WHEN c.prev_end_ns IS NULL THEN 0 ELSE greatest(c.ts_ns - c.prev_end_ns, 0) END AS gap,
       coalesce(w.n, -1) AS wait, CASE WHEN w.n IS NULL THEN 0 ELSE greatest(w.end_ns - w.item_end_ns, 0) END AS tail,
       coalesce(c.cpu_op_id, -1) AS op, coalesce(o.op_path, '') AS op_path
FROM _replay_calls c
LEFT JOIN cpu_op_rows o ON o.trace_id = c.trace_id AND o.op_id = c.cpu_op_id  -- an op's id is its own
-- each call's wait, the first item where the view has several: one row a call, so no call is repeated
LEFT JOIN (SELECT w.trace_id, w.pid, w.tid, w.ts_ns, w.end_ns, w.item_end_ns, i.n
           FROM (SELECT * FROM _cp_waits WHERE trace_id = $trace_id) w JOIN _replay_items i ON i.device = w.device AND i.stream = w.stream AND i.place = w.place
           QUALIFY row_number() OVER (PARTITION BY w.trace_id, w.pid, w.tid, w.ts_ns, w.end_ns ORDER BY i.n) = 1) w
     ON w.trace_id = c.trace_id AND w.pid = c.pid AND w.tid = c.tid AND w.ts_ns = c.ts_ns AND w.end_ns = c.ts_ns + c.dur_ns
ORDER BY c.n
"""

# A handoff between threads (view _cp_handoffs, the critical path's too): a call after a gap of at
# least 50 µs on its thread, where another thread's call ended within the gap and that thread made
# no call again before this one started: the thread waited for the other (the main thread in
# backward() for autograd's, autograd's for the main thread's forward). The call then starts its
# observed lag after the other's end. The CPU ops either thread records in that lag are counted
# (each a profiler record that costs time, as in _OPS_IN_GAPS): the other thread's last work after
# its call (autograd's tail of the backward) and this thread's own before its call.
_HANDOFFS = """
WITH handoffs AS (
    SELECT c.n, a.n AS after, c.ts_ns - h.other_end_ns AS lag, h.other_end_ns AS from_ns, c.ts_ns AS to_ns,
           c.pid, c.tid, a.pid AS other_pid, a.tid AS other_tid
    FROM _cp_handoffs h
    JOIN _replay_calls c ON c.pid = h.pid AND c.tid = h.tid AND c.ts_ns = h.ts_ns
    JOIN _replay_calls a ON a.pid = h.other_pid AND a.tid = h.other_tid AND a.ts_ns = h.other_ts_ns
         AND a.ts_ns + a.dur_ns = h.other_end_ns
    WHERE h.trace_id = $trace_id
    QUALIFY row_number() OVER (PARTITION BY h.pid, h.tid, h.ts_ns ORDER BY c.n, a.n) = 1
), ops AS (  -- each op with the count of its thread's ops that start no later
    SELECT o.pid, o.tid, o.ts_ns, count(*) OVER (PARTITION BY o.pid, o.tid ORDER BY o.ts_ns) AS upto
    FROM cpu_op_rows o
    WHERE o.trace_id = $trace_id AND o.ts_ns IS NOT NULL
), lags AS (  -- the lag's window on each of the two threads
    SELECT n, pid, tid, from_ns, to_ns FROM handoffs
    UNION ALL
    SELECT n, other_pid, other_tid, from_ns, to_ns FROM handoffs
), counted AS (  -- the thread's ops started before the window's end, less those before its start
    SELECT w.n, coalesce(e.upto, 0) - coalesce(b.upto, 0) AS ops
    FROM lags w
    ASOF LEFT JOIN ops e ON e.pid = w.pid AND e.tid = w.tid AND w.to_ns > e.ts_ns
    ASOF LEFT JOIN ops b ON b.pid = w.pid AND b.tid = w.tid AND w.from_ns > b.ts_ns
)
SELECT h.n, h.after, h.lag, (SELECT sum(ops) FROM counted WHERE counted.n = h.n) AS lag_ops
FROM handoffs h
"""

# A stream waiting for another (view _cp_stream_waits, the critical path's too): the work queued
# after a cudaStreamWaitEvent runs no earlier than the other stream's item it waited for.
_STREAM_WAITS = """
SELECT c.n AS consumer, p.n AS producer, c.ts_ns - w.on_end_ns AS lag
FROM _cp_stream_waits w
JOIN _replay_items c ON c.device = w.device AND c.stream = w.stream AND c.place = w.place
JOIN _replay_items p ON p.device = w.on_device AND p.stream = w.on_stream AND p.place = w.on_place
WHERE w.trace_id = $trace_id
"""

# A launch the runtime held because its device's queue was full: a GPU-bound loop that does not
# sync runs ahead of the GPU until the queue holds its fill (1,022 kernels on the H100s of
# tests/data/h100), and from then on each launch returns just after an item ends and frees a
# place. Such a call waits for the GPU as a sync does: a faster GPU returns it sooner, which its
# traced duration, kept as the thread's own time, would hide. A call is taken as held where, as
# it began, its device's queue held at least QUEUE_FULL_SHARE of the most the trace's queue ever
# held (that most at least MIN_QUEUE_FILL: a lead of a few launches is no full queue), it lasted
# HELD_OVER_USUAL times as long as the usual call of its name (the trace's first quartile: an
# unheld launch that an item happened to end inside is not held), and it returned within 50 µs of
# the end of an item that ended inside it, as _cp_waits takes a sync's.
QUEUE_FULL_SHARE = 0.95
MIN_QUEUE_FILL = 256
HELD_OVER_USUAL = 2
_QUEUE_WAITS = f"""
WITH changes AS (  -- each launched item enters its device's queue as its launch returns, leaves as it ends
    SELECT device, launch_end_ns AS t, 1 AS change FROM _replay_items WHERE launch_end_ns IS NOT NULL
    UNION ALL
    SELECT device, end_ns, -1 FROM _replay_items WHERE launch_end_ns IS NOT NULL
), queue AS (
    SELECT device, t, sum(change) OVER (PARTITION BY device ORDER BY t, change ROWS UNBOUNDED PRECEDING) AS queued
    FROM changes
), fill AS (
    SELECT device, max(queued) AS most FROM queue GROUP BY device HAVING max(queued) >= {MIN_QUEUE_FILL}
), launches AS (
    SELECT c.n, any_value(c.name) AS name, any_value(c.ts_ns) AS ts_ns, any_value(c.ts_ns + c.dur_ns) AS end_ns,
           min(i.device) AS device
    FROM _replay_calls c JOIN _replay_items i ON i.correlation = c.correlation
    WHERE i.device IN (SELECT device FROM fill)
    GROUP BY c.n
), usual AS (
    SELECT name, quantile_cont(end_ns - ts_ns, 0.25) AS dur_ns FROM launches GROUP BY name
), held AS (
    SELECT l.n, l.ts_ns, l.end_ns, l.device
    FROM launches l
    ASOF JOIN queue q ON q.device = l.device AND l.ts_ns > q.t
    JOIN fill f ON f.device = l.device
    JOIN usual u ON u.name = l.name
    WHERE q.queued >= {QUEUE_FULL_SHARE} * f.most AND l.end_ns - l.ts_ns >= {HELD_OVER_USUAL} * u.dur_ns
)
SELECT h.n AS call, i.n AS item, h.end_ns - i.end_ns AS tail
FROM held h
ASOF JOIN (SELECT n, device, end_ns FROM _replay_items) i ON i.device = h.device AND h.end_ns >= i.end_ns
WHERE i.end_ns > h.ts_ns AND h.end_ns - i.end_ns <= 50000
"""

# How many CPU ops (each a profiler record, which costs the thread time) start in each call's gap.
_OPS_IN_GAPS = """
WITH events AS (
    SELECT o.pid, o.tid, o.ts_ns, 1 AS is_op, CAST(NULL AS BIGINT) AS n
    FROM cpu_op_rows o
    WHERE o.trace_id = $trace_id AND o.ts_ns IS NOT NULL
    UNION ALL
    SELECT pid, tid, ts_ns, 0, n FROM _replay_calls
), counted AS (
    SELECT n, pid, tid, sum(is_op) OVER (PARTITION BY pid, tid ORDER BY ts_ns, is_op, n
                                         ROWS UNBOUNDED PRECEDING) AS ops_before
    FROM events
)
SELECT n, ops_before - coalesce(lag(ops_before) OVER (PARTITION BY pid, tid ORDER BY n), 0) AS ops
FROM counted WHERE n IS NOT NULL ORDER BY n
"""

_LANES = "SELECT DISTINCT lane, pid, tid FROM _replay_calls ORDER BY lane"

_STEPS = """
SELECT s.step, s.ts_ns, s.end_ns, coalesce(min(c.lane), -1) AS lane, s.from_ns, s.done_ns
FROM _cp_steps s
LEFT JOIN _replay_calls c ON c.pid = s.pid AND c.tid = s.tid
WHERE s.trace_id = $trace_id
GROUP BY s.step, s.ts_ns, s.end_ns, s.from_ns, s.done_ns
ORDER BY s.ts_ns, s.step
"""


@dataclass
class Graph:
    """The arrays of one trace's graph (names as in the module's doc); times in ns."""

    item_lane: np.ndarray      # the item's stream, numbered 0..; items sorted by lane, then order
    item_kind: np.ndarray      # 'kernel', 'comm', 'memcpy', 'memset'
    item_name: np.ndarray
    item_op_path: np.ndarray   # the chain of ops that launched it ('' unknown), e.g. 'aten::masked_fill → aten::clone → aten::copy_'
    item_dur: np.ndarray
    item_ts: np.ndarray        # observed start
    item_step: np.ndarray      # the step that owns it (-1: none)
    item_gap: np.ndarray       # observed idle time on the stream before it (0 for the first)
    item_launch: np.ndarray    # index of its launch call, -1: launched outside the trace
    item_latency: np.ndarray   # observed start minus its launch call's start (when launched)
    item_idle_before: np.ndarray  # its stream was idle, waiting for its launch (_cp_items.waited_for)
    item_math_unit: np.ndarray  # a GEMM's 'simt' or 'tensor_core' ('' for the rest, or unknown)
    item_roofline: np.ndarray  # a GEMM's least time on Tensor Cores (gemm_math.roofline_us), -1: unknown
    item_half_peak_ns: np.ndarray  # its FLOPs alone at the 16-bit Tensor Core peak, -1: FLOPs unknown, -2: the peak
    item_flops: np.ndarray     # a SIMT GEMM's FLOPs (-1: unknown, or not a SIMT GEMM)
    item_bf16_peak_ns: np.ndarray  # and its time at the GPU's bf16 peak (-1: unknown)
    item_aligned: np.ndarray   # its matrices' last two dimensions rows of a multiple of 16 bytes (unknown: True)
    item_copy_kind: np.ndarray  # a copy's HtoD, DtoH, DtoD ... ('' for the rest)
    item_bytes: np.ndarray     # a copy's or GEMM's bytes, -1: unknown
    item_after: np.ndarray     # a stream wait: the item on another stream it waited for (-1: none)
    item_lag: np.ndarray       # and its start after that item's end
    item_call_key: np.ndarray  # a collective's kernel matched across the job's ranks: the call's key ('' none)
    item_transfer: np.ndarray  # and its own time, after the last rank arrived (-1: none)
    item_collective: np.ndarray  # in a job's graph (replay.job): the call's number, -1: none (a rank alone: all -1)
    item_clock: np.ndarray     # in a job's graph: what puts its rank's times on the first rank's clock
    call_lane: np.ndarray      # the call's thread, numbered 0..; calls sorted by lane, then time
    call_name: np.ndarray
    call_ts: np.ndarray
    call_dur: np.ndarray
    call_gap: np.ndarray       # the thread's own time before it (0 for the first call)
    call_wait: np.ndarray      # index of the item it waited for, -1: none
    call_held: np.ndarray      # its wait is a full queue's (a launch held), not a sync's
    call_tail: np.ndarray      # its return after that item's end
    call_op: np.ndarray        # the cpu_ops.op_id that made it (-1: unknown)
    call_op_path: np.ndarray   # that op's chain of ops ('' unknown), e.g. 'aten::item → aten::_local_scalar_dense'
    call_ops: np.ndarray       # the CPU ops (profiler records) that start in its gap
    call_after: np.ndarray     # a handoff: the call on another thread it waited for (-1: none)
    call_lag: np.ndarray       # and its start after that call's end
    call_lag_ops: np.ndarray   # the CPU ops (profiler records) either thread starts in that lag
    lanes: list                # (pid, tid) of each call lane
    steps: list                # of dict(step, ts_ns, end_ns, lane (thread of its span, -1), from_ns, done_ns)
    trace: str                 # its name in the database
    steady: list               # the steps of view steady_steps, the loop's steady state
    # what fixes read from the database about this graph's nodes, kept for the next fix on it (a
    # graph that dataclasses.replace makes, with other nodes, starts without)
    read_by_fixes: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # what fixes read for several traces at once, shared by the graphs of one findings run (which
    # lists its traces under SHARED_TRACES): a query that reads the views for each trace apart
    # costs their planning each time
    shared_reads: dict = field(default_factory=dict, init=False, repr=False, compare=False)


SHARED_TRACES = "traces"


def read_graph(con, trace, rank_waits="_cp_rank_waits"):
    """The Graph of `trace` on connection `con` (a database or a lake, DuckDB; it must be able to
    make temporary tables); `rank_waits`: the relation of _cp_rank_waits's rows to read (a job's
    replay reads them once for all its ranks: replay.job.Jobs)."""
    # the trace's id as a constant, which DuckDB filters the views' scans by (a subquery's it cannot)
    found = con.execute("SELECT trace_id FROM trace_files WHERE trace = $trace", {"trace": trace}).fetchone()
    this_trace = {"trace_id": found[0] if found else None}
    for statement in _NODES.strip().split(";\n"):
        con.execute(statement, this_trace)
    items = con.execute(_ITEMS.replace("{rank_waits}", rank_waits)).fetchnumpy()
    calls = con.execute(_CALLS, this_trace).fetchnumpy()
    steps = con.execute(_STEPS, this_trace).fetchall()
    lanes = [(pid, tid) for _, pid, tid in con.execute(_LANES).fetchall()]
    call_after = np.full(len(calls["lane"]), -1, dtype=np.int64)
    call_lag = np.zeros(len(calls["lane"]), dtype=np.int64)
    call_lag_ops = np.zeros(len(calls["lane"]), dtype=np.int64)
    item_after = np.full(len(items["lane"]), -1, dtype=np.int64)
    item_lag = np.zeros(len(items["lane"]), dtype=np.int64)
    stream_waits = con.execute(_STREAM_WAITS, this_trace).fetchnumpy()
    item_after[stream_waits["consumer"].astype(np.int64)] = stream_waits["producer"].astype(np.int64)
    item_lag[stream_waits["consumer"].astype(np.int64)] = stream_waits["lag"].astype(np.int64)
    call_wait, call_tail = calls["wait"].astype(np.int64), calls["tail"].astype(np.int64)
    held = con.execute(_QUEUE_WAITS).fetchnumpy()
    held_call = held["call"].astype(np.int64)
    unheld = call_wait[held_call] < 0  # a sync's own wait stands
    call_wait[held_call[unheld]] = held["item"][unheld].astype(np.int64)
    call_tail[held_call[unheld]] = held["tail"][unheld].astype(np.int64)
    call_held = np.zeros(len(call_wait), dtype=bool)
    call_held[held_call[unheld]] = True
    if len(lanes) > 1:
        handoffs = con.execute(_HANDOFFS, this_trace).fetchnumpy()
        call_after[handoffs["n"].astype(np.int64)] = handoffs["after"].astype(np.int64)
        call_lag[handoffs["n"].astype(np.int64)] = handoffs["lag"].astype(np.int64)
        call_lag_ops[handoffs["n"].astype(np.int64)] = handoffs["lag_ops"].astype(np.int64)
    steady = [row[0] for row in con.execute("SELECT step FROM steady_steps WHERE trace = ? ORDER BY step",
                                            [trace]).fetchall()]
    return Graph(
        item_lane=items["lane"].astype(np.int64), item_kind=items["kind"].astype(object),
        item_name=items["name"].astype(object), item_op_path=items["op_path"].astype(object), item_dur=items["dur"].astype(np.int64),
        item_ts=items["ts"].astype(np.int64), item_step=items["step"].astype(np.int64),
        item_gap=items["gap"].astype(np.int64), item_launch=items["launch"].astype(np.int64),
        item_latency=items["latency"].astype(np.int64), item_idle_before=items["idle_before"].astype(bool),
        item_math_unit=items["math_unit"].astype(object), item_roofline=items["roofline"].astype(np.int64),
        item_half_peak_ns=items["half_peak_ns"].astype(np.int64),
        item_flops=items["flops"].astype(np.float64), item_bf16_peak_ns=items["bf16_peak_ns"].astype(np.int64),
        item_aligned=items["aligned"].astype(bool),
        item_copy_kind=items["copy_kind"].astype(object), item_bytes=items["bytes"].astype(np.int64),
        item_after=item_after, item_lag=item_lag, item_call_key=items["call_key"].astype(object),
        item_transfer=items["transfer"].astype(np.int64),
        item_collective=np.full(len(items["lane"]), -1, dtype=np.int64),
        item_clock=np.zeros(len(items["lane"]), dtype=np.int64),
        call_lane=calls["lane"].astype(np.int64), call_name=calls["name"].astype(object),
        call_ts=calls["ts"].astype(np.int64), call_dur=calls["dur"].astype(np.int64),
        call_gap=calls["gap"].astype(np.int64), call_wait=call_wait, call_held=call_held,
        call_tail=call_tail, call_op=calls["op"].astype(np.int64),
        call_op_path=calls["op_path"].astype(object),
        call_ops=con.execute(_OPS_IN_GAPS, this_trace).fetchnumpy()["ops"].astype(np.int64),
        call_after=call_after, call_lag=call_lag, call_lag_ops=call_lag_ops, lanes=lanes,
        steps=[{"step": s, "ts_ns": t, "end_ns": e, "lane": lane, "from_ns": f, "done_ns": d}
               for s, t, e, lane, f, d in steps],
        trace=trace, steady=steady,
    )


def calls_inside(graph, spans):
    """(key, the lane's call indices, first, end) of the calls each (key, pid, tid, start_ns,
    end_ns) span holds: a lane's calls are in time order, so two binary searches a span."""
    lanes = {key: np.flatnonzero(graph.call_lane == lane) for lane, key in enumerate(graph.lanes)}
    starts = {key: graph.call_ts[on_lane] for key, on_lane in lanes.items()}
    for key, pid, tid, start, end in spans:
        if (pid, tid) in lanes:
            ts = starts[(pid, tid)]
            yield key, lanes[(pid, tid)], np.searchsorted(ts, start, "left"), np.searchsorted(ts, end, "left")
