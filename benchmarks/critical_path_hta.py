"""HTA's critical path of each ProfilerStep: the reference tracekit's critical path (issue [15]) is checked against.

For each Kineto trace, runs HolisticTraceAnalysis 0.5.0's lightweight critical path analysis
(`TraceAnalysis(...).critical_path_analysis(rank, annotation="ProfilerStep", instance_id=i)`) on every
instance of the annotation, and gives per step: the path's length (the sum of its edge weights, µs),
that length by HTA's `bound_by` (`CPGraph.get_critical_path_breakdown()`), the same time by the
category of the event each edge is attributed to, and the window HTA clipped the step to.
benchmarks/critical_path_hta.md holds a run on the sample and H200 traces and what the categories mean.

    python benchmarks/critical_path_hta.py TRACE... [--annotation ProfilerStep] [--max-steps N] [--hta-python PY] \\
        [--json OUT]

HTA runs in a child process of a Python that has it: HTA 0.5.0's critical path needs pandas < 3 (under
pandas 3 `CPGraph._create_event_nodes` raises "Cannot specify both 'axis' and 'index'/'columns'", and its
`fillna(..., inplace=True)` on columns would silently do nothing). `--hta-python` (or TRACEKIT_HTA_PYTHON)
names it; otherwise this Python, then /tmp/hta-venv/bin/python, whichever has `hta` with pandas < 3:

    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0 'pandas<3'

This file imports only the standard library at the top, so the child is this same file (`--child`).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# HTA's bound_by values (hta/analyzers/critical_path_analysis.py, bound_by()), in table order.
BOUND_BY = ["cpu_bound", "gpu_compute_bound", "gpu_communication_bound",
            "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead"]
SHORT = {"cpu_bound": "cpu", "gpu_compute_bound": "gpu", "gpu_communication_bound": "comm",
         "gpu_kernel_kernel_overhead": "k-k", "gpu_kernel_launch_overhead": "launch"}
FALLBACK_PYTHON = "/tmp/hta-venv/bin/python"
PROBE = "import hta, pandas, sys; sys.exit(0 if int(pandas.__version__.split('.')[0]) < 3 else 3)"


class HtaFailed(Exception):
    """HTA could not analyse a trace; the message is one line saying why."""


def find_hta_python(asked=None):
    """The first Python that imports hta with pandas < 3; else the first that imports hta at all (its run will
    fail with HTA's own error, which is the answer on that setup)."""
    candidates = [asked] if asked else [os.environ.get("TRACEKIT_HTA_PYTHON"), sys.executable, FALLBACK_PYTHON]
    with_hta = []
    for python in filter(None, candidates):
        if not Path(python).exists():
            continue
        code = subprocess.run([python, "-c", PROBE], capture_output=True).returncode
        if code == 0:
            return python
        if code == 3:
            with_hta.append(python)
    if with_hta:
        return with_hta[0]
    raise HtaFailed(f"no Python with holistictraceanalysis among {[c for c in candidates if c]}: "
                    f"python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0 'pandas<3'")


def run_hta(trace_path, annotation="ProfilerStep", hta_python=None, timeout=1800, max_steps=None):
    """HTA's critical path on every instance of `annotation` in one trace (or on `max_steps` CPU instances,
    see pick_instances), in a child process.

    Returns {"steps": [step dicts, see analyse_step], "load_s", "cpa_s", "wall_s", "cuda_sync_events",
    "instances", "cpu_instances", "peak_rss_load", "peak_rss" (bytes), "hta_warnings": {message: count},
    "python", "pandas"}. Raises HtaFailed with HTA's one-line reason, or on a timeout with how far it got."""
    if not Path(trace_path).is_file():
        raise HtaFailed(f"{trace_path}: no such file")
    python = find_hta_python(hta_python)
    cmd = [python, __file__, "--child", str(trace_path), "--annotation", annotation]
    cmd += ["--max-steps", str(max_steps)] if max_steps else []
    started = time.perf_counter()
    try:
        child = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as stopped:
        raise HtaFailed(f"HTA ran past {timeout} s{_progress(stopped.stdout)}") from None
    wall = time.perf_counter() - started
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        tail = (child.stderr.strip().splitlines() or ["no output"])[-1]
        raise HtaFailed(f"HTA's child exited {child.returncode}: {tail}")
    result = json.loads(lines[-1])
    if "error" in result:
        raise HtaFailed(result["error"])
    return {**result, "wall_s": round(wall, 2), "python": python}


def _progress(stdout):
    """The child's last progress line, for a run stopped before its result: on a big trace, whether HTA
    was still parsing or on which step."""
    if isinstance(stdout, bytes):
        stdout = stdout.decode(errors="replace")
    said = [json.loads(line)["progress"] for line in (stdout or "").splitlines() if line.startswith('{"progress"')]
    return f" (its last word: {said[-1]})" if said else " (still parsing the trace)"


def hta_critical_path(trace_path, annotation="ProfilerStep", hta_python=None, gpu_copies=False):
    """[dict(step, path_us, by_kind={bound_by: µs}, span_us, ...)] per instance of `annotation` (analyse_step
    lists every key); by_kind's keys are HTA's bound_by values. A step HTA failed on has path_us None and
    its reason in error. The GPU's copies of ProfilerStep (gpu_user_annotation), which HTA counts as
    instances too, are left out unless gpu_copies. Raises HtaFailed when HTA cannot analyse the trace at all."""
    steps = run_hta(trace_path, annotation, hta_python)["steps"]
    return [s for s in steps if gpu_copies or s["annotation_cat"] != "gpu_user_annotation"]


# ---- the child: runs inside the Python that has HTA --------------------------------------------------------

def _one_line(err):
    """The error's first line, and where in HTA it was raised (a bare `assert` says nothing else)."""
    import traceback
    if isinstance(err, HtaFailed):
        return str(err)
    text = (f"{type(err).__name__}: {err}".strip().splitlines() or [""])[0]
    frames = traceback.extract_tb(err.__traceback__)
    in_hta = [f for f in frames if f"{os.sep}hta{os.sep}" in f.filename]
    if frames:
        last = (in_hta or frames)[-1]
        text += f" [{Path(last.filename).parent.name}/{Path(last.filename).name}:{last.lineno} `{last.line}`]"
    return text


def _load(trace_path, folder):
    """TraceAnalysis on the trace alone in `folder` (HTA reads every trace in a directory), linked, not
    copied: a copy of the 1 GB benchmark trace would cost a second of the timed load and a GB of /tmp,
    left behind when a timeout kills the child; include_last_profiler_step=True, or HTA drops every CPU
    event from the last ProfilerStep's start on."""
    from hta.trace_analysis import TraceAnalysis
    suffix = ".json.gz" if str(trace_path).endswith(".gz") else ".json"
    (Path(folder) / f"rank_0{suffix}").symlink_to(Path(trace_path).resolve())
    return TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)


def _instances(t, rank, annotation):
    """(instance_id, name, category, start_ts, end_ts) the way CriticalPathAnalysis.critical_path_analysis
    picks them: every event whose name contains `annotation`, in the trace frame's order, by position; the
    GPU's copies of ProfilerStep (gpu_user_annotation) count as instances too."""
    df = t.get_trace(rank)
    if annotation == "":  # HTA's own window ends at df.end.max(), which its time shift left unshifted
        return [(None, "whole trace", "", int(df.ts.min()), int((df.ts + df.dur).max()))]
    names = t.symbol_table.get_sym_table()
    ids = [v for k, v in t.symbol_table.get_sym_id_map().items() if annotation in k]
    found = df[df.name.isin(ids)]
    return [(i, names[r.name], names[r.cat], int(r.ts), int(r.ts + r.dur)) for i, r in enumerate(found.itertuples())]


def pick_instances(instances, count):
    """`count` CPU instances (the GPU's copies of ProfilerStep left out, as hta_critical_path does) evenly
    spread between the first and the last, both left out where there are enough: the first ProfilerStep
    is usually the cold one, and the last may be cut short, so neither stands for a step of the trace."""
    cpu = [inst for inst in instances if inst[2] != "gpu_user_annotation"]
    if count >= len(cpu):
        return cpu
    return [cpu[round((i + 1) * (len(cpu) - 1) / (count + 1))] for i in range(count)]


def _peak_rss():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux gives KiB


def _say(progress):
    """A progress line on stdout, which the parent reads back when it stops a run that ran too long."""
    print(json.dumps({"progress": progress}), flush=True)


def _sum_by(frame, column):
    sums = frame[frame[column].notna() & (frame[column] != "")].groupby(column).duration.sum()
    return {str(k): round(float(v), 1) for k, v in sums.items()}


def _path_figures(ta, graph, start):
    """What one CPGraph's critical path gives: its length (HTA's breakdown, summed), by bound_by, the operator
    and kernel edges by their event's category, and where the path starts and ends from `start`."""
    edges = graph.get_critical_path_breakdown()
    names = ta.t.symbol_table.get_sym_table()
    edges["cat_name"] = edges.cat.map(lambda c: None if c != c else names[int(c)])
    first, last = (graph.node_list[graph.critical_path_nodes[i]].ts for i in (0, -1))
    return {"path_us": round(float(edges.duration.sum()), 1), "by_kind": _sum_by(edges, "bound_by"),
            "by_cat": _sum_by(edges[edges.type == "critical_path_operator"], "cat_name"),
            "path_from_us": int(first) - start, "path_to_us": int(last) - start, "edges": len(edges)}


def analyse_step(ta, rank, annotation, instance, tally):
    """One instance: step (N of ProfilerStep#N, else the instance id), name, annotation_cat (user_annotation,
    or gpu_user_annotation for the GPU's copy), instance_id, span_us (the window HTA clipped to), path_us,
    by_kind (µs per bound_by), by_cat (µs of the operator/kernel edges per category of their event),
    path_from_us and path_to_us (the path's first and last node, µs from the window's start), edges,
    seconds, ok (HTA's flag), error (None, or HTA's one-line reason), hta_warnings (message: count)."""
    instance_id, name, cat, start, end = instance
    number = re.search(r"#\s*(\d+)$", name)
    row = {"step": int(number.group(1)) if number else instance_id, "name": name, "annotation_cat": cat,
           "instance_id": instance_id, "span_us": end - start, "path_us": None, "by_kind": {}, "by_cat": {},
           "path_from_us": None, "path_to_us": None, "edges": 0, "seconds": None, "ok": False, "error": None}
    began = time.perf_counter()
    try:
        graph, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance_id)
        row["ok"] = bool(ok)
        if ok:
            row.update(_path_figures(ta, graph, start))
        else:
            row["error"] = "critical_path() returned False (networkx found the graph not a DAG)"
    except Exception as err:  # noqa: BLE001 - HTA's failure on one step is the result for that step
        row["error"] = _one_line(err)
    row["seconds"] = round(time.perf_counter() - began, 3)
    row["hta_warnings"] = tally.take()
    return row


class _Tally:
    """A logging handler counting HTA's warnings and errors, numbers blanked to N, by their first 70
    characters; HTA's parser logs its progress at WARNING too, which is left out."""
    PROGRESS = ("Parsed ", "Overall parsing", "leaving ")

    def __init__(self):
        import logging
        self.counts = Counter()
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self._count

    def _count(self, record):
        message = record.getMessage().strip()
        if not message.startswith(self.PROGRESS):
            self.counts.update([re.sub(r"\d+(\.\d+)?", "N", message)[:70]])

    def take(self):
        counts, self.counts = dict(self.counts), Counter()
        return counts


def child_main(trace_path, annotation, max_steps=None):
    import logging
    import pandas
    tally = _Tally()
    logging.getLogger("hta").addHandler(tally.handler)
    out = {"pandas": pandas.__version__}
    try:
        with tempfile.TemporaryDirectory(prefix="hta_cp_") as folder:
            began = time.perf_counter()
            ta = _load(trace_path, folder)
            out["load_s"] = round(time.perf_counter() - began, 3)
            out["peak_rss_load"] = _peak_rss()
            out["hta_warnings"] = tally.take()
            _say(f"parsed in {out['load_s']:.1f} s")
            rank = ta.t.get_ranks()[0]
            out["cuda_sync_events"] = "cuda_sync" in ta.t.symbol_table.get_sym_id_map()
            instances = _instances(ta.t, rank, annotation)
            if not instances:
                raise HtaFailed(f"no event named like {annotation!r} in the trace")
            out["instances"] = len(instances)
            out["cpu_instances"] = sum(inst[2] != "gpu_user_annotation" for inst in instances)
            chosen = pick_instances(instances, max_steps) if max_steps else instances
            out["steps"] = []
            for number, inst in enumerate(chosen, 1):
                _say(f"parsed in {out['load_s']:.1f} s; on {inst[1]}, step {number} of {len(chosen)}")
                out["steps"].append(analyse_step(ta, rank, annotation, inst, tally))
            out["cpa_s"] = round(sum(s["seconds"] or 0 for s in out["steps"]), 3)
            out["peak_rss"] = _peak_rss()
    except Exception as err:  # noqa: BLE001 - the parent records the reason for this trace
        out["error"] = _one_line(err)
        out["hta_warnings"] = tally.take()
    print(json.dumps(out))


# ---- the table ---------------------------------------------------------------------------------------------

def _num(value):
    return "" if value is None else f"{value:,.0f}"


def _step_label(s):
    gpu = ", GPU's copy" if s.get("annotation_cat") == "gpu_user_annotation" else ""
    return "whole trace" if s["instance_id"] is None else f"{s['step']} ({s['instance_id']}{gpu})"


def _row(trace, s):
    cats = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(s["by_cat"].items(), key=lambda kv: -kv[1]))
    cells = [f"`{trace}`", _step_label(s), _num(s["span_us"]), _num(s["path_us"]),
             f"{_num(s['path_from_us'])} → {_num(s['path_to_us'])}"]
    return "| " + " | ".join(cells + [_num(s["by_kind"].get(k, 0)) for k in BOUND_BY] + [cats, f"{s['seconds']:.2f}"]) + " |"


def markdown(results):
    """Markdown: one row per (trace, instance), the GPU's copies of ProfilerStep in a table of their own, then
    the traces and steps HTA failed on with its reason."""
    head = (["trace", "step (HTA instance_id)", "span_us", "path_us", "path from → to (µs from span start)"]
            + [SHORT[k] for k in BOUND_BY] + ["operator/kernel edges by event category (µs)", "HTA s"])
    align = ["---", "---"] + ["---:"] * (len(head) - 4) + ["---", "---:"]
    table = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    steps, copies, failed = [], [], []
    for trace, result in results:
        if "error" in result:
            failed.append(f"- `{trace}`: {result['error']}")
            continue
        for s in result["steps"]:
            if s["error"]:
                failed.append(f"- `{trace}` step {_step_label(s)}: {s['error']}")
            else:
                (copies if s["annotation_cat"] == "gpu_user_annotation" else steps).append(_row(trace, s))
    lines = table + steps
    if copies:
        lines += ["", "The GPU's copies of ProfilerStep (gpu_user_annotation), which HTA also counts as instances:",
                  ""] + table + copies
    return "\n".join(lines + (["", "HTA failed on:", ""] + failed if failed else []))


def timings(results):
    lines = ["| trace | load s | critical path s (the steps run) | steps | wall s (child process) | cuda_sync events |",
             "|---|---:|---:|---:|---:|---|"]
    for trace, r in results:
        if "error" not in r:
            lines.append(f"| `{trace}` | {r['load_s']:.2f} | {r['cpa_s']:.2f} | {len(r['steps'])} | {r['wall_s']:.2f} "
                         f"| {'yes' if r['cuda_sync_events'] else 'no'} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--annotation", default="ProfilerStep", help="HTA's annotation; '' for the whole trace")
    parser.add_argument("--max-steps", type=int, help="only this many CPU instances, spread over the trace "
                        "(pick_instances): HTA takes long on a big trace")
    parser.add_argument("--hta-python", help="a Python with holistictraceanalysis and pandas < 3")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write every result, HTA's warnings included, here")
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.traces[0], args.annotation, args.max_steps)
    results = []
    for trace in args.traces:
        label = f"{trace.parent.name}/{trace.name.removesuffix('.gz').removesuffix('.json')}"
        try:
            results.append((label, run_hta(trace, args.annotation, args.hta_python, max_steps=args.max_steps)))
        except HtaFailed as err:
            results.append((label, {"error": str(err)}))
    print(markdown(results) + "\n\n" + timings(results))
    if args.json:
        args.json.write_text(json.dumps([{"trace": str(t), **r} for t, r in results], indent=1))


if __name__ == "__main__":
    main()
