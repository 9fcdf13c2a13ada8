-- Stage 4: collectives (NCCL, RCCL, ...) with their process group, message and sequence.

-- Collectives: the kernels a communication rule knows by name (NCCL, RCCL, ...). Kineto writes
-- the collective's fields (`Collective name`, `Process Group Name`, `In msg nelems`, `dtype`,
-- `Seq`, ...) on the record_param_comms op that launched it and, in newer releases, on the kernel
-- too: the kernel's own value first, else its op's. The op is the one the kernel's External id
-- names, else the launch's op or one of the two ops above it. Both reads of args take only the
-- few rows they need.
CREATE OR REPLACE TEMP TABLE _comm_names AS
SELECT DISTINCT n.name
FROM (SELECT DISTINCT name FROM _gpu_ops WHERE op = 'kernel') n
JOIN kernel_rules r ON r.kernel_class = 'communication' AND regexp_matches(left(n.name, 8192), r.pattern, 'i');

-- A trace with no communication kernel and no CPU collective (gloo:, mpi: ranges) has no collectives.
-- @if EXISTS (SELECT 1 FROM _comm_names) OR EXISTS (SELECT 1 FROM _ops WHERE name LIKE 'gloo:%' OR name LIKE 'mpi:%')

CREATE OR REPLACE TEMP TABLE _comm_ops AS
SELECT o.op_id, o.ts_ns, o.dur_ns, e.a
FROM _ops o
JOIN (SELECT rowid AS op_id,
             json_extract_string(args, ['$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                        '$."Process Group Ranks"', '$."Group size"', '$.Seq', '$."In msg nelems"',
                                        '$."Out msg nelems"', '$.dtype', '$."Src Rank"', '$."Dst Rank"']) AS a
      FROM event_rows
      WHERE trace_id = $trace_id AND name = 'record_param_comms' AND ph = 'X') e USING (op_id);

CREATE OR REPLACE TEMP TABLE _comm_kernels AS
SELECT g.event_id, g.name, g.ts_ns, g.dur_ns, g.device, g.stream, g.correlation, g.step, ka.a,
       coalesce(by_id.op_id, c0.op_id, c1.op_id, c2.op_id) AS comm_op_id
FROM _gpu_ops g
JOIN (SELECT rowid AS event_id,
             json_extract_string(args, ['$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                        '$."Process Group Ranks"', '$."Group size"', '$.Seq', '$."In msg nelems"',
                                        '$."Out msg nelems"', '$.dtype', '$."Src Rank"', '$."Dst Rank"']) AS a
      FROM event_rows
      WHERE trace_id = $trace_id AND ph = 'X' AND lower(cat) = 'kernel'
        AND name IN (SELECT name FROM _comm_names)) ka USING (event_id)
LEFT JOIN (SELECT x.external_id, x.op_id FROM _op_by_external x JOIN _comm_ops c USING (op_id)) by_id
       ON by_id.external_id = g.launch_external_id
LEFT JOIN _comm_ops c0 ON c0.op_id = g.cpu_op_id
LEFT JOIN (SELECT op_id, parent_id FROM cpu_op_rows WHERE trace_id = $trace_id) up1 ON up1.op_id = g.cpu_op_id
LEFT JOIN _comm_ops c1 ON c1.op_id = up1.parent_id
LEFT JOIN (SELECT op_id, parent_id FROM cpu_op_rows WHERE trace_id = $trace_id) up2 ON up2.op_id = up1.parent_id
LEFT JOIN _comm_ops c2 ON c2.op_id = up2.parent_id
WHERE g.op = 'kernel';

-- Collectives of a backend that runs them on a CPU thread (gloo, MPI): torch marks each with a
-- record_function range on the backend's worker thread (gloo:all_reduce), whose span is the
-- collective's whole time, the wait for the other ranks included. No kernel, no group, no Seq
-- (they are matched across ranks by order: view collectives); the message from the range's
-- first input (Input Dims, Input type).
CREATE OR REPLACE TEMP TABLE _cpu_collectives AS
SELECT o.op_id AS event_id, o.name, o.ts_ns, o.dur_ns, o.op_id, r.step,
       list_aggregate(TRY_CAST(r.input_dims->>'$[0]' AS BIGINT[]), 'product') AS nelems,
       r.input_types->>'$[0]' AS dtype
FROM _ops o
JOIN cpu_op_rows r ON r.trace_id = $trace_id AND r.op_id = o.op_id
WHERE regexp_full_match(o.name, '(gloo|mpi):[a-z_]+');

INSERT INTO collective_rows
WITH fields AS (
    SELECT 'gpu' AS runs_on, k.event_id, k.name, k.ts_ns, k.dur_ns, k.device, k.stream, k.correlation, k.step, c.op_id AS cpu_op_id,
           c.ts_ns AS cpu_ts_ns, c.dur_ns AS cpu_dur_ns,
           coalesce(k.a[1], c.a[1]) AS collective_name, coalesce(k.a[2], c.a[2]) AS process_group,
           coalesce(k.a[3], c.a[3]) AS process_group_desc, coalesce(k.a[4], c.a[4]) AS process_group_ranks,
           TRY_CAST(coalesce(k.a[5], c.a[5]) AS INTEGER) AS group_size, TRY_CAST(coalesce(k.a[6], c.a[6]) AS BIGINT) AS seq,
           TRY_CAST(coalesce(k.a[7], c.a[7]) AS BIGINT) AS in_nelems, TRY_CAST(coalesce(k.a[8], c.a[8]) AS BIGINT) AS out_nelems,
           coalesce(k.a[9], c.a[9]) AS dtype, TRY_CAST(coalesce(k.a[10], c.a[10]) AS INTEGER) AS src_rank,
           TRY_CAST(coalesce(k.a[11], c.a[11]) AS INTEGER) AS dst_rank
    FROM _comm_kernels k LEFT JOIN _comm_ops c ON c.op_id = k.comm_op_id
    UNION ALL
    SELECT 'cpu', event_id, name, ts_ns, dur_ns, NULL, NULL, NULL, step, op_id, ts_ns, dur_ns,
           split_part(name, ':', 2), NULL, NULL, NULL, NULL, NULL, nelems, nelems, dtype, NULL, NULL
    FROM _cpu_collectives
), named AS (
    -- The collective from torch's name for it ('allreduce', '_allgather_base', 'all_to_allv'...),
    -- else from the kernel's before its parameters (ncclDevKernel_AllReduce_Sum_f32_RING_LL,
    -- ncclKernel_SendRecv_...); the bytes of an element from torch's dtype name.
    SELECT *, regexp_replace(lower(coalesce(collective_name, split_part(name, '(', 1))), '[^a-z]', '', 'g') AS squashed,
           -- torch's dtype names (Float, BFloat16) on NCCL's ops, C++'s (float, c10::BFloat16)
           -- in a CPU range's Input type
           CASE replace(lower(dtype), 'c10::', '') WHEN 'byte' THEN 1 WHEN 'unsigned char' THEN 1 WHEN 'signed char' THEN 1
                WHEN 'long int' THEN 8 WHEN 'int64_t' THEN 8 WHEN 'char' THEN 1 WHEN 'bool' THEN 1 WHEN 'qint8' THEN 1
                WHEN 'quint8' THEN 1 WHEN 'half' THEN 2 WHEN 'bfloat16' THEN 2 WHEN 'short' THEN 2 WHEN 'uint16' THEN 2
                WHEN 'float' THEN 4 WHEN 'int' THEN 4 WHEN 'uint32' THEN 4 WHEN 'complexhalf' THEN 4 WHEN 'qint32' THEN 4
                WHEN 'double' THEN 8 WHEN 'long' THEN 8 WHEN 'uint64' THEN 8 WHEN 'complexfloat' THEN 8
                WHEN 'complexdouble' THEN 16
                ELSE CASE WHEN lower(dtype) LIKE 'float8%' THEN 1 END END AS dtype_bytes
    FROM fields
)
SELECT $trace_id, name, ts_ns, dur_ns, device, stream, correlation, step,
       CASE WHEN squashed LIKE '%alltoall%' THEN 'all_to_all'
            WHEN squashed LIKE '%allreduce%' THEN 'all_reduce'
            WHEN squashed LIKE '%allgather%' THEN 'all_gather'
            WHEN squashed LIKE '%reducescatter%' THEN 'reduce_scatter'
            WHEN squashed LIKE '%broadcast%' THEN 'broadcast'
            WHEN squashed LIKE '%sendrecv%' OR squashed LIKE 'send%' OR squashed LIKE 'recv%'
                 OR squashed LIKE '%kernelsend%' OR squashed LIKE '%kernelrecv%' THEN 'send_recv'
            WHEN squashed LIKE '%barrier%' THEN 'barrier'
            WHEN squashed LIKE '%gather%' THEN 'gather'
            WHEN squashed LIKE '%scatter%' THEN 'scatter'
            WHEN squashed LIKE '%reduce%' THEN 'reduce' END,
       collective_name, process_group, process_group_desc, process_group_ranks, group_size, seq,
       row_number() OVER (PARTITION BY runs_on, process_group ORDER BY ts_ns, correlation, event_id),
       in_nelems, out_nelems, dtype, in_nelems * dtype_bytes, out_nelems * dtype_bytes, src_rank, dst_rank,
       cpu_op_id, cpu_ts_ns, cpu_dur_ns, runs_on
FROM named;
-- @end
