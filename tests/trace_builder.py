"""Builds minimal Kineto traces for tests: the events of one situation and nothing else.

Each function returns an event as Kineto writes it (same categories, arg names and shapes), so
a test states the situation in a few lines and the loader sees what a profiler would write.
Times are microseconds. `write` saves a trace in one of the layouts traces come in.
"""

import gzip
import json

H200 = {"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "numSms": 132}


def op(name, ts, dur, *, tid=1, pid=1, cat="cpu_op", external_id=None):
    args = {} if external_id is None else {"External id": external_id}
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def annotation(name, ts, dur, **kw):
    return op(name, ts, dur, cat="user_annotation", **kw)


def step(n, ts, dur, **kw):
    return annotation(f"ProfilerStep#{n}", ts, dur, **kw)


def launch(ts, correlation, *, dur=2, name="cudaLaunchKernel", tid=1, pid=1, external_id=None,
           cat="cuda_runtime"):
    args = {"correlation": correlation}
    if external_id is not None:
        args["External id"] = external_id
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(name, ts, dur, correlation, *, stream=7, device=0, external_id=None):
    args = {"device": device, "stream": stream, "correlation": correlation,
            "registers per thread": 32, "shared memory": 0, "grid": [1, 1, 1], "block": [128, 1, 1]}
    if external_id is not None:
        args["External id"] = external_id
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": args}


def collective_kernel(name, ts, dur, correlation, collective, in_nelems, out_nelems, group_size):
    """An NCCL kernel with the comms args PyTorch records (bf16, a group of ranks 0..group_size-1)."""
    event = kernel(name, ts, dur, correlation, stream=20)
    event["args"].update({"Collective name": collective, "In msg nelems": in_nelems, "Out msg nelems": out_nelems,
                          "Group size": group_size, "dtype": "BFloat16", "Process Group Name": str(group_size),
                          "Process Group Ranks": str(list(range(group_size)))})
    return event


def memcpy(ts, dur, correlation, *, kind="DtoD", nbytes=None, stream=7, device=0, external_id=None, host="Host"):
    """A copy; `host="Pageable"` names the host side as Kineto does for unpinned memory."""
    args = {"device": device, "stream": stream, "correlation": correlation}
    if nbytes is not None:
        args["bytes"] = nbytes
    if external_id is not None:
        args["External id"] = external_id
    names = {"DtoD": "Device -> Device", "HtoD": f"{host} -> Device", "DtoH": f"Device -> {host}"}
    return {"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {kind} ({names[kind]})", "pid": device,
            "tid": stream, "ts": ts, "dur": dur, "args": args}


def trace(events, *, devices=(H200,), **header):
    return {"schemaVersion": 1, "deviceProperties": list(devices), **header, "traceEvents": list(events),
            "traceName": "built by tests/trace_builder.py"}


LAYOUTS = ("kineto", "compact_lines", "minified", "indent4", "kineto_gz")


def dumps(content, layout="kineto"):
    """The trace as text in one layout: Kineto's own (events at an indent of two, keys on the
    event's lines), one compact event per line, a single line, or another tool's indent of four."""
    header = {k: v for k, v in content.items() if k not in ("traceEvents", "traceName")}
    events = content["traceEvents"]
    tail = {k: v for k, v in content.items() if k == "traceName"}
    if layout in ("kineto", "kineto_gz"):
        head = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in header.items())
        body = ",\n".join("  {\n    " + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in e.items())
                          + "\n  }" for e in events)
        rest = "".join(f",\n  {json.dumps(k)}: {json.dumps(v)}" for k, v in tail.items())
        return "{\n" + head + (",\n" if head else "") + '  "traceEvents": [\n' + body + "\n  ]" + rest + "\n}"
    if layout == "compact_lines":
        head = json.dumps(header)[:-1] + (", " if header else "")
        body = ",\n".join(json.dumps(e) for e in events)
        rest = "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in tail.items())
        return head + '"traceEvents": [\n' + body + "\n]" + rest + "}"
    if layout == "minified":
        return json.dumps(content, separators=(",", ":"))
    if layout == "indent4":
        return json.dumps(content, indent=4)
    raise ValueError(layout)


def write(folder, name, content, layout="kineto"):
    """Writes the trace as `folder/name.json` (or .json.gz); returns the path."""
    text = dumps(content, layout)
    if layout.endswith("_gz"):
        path = folder / f"{name}.json.gz"
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path = folder / f"{name}.json"
        path.write_text(text)
    return path
