-- @view trace_shapes: what a trace ran, for comparing like with like: the speed-up against naive
-- (query summary) and the report's "fastest" compare only traces of one shape on one device.
--   trace: trace name
--   device: the GPU it ran on (device 0's name, 'an unnamed GPU' when the trace does not name it),
--           or 'the CPU' for a trace without GPU work
--   shape: the capture's B x H x S x D, dtype, causal and workload (forward or train) on that
--          device, e.g. '1x2x128x32 fp32 causal forward on the CPU'; NULL for a trace without the
--          capture's metadata (a foreign trace: its shape is unknown, so it matches none)
CREATE OR REPLACE VIEW trace_shapes AS
SELECT trace, device, dims || ' on ' || device AS shape
FROM (
    SELECT t.trace,
           CASE WHEN EXISTS (SELECT 1 FROM gpu_busy g WHERE g.trace = t.trace)
                THEN coalesce(t.device_name, 'an unnamed GPU') ELSE 'the CPU' END AS device,
           json_extract_string(t.metadata, '$.batch') || 'x' || json_extract_string(t.metadata, '$.heads')
             || 'x' || json_extract_string(t.metadata, '$.seq_len') || 'x'
             || json_extract_string(t.metadata, '$.head_dim') || ' ' || json_extract_string(t.metadata, '$.dtype')
             || CASE WHEN json_extract_string(t.metadata, '$.causal') = 'true' THEN ' causal' ELSE '' END
             || ' ' || coalesce(json_extract_string(t.metadata, '$.workload'), 'forward') AS dims
    FROM traces t
) s;
