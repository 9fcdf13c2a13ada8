-- Collective bandwidth: each collective call's message, its algorithm and bus bandwidth by
-- nccl-tests' formulas (NVIDIA/nccl-tests, doc/PERFORMANCE.md), and the link it is measured against.

-- @view interconnects (a table): the link the GPUs of one host are taken to talk over, one row per
-- GPU with the assumption it rests on and its source (a trace names its GPU, not its wiring).
--   name_pattern: regular expression matched against traces.device_name (the longest match wins)
--   gpu, link: the GPU and its link, e.g. NVLink 4, PCIe 4.0 x16
--   per_direction_gb_s: the link's peak in one direction, decimal GB/s: what busbw compares with
--   bidirectional_gb_s: both directions, the figure datasheets print
--   per_peer_gb_s: where each peer has wires of its own (V100, MI300X), one peer's share: a group
--                  of n reaches (n - 1) of them at most; NULL for a switched or shared link
--   assumption, source: why this link, and where the figure comes from

-- @view collective_bandwidth: every row of collectives with the bytes it moved, the rate it moved
-- them at (nccl-tests' algbw and busbw, decimal GB/s) and the link that rate is compared with.
-- As nccl-tests defines them: algbw = S / t, busbw = algbw × a factor of the collective and the group
-- size n (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce,
-- send_recv 1), S the collective's whole size in bytes (elements × the dtype's size; for
-- all_gather its output, the gathered whole; for reduce_scatter its input, the whole before the
-- scatter; else its input), t the time on the GPU: the collective kernel's own duration, never
-- the CPU call's. A kernel's duration holds its wait for the last rank to arrive; where the call
-- is matched across ranks (ranks_matched > 1), t is the shortest of its kernels across the ranks,
-- this kernel's duration minus its wait_us (the time they all moved data together, as nccl-tests
-- times it after a barrier); else this kernel's duration, which may hold a wait, so the
-- bandwidths are then lower bounds. GB/s are decimal (10^9 bytes a second), as nccl-tests prints
-- them (TraceLens divides by 1024^3: its figures are 7.4% lower). busbw is what compares with a
-- link's speed in one direction, whatever n is.
-- Its columns: every column of collectives, then these.
--   message_bytes: S, the bytes the bandwidths use; NULL where the trace gives no size or dtype
--                  (older Kineto), for barrier, gather and scatter, for a call that ran as several
--                  kernels on this rank (the size is the call's, not each kernel's), and for 0
--   bw_us: t, microseconds: this kernel's duration, less its wait_us where the call is matched
--   timed_from: 'all_ranks' (matched: the wait for the last rank is left out) or 'this_rank' (the
--               kernel's own span, any wait in it)
--   algbw_gbps: message_bytes / bw_us, decimal GB/s; NULL where either is unknown or bw_us is 0
--   busbw_factor: the collective's factor for this group size (NULL: group size unknown for a
--                 collective whose factor needs it, or a group of one)
--   busbw_gbps: algbw_gbps × busbw_factor, decimal GB/s (NULL where either is NULL, never 0)
--   link: the link the group is taken to use (interconnects: from the GPU's name, an assumption
--         the table states); NULL for a CPU backend (gloo, MPI), a GPU interconnects does not
--         know, or a group larger than the GPUs the trace's host shows (it spans hosts)
--   link_gb_s: that link's peak in one direction, decimal GB/s; for a link that reaches each peer
--              by its own wires (interconnects.per_peer_gb_s), (n - 1) × per_peer_gb_s at most
--   link_pct: busbw_gbps / link_gb_s, percent
CREATE OR REPLACE VIEW collective_bandwidth AS
WITH sized AS (
    SELECT c.*, w.message_bytes,
           CASE WHEN c.wait_us IS NOT NULL THEN c.dur_us - c.wait_us ELSE c.dur_us END AS bw_us,
           CASE WHEN c.wait_us IS NOT NULL THEN 'all_ranks' ELSE 'this_rank' END AS timed_from,
           w.busbw_factor, w.link, w.link_gb_s
    FROM collectives c
    -- the size, factor and link, worked out once for these and the kernels' work (views.sql)
    LEFT JOIN _collective_work w ON w.trace = c.trace AND w.runs_on = c.runs_on AND w.ts_ns / 1000.0 = c.ts_us
         AND w.name = c.name AND w.device IS NOT DISTINCT FROM c.device AND w.stream IS NOT DISTINCT FROM c.stream
), rated AS (
    SELECT s.*, CASE WHEN s.bw_us > 0 THEN s.message_bytes / s.bw_us / 1000.0 END AS algbw_gbps FROM sized s
)
SELECT * EXCLUDE (link, link_gb_s, algbw_gbps, busbw_factor), algbw_gbps, busbw_factor,
       algbw_gbps * busbw_factor AS busbw_gbps, link, link_gb_s,
       100.0 * algbw_gbps * busbw_factor / link_gb_s AS link_pct
FROM rated;
