-- Which rank arrives late to each collective, and how long do the others wait?
-- A row per collective call matched across the ranks of a job (by process group and Seq, or by
-- its place in the group where the traces have no Seq, checked; see view collectives). The kernels of a
-- collective end together on every rank, so the rank that arrived last runs the shortest kernel:
-- it is the straggler, and every other rank waited its kernel's duration minus that one. The
-- spread of start times says the same where the ranks share a clock (one host); end_spread_us
-- near 0 says they do.
-- keys: collective, step, straggler_rank, max_wait_us
-- columns:
--   process_group: the group's name (Process Group Name; NULL where the traces do not say)
--   seq: c10d's sequence number of the call (NULL where not written)
--   call: its place among the group's calls in the straggler's trace
--   collective: all_reduce, all_gather, reduce_scatter, ...
--   runs_on: 'gpu' (NCCL, RCCL kernels) or 'cpu' (gloo, MPI)
--   matched_by: 'seq' or 'order' (see view collectives)
--   step: the ProfilerStep#N of the straggler's kernel
--   ranks: ranks holding the call
--   in_bytes: the straggler's message size (NULL: not written)
--   straggler_rank: the last rank to arrive (its kernel the shortest; ties: the later start, then the lower rank)
--   straggler_trace: its trace
--   transfer_us: the straggler's kernel time, the collective's own time
--   max_wait_us: the longest any rank waited for it (the longest kernel minus the straggler's)
--   total_wait_us: the time all ranks together waited, microseconds of GPU time
--   start_spread_us: last start minus first start (on the ranks' clocks)
--   end_spread_us: last end minus first end
--   first_start_us: the earliest start, microseconds on the first rank's clock
-- params:
--   trace = NULL: only the calls this trace took part in
--   min_wait_us = 0: only calls where some rank waited at least this long (microseconds)
WITH per_rank AS (
    -- A rank's part of a call: its kernel (the first to the last of them, where it took several).
    SELECT coalesce(job, trace) AS job_key, runs_on, coalesce(process_group, '') AS group_key,
           matched_by, match_key AS call_key, trace, rank, min(step) AS step, min(process_group) AS process_group, min(seq) AS seq,
           min(call) AS call, min(collective) AS collective, sum(in_bytes) AS in_bytes,
           -- waits summed in whole nanoseconds, exact in any order (here and in per_call)
           sum(round(wait_us * 1e3)) / 1e3 AS wait_us, min(start_lag_us) AS start_lag_us, max(end_lag_us) AS end_lag_us, min(ts_us) AS start_us,
           CASE WHEN count(*) = 1 THEN max(dur_us) ELSE max(ts_us + dur_us) - min(ts_us) END AS call_us
    FROM collectives
    WHERE ranks_matched > 1
    GROUP BY coalesce(job, trace), runs_on, coalesce(process_group, ''), matched_by, match_key, trace, rank
), ordered AS (
    SELECT *, row_number() OVER (PARTITION BY job_key, runs_on, group_key, matched_by, call_key
                                 ORDER BY wait_us, start_lag_us DESC, rank, trace) AS arrival_from_last
    FROM per_rank
), per_call AS (
    SELECT job_key, runs_on, group_key, matched_by, call_key, count(*) AS ranks, max(wait_us) AS max_wait_us,
           sum(round(wait_us * 1e3)) / 1e3 AS total_wait_us, max(start_lag_us) AS start_spread_us,
           max(end_lag_us) AS end_spread_us,
           min(start_us) AS first_start_us, max(CASE WHEN trace = $trace THEN 1 ELSE 0 END) AS has_trace
    FROM ordered
    GROUP BY job_key, runs_on, group_key, matched_by, call_key
)
SELECT s.process_group, s.seq, s.call, s.collective, s.runs_on, s.matched_by, s.step, c.ranks, s.in_bytes, s.rank AS straggler_rank,
       s.trace AS straggler_trace, round(s.call_us, 1) AS transfer_us, round(c.max_wait_us, 1) AS max_wait_us,
       round(c.total_wait_us, 1) AS total_wait_us, round(c.start_spread_us, 1) AS start_spread_us,
       round(c.end_spread_us, 1) AS end_spread_us, round(c.first_start_us, 1) AS first_start_us
FROM ordered s
JOIN per_call c ON c.job_key = s.job_key AND c.runs_on = s.runs_on AND c.group_key = s.group_key
     AND c.matched_by = s.matched_by AND c.call_key = s.call_key
WHERE s.arrival_from_last = 1 AND c.max_wait_us >= $min_wait_us AND ($trace IS NULL OR c.has_trace = 1)
ORDER BY c.first_start_us, s.job_key, s.runs_on, s.group_key, s.matched_by, s.call_key;
