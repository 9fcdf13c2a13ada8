"""Queries whose CTEs Spark runs a step at a time (tracekit/spark/ctes.py), timed on a lake in
CPU seconds: this process's and the JVM's together (the JVM does the work; other processes on a
shared machine change a query's wall time far more than its CPU time), with the Spark jobs each
run starts.

One Spark session over the lake (its start left out), then each query once to warm the JVM up
(not counted), then `--repeat` times; a row per query with its rows, its Spark jobs, the median
wall seconds and the median CPU seconds (Python + JVM). To compare two checkouts, run it from
each (PYTHONPATH=OTHER/checkout python benchmarks/spark_ctes.py ...): the first line says which
tracekit ran.

    python benchmarks/spark_ctes.py LAKE [--repeat 3] [--query summary] [--rule gpu_idle] ...

Without --query or --rule: summary and the rule gpu_idle.
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
        queries, rules = ["summary"], ["gpu_idle"]
    print(f"tracekit from {os.path.dirname(tracekit.__file__)}", flush=True)
    started = time.perf_counter()
    with SparkLake(args.lake) as lake:
        context = lake.spark.sparkContext
        pid = context._gateway.proc.pid
        print(f"Spark open in {time.perf_counter() - started:.1f} s (JVM pid {pid})", flush=True)
        calls = [(name, *named_sql(name)) for name in queries] + [(f"rule {name}", *rule_call(name)) for name in rules]
        print("| query | rows | Spark jobs | wall s (median) | CPU s (median) | CPU s each |")
        print("|---|---:|---:|---:|---:|---|")
        for label, sql, params in calls:
            lake.rows(sql, params)
            walls, cpus, jobs, rows = [], [], 0, 0
            for run in range(args.repeat):
                group = f"bench-{label}-{run}"
                context.setJobGroup(group, group)
                wall, cpu, jvm = time.perf_counter(), time.process_time(), jvm_cpu_s(pid)
                rows = len(lake.rows(sql, params).rows)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu + jvm_cpu_s(pid) - jvm)
                jobs = len(context.statusTracker().getJobIdsForGroup(group))
            print(f"| {label} | {rows} | {jobs} | {statistics.median(walls):.1f} | {statistics.median(cpus):.1f} | "
                  f"{', '.join(f'{c:.1f}' for c in cpus)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
