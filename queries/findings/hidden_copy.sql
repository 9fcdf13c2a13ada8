-- hidden_copy: device-to-device copies made by an op that need not copy
-- why: an out-of-place op (masked_fill, or a clone, contiguous or to called inside another op) copies a whole tensor on the GPU before it does its work: a Memcpy the code never asked for, paid on every step
-- fix: use the in-place form (masked_fill_ for masked_fill, add_ for add, ...), or keep the tensor in the layout and dtype the next op wants, so no clone, contiguous or to copies it
-- saving: the copies' GPU time per steady step, which the fix removes; none for copies PyTorch's backward formula makes (no change to the module removes them: they are reported apart, as info)
-- unsaved: a copy PyTorch's own backward formula makes: no change to the model's code removes it
-- params:
--   trace = NULL: only this trace
--   min_bytes = 1048576: ignore copies smaller than this many bytes each
--   max_evidence = 20: at most this many copies named in the evidence
WITH copies AS (
    SELECT m.*, w.steps,
           -- the user's line around the op (a trace with the Python stack; NULL otherwise)
           m.source_file || ':' || m.source_line || ' in ' || m.source_function AS code_line,
           -- The op that need not have copied: the one right above the first copy op of the chain
           -- (masked_fill in ... → masked_fill → clone → copy_), or that copy op itself when the
           -- code called it directly (contiguous, to).
           coalesce(nullif(trim(regexp_extract(regexp_extract(m.cpu_op_path, '^(.*?)(?: → )?aten::(?:clone|contiguous|to|_to_copy|copy_)(?: →|$)', 1),
                                               '([^→]*)$', 1)), ''),
                    regexp_extract(m.cpu_op_path, 'aten::(?:clone|contiguous|to|_to_copy|copy_)', 0)) AS culprit,
           -- made by autograd's backward (masked_fill's formula copies the gradient): its node
           nullif(regexp_extract(m.cpu_op_path, '^autograd::engine::evaluate_function: ([A-Za-z0-9_]+)', 1), '') AS backward
    FROM memcpy m
    JOIN steady_window w ON w.trace = m.trace AND w.step IS NOT DISTINCT FROM m.step
    WHERE m.kind = 'DtoD' AND ($trace IS NULL OR m.trace = $trace)
      AND regexp_matches(m.cpu_op_path, '(^|→ )aten::(clone|contiguous|to|_to_copy|copy_)( →|$)')
      AND coalesce(m.bytes, CAST($min_bytes AS BIGINT)) >= CAST($min_bytes AS BIGINT)
), groups AS (
    SELECT c.trace, c.culprit, c.backward, string_agg(DISTINCT c.cpu_op_path, '; ' ORDER BY c.cpu_op_path) AS paths,
           any_value(c.steps) AS steps,
           -- Lines are listed, not grouped on: a finding is one fix (its whatif drops the culprit's
           -- copies wherever they come from), so two findings for one culprit would each claim it all.
           count(DISTINCT c.code_line) AS lines, min(c.code_line) AS first_line,
           string_agg(DISTINCT c.code_line, '; ' ORDER BY c.code_line) AS code_lines,
           count(*) AS copies, sum(c.bytes) AS bytes, count(*) - count(c.bytes) AS unknown_size,
           sum(round(c.dur_us * 1e3)) / 1e3 AS copy_us,
           to_json(list(struct_pack(source := 'memcpy', trace := c.trace, name := c.name,
                                    ts_ns := CAST(round(c.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(c.dur_us * 1000) AS BIGINT),
                                    correlation := c.correlation, cpu_op_id := c.cpu_op_id,
                                    source_file := c.source_file, source_line := c.source_line,
                                    source_function := c.source_function)
                        ORDER BY c.ts_us, c.correlation)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM copies c
    GROUP BY c.trace, c.culprit, c.backward
)
SELECT g.trace, 'hidden_copy' AS rule,
       CASE WHEN g.backward IS NOT NULL THEN 'info'
            WHEN g.copy_us / g.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN g.copy_us / g.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('{} Memcpy DtoD of {} per step from {}{}{}',
              CASE WHEN g.copies % g.steps = 0 THEN CAST(g.copies // g.steps AS VARCHAR)
                   ELSE format('{:.1f}', g.copies / g.steps) END,
              CASE WHEN g.bytes IS NULL THEN 'unknown size'
                   ELSE format('{:.0f} MiB', g.bytes / g.copies / 1048576.0) END,
              g.culprit, CASE WHEN g.backward IS NULL THEN '' ELSE ' in autograd''s ' || g.backward END,
              CASE g.lines WHEN 0 THEN '' WHEN 1 THEN ' at ' || g.first_line
                   ELSE format(' at {} and {} more line(s)', g.first_line, g.lines - 1) END) AS title,
       format('{} copies in {} steady step(s), {:.1f} µs of GPU time per step ({:.1f}% of the step''s {:.1f} µs of GPU time), made by {}{}',
              g.copies, g.steps, g.copy_us / g.steps, 100.0 * g.copy_us / g.steps / t.gpu_us_per_step,
              t.gpu_us_per_step, g.paths, CASE WHEN g.lines = 0 THEN '' ELSE ' at ' || g.code_lines END) AS detail,
       CASE WHEN g.backward IS NOT NULL
                 THEN 'none in the module: PyTorch''s backward formula (' || g.backward || ') makes this copy; only a '
                      || 'custom torch.autograd.Function that writes the gradient in place would remove it'
            WHEN g.culprit LIKE '%reducer::copy_bucket_to_grad%'
                 THEN 'construct DistributedDataParallel with gradient_as_bucket_view=True: gradients then live in '
                      || 'the buckets, with nothing to copy'
            WHEN g.culprit LIKE '%masked_fill' THEN 'use masked_fill_ (in place) instead of masked_fill'
            -- the code's own Tensor.copy_ into a tensor it holds (a CUDA graph's static input): already in place
            WHEN g.culprit = 'aten::copy_'
                 THEN 'make the data where it is copied to: have the op that produces it write there (its out= '
                      || 'form, or an in-place op on the destination); for a CUDA graph''s static input, have the '
                      || 'loader or the step before write into that buffer'
            WHEN g.culprit IN ('aten::contiguous', 'aten::clone', 'aten::to', 'aten::_to_copy')
                 THEN 'drop the ' || replace(g.culprit, 'aten::', '') || '() or make the tensor in the layout and dtype it needs'
            ELSE 'use the in-place form of ' || g.culprit || ', or keep its input in the layout and dtype it wants' END AS fix,
       CASE WHEN g.backward IS NULL THEN 'drop-copies:' || g.culprit END AS whatif,
       CASE WHEN g.backward IS NULL THEN g.copy_us / g.steps END AS estimate_us_per_step,
       g.evidence
FROM groups g JOIN step_totals t USING (trace);
