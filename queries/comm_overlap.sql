-- How much of each rank's communication hides behind compute?
-- A row per trace (rank) and step: the time its collective kernels ran, how much of it compute
-- kernels ran at the same time on another stream, and the exposed rest, when the GPU only
-- communicated (moved data or waited for other ranks). HTA's get_comm_comp_overlap computes the
-- same intersection of the two merged sets of kernels for a whole trace; this splits it by step
-- (the step of each run of collectives' first kernel) and by device, counts every kernel of a
-- non-communication class as compute (HTA leaves out names containing Memcpy, Memset or Sync),
-- and counts as communication every kernel of class communication (HTA: names matching
-- ^nccl.*Kernel). tests/test_ranks_hta.py compares the two.
-- keys: trace, step, exposed_us, overlap_pct
-- columns:
--   trace: trace name
--   rank: the trace's rank in its job (NULL: no distributedInfo)
--   step: the ProfilerStep#N (NULL: outside steps, or a trace without them)
--   collective_kernels: collective kernels in the step
--   comm_us: time collective kernels ran, microseconds (their union: concurrent ones count once)
--   overlapped_us: of comm_us, the time compute kernels ran too (on another stream)
--   exposed_us: comm_us minus overlapped_us: communication nothing hid
--   overlap_pct: overlapped_us over comm_us, percent (two decimals, as HTA gives it)
-- params:
--   trace = NULL: only this trace
SELECT trace, rank, step, CAST(kernels AS BIGINT) AS collective_kernels, round(comm_us, 1) AS comm_us,
       round(overlap_us, 1) AS overlapped_us, round(comm_us - overlap_us, 1) AS exposed_us,
       CASE WHEN comm_us > 0 THEN round(100.0 * overlap_us / comm_us, 1) END AS overlap_pct
FROM _comm_overlap
WHERE $trace IS NULL OR trace = $trace
ORDER BY rank NULLS LAST, trace, step NULLS LAST;
