"""The "tracekit findings" track: what the named queries found, as slices on the timeline.

A slice over every Memcpy (named with the CPU ops that caused it), every SIMT
GEMM, and the CPU span of cuDNN's plan-building first call, each with the named
query's figures in its args, on a process of its own so it never overlaps the
trace's tracks.
"""

import json

from tracekit.named_queries import run_named, run_sql

FINDINGS_PID = "tracekit findings"
TRACKS = {"memcpy": 1, "simt_gemm": 2, "cudnn_plan": 3}
TRACK_NAMES = {1: "Memcpy and the ops that caused them", 2: "GEMMs on CUDA cores (FP32 SIMT)",
               3: "cuDNN plan build (first call)"}


def _mib(n):
    return f"{n / 2**20:.0f} MiB" if n and n >= 2**20 else f"{n or 0} B"


def _slice(trace, track, name, ts_ns, dur_ns, args):
    return {"trace": trace, "cat": "tracekit_finding", "name": name, "ph": "X", "ts_ns": int(ts_ns),
            "dur_ns": int(max(dur_ns, 1)), "pid": FINDINGS_PID, "tid": str(track), "id": None, "bp": None,
            "s": None, "args": json.dumps(args, default=str)}


def _memcpy_slices(con, trace):
    summary = {(r["kind"], r["caused_by"]): r for r in
               run_named(con, "memcpy", {"trace": trace}).to_dict("records") if r["memcpy_count"]}
    rows = run_sql(con, "SELECT kind, bytes, cpu_op_path, ts_us, dur_us, step FROM memcpy WHERE trace = $t "
                        "ORDER BY ts_us", {"t": trace}).to_dict("records")
    for row in rows:
        total = summary.get((row["kind"], row["cpu_op_path"]), {})
        cause = row["cpu_op_path"] or "an unknown op"
        yield _slice(trace, TRACKS["memcpy"], f"Memcpy {row['kind']} {_mib(row['bytes'])} ← {cause}",
                     round(row["ts_us"] * 1000), round(row["dur_us"] * 1000),
                     {"finding": f"{total.get('memcpy_count', 1)} Memcpy {row['kind']} from {cause}, "
                                 f"{_mib(total.get('memcpy_bytes'))} in all",
                      "query": "memcpy", "bytes": row["bytes"], "caused_by": cause, "step": row["step"]})


def _simt_slices(con, trace):
    classes = run_named(con, "gemm_classes", {"trace": trace}).to_dict("records")
    if not classes or not classes[0]["simt_gemms"]:
        return
    stats = classes[0]
    finding = (f"{stats['simt_gemms']} GEMMs ran as FP32 SIMT on CUDA cores ({stats['simt_us']:.0f} us); "
               f"Tensor Core share of GEMM time {stats['tensor_core_pct']:.0f}%")
    rows = run_sql(con, "SELECT name, ts_us, dur_us, cpu_op, step FROM kernels WHERE trace = $t "
                        "AND gemm_class = 'simt' ORDER BY ts_us", {"t": trace}).to_dict("records")
    for row in rows:
        yield _slice(trace, TRACKS["simt_gemm"], f"SIMT GEMM: {row['name'][:80]}",
                     round(row["ts_us"] * 1000), round(row["dur_us"] * 1000),
                     {"finding": finding, "query": "gemm_classes", "kernel": row["name"],
                      "cpu_op": row["cpu_op"], "step": row["step"]})


def _cudnn_slices(con, trace):
    plans = run_named(con, "cudnn_plan_time", {"trace": trace}).to_dict("records")
    if not plans:
        return
    plan = plans[0]
    first = run_sql(con, "SELECT ts_us, dur_us FROM cudnn_attention_calls WHERE trace = $t AND call = 1",
                    {"t": trace}).to_dict("records")[0]
    steady = plan["steady_call_ms"]
    label = (f"cuDNN plan build: first call {plan['first_call_ms']:.1f} ms"
             + (f", steady {steady:.2f} ms" if steady == steady and steady is not None else ""))
    yield _slice(trace, TRACKS["cudnn_plan"], label, round(first["ts_us"] * 1000), round(first["dur_us"] * 1000),
                 {"finding": label, "query": "cudnn_plan_time", "plan_ms": plan["plan_ms"], "op": plan["op"]})


def findings_events(con, trace):
    """Slices and track names of the findings track for one trace (empty when nothing was found)."""
    slices = [*_memcpy_slices(con, trace), *_simt_slices(con, trace), *_cudnn_slices(con, trace)]
    if not slices:
        return []
    meta = [{"trace": trace, "cat": None, "name": "process_name", "ph": "M", "ts_ns": None, "dur_ns": None,
             "pid": FINDINGS_PID, "tid": "0", "id": None, "bp": None, "s": None,
             "args": json.dumps({"name": "tracekit findings"})}]
    for track in sorted({int(s["tid"]) for s in slices}):
        meta.append({"trace": trace, "cat": None, "name": "thread_name", "ph": "M", "ts_ns": None,
                     "dur_ns": None, "pid": FINDINGS_PID, "tid": str(track), "id": None, "bp": None, "s": None,
                     "args": json.dumps({"name": TRACK_NAMES[track]})})
    return meta + slices
