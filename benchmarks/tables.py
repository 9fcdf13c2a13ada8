"""run.py's markdown: the load table (every trace and layout), HTA, the folder, DuckDB's floor, the
named queries, a small trace's load as a command, the analysis of the loaded trace, and each target
met or missed.

The targets are issue [18]'s: each layout of the 1 GB trace at 150 MB/s or more with a peak RSS of
0.75 GB at most, a real ~140 MB training trace at 100 MB/s, a small trace (10 MB or less) loaded in
0.3 s as a command, and the critical path, `summary` and every finding rule on the loaded 1 GB trace
in 10 s together. Issue [6]'s ratios (2x `json.load`, 14x HTA, the folder at 1.6x one core, named
queries under 0.2 s) are printed beside them, judged as that issue set them.
"""

from pathlib import Path

MB = 1_000_000
TARGETS = {"load_mb_s": 150, "rss_bytes": 750_000_000, "real_mb_s": 100, "small_s": 0.3,
           "small_bytes": 10 * MB, "analysis_s": 10,
           # issue [6]'s
           "vs_json": 2, "vs_hta": 14, "folder_ratio": 1.6, "query_s": 0.2}
# Perfetto's trace processor is not run here; its published figure for a JSON trace, quoted.
PERFETTO = {"mb": 453.8, "s": 2.56, "source": "google/perfetto#1641"}
# Issue [6]'s ratios were judged on these layouts; issue [18]'s MB/s and RSS on every layout.
RATIO_LAYOUTS = ("kineto", "lines")


def _mb(value):
    return "" if value is None else f"{value / MB:,.0f}"


def _s(value):
    return "" if value is None else f"{value:.2f}"


def _layout(row):
    return "kineto .gz" if row["layout"] == "gz" else row["layout"]


def _mark(ok):
    return "✓" if ok else "✗"


def _verdict(ok):
    return "met" if ok else "MISSED"


def hta_rate(row, hta):
    """HTA's speed for `row`'s events, in Kineto-layout bytes per second, and the HTA entry it comes from:
    HTA on the same events when it ran on them, else on the trace of the nearest size."""
    done = [entry for entry in hta if entry.get("hta")]
    if not done:
        return None, None
    entry = min(done, key=lambda e: (e["size"] != row["size"], abs(e["size"] - row["size"])))
    return entry["json_bytes"] / entry["hta"]["seconds"], entry


def vs_hta(row, hta):
    """How many times faster than HTA `row`'s load is: HTA's time for these events (its measured rate
    applied to their Kineto-layout size) over tracekit's."""
    rate, entry = hta_rate(row, hta)
    if rate is None or not row.get("tracekit"):
        return None, None
    return row["kineto_bytes"] / rate / row["tracekit"]["seconds"], entry


def vs_json(row):
    tk, off = row.get("tracekit"), row.get("json_gc_off")
    return off["seconds"] / tk["seconds"] if tk and off else None


def _row_checks(row, hta):
    """The targets `row` meets or misses, as (what, ok) pairs."""
    tk = row["tracekit"]
    return [("MB/s", row["json_bytes"] / tk["seconds"] / MB >= TARGETS["load_mb_s"]),
            ("RSS", tk["peak_rss"] <= TARGETS["rss_bytes"])]


def load_table(rows, hta, judged_size):
    lines = [f"vs target, on the {judged_size:,} MB rows, every layout: ≥ {TARGETS['load_mb_s']} MB/s and peak RSS "
             f"≤ {TARGETS['rss_bytes'] / MB:,.0f} MB (issue [18]). MB/s: the file's JSON bytes (uncompressed for .gz) "
             "per second of wall time; every layout of one size holds the same events.", "",
             "| trace | layout | JSON MB | file MB | events | `tracekit load` s | MB/s | peak RSS MB"
             " | `json.load` s, GC off | × `json.load` | × HTA | vs target |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    used = set()  # the HTA traces a † row borrows its rate from
    for row in rows:
        tk = row.get("tracekit")
        ratio_json = vs_json(row)
        ratio_hta, entry = vs_hta(row, hta)
        hta_cell = ""
        if ratio_hta is not None:
            same = entry["path"] == row["path"]
            hta_cell = f"{ratio_hta:.1f}" + ("" if same else "†")
            used |= set() if same else {Path(entry["path"]).name}
        if tk and row["size"] == judged_size:
            verdict = " · ".join(f"{what} {_mark(ok)}" for what, ok in _row_checks(row, hta))
        else:
            verdict = "" if tk else "load failed"
        lines.append(" | ".join([
            f"| {Path(row['path']).name}", _layout(row),
            _mb(row["json_bytes"]), _mb(row["file_bytes"]), f"{tk['events']:,}" if tk and tk["events"] else "",
            _s(tk and tk["seconds"]), f"{row['json_bytes'] / tk['seconds'] / MB:.0f}" if tk else "",
            _mb(tk and tk["peak_rss"]), _s(row.get("json_gc_off") and row["json_gc_off"]["seconds"]),
            f"{ratio_json:.1f}" if ratio_json else "", hta_cell, verdict]) + " |")
    if used:
        lines.append(f"\n† HTA did not run on this file: its MB/s on {', '.join(sorted(used))} (Kineto's layout; the "
                     "nearest size it ran on), applied to this row's events in Kineto's layout, over tracekit's time.")
    return "\n".join(lines)


def hta_table(hta):
    lines = ["| trace | JSON MB | HTA parse s | HTA MB/s | HTA RSS MB | `tracekit load` s, same file | × HTA |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for entry in hta:
        run, tk = entry.get("hta"), entry.get("tracekit")
        lines.append(" | ".join([
            f"| {Path(entry['path']).name}", _mb(entry["json_bytes"]), _s(run and run["seconds"]),
            f"{entry['json_bytes'] / run['seconds'] / MB:.1f}" if run else "failed", _mb(run and run["peak_rss"]),
            _s(tk and tk["seconds"]), f"{run['seconds'] / tk['seconds']:.1f}" if run and tk else ""]) + " |")
    return "\n".join(lines)


def real_table(real):
    """tracekit load, json.load and HTA's parser on one real trace."""
    tk, off, run = real.get("tracekit"), real.get("json_gc_off"), real.get("hta")
    rate = real["json_bytes"] / tk["seconds"] / MB if tk else None
    target = TARGETS["real_mb_s"]
    return "\n".join([
        "| trace | JSON MB | events | `tracekit load` s | MB/s | peak RSS MB | `json.load` s, GC off | HTA parse s "
        f"| × HTA | vs target (≥ {target} MB/s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        " | ".join([f"| {Path(real['path']).name}", _mb(real["json_bytes"]),
                   f"{tk['events']:,}" if tk and tk["events"] else "", _s(tk and tk["seconds"]),
                   f"{rate:.0f}" if rate else "", _mb(tk and tk["peak_rss"]), _s(off and off["seconds"]),
                   _s(run and run["seconds"]), f"{run['seconds'] / tk['seconds']:.1f}" if run and tk else "",
                   _verdict(rate >= target) if rate else ""]) + " |"])


def folder_table(folder):
    multi, single = folder.get("tracekit"), folder.get("pinned")
    rate = folder["json_bytes"] / multi["seconds"] / MB if multi else None
    single_rate = folder["json_bytes"] / single["seconds"] / MB if single else None
    ratio = rate / single_rate if rate and single_rate else None
    return "\n".join([
        "| folder | traces | JSON MB | events | `tracekit load FOLDER` s | MB/s | peak RSS MB "
        "| pinned to one core (`taskset -c 0`) s | single-core MB/s | ratio | vs target (≥ "
        f"{TARGETS['folder_ratio']}×) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        " | ".join([f"| {Path(folder['path']).name}", str(folder["traces"]), _mb(folder["json_bytes"]),
                   f"{multi['events']:,}" if multi and multi["events"] else "", _s(multi and multi["seconds"]),
                   f"{rate:.0f}" if rate else "", _mb(multi and multi["peak_rss"]), _s(single and single["seconds"]),
                   f"{single_rate:.0f}" if single_rate else "", f"{ratio:.2f}" if ratio else "",
                   _verdict(ratio >= TARGETS["folder_ratio"]) if ratio else ""]) + " |"])


def floor_table(floor, kineto_row):
    run = floor.get("duckdb")
    tk = kineto_row and kineto_row.get("tracekit")
    lines = ["The floor: DuckDB's own read of the same events as NDJSON, typed columns, into a fresh file "
             "database, in a fresh process (`CREATE TABLE` alone; the process's wall time beside it). "
             "Kineto-layout MB/s: the same events' size in Kineto's layout over that time, to set beside "
             "`tracekit load`'s MB/s.", "",
             "| events file | NDJSON MB | events | `read_json` s | NDJSON MB/s | Kineto-layout MB/s | process wall s "
             "| peak RSS MB | `tracekit load` s (Kineto layout) | tracekit ÷ floor |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines.append(" | ".join([
        f"| {Path(floor['path']).name}", _mb(floor["file_bytes"]), f"{run['events']:,}" if run else "",
        _s(run and run["seconds"]), f"{floor['file_bytes'] / run['seconds'] / MB:.0f}" if run else "failed",
        f"{floor['kineto_bytes'] / run['seconds'] / MB:.0f}" if run else "", _s(run and run["wall_s"]),
        _mb(run and run["peak_rss"]), _s(tk and tk["seconds"]),
        f"{tk['seconds'] / run['seconds']:.1f}×" if run and tk else ""]) + " |")
    return "\n".join(lines)


def query_table(results, db):
    lines = [f"Named queries on `{Path(db).name}` ({_mb(Path(db).stat().st_size)} MB database):", "",
             "| query | rows | `tracekit query` wall s | `run_named` first s | `run_named` warm s |",
             "|---|---:|---:|---:|---:|"]
    for name, info in results.items():
        lines.append(f"| {name} | {info['rows']} | {_s(info['cli_s'])} | {info['first_s']:.3f} | {info['warm_s']:.3f} |")
    return "\n".join(lines)


def targets(rows, hta, folder, floor, queries, judged_size, real=None, small=None, analysis=None):
    """One line per target: met or missed, with the number that decides it."""
    lines = []
    judged = [row for row in rows if row["size"] == judged_size and row.get("tracekit")]
    perfetto = PERFETTO["mb"] / PERFETTO["s"]
    for row in judged:
        tk, name = row["tracekit"], f"{Path(row['path']).name} ({_layout(row)})"
        rate = row["json_bytes"] / tk["seconds"] / MB
        lines.append(f"- load {name}: {tk['seconds']:.1f} s, {rate:.0f} MB/s (target ≥ {TARGETS['load_mb_s']} MB/s, "
                     f"{row['json_bytes'] / MB / TARGETS['load_mb_s']:.1f} s for this file): "
                     f"{_verdict(rate >= TARGETS['load_mb_s'])}; Perfetto's {perfetto:.0f} MB/s "
                     f"({PERFETTO['source']}: {PERFETTO['mb']} MB in {PERFETTO['s']} s, published, not run here): "
                     f"{rate / perfetto:.0%} of it")
        if row["layout"] not in RATIO_LAYOUTS:
            continue
        ratio = vs_json(row)
        if ratio is not None:
            lines.append(f"- × `json.load` (GC off, same file) {name}: {ratio:.1f}× (issue [6]'s target ≥ "
                         f"{TARGETS['vs_json']}×): {_verdict(ratio >= TARGETS['vs_json'])}")
        ratio, entry = vs_hta(row, hta)
        if ratio is not None:
            source = "" if entry["size"] == row["size"] else f", from HTA's rate on the {entry['size']:,} MB trace"
            lines.append(f"- × HTA {name}: {ratio:.1f}× (issue [6]'s target ≥ {TARGETS['vs_hta']}×{source}): "
                         f"{_verdict(ratio >= TARGETS['vs_hta'])}")
    if judged:
        worst = max(judged, key=lambda r: r["tracekit"]["peak_rss"])
        each = ", ".join(f"{_layout(r)} {r['tracekit']['peak_rss'] / MB:,.0f}" for r in judged)
        lines.append(f"- peak RSS, {judged_size:,} MB trace, every layout ({each} MB): the most "
                     f"{worst['tracekit']['peak_rss'] / MB:,.0f} MB (target ≤ {TARGETS['rss_bytes'] / MB:,.0f} MB): "
                     f"{_verdict(worst['tracekit']['peak_rss'] <= TARGETS['rss_bytes'])}")
    if real and real.get("tracekit"):
        rate = real["json_bytes"] / real["tracekit"]["seconds"] / MB
        lines.append(f"- load {Path(real['path']).name} (a real training trace, {real['json_bytes'] / MB:.0f} MB): "
                     f"{real['tracekit']['seconds']:.2f} s, {rate:.0f} MB/s (target ≥ {TARGETS['real_mb_s']} MB/s): "
                     f"{_verdict(rate >= TARGETS['real_mb_s'])}")
    for entry in small or []:
        if entry.get("tracekit"):
            tk = entry["tracekit"]
            lines.append(f"- a small trace as a command, {Path(entry['path']).name} ({entry['json_bytes'] / MB:.1f} MB of JSON):"
                         f" median {tk['seconds']:.3f} s of {tk['runs']} (target ≤ {TARGETS['small_s']} s): "
                         f"{_verdict(tk['seconds'] <= TARGETS['small_s'])}")
    if analysis and analysis.get("tracekit"):
        done = analysis["tracekit"]
        parts = ", ".join(f"{name} {part['seconds']:.2f}" for name, part in done["parts"].items())
        lines.append(f"- the critical path, `summary` and every finding rule on the loaded {judged_size:,} MB trace: "
                     f"{done['seconds']:.2f} s together ({parts}; target ≤ {TARGETS['analysis_s']} s): "
                     f"{_verdict(done['seconds'] <= TARGETS['analysis_s'])}")
    if folder and folder.get("tracekit") and folder.get("pinned"):
        ratio = folder["pinned"]["seconds"] / folder["tracekit"]["seconds"]
        lines.append(f"- folder of {folder['traces']} traces: {folder['json_bytes'] / folder['tracekit']['seconds'] / MB:.0f}"
                     f" MB/s, {ratio:.2f}× the single-core rate (issue [6]'s target ≥ {TARGETS['folder_ratio']}×): "
                     f"{_verdict(ratio >= TARGETS['folder_ratio'])}")
    if floor and floor.get("duckdb"):
        kineto = next((r for r in judged if r["layout"] == "kineto"), None)
        if kineto:
            lines.append(f"- the floor (DuckDB's NDJSON read alone): {floor['duckdb']['seconds']:.2f} s; `tracekit load` "
                         f"of the Kineto layout takes {kineto['tracekit']['seconds'] / floor['duckdb']['seconds']:.1f}× that")
    if queries:
        first = max(queries.items(), key=lambda item: item[1]["first_s"])
        warm = max(queries.items(), key=lambda item: item[1]["warm_s"])
        lines.append(f"- named queries in process (issue [6]'s target each < {TARGETS['query_s']} s): slowest warm {warm[0]} "
                     f"{warm[1]['warm_s']:.3f} s: {_verdict(warm[1]['warm_s'] < TARGETS['query_s'])}; slowest first call "
                     f"{first[0]} {first[1]['first_s']:.3f} s: {_verdict(first[1]['first_s'] < TARGETS['query_s'])}")
        cli = [(name, info["cli_s"]) for name, info in queries.items() if info["cli_s"] is not None]
        if cli:
            name, seconds = max(cli, key=lambda item: item[1])
            lines.append(f"- (no target) slowest `tracekit query` as a command, start-up included: {name} {seconds:.2f} s")
    return "\n".join(lines)


def small_table(small):
    """A small trace's `tracekit load` as a command: the median of fresh processes, start-up included."""
    lines = ["| trace | JSON MB | file MB | runs | median s | fastest s | slowest s | peak RSS MB "
             f"| vs target (≤ {TARGETS['small_s']} s) |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for entry in small:
        tk = entry.get("tracekit")
        lines.append(" | ".join([
            f"| {Path(entry['path']).name}", f"{entry['json_bytes'] / MB:.2f}", f"{entry['file_bytes'] / MB:.2f}",
            str(tk["runs"]) if tk else "", f"{tk['seconds']:.3f}" if tk else "failed",
            f"{tk['min_s']:.3f}" if tk else "", f"{tk['max_s']:.3f}" if tk else "", _mb(tk and tk["peak_rss"]),
            _verdict(tk["seconds"] <= TARGETS["small_s"]) if tk else ""]) + " |")
    return "\n".join(lines)


def analysis_table(analysis):
    """The analysis of the loaded trace, in one fresh process, each part read once in this order."""
    done = analysis.get("tracekit")
    lines = [f"On `{Path(analysis['db']).name}`, in one fresh process on a read-only connection (as `tracekit "
             "query` opens one), each read whole once in this order; then `tracekit findings` as a command (the "
             "rules with each finding's fix replayed).", "",
             "| part | rows | s |", "|---|---:|---:|"]
    if not done:
        return "\n".join(lines + ["| failed | | |"])
    for name, part in done["parts"].items():
        lines.append(f"| {name} | {part['rows']:,} | {part['seconds']:.2f} |")
    lines.append(f"| together | | {done['seconds']:.2f} |")
    if done.get("findings_command_s") is not None:
        lines.append(f"| (`tracekit findings` as a command) | | {done['findings_command_s']:.2f} |")
    return "\n".join(lines)
