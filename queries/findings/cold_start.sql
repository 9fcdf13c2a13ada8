-- cold_start: a first step that costs far more than the steady ones, and what it spent it on (in a trace without steps, an op's first call against its later calls)
-- why: the first call pays one-time costs (cuDNN building its execution plan, torch.compile tracing and compiling, Triton autotuning, cuBLAS and cuDNN handles, the allocator's first allocations); they distort a benchmark that times it, and come back whenever shapes change
-- fix: warm up before measuring; keep shapes static so plans and compiled graphs are reused (torch.compile(dynamic=False), cuDNN caches a plan per shape); cache compiled artifacts across runs (Inductor's FX graph cache)
-- saving: not per step (NULL): a one-time cost; the detail says how much the first step costs over a steady one and which op spent it
-- unsaved: a one-time cost, paid by the first step and not by the steps after it: no saving per step
-- params:
--   trace = NULL: only this trace
--   min_ms = 5: report a first step that costs at least this many milliseconds more than the median steady step
--   max_evidence = 20: at most this many ops named in the evidence
WITH unstepped AS (
    -- Traces without two steps: their ops' first calls are weighed against their later calls.
    SELECT trace FROM traces WHERE trace NOT IN (SELECT trace FROM steps GROUP BY trace HAVING count(*) >= 2)
      AND ($trace IS NULL OR trace = $trace)
), calls AS (
    SELECT o.trace, o.name, lower(o.cat) AS cat, o.depth, o.op_id, o.ts_us, o.dur_us,
           row_number() OVER (PARTITION BY o.trace, o.name ORDER BY o.ts_us, o.op_id) AS call
    FROM cpu_ops o JOIN unstepped u ON u.trace = o.trace
    WHERE lower(o.cat) IN ('cpu_op', 'operator')
), first_calls AS (
    SELECT trace, name, min(depth) AS depth, count(*) AS calls,
           max(dur_us) FILTER (WHERE call = 1) AS first_us, median(dur_us) FILTER (WHERE call > 1) AS later_us,
           max(op_id) FILTER (WHERE call = 1) AS first_op_id, max(ts_us) FILTER (WHERE call = 1) AS first_ts_us
    FROM calls GROUP BY trace, name HAVING count(*) >= 3
), costly_calls AS (
    SELECT *, first_us - later_us AS excess_us,
           CASE WHEN regexp_matches(lower(name), 'cudnn') THEN 'cuDNN'
                WHEN regexp_matches(lower(name), 'cublas') THEN 'cuBLAS' END AS cause
    FROM first_calls WHERE first_us - later_us >= CAST($min_ms AS DOUBLE) * 1000
), first_call AS (
    -- The op to name: a known library's with the most excess, else the outermost with the most.
    SELECT trace, name, depth, calls, first_us, later_us, first_op_id, first_ts_us, excess_us, cause FROM costly_calls
    QUALIFY row_number() OVER (PARTITION BY trace ORDER BY cause IS NULL, excess_us DESC, depth, name) = 1
), first AS (
    SELECT trace, min(step) AS step, count(*) AS steps FROM steps GROUP BY trace HAVING count(*) >= 2
), spans AS (
    SELECT f.trace, f.step AS cold_step,
           max(s.dur_us) FILTER (WHERE s.step = f.step) AS cold_us,
           median(s.dur_us) FILTER (WHERE s.step <> f.step) AS steady_us
    FROM first f JOIN steps s USING (trace)
    WHERE $trace IS NULL OR f.trace = $trace
    GROUP BY f.trace, f.step
), costly AS (
    SELECT * FROM spans WHERE cold_us - steady_us >= CAST($min_ms AS DOUBLE) * 1000
), ops AS (
    -- Each op name's CPU time in the cold step against its mean in a steady step.
    SELECT o.trace, o.name, any_value(lower(o.cat)) AS cat, min(o.depth) AS depth, any_value(c.cold_us - c.steady_us) AS step_excess_us,
           sum(round(o.dur_us * 1e3)) FILTER (WHERE o.step = c.cold_step) / 1e3 AS cold_op_us,
           coalesce(sum(round(o.dur_us * 1e3)) FILTER (WHERE o.step <> c.cold_step) / 1e3
                    / nullif(count(DISTINCT o.step) FILTER (WHERE o.step <> c.cold_step), 0), 0) AS steady_op_us,
           arg_min(o.op_id, o.ts_us) FILTER (WHERE o.step = c.cold_step) AS first_op_id,
           min(o.ts_us) FILTER (WHERE o.step = c.cold_step) AS first_ts_us,
           arg_min(o.dur_us, o.ts_us) FILTER (WHERE o.step = c.cold_step) AS first_dur_us
    FROM cpu_ops o JOIN costly c ON c.trace = o.trace
    WHERE NOT regexp_full_match(o.name, 'ProfilerStep#\d+')
    GROUP BY o.trace, o.name
), excess AS (
    SELECT *, cold_op_us - steady_op_us AS excess_us,
           -- torch.compile and autotuning mark their work with record_function ranges; a library's
           -- first call is an aten op (a range of the user's that happens to say cudnn is not).
           CASE WHEN regexp_matches(lower(name), 'dynamo|inductor|compile_fx|torch-compiled|compiledfunction|aot_') THEN 'torch.compile'
                WHEN regexp_matches(lower(name), 'autotun') THEN 'Triton autotuning'
                WHEN cat <> 'user_annotation' AND regexp_matches(lower(name), 'cudnn') THEN 'cuDNN'
                WHEN cat <> 'user_annotation' AND regexp_matches(lower(name), 'cublas') THEN 'cuBLAS' END AS cause
    FROM ops WHERE cold_op_us IS NOT NULL
), named AS (
    -- The cause: the known one with the most excess (its outermost op has the most), else the
    -- deepest op that alone accounts for half the step's excess.
    SELECT trace,
           coalesce(arg_max(cause, excess_us) FILTER (WHERE cause IS NOT NULL AND excess_us >= 0.25 * step_excess_us), 'first-call work') AS cause,
           coalesce(arg_max(name, excess_us) FILTER (WHERE cause IS NOT NULL AND excess_us >= 0.25 * step_excess_us),
                    arg_max(name, depth * 1e12 + excess_us) FILTER (WHERE excess_us >= 0.5 * step_excess_us)) AS op,
           coalesce(max(excess_us) FILTER (WHERE cause IS NOT NULL AND excess_us >= 0.25 * step_excess_us),
                    arg_max(excess_us, depth * 1e12 + excess_us) FILTER (WHERE excess_us >= 0.5 * step_excess_us)) AS op_excess_us,
           to_json(list(struct_pack(source := 'cpu_ops', trace := trace, name := name,
                                    ts_ns := CAST(round(first_ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(first_dur_us * 1000) AS BIGINT), cpu_op_id := first_op_id)
                        ORDER BY excess_us DESC, name)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM excess
    WHERE excess_us >= 0.05 * step_excess_us
    GROUP BY trace
), captured AS (
    -- a CUDA graph captured and instantiated in the step: runtime calls, not ops
    SELECT trace, step, sum(round(dur_us * 1e3)) FILTER (WHERE regexp_matches(name, 'GraphInstantiate')) / 1e3 AS instantiate_us
    FROM runtime
    WHERE regexp_matches(name, '^(cuda|hip)StreamBeginCapture|^(cuda|hip)GraphInstantiate') AND ($trace IS NULL OR trace = $trace)
    GROUP BY trace, step
), causes AS (
    SELECT n.*, CASE WHEN n.cause = 'first-call work' AND g.step IS NOT NULL THEN 'CUDA graph capture' ELSE n.cause END AS named_cause,
           g.instantiate_us
    FROM costly c JOIN named n USING (trace) LEFT JOIN captured g ON g.trace = c.trace AND g.step = c.cold_step
)
SELECT c.trace, 'cold_start' AS rule,
       CASE WHEN c.cold_us - c.steady_us >= 100000 THEN 'high'
            WHEN c.cold_us - c.steady_us >= 10000 THEN 'medium' ELSE 'low' END AS severity,
       format('The first step''s CPU span lasts {:.1f} ms against {:.3f} ms in a steady one: {}',
              c.cold_us / 1000, c.steady_us / 1000, n.named_cause) AS title,
       format('Step {}''s CPU span lasts {:.1f} ms more than the median steady step''s; {}',
              c.cold_step, (c.cold_us - c.steady_us) / 1000,
              CASE WHEN n.op IS NOT NULL THEN format('{} alone spends {:.1f} ms more than in a steady step', n.op, n.op_excess_us / 1000)
                   WHEN n.named_cause = 'CUDA graph capture'
                   THEN 'the step captures a CUDA graph, which the steps after it replay: its warm-up calls, the capture'
                        || coalesce(format(' and {:.1f} ms of cudaGraphInstantiate', n.instantiate_us / 1000), ' and its instantiation')
                   ELSE 'no single op accounts for half of it' END) AS detail,
       CASE n.named_cause
            WHEN 'CUDA graph capture' THEN 'capture the graph in the warm-up, before the steps you measure: it is captured once and replayed'
            WHEN 'torch.compile' THEN 'warm up before measuring, keep shapes static (torch.compile(dynamic=False)) so it compiles once, and keep Inductor''s FX graph cache on across runs'
            WHEN 'Triton autotuning' THEN 'warm up before measuring; keep autotuning results across runs (Inductor''s cache) and shapes static'
            WHEN 'cuDNN' THEN 'warm up before measuring: cuDNN builds and caches an execution plan per shape on the first call; keep shapes static'
            ELSE 'warm up before measuring, and keep shapes static so the one-time work is not repeated' END AS fix,
       CAST(NULL AS VARCHAR) AS whatif,
       CAST(NULL AS DOUBLE) AS estimate_us_per_step,
       n.evidence
FROM costly c JOIN causes n USING (trace)
UNION ALL
SELECT f.trace, 'cold_start' AS rule,
       CASE WHEN f.excess_us >= 100000 THEN 'high' WHEN f.excess_us >= 10000 THEN 'medium' ELSE 'low' END AS severity,
       format('The first call of {} takes {:.1f} ms against {:.3f} ms for its later calls: {}',
              f.name, f.first_us / 1000, f.later_us / 1000, coalesce(f.cause, 'first-call work')) AS title,
       format('The trace has no steps: of {} calls of {}, the first costs {:.1f} ms more than the median later one',
              f.calls, f.name, f.excess_us / 1000) AS detail,
       CASE f.cause
            WHEN 'cuDNN' THEN 'warm up before measuring: cuDNN builds and caches an execution plan per shape on the first call; keep shapes static'
            ELSE 'warm up before measuring, and keep shapes static so the one-time work is not repeated' END AS fix,
       CAST(NULL AS VARCHAR) AS whatif,
       CAST(NULL AS DOUBLE) AS estimate_us_per_step,
       to_json([struct_pack(source := 'cpu_ops', trace := f.trace, name := f.name,
                            ts_ns := CAST(round(f.first_ts_us * 1000) AS BIGINT),
                            dur_ns := CAST(round(f.first_us * 1000) AS BIGINT), cpu_op_id := f.first_op_id)]) AS evidence
FROM first_call f;
