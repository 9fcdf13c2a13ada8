-- Physical tables: tracekit's storage. Users query the views in views.sql, which are the contract;
-- these tables may change between releases. Every row carries the trace_id of trace_files.

CREATE SEQUENCE IF NOT EXISTS trace_id_seq START 1;

CREATE TABLE IF NOT EXISTS schema_info (key VARCHAR PRIMARY KEY, value VARCHAR);

CREATE TABLE IF NOT EXISTS trace_files (
    trace_id INTEGER PRIMARY KEY,
    trace VARCHAR UNIQUE NOT NULL,
    path VARCHAR,
    sha256 VARCHAR NOT NULL,
    file_sha256 VARCHAR,
    file_bytes BIGINT,
    loaded_at TIMESTAMP,
    tracekit_version VARCHAR,
    header JSON,
    metadata JSON,
    device_name VARCHAR,
    compute_capability VARCHAR,
    events BIGINT,
    dropped_events BIGINT,
    dropped_reasons VARCHAR,
    vendor VARCHAR,
    gpu_arch VARCHAR,
    -- From the header's distributedInfo (NULL without it); default_group: the default process
    -- group's ranks ('0,1'), which a job's ranks agree on.
    rank INTEGER,
    world_size INTEGER,
    dist_backend VARCHAR,
    default_group VARCHAR,
    -- The header's baseTimeNanoseconds (NULL: not written), and the first start and last end of
    -- the trace's ops and GPU work on its own clock (ns): base + ts is the time since the epoch,
    -- which tells whether two rank traces ran at the same time.
    base_time_ns BIGINT,
    first_ns BIGINT,
    last_ns BIGINT
);

CREATE TABLE IF NOT EXISTS event_rows (
    trace_id INTEGER,
    cat VARCHAR,
    name VARCHAR,
    ph VARCHAR,
    ts_ns BIGINT,
    dur_ns BIGINT,
    pid VARCHAR,
    tid VARCHAR,
    id VARCHAR,
    bp VARCHAR,
    s VARCHAR,
    -- ZSTD, not DuckDB's default DICT_FSST: args are most of a trace's bytes, and FSST spent a
    -- fifth of a 1 GB load compressing them (1.1 of 5.4 CPU-s) into a file 2.7x as big.
    args JSON USING COMPRESSION zstd
);

CREATE TABLE IF NOT EXISTS step_rows (
    trace_id INTEGER, step INTEGER, ts_ns BIGINT, end_ns BIGINT, source VARCHAR
);

CREATE TABLE IF NOT EXISTS cpu_op_rows (
    trace_id INTEGER, op_id BIGINT, cat VARCHAR, name VARCHAR, ts_ns BIGINT, dur_ns BIGINT,
    pid VARCHAR, tid VARCHAR, external_id BIGINT, input_dims JSON, input_types JSON,
    depth INTEGER, parent_id BIGINT, parent VARCHAR, step INTEGER, op_path VARCHAR,
    -- The op's innermost frame of the user's code (with_stack traces; NULL otherwise).
    source_file VARCHAR, source_line INTEGER, source_function VARCHAR
);

-- One row per [memory] event of the allocator (torch.profiler's profile_memory), its args typed:
-- device_type is c10's DeviceType (0 CPU, 1 CUDA); device -1 for the CPU; bytes < 0 a free.
-- seq orders a device's events; freed_seq and freed_ns: an allocation's free (NULL: none seen).
CREATE TABLE IF NOT EXISTS memory_rows (
    trace_id INTEGER, event_id BIGINT, ts_ns BIGINT, pid VARCHAR, tid VARCHAR, device_type INTEGER,
    device INTEGER, addr BIGINT, bytes BIGINT, total_allocated BIGINT, total_reserved BIGINT, seq BIGINT,
    freed_seq BIGINT, freed_ns BIGINT, cpu_op_id BIGINT, step INTEGER
);

CREATE TABLE IF NOT EXISTS runtime_rows (
    trace_id INTEGER, cat VARCHAR, name VARCHAR, ts_ns BIGINT, dur_ns BIGINT, pid VARCHAR,
    tid VARCHAR, correlation BIGINT, external_id BIGINT, cpu_op_id BIGINT, step INTEGER
);

CREATE TABLE IF NOT EXISTS kernel_rows (
    trace_id INTEGER, name VARCHAR, ts_ns BIGINT, dur_ns BIGINT, device INTEGER, stream INTEGER,
    correlation BIGINT, external_id BIGINT, grid INTEGER[], block INTEGER[],
    registers_per_thread INTEGER, shared_memory_bytes BIGINT, blocks_per_sm DOUBLE,
    warps_per_sm DOUBLE, est_occupancy_pct DOUBLE, cpu_op_id BIGINT, step INTEGER,
    cpu_op VARCHAR, cpu_op_path VARCHAR,
    -- The kernel's share of its op's work (knowledge/op_work_models.csv): FLOPs executed, the
    -- least bytes moved, FLOPs of the model (attention's backward without its recompute), the
    -- dtype that picks the peak, and the formula's family; NULL where no formula or no shapes.
    flops DOUBLE, flops_dtype VARCHAR, bytes DOUBLE, model_flops DOUBLE, work_family VARCHAR,
    -- The launching op's innermost frame of the user's code (with_stack traces; NULL otherwise).
    source_file VARCHAR, source_line INTEGER, source_function VARCHAR,
    -- Where the work came from: 'op shapes', 'step gradients' (a tensor list sized by the step's
    -- AccumulateGrad shapes), 'identical kernel' (no launch in the trace); NULL with no work.
    -- work_missing: why flops or bytes are NULL (NULL when both are known).
    work_source VARCHAR, work_missing VARCHAR
);

CREATE TABLE IF NOT EXISTS transfer_rows (
    trace_id INTEGER, op VARCHAR, name VARCHAR, kind VARCHAR, bytes BIGINT, ts_ns BIGINT,
    dur_ns BIGINT, device INTEGER, stream INTEGER, correlation BIGINT, external_id BIGINT,
    cpu_op_id BIGINT, step INTEGER, cpu_op VARCHAR, cpu_op_path VARCHAR,
    source_file VARCHAR, source_line INTEGER, source_function VARCHAR
);

-- One row per kernel of a collective (a kernel whose name a communication rule knows, or whose
-- args carry Kineto's collective fields), with those fields from its args or, where the kernel
-- has none, from the record_param_comms op that launched it.
CREATE TABLE IF NOT EXISTS collective_rows (
    trace_id INTEGER, name VARCHAR, ts_ns BIGINT, dur_ns BIGINT, device INTEGER, stream INTEGER,
    correlation BIGINT, step INTEGER, collective VARCHAR, collective_name VARCHAR, process_group VARCHAR,
    process_group_desc VARCHAR, process_group_ranks VARCHAR, group_size INTEGER, seq BIGINT, call BIGINT,
    in_nelems BIGINT, out_nelems BIGINT, dtype VARCHAR, in_bytes BIGINT, out_bytes BIGINT,
    src_rank INTEGER, dst_rank INTEGER, cpu_op_id BIGINT, cpu_ts_ns BIGINT, cpu_dur_ns BIGINT,
    -- 'gpu': a kernel (NCCL, RCCL); 'cpu': a backend that runs the collective on a CPU thread
    -- (gloo, MPI), its span the collective's own time
    runs_on VARCHAR
);

CREATE TABLE IF NOT EXISTS gpu_busy_rows (
    trace_id INTEGER, step INTEGER, device INTEGER, busy_ns BIGINT, kernel_ns BIGINT, memcpy_ns BIGINT,
    memset_ns BIGINT, kernels BIGINT, first_ns BIGINT, last_ns BIGINT
);

-- One row per kernel name of each trace (per trace, so loads running side by side never write
-- the same row).
CREATE TABLE IF NOT EXISTS kernel_classes (
    name VARCHAR, kernel_class VARCHAR, gemm_class VARCHAR, math_unit VARCHAR, rule VARCHAR, trace_id INTEGER
);

CREATE TABLE IF NOT EXISTS kernel_rules (
    rule_order INTEGER PRIMARY KEY, pattern VARCHAR, kernel_class VARCHAR, gemm_class VARCHAR,
    math_unit VARCHAR, why VARCHAR
);
