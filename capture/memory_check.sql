-- memory_check.py's figures beside tracekit's: each profiled step after the cold one (memory_steps,
-- device cuda) against the same step measured outside the profiler (DIR/measured.csv). Run from
-- the folder memory_check.py wrote: tracekit query --db memcheck.duckdb --allow-files --sql @memory_check.sql
SELECT s.trace, s.step, s.peak_allocated_bytes, m.max_memory_allocated_bytes,
       s.peak_allocated_bytes = m.max_memory_allocated_bytes AS same_peak,
       s.peak_over_start_bytes, m.max_memory_allocated_bytes - m.start_allocated_bytes AS measured_over_start_bytes,
       s.peak_reserved_bytes, m.max_memory_reserved_bytes
FROM memory_steps s
JOIN read_csv('measured.csv') m ON m.trace = s.trace AND m.step = s.step
WHERE s.device_type = 'cuda' AND s.step >= 1
ORDER BY s.trace, s.step
