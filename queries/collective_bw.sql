-- How fast did each collective move its data, against the link its GPUs are taken to share?
-- A row per collective kernel (and per gloo/MPI collective on the CPU): its message, the time it
-- moved it, and nccl-tests' algorithm and bus bandwidth (view collective_bandwidth has the
-- formulas). Where the call is matched across ranks, the time leaves out the wait for the last
-- rank (timed_from 'all_ranks'), so a low busbw there is a slow transfer, not a late rank; a
-- call only this trace holds is timed on this rank ('this_rank'), and any wait is in it.
-- keys: trace, collective, message_bytes, busbw_gbps, link_pct
-- columns:
--   trace: trace name
--   rank: the trace's rank in its job (NULL: no distributedInfo)
--   step: the ProfilerStep#N (NULL: outside steps)
--   collective: all_reduce, all_gather, reduce_scatter, broadcast, send_recv, ...
--   runs_on: 'gpu' (NCCL, RCCL kernels) or 'cpu' (gloo, MPI)
--   group_size: ranks in the group (NULL: not written)
--   message_bytes: the collective's whole size in bytes (NULL: unknown; see collective_bandwidth)
--   dur_us: the kernel's duration on the GPU (the CPU range's span for gloo), 0.1 µs
--   bw_us: the time the bandwidths use: dur_us less the wait for the last rank where matched
--   timed_from: 'all_ranks' or 'this_rank' (see above)
--   algbw_gbps: message_bytes / bw_us, decimal GB/s, three significant digits (to 1 MB/s below 1 MB/s)
--   busbw_gbps: algbw_gbps × the collective's factor for the group size, decimal GB/s, three significant digits
--   link: the link assumed from the GPU's name (table interconnects; NULL: unknown, CPU, or the group spans hosts)
--   link_gb_s: its peak in one direction, decimal GB/s
--   link_pct: busbw_gbps over link_gb_s, percent, one decimal
-- params:
--   trace = NULL: only this trace
--   min_bytes = 0: only calls of at least this many bytes
SELECT trace, rank, step, collective, runs_on, group_size, message_bytes, round(dur_us, 1) AS dur_us,
       round(bw_us, 1) AS bw_us, timed_from,
       -- three significant digits (Spark's round takes a constant scale)
       CASE WHEN algbw_gbps >= 100 THEN round(algbw_gbps, 0) WHEN algbw_gbps >= 10 THEN round(algbw_gbps, 1) WHEN algbw_gbps >= 1 THEN round(algbw_gbps, 2)
            WHEN algbw_gbps >= 0.1 THEN round(algbw_gbps, 3) WHEN algbw_gbps >= 0.01 THEN round(algbw_gbps, 4) WHEN algbw_gbps >= 0.001 THEN round(algbw_gbps, 5)
            ELSE round(algbw_gbps, 6) END AS algbw_gbps,
       CASE WHEN busbw_gbps >= 100 THEN round(busbw_gbps, 0) WHEN busbw_gbps >= 10 THEN round(busbw_gbps, 1) WHEN busbw_gbps >= 1 THEN round(busbw_gbps, 2)
            WHEN busbw_gbps >= 0.1 THEN round(busbw_gbps, 3) WHEN busbw_gbps >= 0.01 THEN round(busbw_gbps, 4) WHEN busbw_gbps >= 0.001 THEN round(busbw_gbps, 5)
            ELSE round(busbw_gbps, 6) END AS busbw_gbps,
       link, link_gb_s, round(link_pct, 1) AS link_pct
FROM collective_bandwidth
WHERE ($trace IS NULL OR trace = $trace) AND coalesce(message_bytes, 0) >= CAST($min_bytes AS BIGINT)
ORDER BY rank NULLS LAST, trace, ts_us, correlation;
