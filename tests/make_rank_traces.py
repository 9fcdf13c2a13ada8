"""Builds the rank traces of a data-parallel job from real traces, with one rank made late by a
known delay: the test data of the rank queries (rank_steps, collective_skew, comm_overlap).

Each rank is a copy of a real H200 training trace (tests/data/h200/train_bf16: 8 steps of a small
transformer, each ending in cudaDeviceSynchronize) given a gradient all_reduce per step: the real
NCCL kernel, its cudaLaunchKernelExC and its record_param_comms op, copied from the rank 0 trace
of a real 2-GPU job (tests/data/foreign/rtx4090_tp2_rank0_nccl_allreduce), with the group, size
and Seq of this job. What is made up is only the timing, done the way a straggler does it:

- Every rank pauses at the middle of each step's GPU work (between two kernels) for a small
  jitter, and the straggler, in the chosen step, for the delay besides: everything of that rank
  after that point, CPU and GPU, happens that much later, and the ops open then last that much
  longer (the step among them).
- The all_reduce is issued from a CPU thread of its own (as DDP's hooks run on autograd's) and
  its kernel starts beside the step's last compute kernels, --overlap-us before the compute ends
  (0: when it has ended), on a stream of its own. It ends on every rank when the last rank has
  arrived, plus its own time (--allreduce-us): the ranks that came earlier run a longer NCCL
  kernel, waiting. The step's closing cudaDeviceSynchronize waits for it, so every rank's step
  ends then, as in a real job in lockstep.

So in the chosen step the straggler's step holds the delay as work and the others hold it as
wait in their all_reduce kernel: the others' kernels are longer by the delay, give or take the
jitter.

Usage: python tests/make_rank_traces.py OUT_DIR [--ranks 4] [--straggler 2] [--step 3]
           [--delay-us 3000] [--allreduce-us 500] [--jitter-us 20] [--overlap-us 200] [--seed 0]
           [--kernel-name NAME]
It writes OUT_DIR/rank<r>/trace.json.gz (a job laid out one folder per rank), plus manifest.json with
the parameters and the pauses it used (as manifest.json, which a folder load passes over).
"""

import argparse
import copy
import gzip
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
BASE_TRACE = DATA / "h200" / "train_bf16" / "train_sdpa_default.json.gz"
NCCL_TRACE = DATA / "foreign" / "rtx4090_tp2_rank0_nccl_allreduce.json.gz"
COMM_STREAM = 20  # the NCCL stream of every rank (the base trace computes on stream 7)
GRADIENT_ELEMENTS = 4_194_304  # what each all_reduce sums (fp32): 16 MiB
# The CPU side of each all_reduce: record_param_comms for 8 us, the launch from 2 to 6 us into it.
OP_US, LAUNCH_AT_US, LAUNCH_US = 8.0, 2.0, 4.0
FIRST_CORRELATION, FIRST_EXTERNAL_ID = 90_000_000, 9_000_000  # far above the base trace's ids
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass
class Job:
    ranks: int = 4
    straggler: int = 2
    step: int = 3  # the ProfilerStep#N the straggler is late in
    delay_us: float = 3000.0
    allreduce_us: float = 500.0
    jitter_us: float = 20.0
    overlap_us: float = 200.0  # how long before the step's compute ends its all_reduce starts
    seed: int = 0
    # The NCCL kernel's name: None keeps the real one (NCCL 2.19+: ncclDevKernel_AllReduce_...);
    # HTA 0.5's straggler analysis knows only the older ncclKernel_... names.
    kernel_name: str = None
    pauses_us: dict = field(default_factory=dict)  # step -> each rank's pause in it
    kernel_us: dict = field(default_factory=dict)  # step -> each rank's all_reduce kernel time


def read(path):
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


def insert_gap(events, at, gap):
    """Everything from `at` on happens `gap` us later; what is running at `at` lasts `gap` longer."""
    for event in events:
        ts = event.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            continue
        if ts >= at:
            event["ts"] = round(ts + gap, 3)
        elif event.get("ph") == "X" and isinstance(event.get("dur"), (int, float)) and ts + event["dur"] > at:
            event["dur"] = round(event["dur"] + gap, 3)


def step_points(events, overlap_us):
    """Per ProfilerStep#N (by N): its closing cudaDeviceSynchronize, the end of the GPU work it
    launched, the end of the kernel in the middle of that work (where ranks pause), and the compute
    kernel the all_reduce starts beside (None: it starts when the compute is done)."""
    launches = {}
    for event in events:
        if event.get("cat") in ("cuda_runtime", "cuda_driver"):
            launches[event["args"].get("correlation")] = event["ts"]
    gpu = sorted((e for e in events if e.get("cat") in GPU_CATEGORIES and e.get("ph") == "X"), key=lambda e: e["ts"])
    points = {}
    for step in (e for e in events if e.get("name", "").startswith("ProfilerStep#")):
        start, end = step["ts"], step["ts"] + step["dur"]
        syncs = [e for e in events if e.get("name") == "cudaDeviceSynchronize" and start <= e["ts"] < end]
        work = [e for e in gpu if start <= launches.get(e["args"].get("correlation"), -1) < end]
        kernels = [e for e in work if e["cat"] == "kernel"]
        if not syncs or not kernels:
            raise SystemExit(f"{BASE_TRACE.name}: {step['name']} has no cudaDeviceSynchronize or no kernels")
        work_end = max(e["ts"] + e["dur"] for e in work)
        middle = kernels[len(kernels) // 2 - 1]
        beside = [k for k in kernels if k["ts"] <= work_end - overlap_us][-1] if overlap_us > 0 else None
        if beside is not None and beside["ts"] <= middle["ts"] + middle["dur"]:
            raise SystemExit(f"--overlap-us {overlap_us:g} reaches back past the middle of {step['name']}")
        points[int(step["name"].split("#")[1])] = StepPoints(
            syncs[-1], work_end, middle["ts"] + middle["dur"],
            None if beside is None else (beside["ts"], launches[beside["args"]["correlation"]]))
    return points


@dataclass
class StepPoints:
    sync: dict  # the step's closing cudaDeviceSynchronize
    work_end: float  # when the GPU work the step launched ends
    middle: float  # the end of its middle kernel: where each rank pauses
    beside: tuple  # (start, launch time) of the compute kernel the all_reduce starts with, or None

    def allreduce_times(self):
        """(when the all_reduce kernel starts, where the step waits for it to end: 1 us into the
        sync or when the compute ends, when its op ends on the CPU), on the base trace's clock."""
        waits_at = max(self.work_end, self.sync["ts"] + 1)
        if self.beside is None:
            return waits_at, waits_at, self.sync["ts"]
        return self.beside[0], waits_at, self.beside[1]


def nccl_events(trace):
    """The real all_reduce of the NCCL trace: its kernel, launch and record_param_comms op."""
    events = trace["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    launch = next(e for e in events if e.get("cat") == "cuda_runtime"
                  and e["args"].get("correlation") == kernel["args"]["correlation"])
    op = next(e for e in events if e.get("name") == "record_param_comms"
              and e["args"].get("External id") == kernel["args"]["External id"])
    return kernel, launch, op


def allreduce(nccl, job, step, issued_at, thread, gpu_pid):
    """The three events of step `step`'s all_reduce, from the real ones: the op ends at
    `issued_at` on CPU thread `thread` (pid, tid); the kernel's time is set by the caller."""
    kernel, launch, op = (copy.deepcopy(e) for e in nccl)
    correlation, external_id = FIRST_CORRELATION + step, FIRST_EXTERNAL_ID + step
    group = {"Group size": job.ranks, "Process Group Ranks": "[" + ", ".join(map(str, range(job.ranks))) + "]",
             "In msg nelems": GRADIENT_ELEMENTS, "Out msg nelems": GRADIENT_ELEMENTS, "dtype": "Float", "Seq": step}
    op.update(ts=round(issued_at - OP_US, 3), dur=OP_US, pid=thread[0], tid=thread[1])
    op["args"].update(group, **{"External id": external_id})
    launch.update(ts=round(issued_at - OP_US + LAUNCH_AT_US, 3), dur=LAUNCH_US, pid=thread[0], tid=thread[1])
    launch["args"].update(correlation=correlation, **{"External id": external_id})
    kernel.update(pid=gpu_pid, tid=COMM_STREAM, name=job.kernel_name or kernel["name"])
    kernel["args"].update(group, stream=COMM_STREAM, correlation=correlation, device=gpu_pid,
                          **{"External id": external_id})
    return [op, launch, kernel]


def rank_trace(base, nccl, points, job, rank):
    trace = copy.deepcopy(base)
    events = trace["traceEvents"]
    gpu_pid = next(e["pid"] for e in events if e.get("cat") == "kernel")
    main = points[min(points)].sync
    # The all_reduces are issued from a CPU thread of their own (as DDP's hooks run on autograd's).
    thread = (main["pid"], max(e["tid"] for e in events if isinstance(e.get("tid"), int)) + 1)
    # Latest step first: a gap moves only what comes after it, so the points of earlier steps hold.
    for step in sorted(points, reverse=True):
        point, pauses = points[step], job.pauses_us[step]
        sync = next(e for e in events if e.get("name") == "cudaDeviceSynchronize" and e["ts"] == point.sync["ts"])
        if sync["dur"] <= 1 or sync["ts"] + sync["dur"] < point.work_end:
            raise SystemExit(f"{BASE_TRACE.name}: step {step}'s cudaDeviceSynchronize ends before its GPU work")
        start, waits_at, issued_at = point.allreduce_times()
        cpu_and_gpu = allreduce(nccl, job, step, issued_at, thread, gpu_pid)
        end = start + job.kernel_us[step][rank]  # before this rank's pause
        insert_gap(events, waits_at, max(end - waits_at, 0.0))  # the sync, and the step, wait for it
        cpu_and_gpu[2].update(ts=round(start, 3), dur=round(end - start, 3))
        events.extend(cpu_and_gpu)
        insert_gap(events, point.middle, pauses[rank])
    trace.pop("tracekit", None)  # not a `tracekit capture` of its own
    trace["traceName"] = f"rank{rank}/trace.json"
    trace["distributedInfo"] = {
        "backend": "nccl", "rank": rank, "world_size": job.ranks, "pg_count": 1,
        "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                       "pg_size": job.ranks, "ranks": list(range(job.ranks))}]}
    return trace


def kernel_times(job, points):
    """Each rank's all_reduce kernel time per step. A rank's clock runs ahead of the base trace's by
    its pauses and waits so far; the kernels of a step end together, when the last rank has arrived
    plus the all_reduce's own time."""
    ahead, times = [0.0] * job.ranks, {}
    for step in sorted(points):
        start, waits_at, _ = points[step].allreduce_times()
        pauses = job.pauses_us[step]
        arrivals = [start + ahead[rank] + pauses[rank] for rank in range(job.ranks)]
        times[step] = [round(max(arrivals) + job.allreduce_us - arrival, 3) for arrival in arrivals]
        for rank in range(job.ranks):
            ahead[rank] += max(start + times[step][rank] - waits_at, 0.0) + pauses[rank]
    return times


def build(out_dir, job=None):
    """Writes the job's rank traces under `out_dir`; returns the Job (with its pauses) and their paths."""
    job = job or Job()
    if not 0 <= job.straggler < job.ranks:
        raise SystemExit(f"--straggler must be a rank of the job (0 to {job.ranks - 1})")
    base, nccl = read(BASE_TRACE), nccl_events(read(NCCL_TRACE))
    points = step_points(base["traceEvents"], job.overlap_us)
    if job.step not in points:
        raise SystemExit(f"--step must be one of the base trace's steps {sorted(points)}")
    draw = random.Random(job.seed)
    job.pauses_us = {step: [round(draw.uniform(0, job.jitter_us), 3)
                            + (job.delay_us if rank == job.straggler and step == job.step else 0.0)
                            for rank in range(job.ranks)] for step in sorted(points)}
    job.kernel_us = kernel_times(job, points)
    out_dir = Path(out_dir)
    paths = []
    for rank in range(job.ranks):
        path = out_dir / f"rank{rank}" / "trace.json.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        # Kineto's own separators: HTA finds the rank with the regex `"rank":\s+(\d+)`.
        text = json.dumps(rank_trace(base, nccl, points, job, rank))
        path.write_bytes(gzip.compress(text.encode(), compresslevel=1, mtime=0))
        paths.append(path)
    (out_dir / "manifest.json").write_text(json.dumps(asdict(job), indent=1) + "\n")
    return job, paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    defaults = Job()
    for name in ("ranks", "straggler", "step", "seed"):
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    parser.add_argument("--kernel-name", dest="kernel_name", help="the NCCL kernel's name (default: the real one)")
    for name in ("delay_us", "allreduce_us", "jitter_us", "overlap_us"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=float, default=getattr(defaults, name))
    args = vars(parser.parse_args())
    job, paths = build(args.pop("out_dir"), Job(**args))
    print(f"wrote {len(paths)} rank traces to {paths[0].parent.parent}: rank {job.straggler} is "
          f"{job.delay_us:g} µs late in step {job.step}")


if __name__ == "__main__":
    main()
