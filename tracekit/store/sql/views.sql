-- The public contract: write your SQL against these views. A change here is a change to the product.
-- Times are microseconds (DOUBLE, with the trace's nanosecond fraction) unless a name says _ns.

-- Which traces are the ranks of one job. Not the folder they sit in: traces are ranks of one
-- job when what their distributedInfo says agrees (backend, world size, the default process
-- group's ranks) and they ran at the same time (their spans overlap on the epoch's clock:
-- baseTimeNanoseconds + ts). Where two runs of one setup overlap (a rank twice among overlapping
-- traces), the k-th trace of each rank, by folder then time, is the k-th job's. A trace without
-- a rank is in no job. A job is named for the trace of its lowest rank.
CREATE OR REPLACE VIEW _jobs AS
WITH ranked AS (
    SELECT trace_id, trace, rank, regexp_replace(path, '[^/]*$', '') AS folder,
           coalesce(dist_backend, '') AS backend, coalesce(world_size, -1) AS size,
           coalesce(default_group, '') AS grp,
           coalesce(base_time_ns, 0) + first_ns AS start_ns, coalesce(base_time_ns, 0) + last_ns AS end_ns
    FROM trace_files
    WHERE rank IS NOT NULL AND first_ns IS NOT NULL
), reach AS (
    SELECT *, max(end_ns) OVER (PARTITION BY backend, size, grp ORDER BY start_ns, trace
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_ns
    FROM ranked
), islands AS (
    SELECT *, sum(CASE WHEN reach_ns IS NULL OR start_ns > reach_ns THEN 1 ELSE 0 END)
                  OVER (PARTITION BY backend, size, grp ORDER BY start_ns, trace ROWS UNBOUNDED PRECEDING) AS island
    FROM reach
), turns AS (
    SELECT *, row_number() OVER (PARTITION BY backend, size, grp, island, rank ORDER BY folder, start_ns, trace) AS turn
    FROM islands
)
SELECT trace_id, first_value(trace) OVER (PARTITION BY backend, size, grp, island, turn
                                          ORDER BY rank, start_ns, trace) AS job
FROM turns;

-- @view traces: one row per loaded trace file.
--   trace: unique name, the file name without .json[.gz] (suffixed -2, -3... on collisions)
--   path: the absolute path it was loaded from
--   sha256: hash of the trace's decompressed content (a second load of the same content is skipped)
--   device_name: GPU of device 0 from deviceProperties (NULL for CPU-only traces and traces without
--                it, or with an empty name)
--   vendor: 'nvidia' or 'amd' (from the device's name and gcnArchName, else from CUDA or HIP calls);
--           NULL when the trace does not say
--   gpu_arch: the GPU architecture: 'sm_90' (Hopper), 'sm_80' (A100), 'gfx90a' (MI210), 'gfx942'
--             (MI300X; from gcnArchName, or from ISA942 in Tensile's kernel names)
--   compute_capability: CUDA's, e.g. '9.0' for Hopper, '8.0' for A100, '7.0' for V100; NULL for
--                        AMD devices (HIP reports its own numbers there: an MI210 says 9.0)
--   events: number of events loaded
--   metadata: what `tracekit capture` embedded (variant, shape, dtype, versions...), NULL for foreign traces
--   variant: metadata's variant (naive, sdpa_flash, ...), NULL for foreign traces
--   dropped_events: events left out by `load --lenient` (0 otherwise)
--   loaded_at: when it was loaded (UTC)
--   rank, world_size: the trace's rank in its distributed job and the job's size, from the
--                     header's distributedInfo; NULL when the trace has none (never 0)
--   dist_backend: the job's backend (nccl, gloo, ...); where torch wrote 'undefined' (a default
--                 group with a backend per device), the GPU's one from its backend_config
--   job: the job the trace is a rank of, named for its lowest rank's trace (view _jobs says how
--        ranks are found to be one job); the rank queries compare the ranks of one job. NULL
--        without a rank
--   first_us, last_us: the first start and the last end of its ops and GPU work (its clock)
CREATE OR REPLACE VIEW traces AS
SELECT f.trace, f.path, f.sha256, f.device_name, f.vendor, f.gpu_arch, f.compute_capability, f.events, f.metadata,
       json_extract_string(f.metadata, '$.variant') AS variant, f.dropped_events, f.loaded_at,
       f.rank, f.world_size, f.dist_backend, j.job, f.first_ns / 1000.0 AS first_us, f.last_ns / 1000.0 AS last_us
FROM trace_files f LEFT JOIN _jobs j ON j.trace_id = f.trace_id;

-- @view events: every event of every trace, as written.
--   trace: trace name
--   cat: category (kernel, cpu_op, cuda_runtime, gpu_memcpy, ...; NULL for M metadata events)
--   name: event name
--   ph: Chrome phase (X complete, i instant, s/f flow, M metadata, ...)
--   ts_us: start, microseconds on the trace's clock
--   dur_us: duration in microseconds (NULL when the event has none)
--   pid, tid: process and thread (text: Kineto writes some as strings)
--   id: flow or async id (text), bp: flow binding point, s: instant scope
--   args: the event's args as JSON
--   ts_ns, dur_ns: start and duration as integer nanoseconds, exactly as written (export uses them)
CREATE OR REPLACE VIEW events AS
SELECT t.trace, e.cat, e.name, e.ph, e.ts_ns / 1000.0 AS ts_us, e.dur_ns / 1000.0 AS dur_us,
       e.pid, e.tid, e.id, e.bp, e.s, e.args, e.ts_ns, e.dur_ns
FROM event_rows e JOIN trace_files t USING (trace_id);

-- @view steps: the steps of each trace: its ProfilerStep#N spans, or in a trace without them the
-- iterations it marks with record_function ranges (iteration_0, iteration_1, ..., or train_step
-- repeated at the top of a thread: the rule is in derive_1_ops.sql).
--   trace: trace name
--   step: N of ProfilerStep#N (step 0 of a `tracekit capture` trace is the cold first call), or of
--         the iteration (its counter, else its place in time from 0)
--   ts_us, dur_us: the step's CPU span
--   source: 'profiler' (ProfilerStep#N) or 'inferred' (record_function iterations)
CREATE OR REPLACE VIEW steps AS
SELECT t.trace, s.step, s.ts_ns / 1000.0 AS ts_us, (s.end_ns - s.ts_ns) / 1000.0 AS dur_us, s.source
FROM step_rows s JOIN trace_files t USING (trace_id);

-- @view cpu_ops: CPU operators (cat cpu_op) and record_function ranges (cat user_annotation).
--   trace: trace name
--   op_id: id of the op within its trace (parent_id, and kernels' cpu_op_id, refer to it): its
--          event's row number, so ids follow the file's order
--   cat: cpu_op or user_annotation
--   name: e.g. aten::masked_fill, ProfilerStep#3
--   ts_us, dur_us: CPU span in microseconds
--   pid, tid: process and thread
--   external_id: Kineto's External id, shared with the GPU work the op launched
--   input_dims, input_types: the op's input shapes and dtypes as JSON lists (with record_shapes)
--   parent_id, parent: the enclosing op on the same thread (NULL at the top)
--   depth: nesting depth on its thread, 0 at the top
--   step: enclosing ProfilerStep#N, NULL outside steps or when the trace has none
--   op_path: for ops that launched GPU work, called the runtime or allocated memory, the chain of
--            cpu_op names from the outermost to this one, e.g.
--            'aten::masked_fill → aten::clone → aten::copy_'; a chain more than 64 ops deep keeps the
--            64 nearest this one, after '… → '
--   source_file, source_line, source_function: the innermost frame of the user's code around it,
--          from a trace recorded with the Python stack (with_stack=True): file as torch wrote
--          it (relative to its sys.path entry, e.g. 'model.py'), the line torch records (a
--          function's first line for a call made while profiling) and the function; frames of
--          torch, the standard library and site-packages are skipped (docs/source-lines.md).
--          NULL when the trace has no stack or no user frame encloses the op
CREATE OR REPLACE VIEW cpu_ops AS
SELECT t.trace, o.op_id, o.cat, o.name, o.ts_ns / 1000.0 AS ts_us, o.dur_ns / 1000.0 AS dur_us,
       o.pid, o.tid, o.external_id, o.input_dims, o.input_types, o.parent_id, o.parent, o.depth,
       o.step, o.op_path, o.source_file, o.source_line, o.source_function
FROM cpu_op_rows o JOIN trace_files t USING (trace_id);

-- @view runtime: CUDA (or HIP) runtime and driver calls on the CPU: launches, syncs, mallocs.
--   trace: trace name
--   cat: cuda_runtime or cuda_driver
--   name: e.g. cudaLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync
--   ts_us, dur_us: CPU span in microseconds
--   pid, tid: process and thread
--   correlation: id shared with the kernel or memcpy it launched
--   cpu_op_id, cpu_op: the innermost CPU op open on the call's thread when it was made (its External
--                      id's op only when that op encloses the call); NULL when no op encloses it
--   step: enclosing ProfilerStep#N
CREATE OR REPLACE VIEW runtime AS
SELECT t.trace, r.cat, r.name, r.ts_ns / 1000.0 AS ts_us, r.dur_ns / 1000.0 AS dur_us, r.pid, r.tid,
       r.correlation, r.cpu_op_id, o.name AS cpu_op, r.step
FROM runtime_rows r JOIN trace_files t USING (trace_id)
LEFT JOIN cpu_op_rows o ON o.trace_id = r.trace_id AND o.op_id = r.cpu_op_id;

-- @view device_limits: each GPU of each trace with the limits that bound a kernel's occupancy.
--   trace: trace name; device: GPU index (deviceProperties' id)
--   arch: the trace's gpu_arch (sm_90, ...)
--   max_warps_per_sm, max_blocks_per_sm: resident warps and blocks an SM holds at most
--   registers_per_sm, register_alloc_unit: the SM's registers, allocated per warp in units of this
--   shared_memory_per_sm, reserved_shared_memory_per_block: bytes; CUDA keeps the second per block
--   source: 'deviceProperties' where the trace gives the figures (the block limit and allocation
--           units always come from gpu_arch_limits), else 'gpu_arch_limits'
CREATE OR REPLACE VIEW device_limits AS
WITH props AS (
    SELECT f.trace_id, f.trace, f.gpu_arch, unnest(CAST(json_extract(f.header, '$.deviceProperties') AS JSON[])) AS p
    FROM trace_files f
    WHERE json_type(json_extract(f.header, '$.deviceProperties')) = 'ARRAY'
), devices AS (
    SELECT trace_id, trace, gpu_arch, TRY_CAST(json_extract(p, '$.id') AS INTEGER) AS device,
           TRY_CAST(json_extract(p, '$.maxThreadsPerMultiprocessor') AS INTEGER)
             // coalesce(TRY_CAST(json_extract(p, '$.warpSize') AS INTEGER), 32) AS warps,
           TRY_CAST(json_extract(p, '$.regsPerMultiprocessor') AS INTEGER) AS registers,
           TRY_CAST(json_extract(p, '$.sharedMemPerMultiprocessor') AS INTEGER) AS shared_memory
    FROM props
    UNION ALL
    -- A trace that names its architecture but gives no deviceProperties: the architecture's figures.
    SELECT f.trace_id, f.trace, f.gpu_arch, NULL, NULL, NULL, NULL
    FROM trace_files f
    WHERE json_type(json_extract(f.header, '$.deviceProperties')) IS DISTINCT FROM 'ARRAY' AND f.gpu_arch IS NOT NULL
)
SELECT d.trace_id, d.trace, d.device, d.gpu_arch AS arch,
       coalesce(d.warps, a.max_warps_per_sm) AS max_warps_per_sm, a.max_blocks_per_sm,
       coalesce(d.registers, a.registers_per_sm) AS registers_per_sm, a.register_alloc_unit,
       coalesce(d.shared_memory, a.shared_memory_per_sm) AS shared_memory_per_sm,
       a.reserved_shared_memory_per_block,
       CASE WHEN d.registers IS NOT NULL THEN 'deviceProperties' ELSE 'gpu_arch_limits' END AS source
FROM devices d JOIN gpu_arch_limits a ON a.arch = d.gpu_arch;

-- Each trace's row of gpu_specs: the longest name_pattern that matches its device's name.
-- (Columns named, not sp.*: Spark's QUALIFY, as sqlglot writes it, would return its row number too.)
CREATE OR REPLACE VIEW _trace_specs AS
SELECT f.trace_id, sp.name_pattern, sp.gpu, sp.arch, sp.tf32_tflops, sp.bf16_tflops, sp.fp16_tflops,
       sp.fp8_tflops, sp.vector_tflops, sp.memory_tb_s, sp.source
FROM trace_files f JOIN gpu_specs sp ON regexp_matches(f.device_name, sp.name_pattern)
QUALIFY row_number() OVER (PARTITION BY f.trace_id ORDER BY length(sp.name_pattern) DESC, sp.name_pattern) = 1;

-- Each trace's row of interconnects (the longest name_pattern that matches its device's name), for
-- the traces with collectives, with the GPUs its host shows (deviceProperties lists every GPU the process could see: a group
-- of more ranks than that spans hosts, and its bottleneck is the network, which no trace records).
CREATE OR REPLACE VIEW _trace_links AS
SELECT f.trace_id, f.trace, i.name_pattern, i.gpu, i.link, i.per_direction_gb_s, i.per_peer_gb_s, i.assumption,
       i.source,
       CASE WHEN json_type(json_extract(f.header, '$.deviceProperties')) = 'ARRAY'
            THEN json_array_length(json_extract(f.header, '$.deviceProperties')) END AS host_gpus
-- Only traces with collectives need one: each pattern is a regular expression compiled per row
-- (11 ms for the 102 test traces, on every query of the kernels view).
FROM (SELECT * FROM trace_files WHERE trace_id IN (SELECT trace_id FROM collective_rows)) f
JOIN interconnects i ON regexp_matches(f.device_name, i.name_pattern)
QUALIFY row_number() OVER (PARTITION BY f.trace_id ORDER BY length(i.name_pattern) DESC, i.name_pattern) = 1;

-- Each collective of collective_rows with the size nccl-tests' formulas take (NVIDIA/nccl-tests,
-- doc/PERFORMANCE.md), the link it is taken to use, and the work of its kernel: the bytes NCCL's
-- ring moves over each rank's link and the additions of a reduction. Read by the kernels view
-- (a collective kernel's work) and collective_bandwidth, which documents message_bytes,
-- busbw_factor, link and link_gb_s.
--   bus_bytes: message_bytes × busbw_factor: what each rank sends (and receives) over its link,
--              as busbw = algbw × busbw_factor counts it
--   flops: the additions of a reduction (all_reduce, reduce_scatter, reduce): the group's
--          (n - 1)·N over its n ranks, N the elements reduced (a ring's share on each rank; a
--          tree's on average); 0 for the collectives that only move data (all_gather,
--          all_to_all, broadcast, send_recv)
--   work_missing: why bus_bytes or flops is NULL, as the kernels view says it
CREATE OR REPLACE VIEW _collective_work AS
WITH calls AS (
    SELECT trace_id, cpu_op_id, count(*) AS kernels
    FROM collective_rows WHERE cpu_op_id IS NOT NULL GROUP BY trace_id, cpu_op_id
), sized AS (
    SELECT c.trace_id, f.trace, c.runs_on, c.name, c.ts_ns, c.device, c.stream, c.collective, c.group_size,
           c.dtype, c.in_nelems, coalesce(k.kernels, 1) > 1 AND c.runs_on = 'gpu' AS split,
           CASE WHEN coalesce(k.kernels, 1) > 1 AND c.runs_on = 'gpu' THEN NULL
                WHEN c.collective = 'all_gather' THEN nullif(c.out_bytes, 0)
                WHEN c.collective IN ('all_reduce', 'reduce_scatter', 'all_to_all', 'broadcast', 'reduce', 'send_recv')
                     THEN nullif(coalesce(c.in_bytes, c.out_bytes), 0) END AS message_bytes,
           CASE WHEN c.collective IN ('broadcast', 'reduce', 'send_recv') THEN 1.0
                WHEN c.group_size IS NULL OR c.group_size < 2 THEN NULL
                WHEN c.collective = 'all_reduce' THEN 2.0 * (c.group_size - 1) / c.group_size
                WHEN c.collective IN ('all_gather', 'reduce_scatter', 'all_to_all') THEN (c.group_size - 1.0) / c.group_size
           END AS busbw_factor,
           CASE WHEN c.collective IN ('all_gather', 'all_to_all', 'broadcast', 'send_recv') THEN 0.0
                WHEN c.collective IN ('all_reduce', 'reduce_scatter', 'reduce') AND c.group_size >= 2
                     THEN c.in_nelems * (c.group_size - 1.0) / c.group_size END AS reduced
    FROM collective_rows c
    JOIN trace_files f ON f.trace_id = c.trace_id
    LEFT JOIN calls k ON k.trace_id = c.trace_id AND k.cpu_op_id = c.cpu_op_id
)
SELECT s.trace_id, s.trace, s.runs_on, s.name, s.ts_ns, s.device, s.stream, s.collective, s.dtype, s.message_bytes,
       s.busbw_factor, s.message_bytes * s.busbw_factor AS bus_bytes,
       CASE WHEN s.message_bytes IS NOT NULL THEN s.reduced END AS flops,
       CASE WHEN s.runs_on = 'gpu' AND (l.host_gpus IS NULL OR s.group_size IS NULL OR s.group_size <= l.host_gpus)
            THEN l.link END AS link,
       CASE WHEN s.runs_on = 'gpu' AND (l.host_gpus IS NULL OR s.group_size IS NULL OR s.group_size <= l.host_gpus)
            THEN CASE WHEN l.per_peer_gb_s IS NULL THEN l.per_direction_gb_s
                      WHEN s.group_size IS NULL THEN NULL
                      ELSE least(l.per_direction_gb_s, (s.group_size - 1) * l.per_peer_gb_s) END END AS link_gb_s,
       CASE WHEN s.split THEN 'a collective call that ran as several kernels'
            WHEN s.collective IS NULL OR s.collective IN ('barrier', 'gather', 'scatter') THEN 'no formula for its collective'
            WHEN s.message_bytes IS NULL THEN 'no message size (comms args)'
            WHEN s.busbw_factor IS NULL OR s.reduced IS NULL THEN 'no group size (comms args)' END AS work_missing
FROM sized s
LEFT JOIN _trace_links l ON l.trace_id = s.trace_id;

-- The blocks per SM each distinct launch shape allows, by each limit (CUDA's occupancy
-- calculator); the kernels view turns the least of them into occupancy and its limiter.
CREATE OR REPLACE VIEW _kernel_occupancy AS
WITH shapes AS (
    SELECT DISTINCT trace_id, device, block, registers_per_thread, shared_memory_bytes
    FROM kernel_rows WHERE block IS NOT NULL AND registers_per_thread IS NOT NULL
), sized AS (
    SELECT s.trace_id, s.device, s.block, s.registers_per_thread, s.shared_memory_bytes,
           l.max_warps_per_sm, l.max_blocks_per_sm,
           CAST(ceil(s.block[1] * coalesce(s.block[2], 1) * coalesce(s.block[3], 1) / 32.0) AS INTEGER) AS warps_per_block,
           CAST(ceil(greatest(s.registers_per_thread, 1) * 32.0 / l.register_alloc_unit) AS INTEGER) * l.register_alloc_unit
             AS registers_per_warp,
           l.registers_per_sm, l.shared_memory_per_sm,
           coalesce(s.shared_memory_bytes, 0) + l.reserved_shared_memory_per_block AS shared_per_block
    FROM shapes s
    JOIN device_limits l ON l.trace_id = s.trace_id AND (l.device = s.device OR l.device IS NULL)
    QUALIFY row_number() OVER (PARTITION BY s.trace_id, s.device, s.block, s.registers_per_thread, s.shared_memory_bytes
                               ORDER BY l.device IS NULL, l.device) = 1
), limits AS (
    SELECT *, (registers_per_sm // registers_per_warp) // warps_per_block AS by_registers,
           CASE WHEN shared_per_block > 0 THEN shared_memory_per_sm // shared_per_block ELSE max_blocks_per_sm END
             AS by_shared_memory,
           max_warps_per_sm // warps_per_block AS by_threads
    FROM sized WHERE warps_per_block > 0
)
SELECT *, least(by_registers, by_shared_memory, by_threads, max_blocks_per_sm) AS blocks FROM limits;

-- @view kernels: one row per GPU kernel execution.
--   trace: trace name
--   name: kernel name as the profiler recorded it
--   ts_us, dur_us: GPU span in microseconds
--   device, stream: GPU index and CUDA stream
--   correlation: id of the runtime call that launched it
--   external_id: External id of the launching CPU op
--   grid, block: launch dimensions [x, y, z]
--   registers_per_thread, shared_memory_bytes: resources per thread / per block
--   blocks_per_sm, warps_per_sm: the launch's blocks (and their warps) divided by the GPU's SM count,
--                 as Kineto computes them: above 1 the grid needs more than one wave
--   est_occupancy_pct: Kineto's estimated achieved occupancy, percent; NULL when it could not say
--                 (AMD; and it reports 0 for kernels with more than 48 KiB of shared memory, such
--                 as cuDNN's, flex's and nvjet's, which is stored as NULL)
--   kernel_class: gemm, convolution, attention, elementwise, reduction, softmax, copy,
--                 communication, other; NULL when no rule knows the name (see `tracekit query
--                 unclassified`)
--   math_unit: for matrix math (gemm, convolution, attention): 'tensor_core' (Tensor Cores, AMD
--                 matrix cores) or 'simt' (FMAs on CUDA cores); NULL when the name does not say,
--                 and for every other class
--   gemm_class: math_unit of GEMMs, NULL for every other class (kept for older queries)
--   rule: the classification rule that matched
--   theoretical_occupancy_pct: the occupancy its launch allows: resident warps per SM over the
--                 SM's maximum, from its registers per thread, shared memory per block and threads
--                 per block against the device's limits (deviceProperties, else gpu_arch_limits),
--                 as CUDA's occupancy calculator computes it; NULL without those (AMD, CPU)
--   flops: the floating-point operations it computes, from its op's recorded input shapes
--          (Input Dims, Input type, Concrete Inputs) by its op family's formula
--          (tracekit/store/knowledge/op_work_models.csv, docs/work-models.md): GEMMs, convolutions,
--          attention (the pairs a causal mask keeps; recompute counted), softmax, norms, losses,
--          embeddings, copies, elementwise ops, reductions, optimizer steps. An op that ran as
--          several kernels (a split-K GEMM and its reduction, attention's backward) has its work
--          split over them by their time. A kernel whose launch is not in the trace takes the work
--          of its identical kernels, where they agree (work_source). A collective's (NCCL, RCCL):
--          the additions of its reduction, from its comms args (_collective_work). NULL when the
--          trace has no shapes (or no is_causal) or no formula knows the op (work_missing)
--   achieved_tflops: flops over its duration, TFLOP/s
--   peak_tflops: the compute peak its roofline takes: for matrix math (work_family gemm,
--                convolution, attention) the device's dense Tensor Core peak for its inputs'
--                dtype (TF32 for fp32; see gpu_specs), for the rest the vector (CUDA core) FP32
--                peak; NULL for a GPU or dtype tracekit has no figure for
--   pct_of_peak: achieved_tflops over peak_tflops, percent
--   occupancy_limiter: what caps it: 'registers', 'shared_memory', 'threads' (warps per block
--                 against warps per SM) or 'blocks' (the SM's block limit)
--   cpu_op_id, cpu_op: the CPU op of the runtime call that launched it (matched by correlation; see
--                      runtime.cpu_op); NULL when the trace holds no launch for it
--   cpu_op_path: op_path of that op, e.g. 'aten::matmul → aten::bmm'
--   step: the ProfilerStep#N whose CPU span encloses the launch call; when the launch is not in the
--         trace (see `anomalies`), the step whose GPU-side span (Kineto's gpu_user_annotation
--         ProfilerStep#N) encloses the kernel's start, else NULL; NULL when the trace has no steps
--   bytes: the least bytes its share of the op must move (inputs read and outputs written once);
--          a collective's: the bytes it moves over this rank's link (message_bytes × busbw_factor
--          of collective_bandwidth, as nccl-tests' bus bandwidth counts them)
--   model_flops: the FLOPs of the math it does, without recompute (attention's backward counts
--                four matmuls, not five); equal to flops for every other family
--   work_family: the formula's family (gemm, convolution, attention, softmax, norm, loss,
--                embedding, copy, elementwise, reduction, optimizer; collective for NCCL's and
--                RCCL's kernels); NULL where no formula knows its op
--   flops_dtype: the dtype of the op's input that picks peak_tflops (float, c10::BFloat16, ...)
--   roofline_us: the least time the device could take: flops at peak_tflops or bytes at its
--                memory bandwidth (gpu_specs.memory_tb_s), whichever is slower; a collective's
--                bytes at its link's speed (collective_bandwidth.link_gb_s); NULL when either
--                is unknown (a collective's link: a group larger than its host)
--   bound: 'compute' or 'memory' ('network' for a collective): which of the two sets roofline_us
--   pct_of_roofline: roofline_us over dur_us, percent: how close it ran to the roofline
--   source_file, source_line, source_function: the source frame of its cpu_op (see cpu_ops);
--         NULL without a stack or a launching op
--   work_source: where flops and bytes came from: 'op shapes' (its op's recorded shapes), 'step
--         gradients' (an optimizer's tensor lists, whose shapes Kineto did not write, sized by the
--         step's AccumulateGrad shapes, their chunks checked against the kernels' blocks),
--         'graph capture' (a CUDA graph's replay whose capture is in the trace: the work of the op
--         that launched it at capture), 'identical kernel' (no launch in the trace, or a CUDA
--         graph's replay whose capture is not: the work of every
--         kernel of the same name, grid and block it holds the launch of, when all did the same),
--         'identical op' (the same for a run of kernels that an op of several kernels ran, its
--         work split over them by time), 'comms args' (a collective's message); NULL with no work
--   work_missing: why flops or bytes are NULL: 'no launch in the trace, no identical kernel that
--         agrees', 'a CUDA graph replay whose capture is not in the trace', 'no formula for its op',
--         'flex attention: which blocks it computes is not in the trace (block mask values)',
--         'no message size (comms args)', 'no group size (comms args)', 'no formula for its
--         collective' (barrier, gather, scatter), 'a collective call that ran as several kernels', 'no shapes recorded', 'a tensor list without shapes',
--         'a tensor list without a dtype', 'no is_causal (Concrete Inputs)', 'no bytes formula',
--         'shapes incomplete'; NULL when both are known
CREATE OR REPLACE VIEW kernels AS
WITH base AS (
SELECT t.trace, k.name, k.ts_ns / 1000.0 AS ts_us, k.dur_ns / 1000.0 AS dur_us, k.device, k.stream,
       k.correlation, k.external_id, k.grid, k.block, k.registers_per_thread,
       k.shared_memory_bytes, k.blocks_per_sm, k.warps_per_sm, k.est_occupancy_pct,
       c.kernel_class, c.math_unit, c.gemm_class, c.rule,
       k.flops, k.flops / k.dur_ns / 1000.0 AS achieved_tflops,
       CASE WHEN k.work_family NOT IN ('gemm', 'convolution', 'attention') THEN sp.vector_tflops
            WHEN k.flops_dtype = 'float' THEN sp.tf32_tflops WHEN k.flops_dtype = 'c10::BFloat16' THEN sp.bf16_tflops
            WHEN k.flops_dtype = 'c10::Half' THEN sp.fp16_tflops WHEN k.flops_dtype LIKE 'c10::Float8%' THEN sp.fp8_tflops
            END AS peak_tflops,
       100.0 * o.blocks * o.warps_per_block / o.max_warps_per_sm AS theoretical_occupancy_pct,
       CASE WHEN o.blocks IS NULL THEN NULL
            WHEN o.blocks = o.by_registers THEN 'registers' WHEN o.blocks = o.by_shared_memory THEN 'shared_memory'
            WHEN o.blocks = o.by_threads THEN 'threads' ELSE 'blocks' END AS occupancy_limiter,
       k.cpu_op_id, k.cpu_op, k.cpu_op_path, k.step, k.bytes, k.model_flops, k.work_family, k.flops_dtype,
       k.source_file, k.source_line, k.source_function, k.work_source, k.work_missing,
       -- a collective's bytes cross its link, the rest's the device's memory
       CASE WHEN k.work_family = 'collective' THEN k.bytes / (k.link_gb_s * 1e3)
            ELSE k.bytes / (sp.memory_tb_s * 1e6) END AS memory_us
FROM (
    -- the work of a collective kernel (NCCL, RCCL) is its message's, from the comms args
    SELECT k.* EXCLUDE (flops, bytes, model_flops, work_family, flops_dtype, work_source, work_missing), cw.link_gb_s,
           CASE WHEN cw.trace_id IS NULL THEN k.flops ELSE cw.flops END AS flops,
           CASE WHEN cw.trace_id IS NULL THEN k.bytes ELSE cw.bus_bytes END AS bytes,
           CASE WHEN cw.trace_id IS NULL THEN k.model_flops ELSE cw.flops END AS model_flops,
           CASE WHEN cw.trace_id IS NULL THEN k.work_family ELSE 'collective' END AS work_family,
           CASE WHEN cw.trace_id IS NULL THEN k.flops_dtype ELSE cw.dtype END AS flops_dtype,
           CASE WHEN cw.trace_id IS NULL THEN k.work_source
                WHEN coalesce(cw.flops, cw.bus_bytes) IS NOT NULL THEN 'comms args' END AS work_source,
           CASE WHEN cw.trace_id IS NULL THEN k.work_missing
                WHEN cw.flops IS NULL OR cw.bus_bytes IS NULL THEN cw.work_missing END AS work_missing
    FROM kernel_rows k
    LEFT JOIN _collective_work cw ON cw.runs_on = 'gpu' AND cw.trace_id = k.trace_id AND cw.ts_ns = k.ts_ns
         AND cw.stream IS NOT DISTINCT FROM k.stream AND cw.device IS NOT DISTINCT FROM k.device
) k JOIN trace_files t USING (trace_id)
LEFT JOIN kernel_classes c ON c.trace_id = k.trace_id AND c.name = k.name
LEFT JOIN _trace_specs sp ON sp.trace_id = k.trace_id
LEFT JOIN _kernel_occupancy o ON o.trace_id = k.trace_id AND o.device IS NOT DISTINCT FROM k.device
     AND o.block IS NOT DISTINCT FROM k.block AND o.registers_per_thread IS NOT DISTINCT FROM k.registers_per_thread
     AND o.shared_memory_bytes IS NOT DISTINCT FROM k.shared_memory_bytes
), timed AS (
    -- no arithmetic takes no time, whatever the peak (a collective that only moves data)
    SELECT *, CASE WHEN flops = 0 THEN 0.0 ELSE flops / (peak_tflops * 1e6) END AS compute_us FROM base
)
SELECT trace, name, ts_us, dur_us, device, stream, correlation, external_id, grid, block, registers_per_thread,
       shared_memory_bytes, blocks_per_sm, warps_per_sm, est_occupancy_pct, kernel_class, math_unit, gemm_class, rule,
       flops, achieved_tflops, peak_tflops, 100.0 * achieved_tflops / peak_tflops AS pct_of_peak,
       theoretical_occupancy_pct, occupancy_limiter, cpu_op_id, cpu_op, cpu_op_path, step, bytes, model_flops,
       work_family, flops_dtype,
       -- greatest() would skip a NULL side: a roofline needs both
       CASE WHEN compute_us IS NOT NULL AND memory_us IS NOT NULL THEN greatest(compute_us, memory_us) END AS roofline_us,
       CASE WHEN compute_us IS NULL OR memory_us IS NULL THEN NULL
            WHEN compute_us >= memory_us THEN 'compute' WHEN work_family = 'collective' THEN 'network'
            ELSE 'memory' END AS bound,
       CASE WHEN compute_us IS NOT NULL AND memory_us IS NOT NULL
            THEN 100.0 * greatest(compute_us, memory_us) / dur_us END AS pct_of_roofline,
       source_file, source_line, source_function, work_source, work_missing
FROM timed;

-- @view gpu_busy: how long each GPU was busy, per trace, step and device.
--   trace: trace name
--   step: the ProfilerStep#N the work was launched in, as kernels.step (NULL: launched outside any
--         step, a launch not in the trace and no GPU-side step span, or a trace without steps)
--   device: GPU index (NULL when the trace does not say, as on ROCm)
--   busy_us: time the device ran a kernel, memcpy or memset: the union of their intervals, so work on
--            concurrent streams counts once. This is the GPU time of the step.
--   kernel_sum_us: the plain sum of kernel durations; above busy_us when streams overlap
--   memcpy_us, memset_us: plain sums of copy and fill durations
--   kernels: kernel launches
--   span_us: from the first start to the last end of that work (busy_us / span_us: how full it was)
CREATE OR REPLACE VIEW gpu_busy AS
SELECT t.trace, b.step, b.device, b.busy_ns / 1000.0 AS busy_us, b.kernel_ns / 1000.0 AS kernel_sum_us,
       b.memcpy_ns / 1000.0 AS memcpy_us, b.memset_ns / 1000.0 AS memset_us, b.kernels,
       (b.last_ns - b.first_ns) / 1000.0 AS span_us
FROM gpu_busy_rows b JOIN trace_files t USING (trace_id);

-- @view collectives: one row per kernel of a collective (NCCL, RCCL, ...: kernels of class
-- communication) and per collective a CPU backend ran (gloo or MPI, each marked by torch with a
-- range such as gloo:all_reduce), with what Kineto wrote about the call, and how it lined up with the same call
-- on the job's other ranks. A call is matched across ranks by what identifies it: its process
-- group and Seq. Where the traces have no Seq, by its place among its group's calls in its step
-- (in the trace, without steps): such a match is checked, as a collective is one event on every
-- rank: the same collective everywhere, every rank still in it when the last one arrives (the
-- last start before the first end, give or take 100 µs), and for kernels, which end together,
-- the ends within 100 µs plus a tenth of the longest; a call that fails it is left unmatched.
--   trace, rank, job: the trace and its place in its job (see traces)
--   step: the ProfilerStep#N the kernel was launched in, or the CPU range started in (NULL:
--         outside steps, or no steps)
--   name: the kernel, e.g. ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), or the range (gloo:all_reduce)
--   runs_on: 'gpu' (a kernel) or 'cpu' (a range of a backend that runs collectives on the CPU)
--   collective: all_reduce, all_gather, reduce_scatter, broadcast, send_recv, all_to_all, reduce,
--               gather, scatter, barrier (from torch's collective name, else the kernel's name)
--   collective_name: torch's name for it as written (`Collective name`: allreduce, _allgather_base...)
--   process_group, process_group_desc, process_group_ranks: the group it ran in (`Process Group
--               Name`, e.g. '0'; its description, e.g. 'default_pg'; its ranks, e.g. '[0, 1]')
--   group_size: ranks in the group
--   seq: c10d's sequence number of the call in its group (Kineto's `Seq`), NULL where not written
--   call: the kernel's place among its group's collective kernels in the trace, 1, 2, ... in time order
--   in_nelems, out_nelems: elements in and out; dtype: torch's name (Float, BFloat16, ...), or
--                          the C++ type a CPU range names (float, c10 BFloat16)
--   in_bytes, out_bytes: the message sizes, elements times the dtype's size
--   src_rank, dst_rank: the peers of a point-to-point call, where written
--   ts_us, dur_us: the kernel's GPU span, or the range's CPU span; device, stream: where a
--                  kernel ran; correlation: its launch
--   cpu_op_id, cpu_ts_us, cpu_dur_us: the op that issued it (record_param_comms; the range
--                                     itself on the CPU), and its CPU span
--   ranks_matched: traces of the job holding this call (1: no other rank to compare with, or a
--                  match by order that failed its check)
--   matched_by: 'seq' (process group and Seq), 'order' (its place, checked), NULL: unmatched
--   match_key: what the call is matched by: its Seq, or (step + 1) * 1,000,000 + its place in the step
--   wait_us: how long this rank waited in the call for the last rank to arrive. A kernel: its
--            duration minus the shortest of the call's kernels across ranks (a collective's
--            kernels end together, so the last to arrive runs shortest, and no clock is shared
--            across hosts). A CPU range: from its start to the last rank's start (threads end
--            apart, as the OS schedules them). NULL when unmatched, 0 on later kernels of a
--            call that took several on this rank
--   start_lag_us: its start after the first rank's start (on the epoch's clock: baseTimeNanoseconds
--                 + ts; ranks on one host share it)
--   end_lag_us: its end after the first rank's end (near 0 for a collective on a shared clock)
CREATE OR REPLACE VIEW collectives AS
WITH placed AS (
    SELECT x.*, f.trace, f.rank, coalesce(x.process_group, '') AS group_key, coalesce(f.base_time_ns, 0) AS base_ns,
           row_number() OVER (PARTITION BY x.trace_id, x.runs_on, coalesce(x.process_group, ''), x.step
                              ORDER BY x.ts_ns, x.call) AS place
    FROM collective_rows x
    LEFT JOIN kernel_classes c ON c.trace_id = x.trace_id AND c.name = x.name
    JOIN trace_files f ON f.trace_id = x.trace_id
    WHERE x.runs_on = 'cpu' OR c.kernel_class = 'communication'
), calls AS (
    SELECT j.job, p.*, coalesce(j.job, p.trace) AS job_key,
           CASE WHEN p.seq IS NULL THEN 0 ELSE 1 END AS by_seq,
           CASE WHEN p.seq IS NOT NULL THEN p.seq ELSE (coalesce(p.step, -1) + 1) * 1000000 + p.place END AS call_key
    FROM placed p
    LEFT JOIN _jobs j ON j.trace_id = p.trace_id
), per_rank AS (
    SELECT job_key, runs_on, group_key, by_seq, call_key, trace, min(collective) AS collective,
           min(base_ns + ts_ns) AS start_ns, max(base_ns + ts_ns + dur_ns) AS end_ns
    FROM calls GROUP BY job_key, runs_on, group_key, by_seq, call_key, trace
), per_call AS (
    SELECT job_key, runs_on, group_key, by_seq, call_key, count(*) AS ranks, min(start_ns) AS first_start_ns,
           min(end_ns) AS first_end_ns, min(end_ns - start_ns) AS shortest_ns,
           max(start_ns) AS last_start_ns,
           CASE WHEN by_seq = 1 THEN 1
                WHEN count(DISTINCT collective) = 1 AND count(collective) = count(*)
                     AND max(start_ns) <= min(end_ns) + 100000
                     AND (runs_on = 'cpu' OR max(end_ns) - min(end_ns) <= 100000 + max(end_ns - start_ns) / 10) THEN 1
                ELSE 0 END AS lines_up
    FROM per_rank GROUP BY job_key, runs_on, group_key, by_seq, call_key
)
SELECT k.trace, k.rank, k.job, k.step, k.name, k.runs_on, k.collective, k.collective_name, k.process_group,
       k.process_group_desc, k.process_group_ranks, k.group_size, k.seq, k.call, k.in_nelems, k.out_nelems,
       k.dtype, k.in_bytes, k.out_bytes, k.src_rank, k.dst_rank, k.ts_ns / 1000.0 AS ts_us,
       k.dur_ns / 1000.0 AS dur_us, k.device, k.stream, k.correlation, k.cpu_op_id,
       k.cpu_ts_ns / 1000.0 AS cpu_ts_us, k.cpu_dur_ns / 1000.0 AS cpu_dur_us,
       CASE WHEN c.lines_up = 1 THEN c.ranks ELSE 1 END AS ranks_matched,
       CASE WHEN c.ranks < 2 OR c.lines_up = 0 THEN NULL WHEN k.by_seq = 1 THEN 'seq' ELSE 'order' END AS matched_by,
       k.call_key AS match_key,
       CASE WHEN c.ranks < 2 OR c.lines_up = 0 THEN NULL
            WHEN k.base_ns + k.ts_ns <> r.start_ns THEN 0.0
            WHEN k.runs_on = 'cpu' THEN least(greatest(c.last_start_ns - r.start_ns, 0), r.end_ns - r.start_ns) / 1000.0
            ELSE (r.end_ns - r.start_ns - c.shortest_ns) / 1000.0 END AS wait_us,
       CASE WHEN c.ranks > 1 AND c.lines_up = 1 THEN (r.start_ns - c.first_start_ns) / 1000.0 END AS start_lag_us,
       CASE WHEN c.ranks > 1 AND c.lines_up = 1 THEN (r.end_ns - c.first_end_ns) / 1000.0 END AS end_lag_us
FROM calls k
JOIN per_rank r ON r.job_key = k.job_key AND r.runs_on = k.runs_on AND r.group_key = k.group_key
     AND r.by_seq = k.by_seq AND r.call_key = k.call_key AND r.trace = k.trace
JOIN per_call c ON c.job_key = k.job_key AND c.runs_on = k.runs_on AND c.group_key = k.group_key
     AND c.by_seq = k.by_seq AND c.call_key = k.call_key;

-- Each trace's kernels merged into islands per device, communication apart from the rest
-- (compute): an island is a run of kernels that overlap or touch, so concurrent streams count
-- once. step: the step of the island's first kernel. comm_overlap and rank_steps rest on it.
CREATE OR REPLACE VIEW _kernel_islands AS
WITH work AS (
    SELECT k.trace_id, coalesce(k.device, -1) AS device, k.step, k.ts_ns AS s,
           k.ts_ns + greatest(k.dur_ns, 0) AS e,
           CASE WHEN c.kernel_class = 'communication' THEN 'comm' ELSE 'compute' END AS kind
    FROM kernel_rows k
    LEFT JOIN kernel_classes c ON c.trace_id = k.trace_id AND c.name = k.name
    WHERE k.ts_ns IS NOT NULL
), reach AS (
    SELECT *, max(e) OVER (PARTITION BY trace_id, device, kind ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_ns
    FROM work
), numbered AS (
    SELECT *, sum(CASE WHEN reach_ns IS NULL OR s > reach_ns THEN 1 ELSE 0 END)
                  OVER (PARTITION BY trace_id, device, kind ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island,
           row_number() OVER (PARTITION BY trace_id, device, kind ORDER BY s, e, step) AS nth
    FROM reach
), firsts AS (
    SELECT trace_id, device, kind, island, step,
           row_number() OVER (PARTITION BY trace_id, device, kind, island ORDER BY nth) AS place
    FROM numbered
)
SELECT n.trace_id, n.device, n.kind, n.island, f.step, min(n.s) AS s, max(n.e) AS e, count(*) AS kernels
FROM numbered n
JOIN firsts f ON f.trace_id = n.trace_id AND f.device = n.device AND f.kind = n.kind AND f.island = n.island
     AND f.place = 1
GROUP BY n.trace_id, n.device, n.kind, n.island, f.step;

-- Per trace and step: the time its collective kernels ran (their union), and how much of it
-- compute kernels ran too, on another stream of the same device (the intersection of the two
-- unions: no time counts twice). An island of collectives belongs to the step of its first kernel.
CREATE OR REPLACE VIEW _comm_overlap AS
WITH comm AS (
    SELECT * FROM _kernel_islands WHERE kind = 'comm'
), overlapped AS (
    SELECT m.trace_id, m.device, m.island, sum(least(m.e, p.e) - greatest(m.s, p.s)) AS overlap_ns
    FROM comm m
    JOIN _kernel_islands p ON p.trace_id = m.trace_id AND p.device = m.device AND p.kind = 'compute'
         AND p.s < m.e AND p.e > m.s
    GROUP BY m.trace_id, m.device, m.island
)
SELECT f.trace, f.rank, j.job, m.step, sum(m.kernels) AS kernels, sum(m.e - m.s) / 1000.0 AS comm_us,
       sum(coalesce(o.overlap_ns, 0)) / 1000.0 AS overlap_us
FROM comm m
JOIN trace_files f ON f.trace_id = m.trace_id
LEFT JOIN _jobs j ON j.trace_id = m.trace_id
LEFT JOIN overlapped o ON o.trace_id = m.trace_id AND o.device = m.device AND o.island = m.island
GROUP BY f.trace, f.rank, j.job, m.step;

-- Both kinds of transfer with their causes; memcpy and memset below are its two halves.
CREATE OR REPLACE VIEW _transfers AS
SELECT x.op, t.trace, x.name, x.kind, x.bytes, x.ts_ns / 1000.0 AS ts_us, x.dur_ns / 1000.0 AS dur_us,
       x.device, x.stream, x.correlation, x.cpu_op_id, x.cpu_op, x.cpu_op_path, x.step,
       x.source_file, x.source_line, x.source_function
FROM transfer_rows x JOIN trace_files t USING (trace_id);

-- @view memcpy: one row per GPU memory copy.
--   trace: trace name
--   name: e.g. 'Memcpy DtoD (Device -> Device)'
--   kind: DtoD, HtoD, DtoH, PtoP, HtoH, ... (from the name)
--   bytes: bytes copied (NULL when the profiler did not record it, e.g. ROCm)
--   ts_us, dur_us: GPU span in microseconds
--   device, stream: GPU index and stream
--   correlation: id of the runtime call that issued it
--   cpu_op_id, cpu_op: innermost CPU op that caused it; cpu_op_path: its chain of ops
--   step: enclosing ProfilerStep#N
--   source_file, source_line, source_function: the source frame of its cpu_op (see cpu_ops), e.g.
--          'model.py', 42, 'forward'; NULL without a stack or a launching op
CREATE OR REPLACE VIEW memcpy AS
SELECT * EXCLUDE (op) FROM _transfers WHERE op = 'memcpy';

-- @view memset: one row per GPU memset, with the columns of memcpy (kind is e.g. 'Device').
CREATE OR REPLACE VIEW memset AS
SELECT * EXCLUDE (op) FROM _transfers WHERE op = 'memset';

-- @view kernel_rules (a table): the classification rules, in the order they are tried (first match wins).
--   rule_order: position; pattern: case-insensitive regular expression searched in the name;
--   kernel_class, math_unit: what a match means; gemm_class: math_unit when kernel_class is gemm;
--   why: the reason for the rule

-- @view steady_steps: the steps that count as steady. A step the profiler cut short is left out: of
-- two steps or more, a first or last step that owns no GPU work in a trace that has some, or whose
-- CPU span is under a quarter of the steps' median (a loop that ended while the profiler still had a
-- step to record). Of the steps left, the first is left out too when two or more remain: the first
-- call pays for cuDNN plans, torch.compile and allocator warm-up.
--   trace: trace name
--   step: N of ProfilerStep#N
--   ts_us, dur_us: the step's CPU span
CREATE OR REPLACE VIEW steady_steps AS
-- From the tables, each read once, with window aggregates: on Spark the same rule written over the
-- steps and gpu_busy views, each read twice, doubled the time of summary and every rule.
WITH busy AS (
    SELECT trace_id, step, count(*) OVER (PARTITION BY trace_id) AS busy_rows
    FROM gpu_busy_rows GROUP BY trace_id, step
), stepped AS (
    SELECT s.trace_id, s.step, s.ts_ns, s.end_ns, b.step IS NOT NULL AS owns_gpu,
           max(b.busy_rows) OVER (PARTITION BY s.trace_id) AS busy_rows,
           min(s.step) OVER (PARTITION BY s.trace_id) AS first_step,
           max(s.step) OVER (PARTITION BY s.trace_id) AS last_step,
           count(*) OVER (PARTITION BY s.trace_id) AS n,
           median(s.end_ns - s.ts_ns) OVER (PARTITION BY s.trace_id) AS median_ns
    FROM step_rows s LEFT JOIN busy b ON b.trace_id = s.trace_id AND b.step = s.step
), complete AS (
    SELECT trace_id, step, ts_ns, end_ns, min(step) OVER (PARTITION BY trace_id) AS first_kept,
           count(*) OVER (PARTITION BY trace_id) AS kept
    FROM stepped
    WHERE NOT (n > 1 AND (step = first_step OR step = last_step)
               AND (end_ns - ts_ns < 0.25 * median_ns OR (busy_rows IS NOT NULL AND NOT owns_gpu)))
)
SELECT t.trace, c.step, c.ts_ns / 1000.0 AS ts_us, (c.end_ns - c.ts_ns) / 1000.0 AS dur_us
FROM complete c JOIN trace_files t ON t.trace_id = c.trace_id
WHERE c.kept = 1 OR c.step > c.first_kept;

-- @view steady_window: the work a per-step figure averages over: each trace's steady steps, or, for
-- a trace without ProfilerStep#N, the whole trace as one step (step NULL). Join on
-- `w.trace = x.trace AND w.step IS NOT DISTINCT FROM x.step` to keep a row's steady work only.
--   trace: trace name
--   step: N of a steady ProfilerStep#N; NULL for the one window of a trace without steps
--   steps: how many steady steps the trace has (1 without steps): the divisor of per-step figures
CREATE OR REPLACE VIEW steady_window AS
WITH windows AS (
    SELECT trace, step FROM steady_steps
    UNION ALL
    SELECT trace, NULL FROM traces WHERE trace NOT IN (SELECT trace FROM steps)
)
SELECT trace, step, count(*) OVER (PARTITION BY trace) AS steps FROM windows;

-- @view step_totals: per-step figures of each trace over its steady window (see steady_window).
--   trace: trace name
--   steps: steady steps averaged over (1 for a trace without steps)
--   gpu_us_per_step: GPU busy time per step (view gpu_busy, all devices); NULL without GPU events
--   cpu_us_per_step: the ProfilerStep#N span per step; NULL for a trace without steps
--   kernels_per_step: kernel launches per step
CREATE OR REPLACE VIEW step_totals AS
-- Joins of per-trace sums, not scalar subqueries: Spark runs no correlated subquery beside an aggregate.
-- Times summed in whole nanoseconds, exact in any order: a database, a lake and Spark give the same.
WITH windows AS (
    SELECT trace, any_value(steps) AS steps FROM steady_window GROUP BY trace
), busy AS (
    SELECT b.trace, sum(round(b.busy_us * 1e3)) / 1e3 AS busy_us, sum(b.kernels) AS kernels
    FROM gpu_busy b JOIN steady_window v ON v.trace = b.trace AND v.step IS NOT DISTINCT FROM b.step
    GROUP BY b.trace
), cpu AS (
    SELECT trace, avg(round(dur_us * 1e3)) / 1e3 AS cpu_us FROM steady_steps GROUP BY trace
)
SELECT w.trace, w.steps, b.busy_us / w.steps AS gpu_us_per_step, c.cpu_us AS cpu_us_per_step,
       b.kernels / w.steps AS kernels_per_step
FROM windows w LEFT JOIN busy b ON b.trace = w.trace LEFT JOIN cpu c ON c.trace = w.trace;

-- @view cudnn_attention_calls: each call into cuDNN attention on the CPU (the outermost op whose name
-- mentions cudnn and attention), numbered per trace in time order. Its first call builds the plan.
--   trace: trace name
--   call: 1 for the first call, 2, ...
--   name: the op, e.g. aten::_scaled_dot_product_cudnn_attention
--   ts_us, dur_us: CPU span of the call in microseconds
--   step: enclosing ProfilerStep#N
CREATE OR REPLACE VIEW cudnn_attention_calls AS
SELECT o.trace, row_number() OVER (PARTITION BY o.trace ORDER BY o.ts_us, o.op_id) AS call,
       o.name, o.ts_us, o.dur_us, o.step
FROM cpu_ops o
LEFT JOIN cpu_ops p ON p.trace = o.trace AND p.op_id = o.parent_id
WHERE o.name ILIKE '%cudnn%attention%'
  AND (p.name IS NULL OR NOT (p.name ILIKE '%cudnn%attention%'));

-- @view cudnn_plans: a row per trace that calls cuDNN attention: its first call against the others.
--   trace: trace name; op: the cuDNN attention op; calls: its calls in the trace
--   first_call_ms: CPU time of the first call; steady_call_ms: median CPU time of the others
--   plan_ms: first_call_ms - steady_call_ms, the cost of building the plan; NULL when the first call
--            in the trace costs less than twice a steady one: it is not the process's first (a
--            profiler schedule's window opened later) and found its plan built, so the trace does
--            not hold the plan's cost (a difference of noise, even below 0, is no plan time)
--   first_call_step: step of the first call
CREATE OR REPLACE VIEW cudnn_plans AS
WITH calls AS (
    SELECT trace, any_value(name) AS op, count(*) AS calls,
           max(dur_us) FILTER (WHERE call = 1) AS first_us, median(dur_us) FILTER (WHERE call > 1) AS steady_us,
           max(step) FILTER (WHERE call = 1) AS first_call_step
    FROM cudnn_attention_calls GROUP BY trace
)
SELECT trace, op, calls, first_us / 1000.0 AS first_call_ms, steady_us / 1000.0 AS steady_call_ms,
       CASE WHEN first_us >= 2 * steady_us THEN (first_us - steady_us) / 1000.0 END AS plan_ms, first_call_step
FROM calls;

-- @view gemm_math: each GEMM kernel whose FLOPs the trace lets tracekit count (see kernels.flops),
-- with what the device's Tensor Cores could do with it: the roofline, the slower of computing
-- its FLOPs at the dense peak and moving its bytes at the memory's bandwidth.
--   trace, step, name: the kernel; cpu_op_id, cpu_op, cpu_op_path: its op (aten::mm, bmm, ...)
--   math_unit: tensor_core or simt; gemm_us: its GPU time, microseconds
--   flops, bytes: its share of its op's floating-point operations, and of the bytes its inputs
--                 and output take (a split-K GEMM's kernels share them by time)
--   dtype: its first input's dtype (float, c10::BFloat16, ...)
--   achieved_tflops, tensor_core_tflops, pct_of_peak: as in kernels (peak_tflops)
--   roofline_us: max(flops at that peak, bytes at the device's memory bandwidth), microseconds:
--                the least time Tensor Cores could take (kernels.roofline_us, the same model);
--                NULL for a GPU or dtype tracekit has no figures for
CREATE OR REPLACE VIEW gemm_math AS
SELECT trace, step, name, cpu_op_id, cpu_op, cpu_op_path, math_unit, dur_us AS gemm_us, flops, bytes,
       flops_dtype AS dtype, achieved_tflops, peak_tflops AS tensor_core_tflops, roofline_us, pct_of_peak
FROM kernels
WHERE flops IS NOT NULL AND kernel_class = 'gemm' AND work_family IN ('gemm', 'convolution', 'attention');

-- @view findings: what the finding rules (queries/findings/*.sql) see, with their default
-- thresholds (made by tracekit from the rule files; `tracekit findings` runs them with yours).
--   trace: trace name; rule: the rule's id (hidden_copy, simt_gemm, ...)
--   severity: high, medium, low or info
--   title, detail: the finding in words, computed from the trace
--   fix: what to change
--   whatif: the fix as the replay takes it (`tracekit whatif TRACE --apply FIX`); NULL: no modelled fix
--   estimate_us_per_step: the rule's own figure from its slice of the step, microseconds (the
--                         copies' GPU time, the idle gaps, ...; NULL: none; each rule's header
--                         says how); `tracekit findings` adds saving_us_per_step, the replay's
--   evidence: JSON list of the events it rests on (source, trace, name, ts_ns, dur_ns and a key
--             back to kernels, memcpy, cpu_ops or steps)

-- @view gpu_specs (a table): what tracekit knows of each GPU's peaks, one row per GPU with its source.
--   name_pattern: regular expression matched against traces.device_name (the longest match wins)
--   tf32_tflops, bf16_tflops, fp16_tflops: dense Tensor Core peaks; memory_tb_s: memory bandwidth

-- @view library_modules (a table): the top-level Python modules whose frames are not the
-- user's code (torch and its compiler's packages, the standard library), with the source of each;
-- see cpu_ops.source_file.

-- @view gpu_arch_limits (a table): the per-SM limits of each architecture (CUDA's technical
-- specifications per compute capability), with its source; see device_limits.
-- The critical path of each step: what its time waited on, walked back from where the step
-- completed. GPU work (kernels, copies, fills) waits for the item before it on its stream or for
-- its launch call; a thread of the CPU runs its calls one after another, and waits for the GPU
-- in a call that synchronises (cudaDeviceSynchronize, cudaStreamSynchronize, a blocking copy).

-- A collective of a backend that runs it on a CPU thread (gloo, MPI: collectives.runs_on = 'cpu')
-- as the walk and the replay see it: work on a lane of its own (its worker thread: device -2,
-- stream numbered per trace; correlation -op_id, as no runtime call launched it), launched by the
-- c10d op its caller's thread was in when the range started, or before (c10d::allreduce_: the
-- enqueue), and waited for by that thread where it sat idle for it: a stretch of at least 50 µs in
-- which the thread ran no op (only ops around it open: DDP's wait for its buckets is no op), which
-- began after the enqueue and before the range ended, and ended after the range started and no
-- more than 5 ms before it ended; the longest such stretch, each stretch waiting for one collective
-- (the one ending nearest its end). Gloo completes a call's future, which wakes the thread waiting
-- on it, before it ends the call's range (ProcessGroupGloo::AsyncWork::finishWorkGloo, then
-- Work::finish), so on a busy host the range ends up to a time slice after the thread resumed
-- (3.4 and 3.7 ms in tests/data/cpu/gloo_job): end_ns is then the thread's resumption. A
-- collective no thread sat waiting for (it ran while its caller computed) has no resumed_ns.
CREATE OR REPLACE VIEW _cp_cpu_collectives AS
WITH ranges AS MATERIALIZED (
    SELECT x.trace_id, x.cpu_op_id AS op_id, x.name, x.ts_ns, x.ts_ns + greatest(x.dur_ns, 0) AS range_end_ns, x.step,
           o.pid, o.tid, dense_rank() OVER (PARTITION BY x.trace_id ORDER BY o.pid, o.tid) - 1 AS stream
    FROM collective_rows x JOIN cpu_op_rows o ON o.trace_id = x.trace_id AND o.op_id = x.cpu_op_id
    WHERE x.runs_on = 'cpu' AND x.ts_ns IS NOT NULL
), enqueued AS MATERIALIZED (
    SELECT r.*, e.tid AS launch_tid, e.ts_ns AS launch_ns, e.ts_ns + e.dur_ns AS launch_end_ns, e.op_id AS launch_op_id,
           e.name AS launch_name, e.op_path AS launch_op_path
    FROM ranges r
    ASOF JOIN (SELECT trace_id, pid, tid, op_id, name, op_path, ts_ns, dur_ns FROM cpu_op_rows
               WHERE name LIKE 'c10d::%' AND trace_id IN (SELECT trace_id FROM ranges)) e
         ON e.trace_id = r.trace_id AND e.pid = r.pid AND e.ts_ns <= r.ts_ns
), callers AS (
    SELECT DISTINCT trace_id, pid, launch_tid AS tid FROM enqueued
), events AS (
    SELECT o.trace_id, o.pid, o.tid, o.ts_ns AS t, 1 AS opens, o.op_id FROM cpu_op_rows o JOIN callers USING (trace_id, pid, tid)
    UNION ALL
    SELECT o.trace_id, o.pid, o.tid, o.ts_ns + o.dur_ns, 0, o.op_id FROM cpu_op_rows o JOIN callers USING (trace_id, pid, tid)
), idle AS (
    -- an op's start right after another's end: the thread ran no op in between
    SELECT trace_id, pid, tid, prev_t AS from_ns, t AS resumed_ns, op_id AS resumed_op_id
    FROM (SELECT *, lag(t) OVER w AS prev_t, lag(opens) OVER w AS prev_opens FROM events
          WINDOW w AS (PARTITION BY trace_id, pid, tid ORDER BY t, opens, op_id))
    WHERE opens = 1 AND prev_opens = 0 AND t - prev_t >= 50000
), candidates AS (
    SELECT e.trace_id, e.op_id, i.from_ns, i.resumed_ns, i.resumed_op_id
    FROM enqueued e
    JOIN idle i ON i.trace_id = e.trace_id AND i.pid = e.pid AND i.tid = e.launch_tid AND i.from_ns >= e.launch_end_ns
         AND i.from_ns < e.range_end_ns AND i.resumed_ns > e.ts_ns AND i.resumed_ns >= e.range_end_ns - 5000000
    QUALIFY row_number() OVER (PARTITION BY i.trace_id, i.pid, i.tid, i.resumed_ns
                               ORDER BY abs(i.resumed_ns - e.range_end_ns), e.op_id) = 1
), waits AS (
    SELECT * FROM candidates
    QUALIFY row_number() OVER (PARTITION BY trace_id, op_id ORDER BY resumed_ns - from_ns DESC, resumed_ns) = 1
)
SELECT e.trace_id, e.op_id, e.name, e.ts_ns, e.range_end_ns, least(e.range_end_ns, coalesce(w.resumed_ns, e.range_end_ns)) AS end_ns,
       e.step, e.pid, e.tid, -2 AS device, e.stream, -e.op_id AS correlation, e.launch_tid, e.launch_ns, e.launch_end_ns,
       e.launch_op_id, e.launch_name, e.launch_op_path, w.from_ns AS wait_from_ns, w.resumed_ns, w.resumed_op_id
FROM enqueued e LEFT JOIN waits w ON w.trace_id = e.trace_id AND w.op_id = e.op_id;

-- GPU work as the walk sees it, each item with its launch call and what it waited for: 'launch'
-- where its launch call ended after the item before it on the stream had ended (the stream was
-- idle, waiting for the CPU), else 'stream' (queued behind that item); NULL: the first item on
-- its stream, launched outside the trace. run: items queued behind each other, numbered per
-- stream; run_first: the place of the run's first item. A CPU backend's collective is an item
-- too, of kind comm, on its worker thread (tid; device -2), launched by its enqueue
-- (_cp_cpu_collectives).
CREATE OR REPLACE VIEW _cp_items AS
WITH items AS (
    SELECT k.trace_id, k.ts_ns, k.ts_ns + greatest(k.dur_ns, 0) AS end_ns, coalesce(k.device, -1) AS device,
           coalesce(k.stream, -1) AS stream, k.correlation, k.step, k.name,
           CASE WHEN c.kernel_class = 'communication' THEN 'comm' ELSE 'kernel' END AS kind, k.cpu_op_path AS op_path,
           CASE WHEN c.kernel_class = 'gemm' THEN c.math_unit END AS math_unit,
           -- the work of matrix math only: the replay runs it at its Tensor Core roofline
           CASE WHEN k.work_family IN ('gemm', 'convolution', 'attention') THEN k.flops END AS flops, k.flops_dtype,
           CASE WHEN k.work_family IN ('gemm', 'convolution', 'attention') THEN k.bytes END AS bytes,
           CAST(NULL AS VARCHAR) AS copy_kind, CAST(NULL AS VARCHAR) AS tid
    FROM kernel_rows k LEFT JOIN kernel_classes c ON c.trace_id = k.trace_id AND c.name = k.name
    WHERE k.ts_ns IS NOT NULL
    UNION ALL
    SELECT trace_id, ts_ns, ts_ns + greatest(dur_ns, 0), coalesce(device, -1), coalesce(stream, -1), correlation,
           step, name, op, cpu_op_path, NULL, NULL, NULL, bytes, kind, NULL
    FROM transfer_rows WHERE ts_ns IS NOT NULL
), launched AS (
    SELECT i.trace_id, i.ts_ns, i.end_ns, i.device, i.stream, i.correlation, i.step, i.name, i.kind, i.op_path,
           i.math_unit, i.flops, i.flops_dtype, i.bytes, i.copy_kind, i.tid,
           r.pid AS launch_pid, r.tid AS launch_tid, r.ts_ns AS launch_ns, r.ts_ns + r.dur_ns AS launch_end_ns,
           r.cpu_op_id AS launch_op_id, r.name AS launch_name,
           lag(i.end_ns) OVER (PARTITION BY i.trace_id, i.device, i.stream ORDER BY i.ts_ns, i.end_ns, i.correlation) AS prev_end_ns,
           row_number() OVER (PARTITION BY i.trace_id, i.device, i.stream ORDER BY i.ts_ns, i.end_ns, i.correlation) AS place
    FROM items i
    LEFT JOIN runtime_rows r ON r.trace_id = i.trace_id AND r.correlation = i.correlation
    UNION ALL
    -- a CPU collective on its worker thread, enqueued by its c10d op (_cp_cpu_collectives)
    SELECT trace_id, ts_ns, end_ns, device, stream, correlation, step, name, 'comm', launch_op_path, NULL, NULL, NULL,
           NULL, NULL, tid, pid, launch_tid, launch_ns, launch_end_ns, launch_op_id, launch_name,
           lag(end_ns) OVER (PARTITION BY trace_id, device, stream ORDER BY ts_ns, end_ns, correlation),
           row_number() OVER (PARTITION BY trace_id, device, stream ORDER BY ts_ns, end_ns, correlation)
    FROM _cp_cpu_collectives
), waited AS (
    SELECT *, CASE WHEN prev_end_ns IS NOT NULL AND (launch_end_ns IS NULL OR launch_end_ns <= prev_end_ns) THEN 'stream'
                   WHEN launch_ns IS NOT NULL THEN 'launch' END AS waited_for
    FROM launched
)
-- a run's first item is the latest at or before an item that was not queued: both in one pass
-- over the stream's order (a window of their own would sort every item, kernel names and all, again)
SELECT trace_id, ts_ns, end_ns, device, stream, correlation, step, name, kind, op_path, math_unit, flops, flops_dtype,
       bytes, copy_kind, tid, launch_pid, launch_tid, launch_ns, launch_end_ns, launch_op_id, launch_name, prev_end_ns,
       place, waited_for,
       sum(CASE WHEN waited_for = 'stream' THEN 0 ELSE 1 END)
           OVER (PARTITION BY trace_id, device, stream ORDER BY place ROWS UNBOUNDED PRECEDING) AS run,
       max(CASE WHEN waited_for = 'stream' THEN NULL ELSE place END)
           OVER (PARTITION BY trace_id, device, stream ORDER BY place ROWS UNBOUNDED PRECEDING) AS run_first
FROM waited;

-- The runtime calls that waited for the GPU: a sync, a blocking copy or fill, a free, which
-- returned within 50 µs of the end of an item that ended inside the call; the item: the last to
-- end. And a thread's idle stretch in which it waited for a CPU collective. (An asynchronous copy from pageable memory blocks too, on its own copy: see _cp_segments.)
-- (The last item to end by the call's end: an ASOF join, not a range join of every call with
-- every item, which took 11 s on the 1 GB benchmark trace.)
CREATE OR REPLACE VIEW _cp_waits AS
SELECT r.trace_id, r.pid, r.tid, r.name, r.ts_ns, r.end_ns, r.cpu_op_id,
       i.device, i.stream, i.place, i.end_ns AS item_end_ns
FROM (SELECT trace_id, pid, tid, name, ts_ns, ts_ns + dur_ns AS end_ns, cpu_op_id FROM runtime_rows
      WHERE regexp_matches(lower(name), 'synchroni[sz]e|^(cuda|hip)(memcpy|memset)[23]?d?(_v2)?$|^(cuda|hip)?free')) r
ASOF JOIN (SELECT trace_id, end_ns, device, stream, place FROM _cp_items WHERE device <> -2) i
     ON i.trace_id = r.trace_id AND i.end_ns <= r.end_ns
WHERE i.end_ns > r.ts_ns AND r.end_ns - i.end_ns <= 50000
UNION ALL
-- a thread idle for a CPU collective it enqueued (_cp_cpu_collectives), as a call from its going
-- idle to its resuming
SELECT c.trace_id, c.pid, c.launch_tid, concat('wait for ', c.name), c.wait_from_ns, c.resumed_ns, c.resumed_op_id,
       i.device, i.stream, i.place, i.end_ns
FROM _cp_cpu_collectives c
JOIN _cp_items i ON i.trace_id = c.trace_id AND i.device = c.device AND i.stream = c.stream AND i.correlation = c.correlation
WHERE c.resumed_ns IS NOT NULL;

-- Each step's window, from the previous step's completion to its own: a step completes when its
-- CPU span and the GPU work it owns have both ended. pid, tid: the thread its span ran on;
-- cpu_ended_last: its CPU span ended after its GPU work (the walk then starts on that thread).
CREATE OR REPLACE VIEW _cp_steps AS
WITH owned AS (
    -- the thread that waited for a CPU collective completes its step, not the collective's range
    SELECT trace_id, step, max(end_ns) AS gpu_end_ns FROM _cp_items WHERE step IS NOT NULL AND device <> -2
    GROUP BY trace_id, step
), spans AS (
    SELECT s.trace_id, s.step, s.ts_ns, s.end_ns, o.pid, o.tid
    FROM step_rows s
    LEFT JOIN cpu_op_rows o ON o.trace_id = s.trace_id AND o.ts_ns = s.ts_ns AND o.depth = 0
    QUALIFY row_number() OVER (PARTITION BY s.trace_id, s.step ORDER BY o.dur_ns DESC, o.op_id) = 1
), done AS (
    SELECT p.trace_id, p.step, p.ts_ns, p.end_ns, p.pid, p.tid, o.gpu_end_ns,
           greatest(p.end_ns, coalesce(o.gpu_end_ns, p.end_ns)) AS done_ns
    FROM spans p LEFT JOIN owned o ON o.trace_id = p.trace_id AND o.step = p.step
)
SELECT trace_id, step, ts_ns, end_ns, pid, tid, gpu_end_ns, done_ns,
       least(coalesce(lag(done_ns) OVER (PARTITION BY trace_id ORDER BY ts_ns, step), ts_ns), done_ns) AS from_ns,
       NOT coalesce(gpu_end_ns > end_ns, false) AS cpu_ended_last
FROM done;

-- A CPU thread that waited for another: a call after a gap of at least 50 µs on its thread, where
-- another thread's call ended within the gap and that thread called nothing again before this one
-- started (the main thread in backward() waiting for autograd's thread, and autograd's thread
-- waiting for the main thread's forward). other_*: that thread and its call. The replay
-- (tracekit/replay/graph.py) reads its handoffs here too.
CREATE OR REPLACE VIEW _cp_handoffs AS
WITH calls AS MATERIALIZED (
    SELECT trace_id, pid, tid, name, ts_ns, ts_ns + dur_ns AS end_ns, cpu_op_id,
           lag(ts_ns + dur_ns) OVER lane AS prev_end_ns, lead(ts_ns) OVER lane AS next_ts_ns
    FROM runtime_rows WHERE ts_ns IS NOT NULL
    WINDOW lane AS (PARTITION BY trace_id, pid, tid ORDER BY ts_ns, dur_ns, correlation)
), waiting AS (
    SELECT c.trace_id, c.pid, c.tid, c.name, c.ts_ns, c.cpu_op_id, c.prev_end_ns, o.pid AS other_pid,
           o.tid AS other_tid
    FROM calls c
    JOIN (SELECT DISTINCT trace_id, pid, tid FROM calls) o
         ON o.trace_id = c.trace_id AND (o.pid <> c.pid OR o.tid <> c.tid)
    WHERE c.ts_ns - c.prev_end_ns >= 50000
), latest AS (
    SELECT w.*, e.name AS other_name, e.ts_ns AS other_ts_ns, e.end_ns AS other_end_ns, e.next_ts_ns AS other_next_ts_ns
    FROM waiting w
    ASOF JOIN calls e ON e.trace_id = w.trace_id AND e.pid = w.other_pid AND e.tid = w.other_tid AND e.end_ns <= w.ts_ns
)
SELECT trace_id, pid, tid, name, ts_ns, cpu_op_id, other_pid, other_tid, other_name, other_ts_ns, other_end_ns
FROM latest
WHERE other_end_ns > prev_end_ns AND coalesce(other_next_ts_ns >= ts_ns, true)
QUALIFY row_number() OVER (PARTITION BY trace_id, pid, tid, ts_ns ORDER BY other_end_ns DESC, other_pid, other_tid) = 1;

-- A stream waiting for another (cudaStreamWaitEvent, recorded by Kineto's CUDA sync events): the
-- wait's stream cannot run the work queued after the wait until the event's work is done: the last
-- item the thread launched before the wait on another stream (on wait_on_stream where Kineto could
-- say which; torch 2.11's often cannot). A row where it held that work back: the consumer (device,
-- stream, place) was queued, its stream idle, and the producer (on_*) ended in that idle. (Each
-- wait finds its producer by an ASOF join per stream its thread launched on, not a range join of
-- every wait with every item.) The replay reads its stream waits here too.
CREATE OR REPLACE VIEW _cp_stream_waits AS
WITH waits AS (
    SELECT r.trace_id, r.pid, r.tid, r.name, r.ts_ns AS wait_ns, r.cpu_op_id,
           TRY_CAST(e.args->>'stream' AS INTEGER) AS stream, TRY_CAST(e.args->>'device' AS INTEGER) AS device,
           coalesce(TRY_CAST(e.args->>'wait_on_stream' AS INTEGER), -1) AS wait_on_stream
    FROM event_rows e
    JOIN runtime_rows r ON r.trace_id = e.trace_id AND r.correlation = TRY_CAST(e.args->>'correlation' AS BIGINT)
    WHERE e.cat = 'cuda_sync' AND e.name = 'Stream Wait Event'
), launched AS MATERIALIZED (
    SELECT trace_id, launch_pid, launch_tid, launch_ns, device, stream, place, end_ns, ts_ns, prev_end_ns, waited_for
    FROM _cp_items WHERE launch_ns IS NOT NULL
), candidates AS (
    SELECT w.*, s.device AS on_device, s.stream AS on_stream
    FROM waits w
    JOIN (SELECT DISTINCT trace_id, launch_pid, launch_tid, device, stream FROM launched) s
         ON s.trace_id = w.trace_id AND s.launch_pid = w.pid AND s.launch_tid = w.tid
         AND s.device = coalesce(w.device, s.device) AND s.stream <> w.stream
         AND (w.wait_on_stream < 0 OR s.stream = w.wait_on_stream)
), producers AS (
    SELECT c.*, i.place AS on_place, i.end_ns AS on_end_ns
    FROM candidates c
    ASOF JOIN launched i ON i.trace_id = c.trace_id AND i.launch_pid = c.pid AND i.launch_tid = c.tid
         AND i.device = c.on_device AND i.stream = c.on_stream AND i.launch_ns < c.wait_ns
    QUALIFY row_number() OVER (PARTITION BY c.trace_id, c.pid, c.tid, c.wait_ns
                               ORDER BY i.launch_ns DESC, i.device DESC, i.stream DESC, i.place DESC) = 1
), consumers AS (
    SELECT p.*, i.device AS consumer_device, i.place, i.ts_ns, i.prev_end_ns, i.waited_for
    FROM producers p
    ASOF JOIN launched i ON i.trace_id = p.trace_id AND i.device = coalesce(p.device, p.on_device)
         AND i.stream = p.stream AND i.launch_ns > p.wait_ns
)
SELECT trace_id, consumer_device AS device, stream, place, on_device, on_stream, on_place, on_end_ns,
       name, cpu_op_id, pid, tid
FROM consumers
WHERE waited_for = 'stream' AND on_end_ns BETWEEN prev_end_ns AND ts_ns
QUALIFY row_number() OVER (PARTITION BY trace_id, device, stream, place ORDER BY on_end_ns DESC, on_stream, on_place) = 1;

-- Where the walk leaves a thread, back from a point on it (the launch of a run's first item, a
-- step's end, a call another thread waited for): the last mark at or before the point. A mark is a
-- call that waited for the GPU, at its return (lo_ns), and the walk goes on to the item it waited
-- for; or a call after a handoff, at its start, and the walk goes on to the other thread's call.
-- to_end_ns: the end of that item or call, where the walk goes on.
CREATE OR REPLACE VIEW _cp_links AS
WITH marks AS (
    SELECT trace_id, pid, tid, end_ns AS lo_ns, 'wait' AS via, name, cpu_op_id, item_end_ns AS to_end_ns,
           device AS to_device, stream AS to_stream, place AS to_place,
           CAST(NULL AS VARCHAR) AS to_pid, CAST(NULL AS VARCHAR) AS to_tid
    FROM _cp_waits
    UNION ALL
    SELECT trace_id, pid, tid, ts_ns, 'handoff', name, cpu_op_id, other_end_ns, NULL, NULL, NULL, other_pid, other_tid
    FROM _cp_handoffs
), points AS (
    SELECT trace_id, launch_pid AS pid, launch_tid AS tid, launch_ns AS t FROM _cp_items
    WHERE place = run_first AND waited_for = 'launch'
    UNION
    SELECT trace_id, pid, tid, end_ns FROM _cp_steps
    UNION
    SELECT trace_id, other_pid, other_tid, other_end_ns FROM _cp_handoffs
)
SELECT p.trace_id, p.pid, p.tid, p.t, m.via, m.lo_ns, m.to_end_ns, m.name, m.cpu_op_id, m.to_device, m.to_stream,
       m.to_place, m.to_pid, m.to_tid
FROM points p
ASOF JOIN marks m ON m.trace_id = p.trace_id AND m.pid = p.pid AND m.tid = p.tid AND m.lo_ns <= p.t;

-- The walk, node by node, back from where each step completed to where the step before it did. A
-- node is a GPU item (device, stream, place; pid '', tid '', t -1) or a point on a CPU thread
-- (pid, tid, t; device, stream, place -1). From an item: back over the items queued behind each
-- other on its stream to the first (first_place), then to that one's launch (a point on the
-- launching thread) or, where a stream wait held it back, to the other stream's item. From a point:
-- back along its thread to its last mark (_cp_links). Each node's connector is the segment between
-- it and the next node (lo_ns back to to_end_ns): the launch, a sync's return, a stream wait, a
-- thread's wake-up after a handoff; 'idle' before an item nothing launched in the trace.
CREATE OR REPLACE VIEW _cp_hops AS
WITH RECURSIVE item_firsts AS (
    SELECT i.trace_id, i.device, i.stream, i.place,
           CASE WHEN w.place >= i.run_first THEN w.place ELSE i.run_first END AS first_place
    FROM _cp_items i
    ASOF LEFT JOIN (SELECT trace_id, device, stream, place FROM _cp_stream_waits) w
         ON w.trace_id = i.trace_id AND w.device = i.device AND w.stream = i.stream AND w.place <= i.place
), edges AS MATERIALIZED (
    SELECT x.trace_id, x.device, x.stream, x.place, '' AS pid, '' AS tid, CAST(-1 AS BIGINT) AS t, f.place AS first_place,
           f.ts_ns AS lo_ns,
           CASE WHEN w.place IS NOT NULL THEN w.on_end_ns WHEN f.waited_for = 'launch' THEN f.launch_ns END AS to_end_ns,
           CASE WHEN w.place IS NOT NULL THEN w.on_device WHEN f.waited_for = 'launch' THEN -1 END AS to_device,
           CASE WHEN w.place IS NOT NULL THEN w.on_stream WHEN f.waited_for = 'launch' THEN -1 END AS to_stream,
           CASE WHEN w.place IS NOT NULL THEN w.on_place WHEN f.waited_for = 'launch' THEN -1 END AS to_place,
           CASE WHEN w.place IS NOT NULL THEN '' WHEN f.waited_for = 'launch' THEN f.launch_pid END AS to_pid,
           CASE WHEN w.place IS NOT NULL THEN '' WHEN f.waited_for = 'launch' THEN f.launch_tid END AS to_tid,
           CASE WHEN w.place IS NOT NULL THEN -1 WHEN f.waited_for = 'launch' THEN f.launch_ns END AS to_t,
           CASE WHEN w.place IS NULL AND f.waited_for = 'launch' THEN f.launch_op_id END AS to_op_id,
           CASE WHEN w.place IS NOT NULL THEN 'sync_wait' WHEN f.launch_ns IS NULL THEN 'idle' ELSE 'launch' END AS conn_kind,
           CASE WHEN w.place IS NOT NULL THEN w.name ELSE f.launch_name END AS conn_name,
           CASE WHEN w.place IS NOT NULL THEN w.cpu_op_id ELSE f.launch_op_id END AS conn_op_id,
           CASE WHEN w.place IS NULL THEN f.launch_tid END AS conn_tid,
           f.device AS conn_device, f.stream AS conn_stream,
           CASE WHEN w.place IS NULL THEN f.correlation END AS conn_correlation
    FROM item_firsts x
    JOIN _cp_items f ON f.trace_id = x.trace_id AND f.device = x.device AND f.stream = x.stream AND f.place = x.first_place
    LEFT JOIN _cp_stream_waits w ON w.trace_id = f.trace_id AND w.device = f.device AND w.stream = f.stream
         AND w.place = f.place
    UNION ALL
    SELECT trace_id, -1, -1, -1, pid, tid, t, NULL, lo_ns, to_end_ns,
           coalesce(to_device, -1), coalesce(to_stream, -1), coalesce(to_place, -1), coalesce(to_pid, ''),
           coalesce(to_tid, ''), CASE WHEN via = 'wait' THEN -1 ELSE to_end_ns END, NULL, 'sync_wait',
           CASE WHEN via = 'wait' THEN name ELSE 'handoff from thread ' || to_tid END, cpu_op_id, tid, NULL, NULL, NULL
    FROM _cp_links
), entry AS (
    -- where the step completed: its last GPU item, or the end of its CPU span
    SELECT trace_id, step, from_ns, device, stream, place, pid, tid, t, hi_op_id FROM (
        SELECT s.trace_id, s.step, s.from_ns, i.device, i.stream, i.place, '' AS pid, '' AS tid, CAST(-1 AS BIGINT) AS t,
               CAST(NULL AS BIGINT) AS hi_op_id,
               row_number() OVER (PARTITION BY s.trace_id, s.step ORDER BY i.device, i.stream, i.place) AS nth
        FROM _cp_steps s
        JOIN _cp_items i ON i.trace_id = s.trace_id AND i.step = s.step AND i.end_ns = s.gpu_end_ns
        WHERE NOT s.cpu_ended_last
    ) WHERE nth = 1
    UNION ALL
    SELECT trace_id, step, from_ns, -1, -1, -1, pid, tid, end_ns, NULL FROM _cp_steps WHERE cpu_ended_last
), walk AS (
    SELECT trace_id, step, from_ns, 1 AS hop, device, stream, place, pid, tid, t, hi_op_id FROM entry
    UNION ALL
    SELECT w.trace_id, w.step, w.from_ns, w.hop + 1, e.to_device, e.to_stream, e.to_place, e.to_pid, e.to_tid,
           e.to_t, e.to_op_id
    FROM walk w
    JOIN edges e ON e.trace_id = w.trace_id AND e.device = w.device AND e.stream = w.stream AND e.place = w.place
         AND e.pid = w.pid AND e.tid = w.tid AND e.t = w.t
    WHERE e.to_end_ns > w.from_ns AND w.hop < 100000
)
SELECT w.trace_id, w.step, w.from_ns, w.hop, w.device, w.stream, w.place, w.pid, w.tid, w.t, w.hi_op_id,
       e.first_place, e.lo_ns, e.to_end_ns, e.conn_kind, e.conn_name, e.conn_op_id, e.conn_tid, e.conn_device,
       e.conn_stream, e.conn_correlation
FROM walk w
LEFT JOIN edges e ON e.trace_id = w.trace_id AND e.device = w.device AND e.stream = w.stream AND e.place = w.place
     AND e.pid = w.pid AND e.tid = w.tid AND e.t = w.t;

-- The path's segments, in no order (critical_path orders them). The walk, the items and the
-- threads' stretches are each computed once (MATERIALIZED: each is read several times), and a call
-- or an item finds its stretch or node by an ASOF join (the stretches of a thread, and the nodes'
-- item ranges on a stream once cut at their step's start, do not overlap), not by a range join.
-- A thread's stretch runs from its last mark (or the step's start) to the point the walk reached.
CREATE OR REPLACE VIEW _cp_segments AS
WITH hops AS MATERIALIZED (
    SELECT * FROM _cp_hops
), item_hops AS MATERIALIZED (
    SELECT * FROM hops WHERE place > 0
), items AS MATERIALIZED (
    SELECT trace_id, device, stream, place, kind, name, ts_ns, end_ns, prev_end_ns, correlation, tid FROM _cp_items
), runs AS MATERIALIZED (
    SELECT trace_id, step, hop, pid, tid, CASE WHEN lo_ns > from_ns THEN lo_ns ELSE from_ns END AS lo_ns, t AS hi_ns,
           hi_op_id
    FROM hops WHERE place < 0 AND t > from_ns
), calls AS (
    -- each thread's runtime calls inside a stretch, and the CPU time before each
    SELECT c.trace_id, c.step, c.hop, c.tid, c.lo_ns, c.hi_ns, r.name, r.ts_ns, r.ts_ns + r.dur_ns AS end_ns,
           r.cpu_op_id, r.correlation,
           lag(r.ts_ns + r.dur_ns) OVER (PARTITION BY c.trace_id, c.step, c.hop ORDER BY r.ts_ns, r.dur_ns) AS prev_end_ns
    FROM runtime_rows r
    ASOF JOIN runs c ON c.trace_id = r.trace_id AND c.pid = r.pid AND c.tid = r.tid AND r.ts_ns + r.dur_ns > c.lo_ns
    WHERE r.ts_ns < c.hi_ns
), last_calls AS (
    SELECT trace_id, step, hop, max(end_ns) AS end_ns FROM calls GROUP BY trace_id, step, hop
), own_copies AS (
    -- an asynchronous copy from pageable memory returns when its copy is (nearly) done
    SELECT DISTINCT c.trace_id, c.correlation
    FROM calls c JOIN items i ON i.trace_id = c.trace_id AND i.correlation = c.correlation AND i.kind = 'memcpy'
    WHERE i.ts_ns < c.end_ns AND 2 * (i.end_ns - i.ts_ns) >= c.end_ns - c.ts_ns
), on_path AS (
    -- GPU items of each node's run: the node with the first last place at or after the item's
    SELECT h.trace_id, h.step, h.from_ns, h.first_place, i.*
    FROM items i
    ASOF JOIN item_hops h ON h.trace_id = i.trace_id AND h.device = i.device AND h.stream = i.stream AND h.place >= i.place
    WHERE i.place >= h.first_place AND i.end_ns > h.from_ns
)
-- GPU items of each node's run, and the idle time between them
SELECT trace_id, step, kind, name, greatest(ts_ns, from_ns) AS ts_ns, end_ns, device, stream, correlation,
       CAST(NULL AS BIGINT) AS cpu_op_id, tid
FROM on_path
UNION ALL
SELECT trace_id, step, 'idle', NULL, greatest(prev_end_ns, from_ns), ts_ns, device, stream, NULL, NULL, NULL
FROM on_path WHERE place > first_place AND ts_ns > prev_end_ns AND ts_ns > from_ns
UNION ALL
-- each node's connector to the next: a launch (from its call's start to its work's start), a
-- sync's return, a stream wait, a handoff's wake-up; idle before work nothing in the trace launched
SELECT trace_id, step, conn_kind, conn_name, greatest(coalesce(to_end_ns, from_ns), from_ns), lo_ns,
       conn_device, conn_stream, conn_correlation, conn_op_id, conn_tid
FROM hops WHERE lo_ns > from_ns
UNION ALL
-- a thread's calls: launches (of kernels, copies, fills), blocking copies, the rest CPU time
SELECT c.trace_id, c.step,
       CASE WHEN o.correlation IS NOT NULL THEN 'memcpy'
            WHEN regexp_matches(lower(c.name), 'launch|memcpy|memset|graphlaunch') THEN 'launch' ELSE 'cpu' END,
       c.name, greatest(c.ts_ns, c.lo_ns), least(c.end_ns, c.hi_ns), NULL, NULL, c.correlation, c.cpu_op_id, c.tid
FROM calls c LEFT JOIN own_copies o ON o.trace_id = c.trace_id AND o.correlation = c.correlation
UNION ALL
-- and the CPU time between them, named for the op that made the next call
SELECT c.trace_id, c.step, 'cpu', op.name, greatest(coalesce(c.prev_end_ns, c.lo_ns), c.lo_ns), c.ts_ns, NULL, NULL,
       NULL, c.cpu_op_id, c.tid
FROM calls c LEFT JOIN cpu_op_rows op ON op.trace_id = c.trace_id AND op.op_id = c.cpu_op_id
WHERE c.ts_ns > greatest(coalesce(c.prev_end_ns, c.lo_ns), c.lo_ns)
UNION ALL
SELECT r.trace_id, r.step, 'cpu', op.name, greatest(coalesce(l.end_ns, r.lo_ns), r.lo_ns), r.hi_ns, NULL, NULL, NULL,
       r.hi_op_id, r.tid
FROM runs r
LEFT JOIN last_calls l ON l.trace_id = r.trace_id AND l.step = r.step AND l.hop = r.hop
LEFT JOIN cpu_op_rows op ON op.trace_id = r.trace_id AND op.op_id = r.hi_op_id
WHERE r.hi_ns > greatest(coalesce(l.end_ns, r.lo_ns), r.lo_ns);

-- A collective's kernel waits on each rank for the last rank to arrive (view collectives.wait_us,
-- from the kernels' durations, as no clock is shared across hosts): that first stretch of the kernel
-- is the other rank's time, not the network's. Per kernel of a call matched across the job's
-- ranks (its first kernel on this rank, where it took several): the wait, the rank it waited for
-- (the last to arrive: the shortest kernel, ties to the later start, then the lower rank), and the
-- call's identity across ranks (call_key), which the replay links the ranks' kernels by. A CPU
-- backend's collective (gloo) likewise, as an item of _cp_cpu_collectives (device -2): its wait
-- from the durations too, its item's (the range, up to its caller's resuming) less the call's
-- shortest across the ranks (not
-- collectives.wait_us, which for a CPU range compares starts on the epoch's clock, which only the
-- ranks of one host share).
CREATE OR REPLACE VIEW _cp_rank_waits AS
WITH matched AS (
    SELECT c.* REPLACE (coalesce(x.device, c.device) AS device, coalesce(x.stream, c.stream) AS stream,
                        coalesce(x.correlation, c.correlation) AS correlation,
                        coalesce((x.end_ns - x.ts_ns) / 1000.0, c.dur_us) AS dur_us),
           f.trace_id,
           concat_ws('|', coalesce(c.job, c.trace), c.runs_on, coalesce(c.process_group, ''), c.matched_by,
                     CAST(c.match_key AS VARCHAR)) AS call_key
    FROM collectives c JOIN trace_files f ON f.trace = c.trace
    LEFT JOIN _cp_cpu_collectives x ON c.runs_on = 'cpu' AND x.trace_id = f.trace_id AND x.op_id = c.cpu_op_id
    WHERE c.ranks_matched > 1 AND c.wait_us IS NOT NULL AND (c.runs_on = 'gpu' OR x.op_id IS NOT NULL)
), timed AS (
    SELECT * REPLACE (CASE WHEN runs_on = 'cpu' THEN dur_us - min(dur_us) OVER (PARTITION BY call_key) ELSE wait_us END
                      AS wait_us)
    FROM matched
), kernels_of_call AS (
    SELECT *, count(*) OVER (PARTITION BY call_key, trace_id) AS kernels_here FROM timed
), last_in AS (
    SELECT call_key, arg_min(rank, struct_pack(w := wait_us, l := -coalesce(start_lag_us, 0), r := rank)) AS last_rank,
           count(DISTINCT trace_id) AS ranks
    FROM kernels_of_call WHERE kernels_here = 1
    GROUP BY call_key
)
SELECT k.trace_id, k.device, k.stream, k.correlation, CAST(round(k.ts_us * 1000) AS BIGINT) AS ts_ns,
       CAST(round(k.wait_us * 1000) AS BIGINT) AS wait_ns, CAST(round((k.dur_us - k.wait_us) * 1000) AS BIGINT) AS transfer_ns,
       l.last_rank, k.collective, k.call_key
FROM kernels_of_call k JOIN last_in l USING (call_key)
WHERE k.kernels_here = 1 AND l.ranks > 1;

-- The critical path's segments with a collective's wait for a later rank apart: a comm segment
-- over the start of a kernel that waited (_cp_rank_waits) is, for that stretch, kind rank_wait.
CREATE OR REPLACE VIEW _cp_path AS
WITH split AS (
    SELECT s.*, w.wait_ns, w.last_rank, w.collective AS waited_in,
           least(greatest(w.ts_ns + w.wait_ns, s.ts_ns), s.end_ns) AS waited_until
    FROM _cp_segments s
    LEFT JOIN _cp_rank_waits w ON s.kind = 'comm' AND w.trace_id = s.trace_id AND w.device = s.device
         AND w.stream = s.stream AND w.correlation = s.correlation AND w.wait_ns > 0
)
SELECT trace_id, step, ts_ns, end_ns, kind, name, device, stream, correlation, cpu_op_id, tid
FROM split WHERE waited_until IS NULL
UNION ALL
SELECT trace_id, step, ts_ns, waited_until, 'rank_wait', concat('waiting for rank ', last_rank, ' in ', waited_in),
       device, stream, correlation, cpu_op_id, tid
FROM split WHERE waited_until IS NOT NULL AND waited_until > ts_ns
UNION ALL
SELECT trace_id, step, waited_until, end_ns, kind, name, device, stream, correlation, cpu_op_id, tid
FROM split WHERE waited_until IS NOT NULL AND end_ns > waited_until;

-- @view critical_path: the critical path of each step: the work its time waited on, one segment
-- after another, walked back from where the step completed (its CPU span and the GPU work it owns
-- both ended) to where the step before it completed, so the segments tile the step's time
-- (step_bounds.step_us). GPU work waits for the item before it on its stream, for its launch where
-- the launch call ended after that item (the stream idle), or for another stream's work where a
-- stream wait held it (cudaStreamWaitEvent, in a trace with Kineto's CUDA sync events); a thread's
-- calls run one after another, a call that synchronises (cudaDeviceSynchronize,
-- cudaStreamSynchronize, a blocking copy or free) waits for the GPU item that ended last inside it,
-- within 50 µs of its return, and a thread that waited for another waits for that thread's call
-- (a call after a gap of at least 50 µs in which another thread's call ended and that thread called
-- nothing again before it, as the main thread in backward() and autograd's thread do).
--   trace, step: the trace and its step (steps view)
--   seq: the segment's place on the path, 1 first in time
--   kind: cpu (a thread's own time between calls, or a call that is not a launch), launch (a launch
--         call, and the time from it to its work's start; for a CPU backend's collective, its
--         c10d op's start to its range's), kernel, comm (a collective's kernel, its own transfer;
--         a CPU backend's (gloo) collective, its range on its worker thread, where its caller's
--         thread sat idle waiting for it), rank_wait (the start of a collective's kernel or CPU
--         range that waited for a later rank of the job, named 'waiting for rank R in
--         all_reduce': that rank's path holds why; only where the job's other ranks are loaded),
--         memcpy, memset (a copy or fill; a copy call from pageable memory that blocked on it),
--         sync_wait (a sync's return after the work it waited for; a stream's start after the other
--         stream's work it waited for; a thread's start after the other thread's call, named
--         'handoff from thread TID'; a thread's resuming after a CPU collective it sat idle
--         waiting on, named as 'wait for gloo:all_reduce'), idle (a stream waiting for nothing)
--   name: the kernel, copy, runtime call, or for cpu time the op that made the next call
--   ts_us, dur_us: the segment's span on the path
--   device, stream: where GPU work ran; correlation: its launch's (a call's own; a CPU
--         collective's: minus its range's op_id)
--   cpu_op_id: the op that made the call (cpu_ops.op_id)
--   tid: the CPU thread of a call, of CPU time, of a launch, of a thread's wait or of a CPU
--        collective's range (NULL for GPU work)
CREATE OR REPLACE VIEW critical_path AS
SELECT t.trace, s.step, row_number() OVER (PARTITION BY s.trace_id, s.step ORDER BY s.ts_ns, s.end_ns) AS seq,
       s.kind, s.name, s.ts_ns / 1000.0 AS ts_us, (s.end_ns - s.ts_ns) / 1000.0 AS dur_us,
       CASE WHEN s.device >= 0 THEN s.device END AS device, CASE WHEN s.device >= 0 AND s.stream >= 0 THEN s.stream END AS stream,
       s.correlation, s.cpu_op_id, s.tid
FROM _cp_path s JOIN trace_files t ON t.trace_id = s.trace_id
WHERE s.end_ns > s.ts_ns;

-- @view step_bounds: what bounds each step: its time, and its critical path's time by kind.
--   trace, step: the trace and its step
--   step_us: from the previous step's completion to its own (the first step: from its CPU span's
--            start), a step completing when its CPU span and the GPU work it owns have both ended:
--            in a loop where the GPU runs behind, the GPU's pace, not the CPU's span
--   cpu_us, launch_us, kernel_us, comm_us, rank_wait_us, memcpy_us, memset_us, sync_wait_us, idle_us:
--            the critical path's time of each kind (critical_path), which add up to step_us;
--            the GPU's kinds (kernel, comm, rank_wait, memcpy, memset) NULL in a trace that lost
--            its GPU events (launch calls, no GPU work: anomalies' 'launches but no GPU events')
--   bound: what most of the path is: cpu-bound (cpu), launch-bound (launch), gpu-bound (kernel),
--          copy-bound (memcpy, memset), comm-bound (comm), rank-bound (rank_wait: the step waited
--          for a later rank: see critical_path's names for which); NULL for a step with no time,
--          and in a trace that lost its GPU events (the path could not see what the GPU did)
--   bound_pct: that kind's share of step_us, percent
CREATE OR REPLACE VIEW step_bounds AS
WITH kinds AS (
    SELECT trace_id, step,
           sum(CASE WHEN kind = 'cpu' THEN end_ns - ts_ns ELSE 0 END) AS cpu_ns,
           sum(CASE WHEN kind = 'launch' THEN end_ns - ts_ns ELSE 0 END) AS launch_ns,
           sum(CASE WHEN kind = 'kernel' THEN end_ns - ts_ns ELSE 0 END) AS kernel_ns,
           sum(CASE WHEN kind = 'comm' THEN end_ns - ts_ns ELSE 0 END) AS comm_ns,
           sum(CASE WHEN kind = 'rank_wait' THEN end_ns - ts_ns ELSE 0 END) AS rank_wait_ns,
           sum(CASE WHEN kind = 'memcpy' THEN end_ns - ts_ns ELSE 0 END) AS memcpy_ns,
           sum(CASE WHEN kind = 'memset' THEN end_ns - ts_ns ELSE 0 END) AS memset_ns,
           sum(CASE WHEN kind = 'sync_wait' THEN end_ns - ts_ns ELSE 0 END) AS sync_wait_ns,
           sum(CASE WHEN kind = 'idle' THEN end_ns - ts_ns ELSE 0 END) AS idle_ns
    FROM _cp_path WHERE end_ns > ts_ns
    GROUP BY trace_id, step
), bounds AS (
    SELECT s.trace_id, s.step, s.done_ns - s.from_ns AS step_ns, coalesce(k.cpu_ns, 0) AS cpu_ns,
           coalesce(k.launch_ns, 0) AS launch_ns, coalesce(k.kernel_ns, 0) AS kernel_ns, coalesce(k.comm_ns, 0) AS comm_ns,
           coalesce(k.rank_wait_ns, 0) AS rank_wait_ns, coalesce(k.memcpy_ns, 0) AS memcpy_ns, coalesce(k.memset_ns, 0) AS memset_ns,
           coalesce(k.sync_wait_ns, 0) AS sync_wait_ns, coalesce(k.idle_ns, 0) AS idle_ns
    FROM _cp_steps s LEFT JOIN kinds k ON k.trace_id = s.trace_id AND k.step = s.step
), lost AS (
    -- traces with launch calls whose GPU work CUPTI did not record: what the GPU did is unknown
    SELECT trace_id FROM runtime_rows WHERE name ILIKE '%launch%'
    EXCEPT SELECT trace_id FROM kernel_rows
    EXCEPT SELECT trace_id FROM transfer_rows
), ranked AS (
    SELECT b.*, greatest(b.cpu_ns, b.launch_ns, b.kernel_ns, b.memcpy_ns + b.memset_ns, b.comm_ns, b.rank_wait_ns) AS top_ns,
           l.trace_id IS NOT NULL AS gpu_lost
    FROM bounds b LEFT JOIN lost l ON l.trace_id = b.trace_id
)
SELECT t.trace, r.step, r.step_ns / 1000.0 AS step_us, r.cpu_ns / 1000.0 AS cpu_us, r.launch_ns / 1000.0 AS launch_us,
       CASE WHEN NOT r.gpu_lost THEN r.kernel_ns / 1000.0 END AS kernel_us,
       CASE WHEN NOT r.gpu_lost THEN r.comm_ns / 1000.0 END AS comm_us,
       CASE WHEN NOT r.gpu_lost THEN r.rank_wait_ns / 1000.0 END AS rank_wait_us,
       CASE WHEN NOT r.gpu_lost THEN r.memcpy_ns / 1000.0 END AS memcpy_us,
       CASE WHEN NOT r.gpu_lost THEN r.memset_ns / 1000.0 END AS memset_us,
       r.sync_wait_ns / 1000.0 AS sync_wait_us, r.idle_ns / 1000.0 AS idle_us,
       CASE WHEN r.step_ns <= 0 OR r.top_ns <= 0 OR r.gpu_lost THEN NULL
            WHEN r.top_ns = r.kernel_ns THEN 'gpu-bound' WHEN r.top_ns = r.memcpy_ns + r.memset_ns THEN 'copy-bound'
            WHEN r.top_ns = r.comm_ns THEN 'comm-bound' WHEN r.top_ns = r.rank_wait_ns THEN 'rank-bound' WHEN r.top_ns = r.launch_ns THEN 'launch-bound'
            ELSE 'cpu-bound' END AS bound,
       CASE WHEN r.step_ns > 0 AND r.top_ns > 0 AND NOT r.gpu_lost THEN round(100.0 * r.top_ns / r.step_ns, 1) END
           AS bound_pct
FROM ranked r JOIN trace_files t ON t.trace_id = r.trace_id;
