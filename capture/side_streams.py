"""Work on a side stream that the main stream waits for (cudaStreamWaitEvent), profiled with
Kineto's CUDA sync events on (`enable_cuda_sync_events`: each stream wait says which stream and
which event record it waits on), as capture/loops.py profiles otherwise (a schedule, no per-step
sync), with each loop's truth measured without the profiler. What tracekit's replay of a wait
between streams is checked on (issue [15]).

    python -m tracekit.capture.side_streams --out DIR [--only NAME,...]

The loops (bf16, one process, in this order):
  side_stream        main stream: a GEMM 4096x4096x4096 (aten::mm); side stream: a batched GEMM
                     4x4096x4096x4096 (aten::bmm), longer; then the main stream waits for the side
                     (wait_stream) and adds the two
  side_stream_none   the same loop with no side work: the main stream still waits for the (idle)
                     side stream: the fix "drop the side work", whose saving the replay predicts
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from tracekit.capture.loops import ACTIVE, WAIT, WARMUP, keep_gzipped, kernels_per_step, step_time_us


def side_stream_step(side_work):
    x, w = (torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    y, v = (torch.randn(4, 4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    side = torch.cuda.Stream()
    done = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def step():
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            b = torch.bmm(y, v)[0] if side_work else done
        a = x @ w
        main.wait_stream(side)
        return a + b
    return step


LOOPS = {"side_stream": lambda: side_stream_step(True), "side_stream_none": lambda: side_stream_step(False)}


def profile_with_sync_events(step, path):
    config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE), experimental_config=config,
                 on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            step()
            prof.step()
    torch.cuda.synchronize()


def capture(name, out):
    step = LOOPS[name]()
    raw = out / f"{name}.json"
    profile_with_sync_events(step, raw)
    truth = {"loop": name, "step_us": round(step_time_us(step, "cuda"), 1),
             "kernels_per_step": kernels_per_step(step, "cuda"),
             "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE}, "torch": torch.__version__,
             "gpu": torch.cuda.get_device_name()}
    keep_gzipped(raw, out / f"{name}.json.gz")
    return truth


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated loop names (default: all)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("side_streams: needs a CUDA GPU", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    truths = {}
    for name in (args.only.split(",") if args.only else list(LOOPS)):
        started = time.time()
        truths[name] = capture(name, args.out)
        print(f"{name}: {truths[name]} in {time.time() - started:.1f} s", flush=True)
    (args.out / "truth.json").write_text(json.dumps(truths, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
