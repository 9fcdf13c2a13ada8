"""The hta_* tables that `tracekit hta` stores (tracekit.outputs.hta_tables): their columns, the
column of HTA's frame each comes from, and a line on what each holds, for `tracekit schema` and
`tracekit tables`."""

# Each table: its columns (name, SQL type), and for HTA's frame the column each comes from.
# Times are microseconds, like every tracekit view.
TABLES = {
    # HTA's per-kernel table, a row per kernel name and type (COMPUTATION, COMMUNICATION, MEMORY:
    # memcpy and memset). calls is counted from HTA's own frame. HTA takes every event with a
    # stream for GPU work, so torch.compile's Triton launch cpu_op (args.stream) adds its CPU
    # span to the kernel of the same name (tests/test_hta.py measures it on flex).
    "hta_kernel_breakdown": [
        ("trace", "VARCHAR", None), ("rank", "INTEGER", "rank"),
        ("kernel_type", "VARCHAR", "kernel_type"), ("name", "VARCHAR", "name"),
        ("calls", "BIGINT", "calls"), ("sum_us", "DOUBLE", "sum (us)"),
        ("mean_us", "DOUBLE", "mean (us)"), ("max_us", "DOUBLE", "max (us)"),
        ("min_us", "DOUBLE", "min (us)"), ("stddev_us", "DOUBLE", "stddev")],
    "hta_kernel_type_breakdown": [  # busy time per kernel type: merged intervals, whole us
        ("trace", "VARCHAR", None), ("kernel_type", "VARCHAR", "kernel_type"),
        ("sum_us", "DOUBLE", "sum"), ("pct", "DOUBLE", "percentage")],
    "hta_temporal_breakdown": [
        ("trace", "VARCHAR", None), ("rank", "INTEGER", "rank"),
        ("idle_time_us", "DOUBLE", "idle_time(us)"), ("compute_time_us", "DOUBLE", "compute_time(us)"),
        ("non_compute_time_us", "DOUBLE", "non_compute_time(us)"),
        ("kernel_time_us", "DOUBLE", "kernel_time(us)"), ("idle_time_pct", "DOUBLE", "idle_time_pctg"),
        ("compute_time_pct", "DOUBLE", "compute_time_pctg"),
        ("non_compute_time_pct", "DOUBLE", "non_compute_time_pctg")],
    "hta_idle_time": [
        ("trace", "VARCHAR", None), ("rank", "INTEGER", "rank"), ("stream", "INTEGER", "stream"),
        ("idle_category", "VARCHAR", "idle_category"), ("idle_time_us", "DOUBLE", "idle_time"),
        ("idle_time_ratio", "DOUBLE", "idle_time_ratio")],
    "hta_launch_stats": [  # one row per launch (correlation id)
        ("trace", "VARCHAR", None), ("rank", "INTEGER", "rank"),
        ("correlation", "BIGINT", "correlation"), ("cpu_duration_us", "DOUBLE", "cpu_duration"),
        ("gpu_duration_us", "DOUBLE", "gpu_duration"), ("launch_delay_us", "DOUBLE", "launch_delay")],
    "hta_trace_diff": [  # trace is the control, test_trace the test; counts and us over all steps
        ("trace", "VARCHAR", None), ("test_trace", "VARCHAR", None), ("name", "VARCHAR", "name"),
        ("control_counts", "BIGINT", "control_counts"),
        ("control_total_duration_us", "DOUBLE", "control_total_duration"),
        ("test_counts", "BIGINT", "test_counts"),
        ("test_total_duration_us", "DOUBLE", "test_total_duration"),
        ("diff_counts", "BIGINT", "diff_counts"), ("diff_duration_us", "DOUBLE", "diff_duration"),
        ("counts_change_categories", "VARCHAR", "counts_change_categories")],
    # One row per trace and analysis of the latest run: status ok or failed, and why.
    # test_trace is set for trace_diff only.
    "hta_runs": [
        ("trace", "VARCHAR", None), ("test_trace", "VARCHAR", None), ("analysis", "VARCHAR", None),
        ("status", "VARCHAR", None), ("message", "VARCHAR", None), ("seconds", "DOUBLE", None),
        ("ran_at", "TIMESTAMP", None)],
}

# What each table holds, for `tracekit schema` and `tracekit tables`.
TABLE_DOCS = {
    "hta_kernel_breakdown": "HTA's kernel breakdown: a row per trace, kernel name and type (µs)",
    "hta_kernel_type_breakdown": "GPU busy time per trace and kernel type (COMPUTATION, COMMUNICATION, MEMORY)",
    "hta_temporal_breakdown": "per trace: GPU idle, compute and non-compute time, and their shares",
    "hta_idle_time": "per trace and stream: GPU idle time by category (host wait, kernel wait, other)",
    "hta_launch_stats": "per kernel launch: CPU time of the launch call, GPU time, launch delay",
    "hta_trace_diff": "tracekit hta diff: per op and kernel name, counts and time in trace and test_trace",
    "hta_runs": "each HTA analysis of the latest run: ok or failed, and why",
}
