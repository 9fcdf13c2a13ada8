-- slow_collective: large NCCL collectives whose bus bandwidth is far below the link the GPUs are taken to share
-- why: busbw (nccl-tests' bus bandwidth, view collective_bandwidth) is the rate each rank's link carried, comparable with the link's peak in one direction whatever the group size; a large message that moves at a small share of it spends the step's time on a slow path: NCCL copying through host memory instead of NVLink or PCIe peer-to-peer, a transport or protocol forced by the environment, too few channels, SMs taken by compute kernels running beside it, or a link slower than the GPU's model suggests (the trace records no topology: interconnects says what each GPU is assumed to use)
-- fix: run nccl-tests (all_reduce_perf -b SIZE -e SIZE -g N) on the same GPUs: if it reaches the link, the job's NCCL setup differs (NCCL_DEBUG=INFO names the transport, P2P/NVLink, SHM or NET, and the channels; look for NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_PROTO, NCCL_ALGO, NCCL_MIN/MAX_NCHANNELS); if it does not, check the link itself (nvidia-smi topo -m, nvidia-smi nvlink -s); where the call is timed on this rank only, load the other ranks' traces first: a late rank looks the same
-- saving: an upper bound per steady step: the calls' time above what their bytes take at the link's peak (message_bytes × the busbw factor / link_gb_s), capped by the step's exposed communication (comm_overlap: time hidden behind compute shortens nothing); no replay (whatif NULL); an upper bound because NCCL never reaches the peak (nccl-tests' sendrecv between A100s over NVLink: 195 of 300 GB/s, li-plus/playground cuda/nccl.md) and a call timed on this rank alone may hold a wait for a late rank
-- unsaved: what a faster collective would save depends on the NCCL setup and the link, which the trace does not show
-- params:
--   trace = NULL: only this trace
--   min_bytes = 16777216: only calls of at least this many bytes (16 MiB): below a few MiB NCCL's fixed cost a call (microseconds a ring step) holds busbw far below the peak on any link, so a low figure says nothing of the link
--   max_pct = 25: report calls whose busbw is below this percent of the link's peak: a healthy link gives a large message well over half of it, a quarter is far below
--   max_evidence = 20: at most this many kernels named in the evidence
WITH slow AS (
    SELECT b.*, w.steps, b.message_bytes * b.busbw_factor / b.link_gb_s / 1000.0 AS link_us
    FROM collective_bandwidth b
    JOIN steady_window w ON w.trace = b.trace AND w.step IS NOT DISTINCT FROM b.step
    WHERE ($trace IS NULL OR b.trace = $trace) AND b.runs_on = 'gpu'
      AND b.message_bytes >= CAST($min_bytes AS BIGINT) AND b.link_pct < CAST($max_pct AS DOUBLE)
), exposed AS (
    SELECT o.trace, o.step, o.comm_us - o.overlap_us AS exposed_us, o.overlap_us / nullif(o.comm_us, 0) AS overlap_share
    FROM _comm_overlap o
), per_step AS (
    -- A step's excess over the link, no more than the communication it left exposed.
    SELECT s.trace, s.collective, s.step, least(sum(s.bw_us - s.link_us), any_value(e.exposed_us)) AS excess_us,
           any_value(e.overlap_share) AS overlap_share
    FROM slow s
    LEFT JOIN exposed e ON e.trace = s.trace AND e.step IS NOT DISTINCT FROM s.step
    GROUP BY s.trace, s.collective, s.step
), groups AS (
    SELECT s.trace, s.collective, any_value(s.steps) AS steps, count(*) AS calls, any_value(s.group_size) AS group_size,
           min(s.message_bytes) AS min_bytes, max(s.message_bytes) AS max_bytes, median(s.busbw_gbps) AS busbw_gbps,
           max(s.busbw_gbps) AS best_gbps, any_value(s.link) AS link, any_value(s.link_gb_s) AS link_gb_s,
           count(*) FILTER (WHERE s.timed_from = 'this_rank') AS this_rank_only, sum(round(s.bw_us * 1e3)) / 1e3 AS bw_us,
           to_json(list(struct_pack(source := 'kernels', trace := s.trace, name := s.name,
                                    ts_ns := CAST(round(s.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(s.dur_us * 1000) AS BIGINT),
                                    correlation := s.correlation, cpu_op_id := s.cpu_op_id)
                        ORDER BY s.link_pct, s.ts_us, s.correlation)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM slow s
    GROUP BY s.trace, s.collective
), totals AS (
    SELECT trace, collective, sum(excess_us) AS excess_us, avg(overlap_share) AS overlap_share
    FROM per_step GROUP BY trace, collective
)
SELECT g.trace, 'slow_collective' AS rule,
       CASE WHEN x.excess_us / g.steps >= 0.10 * t.gpu_us_per_step AND g.this_rank_only = 0 THEN 'high'
            WHEN x.excess_us / g.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('{} of {} reach{} {:.1f} GB/s busbw, {:.0f}% of {}''s {:.0f} GB/s',
              g.collective, CASE WHEN g.min_bytes = g.max_bytes THEN format('{:.1f} MB', g.max_bytes / 1e6)
                                 ELSE format('{:.1f}-{:.1f} MB', g.min_bytes / 1e6, g.max_bytes / 1e6) END,
              CASE WHEN g.calls = 1 THEN 'es' ELSE '' END, g.busbw_gbps, 100.0 * g.busbw_gbps / g.link_gb_s,
              g.link, g.link_gb_s) AS title,
       format('{} call(s) in {} steady step(s), in groups of {} ranks: median busbw {:.1f} GB/s (best {:.1f}; decimal GB/s), {:.1f} µs of kernel time per step; '
              || 'the link ({}, {:.0f} GB/s a direction) is assumed from the GPU''s name ({}), the trace records none; '
              || '{:.0f}% of the step''s communication ran beside compute kernels, which take SMs from NCCL',
              g.calls, g.steps, coalesce(CAST(g.group_size AS VARCHAR), 'an unknown number of'), g.busbw_gbps, g.best_gbps,
              g.bw_us / g.steps, g.link, g.link_gb_s, l.assumption, 100.0 * coalesce(x.overlap_share, 0))
         || CASE WHEN g.this_rank_only > 0
                 THEN format('; {} of the calls are timed on this rank alone (no other rank''s trace holds them): their kernels may hold a wait for a late rank, so their busbw is a lower bound', g.this_rank_only)
                 ELSE '; timed across the ranks (the wait for the last rank left out), so the data moved this slowly' END AS detail,
       'run nccl-tests (all_reduce_perf -b ' || CAST(g.max_bytes AS VARCHAR) || ' -e ' || CAST(g.max_bytes AS VARCHAR)
         || ' -g ' || coalesce(CAST(g.group_size AS VARCHAR), 'N') || ') on these GPUs: if it reaches the link, the job''s NCCL setup differs '
         || '(NCCL_DEBUG=INFO names the transport and channels; look for NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_PROTO, NCCL_ALGO); '
         || 'if not, check the link (nvidia-smi topo -m, nvidia-smi nvlink -s)'
         || CASE WHEN g.this_rank_only > 0 THEN '; first load the other ranks'' traces to rule out a late rank' ELSE '' END AS fix,
       CAST(NULL AS VARCHAR) AS whatif,
       x.excess_us / g.steps AS estimate_us_per_step,
       g.evidence
FROM groups g
JOIN totals x ON x.trace = g.trace AND x.collective = g.collective
JOIN step_totals t ON t.trace = g.trace
LEFT JOIN _trace_links l ON l.trace = g.trace;
