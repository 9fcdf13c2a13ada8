"""Each finding's predicted saving against the saving measured by capturing its fix.

Loads the sample traces and tests/data/h200 (real H200 captures of each "before" and its fix, at
the same shape and in the same process) into a scratch database, runs the finding rules, and prints
a markdown table: predicted saving_us_per_step of the "before" trace against the difference in GPU
busy time per steady step between the two traces. tests/test_findings.py asserts the same pairs.

    python benchmarks/findings_vs_fixes.py [--db /tmp/bench/findings.duckdb]
"""

import argparse
from pathlib import Path

from tracekit.store.database import connect, connect_for_queries
from tracekit.analysis.findings_engine import run_findings
from tracekit.ingest.loader import load_file

ROOT = Path(__file__).resolve().parent.parent
# (rule, before, after): after is the before trace with the rule's fix applied.
PAIRS = [
    ("hidden_copy", "samples/naive", "samples/naive_inplace"),
    ("hidden_copy", "fp32/naive", "fp32/naive_inplace"),
    ("simt_gemm", "fp32/naive", "fp32_tf32/naive"),
    ("simt_gemm", "fp32/naive_inplace", "fp32_tf32/naive_inplace"),
    ("simt_gemm", "fp32/sdpa_math", "fp32_tf32/sdpa_math"),
    # Not the rule's own fix: flash replaces the whole math backend, GEMMs and all the rest.
    ("simt_gemm", "samples/sdpa_math", "samples/sdpa_flash"),
]


def load_all(db):
    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    con = connect(db)
    files = [("samples", p) for p in sorted((ROOT / "sample_traces").glob("*.json.gz"))]
    files += [(p.parent.name, p) for p in sorted((ROOT / "tests" / "data" / "h200").glob("*/*.json.gz"))]
    for folder, file in files:
        load_file(con, file)
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [f"{folder}/{file.name[:-8]}", str(file.resolve())])
    con.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/findings.duckdb")
    args = parser.parse_args()
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    load_all(args.db)
    con = connect_for_queries(args.db)
    found = run_findings(con)
    gpu = dict(con.execute("SELECT trace, gpu_us_per_step FROM step_totals").fetchall())
    print("| rule | before → after (the fix, captured) | predicted µs/step | measured µs/step | error |")
    print("|---|---|---:|---:|---:|")
    for rule, before, after in PAIRS:
        row = found[(found["trace"] == before) & (found["rule"] == rule)]
        predicted = float(row["saving_us_per_step"].iloc[0])
        measured = gpu[before] - gpu[after]
        print(f"| `{rule}` | `{before}` → `{after}` | {predicted:,.1f} | {measured:,.1f} | "
              f"{100 * (predicted - measured) / measured:+.1f}% |")


if __name__ == "__main__":
    main()
