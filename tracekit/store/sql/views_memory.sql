-- Memory: the allocator's [memory] events, which torch.profiler records with profile_memory=True
-- (`tracekit capture --profile-memory`), the totals they carry over time, and each step's peak
-- with the blocks that held it. A trace captured without profile_memory has none of these rows.

-- The memory rows with their device named (c10's DeviceType numbers).
CREATE OR REPLACE VIEW _memory AS
SELECT m.trace_id, m.event_id, m.ts_ns, m.pid, m.tid,
       CASE m.device_type WHEN 0 THEN 'cpu' WHEN 1 THEN 'cuda' WHEN 6 THEN 'hip' WHEN 12 THEN 'xpu'
                          WHEN 13 THEN 'mps' WHEN 15 THEN 'hpu' WHEN 19 THEN 'mtia' WHEN 20 THEN 'privateuse1'
                          ELSE 'type ' || CAST(m.device_type AS VARCHAR) END AS device_type,
       m.device, m.addr, m.bytes, m.total_allocated,
       -- the CPU allocator reserves nothing: Kineto writes 0, which is no measurement
       CASE WHEN m.device_type <> 0 THEN m.total_reserved END AS total_reserved,
       m.seq, m.freed_seq, m.freed_ns, m.cpu_op_id, m.step
FROM memory_rows m;

-- @view memory_events: one row per [memory] event: an allocation or a free by the allocator of a
-- device, with the device's totals after it.
--   trace: trace name
--   ts_us: when, microseconds on the trace's clock
--   device_type: 'cpu', 'cuda' ('hip', 'xpu', 'mps', ...; 'type N' for a DeviceType tracekit does not name)
--   device: the device's index (-1 for the CPU)
--   action: 'alloc' (bytes > 0) or 'free' (bytes < 0)
--   addr: the block's address
--   bytes: the block's size, negative for a free
--   total_allocated_bytes: bytes allocated on the device after the event (Kineto's Total Allocated;
--                          on the CPU, counted from when profiling began)
--   total_reserved_bytes: bytes the caching allocator holds after it (Kineto's Total Reserved);
--                         NULL on the CPU, whose allocator reserves nothing (Kineto writes 0)
--   freed_us: for an allocation, when its block was freed; NULL for a free, and for a block still
--             allocated when the trace ended
--   cpu_op_id, cpu_op: the innermost CPU op open on the event's thread: the op that allocated or
--                      freed the block (aten::empty, aten::mul, ...); NULL when none was open
--   cpu_op_path: that op's chain of ops from the outermost, e.g.
--                'aten::masked_fill → aten::clone → aten::empty_like → aten::empty'
--   step: the enclosing step (view steps); NULL outside steps
--   pid, tid: process and thread
CREATE OR REPLACE VIEW memory_events AS
SELECT t.trace, m.ts_ns / 1000.0 AS ts_us, m.device_type, m.device,
       CASE WHEN m.bytes > 0 THEN 'alloc' WHEN m.bytes < 0 THEN 'free' END AS action, m.addr, m.bytes,
       m.total_allocated AS total_allocated_bytes, m.total_reserved AS total_reserved_bytes,
       m.freed_ns / 1000.0 AS freed_us, m.cpu_op_id, o.name AS cpu_op, o.op_path AS cpu_op_path, m.step,
       m.pid, m.tid
FROM _memory m JOIN trace_files t ON t.trace_id = m.trace_id
LEFT JOIN cpu_op_rows o ON o.trace_id = m.trace_id AND o.op_id = m.cpu_op_id;

-- @view memory_timeline: each device's allocated and reserved memory over time: a row per
-- [memory] event, with the totals just after it (a step function: the value holds until the next row).
--   trace: trace name
--   device_type, device: as in memory_events
--   ts_us: when the totals changed
--   step: the enclosing step; NULL outside steps
--   allocated_bytes, allocated_mib: memory allocated on the device (Kineto's Total Allocated)
--   reserved_bytes, reserved_mib: memory its caching allocator holds (Total Reserved); NULL on the CPU
CREATE OR REPLACE VIEW memory_timeline AS
SELECT t.trace, m.device_type, m.device, m.ts_ns / 1000.0 AS ts_us, m.step,
       m.total_allocated AS allocated_bytes, round(m.total_allocated / 1048576.0, 3) AS allocated_mib,
       m.total_reserved AS reserved_bytes, round(m.total_reserved / 1048576.0, 3) AS reserved_mib
FROM _memory m JOIN trace_files t ON t.trace_id = m.trace_id;

-- Each step's memory events (the whole trace, step NULL, for a trace without steps), numbered in
-- order and from the highest total down, to find where the step began and where it peaked. An
-- event that does not say its device or its total tells nothing of a device's peak: left out.
CREATE OR REPLACE VIEW _memory_step_events AS
SELECT m.*,
       row_number() OVER (PARTITION BY m.trace_id, m.step, m.device_type, m.device ORDER BY m.seq) AS nth,
       row_number() OVER (PARTITION BY m.trace_id, m.step, m.device_type, m.device
                          ORDER BY m.total_allocated DESC, m.seq) AS top_rank
FROM _memory m
WHERE (m.step IS NOT NULL OR m.trace_id NOT IN (SELECT trace_id FROM step_rows))
  AND m.device_type IS NOT NULL AND m.device IS NOT NULL AND m.total_allocated IS NOT NULL;

-- Each step's figures per device. The allocated total when the step began is the first event's
-- total less its own bytes; the peak is the highest total in the step, or that start when the
-- step only freed (as torch.cuda.max_memory_allocated after reset_peak_memory_stats at the step's
-- start); a first event that does not say its bytes leaves the start unknown (NULL), and the peak
-- the highest total. peak_seq: the device's event at the peak (the one before the step's first, when the
-- peak is the start).
CREATE OR REPLACE VIEW _memory_peaks AS
WITH per_step AS (
    SELECT trace_id, step, device_type, device, count(*) AS events,
           max(CASE WHEN nth = 1 THEN total_allocated - bytes END) AS start_bytes,
           max(CASE WHEN nth = 1 THEN seq END) AS first_seq,
           max(CASE WHEN top_rank = 1 THEN total_allocated END) AS top_bytes,
           max(CASE WHEN top_rank = 1 THEN seq END) AS top_seq,
           max(CASE WHEN top_rank = 1 THEN ts_ns END) AS top_ns,
           max(CASE WHEN top_rank = 1 THEN cpu_op_id END) AS top_op_id,
           max(total_reserved) AS peak_reserved_bytes,
           sum(CASE WHEN bytes > 0 THEN bytes ELSE 0 END) AS allocated_bytes,
           count(CASE WHEN bytes > 0 THEN 1 END) AS allocations
    FROM _memory_step_events
    GROUP BY trace_id, step, device_type, device
)
SELECT trace_id, step, device_type, device, events, start_bytes, peak_reserved_bytes, allocated_bytes, allocations,
       greatest(start_bytes, top_bytes) AS peak_bytes,
       CASE WHEN peak_at_start THEN first_seq - 1 ELSE top_seq END AS peak_seq,
       CASE WHEN NOT peak_at_start THEN top_ns END AS peak_ns,
       CASE WHEN NOT peak_at_start THEN top_op_id END AS peak_op_id
FROM (SELECT *, coalesce(top_bytes < start_bytes, false) AS peak_at_start FROM per_step);

-- @view memory_peak_blocks: the blocks live at each step's peak (view memory_steps), per device,
-- largest first: what the peak is made of, and which op allocated each.
--   trace: trace name
--   step: the step (NULL: a trace without steps, taken whole)
--   device_type, device: as in memory_events
--   block_rank: 1 for the largest block live at the peak, 2 the next, ...
--   addr, bytes, mib: the block and its size
--   allocated_us: when it was allocated; allocated_step: in which step (an earlier one's block
--                 still held, e.g. the previous step's output)
--   cpu_op_id, cpu_op, cpu_op_path: the op that allocated it (the innermost CPU op open then)
--   source: the user's line that allocated it, 'file:line in function' (cpu_ops.source_file and
--           its fellows: a with_stack trace's innermost user frame around the op); NULL without a stack
CREATE OR REPLACE VIEW memory_peak_blocks AS
SELECT t.trace, p.step, p.device_type, p.device,
       row_number() OVER (PARTITION BY p.trace_id, p.step, p.device_type, p.device ORDER BY b.bytes DESC, b.seq) AS block_rank,
       b.addr, b.bytes, round(b.bytes / 1048576.0, 3) AS mib, b.ts_ns / 1000.0 AS allocated_us, b.step AS allocated_step,
       b.cpu_op_id, o.name AS cpu_op, o.op_path AS cpu_op_path,
       CASE WHEN o.source_file IS NOT NULL THEN concat(o.source_file, ':', o.source_line, ' in ', o.source_function) END AS source
FROM _memory_peaks p
JOIN _memory b ON b.trace_id = p.trace_id AND b.device_type = p.device_type AND b.device = p.device
               AND b.bytes > 0 AND b.addr IS NOT NULL AND b.seq <= p.peak_seq AND coalesce(b.freed_seq, 9223372036854775807) > p.peak_seq
JOIN trace_files t ON t.trace_id = p.trace_id
LEFT JOIN cpu_op_rows o ON o.trace_id = b.trace_id AND o.op_id = b.cpu_op_id;

-- @view memory_steps: each step's memory per device: where it began, its peak (the figure
-- torch.cuda.max_memory_allocated gives for the step after reset_peak_memory_stats at its
-- start), and what was live at the peak. A trace without steps is one row per device, step NULL.
--   trace: trace name
--   step: the step (view steps); NULL for a trace without steps, taken whole
--   device_type, device: as in memory_events ('cpu' -1, 'cuda' 0, ...)
--   events: [memory] events in the step
--   start_allocated_bytes: allocated when the step began (its first event's total less that
--                          event's bytes; NULL when that event does not say its bytes)
--   peak_allocated_bytes, peak_allocated_mib: the most allocated at once during the step (Kineto's
--                                             Total Allocated at its highest, or the start)
--   peak_over_start_bytes, peak_over_start_mib: the peak above what was allocated when the step began
--   peak_reserved_bytes: the most the caching allocator held in the step (NULL on the CPU)
--   peak_us: when the peak was reached; NULL when the peak is the step's start
--   peak_op, peak_op_path: the op whose allocation reached the peak
--   allocated_bytes, allocations: bytes and blocks allocated in the step, freed or not (the churn
--                                 an in-place op saves even where the peak stays)
--   live_blocks: blocks the trace saw allocated (with an address) that were live at the peak
--   live_at_peak: the three largest, as 'MiB by op path' (view memory_peak_blocks has them all)
--   unattributed_bytes: the peak less those blocks: memory allocated before the profiler saw it
--                       (the inputs, the model's weights); NULL where the blocks come to more
--                       than the peak (a free the trace lost leaves its block live)
CREATE OR REPLACE VIEW memory_steps AS
WITH blocks AS (
    SELECT trace, step, device_type, device, count(*) AS live_blocks, sum(bytes) AS live_bytes,
           string_agg(CASE WHEN block_rank <= 3
                           THEN CAST(round(bytes / 1048576.0, 2) AS VARCHAR) || ' MiB by '
                                || coalesce(cpu_op_path, cpu_op, 'no op') END, '; ' ORDER BY block_rank) AS live_at_peak
    FROM memory_peak_blocks
    GROUP BY trace, step, device_type, device
)
SELECT t.trace, p.step, p.device_type, p.device, p.events, p.start_bytes AS start_allocated_bytes,
       p.peak_bytes AS peak_allocated_bytes, round(p.peak_bytes / 1048576.0, 3) AS peak_allocated_mib,
       p.peak_bytes - p.start_bytes AS peak_over_start_bytes,
       round((p.peak_bytes - p.start_bytes) / 1048576.0, 3) AS peak_over_start_mib,
       p.peak_reserved_bytes, p.peak_ns / 1000.0 AS peak_us, o.name AS peak_op, o.op_path AS peak_op_path,
       p.allocated_bytes, p.allocations, coalesce(b.live_blocks, 0) AS live_blocks, b.live_at_peak,
       CASE WHEN coalesce(b.live_bytes, 0) <= p.peak_bytes THEN p.peak_bytes - coalesce(b.live_bytes, 0) END
         AS unattributed_bytes
FROM _memory_peaks p
JOIN trace_files t ON t.trace_id = p.trace_id
LEFT JOIN blocks b ON b.trace = t.trace AND b.step IS NOT DISTINCT FROM p.step
                  AND b.device_type = p.device_type AND b.device = p.device
LEFT JOIN cpu_op_rows o ON o.trace_id = p.trace_id AND o.op_id = p.peak_op_id;
