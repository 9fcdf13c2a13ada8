"""Queries whose CTEs Spark runs a step at a time (tracekit/spark/ctes.py), timed on a lake in
CPU seconds: this process's and the JVM's together (the JVM does the work; other processes on a
shared machine change a query's wall time far more than its CPU time).

One Spark session over the lake (its start left out), then each query once to warm the JVM up
(not counted), then `--repeat` times each way, in turn: with nothing cached, with the views its
steps share cached (ctes.shared_views), with the lake's tables they share cached too; so every
way sees the same JVM and the same load from other processes; a row per query and way with its rows, the median wall seconds
and the median CPU seconds (Python + JVM).

    python benchmarks/spark_ctes.py LAKE [--repeat 3] [--query summary] [--rule gpu_idle] ...

Without --query or --rule: summary, rank_steps and the rules gpu_idle and per_call_setup.
"""

import argparse
import os
import statistics
import sys
import time


def jvm_cpu_s(pid):
    """The JVM's user + system CPU seconds so far (/proc/PID/stat: utime, stime in clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rule_call(name):
    """(SQL, its parameters at their defaults) of the finding rule `name`."""
    from tracekit.analysis.findings_engine import get_rule
    from tracekit.analysis.param_values import as_sql_text, checked

    rule = get_rule(name)
    return rule.sql, {key: as_sql_text(checked(key, default)) for key, (default, _) in rule.params.items()} or None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lake")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--query", action="append", default=[], help="a named query (repeatable)")
    parser.add_argument("--rule", action="append", default=[], help="a finding rule (repeatable)")
    args = parser.parse_args()
    import tracekit
    from tracekit.analysis.named_queries import named_sql
    from tracekit.spark.engine import SparkLake

    queries, rules = args.query, args.rule
    if not queries and not rules:
        queries, rules = ["summary", "rank_steps"], ["gpu_idle", "per_call_setup"]
    print(f"tracekit from {os.path.dirname(tracekit.__file__)}", flush=True)
    started = time.perf_counter()
    with SparkLake(args.lake) as lake:
        pid = lake.spark.sparkContext._gateway.proc.pid
        print(f"Spark open in {time.perf_counter() - started:.1f} s (JVM pid {pid})", flush=True)
        calls = [(name, *named_sql(name)) for name in queries] + [(f"rule {name}", *rule_call(name)) for name in rules]
        from tracekit.lake.layout import per_trace_tables, shared_tables

        views = lake._view_reads
        # the lake's tables as views that read nothing further, made before the views that read them
        tables = {table: frozenset() for table in [*per_trace_tables(), *shared_tables()]}
        ways = {"not cached": {}, "views cached": views, "views and tables cached": tables | views}
        print("| query | shared views | rows | Spark jobs | wall s (median) | CPU s (median) | CPU s each |")
        print("|---|---|---:|---:|---:|---:|---|")
        for label, sql, params in calls:
            lake.rows(sql, params)
            runs, jobs = {way: ([], []) for way in ways}, {}
            for _ in range(args.repeat):
                for way, (walls, cpus) in runs.items():
                    lake._view_reads = ways[way]
                    group = f"bench-{label}-{way}-{len(walls)}"
                    lake.spark.sparkContext.setJobGroup(group, group)
                    wall, cpu, jvm = time.perf_counter(), time.process_time(), jvm_cpu_s(pid)
                    rows = len(lake.rows(sql, params).rows)
                    jobs[way] = len(lake.spark.sparkContext.statusTracker().getJobIdsForGroup(group))
                    walls.append(time.perf_counter() - wall)
                    cpus.append(time.process_time() - cpu + jvm_cpu_s(pid) - jvm)
            lake._view_reads = views
            for way, (walls, cpus) in runs.items():
                print(f"| {label} | {way} | {rows} | {jobs[way]} | {statistics.median(walls):.1f} | {statistics.median(cpus):.1f} | "
                      f"{', '.join(f'{c:.1f}' for c in cpus)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
