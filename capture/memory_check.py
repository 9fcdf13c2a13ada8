"""Measures each step's peak memory outside the profiler, beside a profiled capture of the same
steps, so that tracekit's memory_steps can be checked against torch.cuda.max_memory_allocated.

    python -m tracekit.capture.memory_check --out DIR [--variants naive,naive_inplace,...] [--steps 6]

On a CUDA GPU, with the capture's GPU shape (B=4 H=16 S=2048 D=64 bf16 unless given), for each
variant: profiles `--steps` calls with profile_memory=True into DIR/<variant>.json.gz (as
`tracekit capture --profile-memory` does), then runs the same calls `--steps` times more outside
the profiler, each after torch.cuda.reset_peak_memory_stats(), and prints and writes to
DIR/measured.csv, per step: memory_allocated() before the call, max_memory_allocated() and
max_memory_reserved() after it. Both runs hold the previous call's output when a call starts (the
capture keeps it to check it), so a steady profiled step and a measured one hold the same memory.

The device has no DuckDB: compare where tracekit is installed (docs/memory.md has the query):

    tracekit load DIR --db memcheck.duckdb
    tracekit query --db memcheck.duckdb --allow-files --sql @capture/memory_check.sql
"""

import argparse
import csv
import sys
from pathlib import Path

import torch

from tracekit.capture.environment import describe_environment
from tracekit.capture.runner import GPU_DEFAULT_SHAPE, CaptureConfig, _profile, _shape, _warm_up_device, _workload
from tracekit.capture.variants import VARIANTS

DEFAULT_VARIANTS = ("naive", "naive_inplace", "naive_mul_inplace", "sdpa_flash")
COLUMNS = ("trace", "step", "start_allocated_bytes", "max_memory_allocated_bytes", "max_memory_reserved_bytes")


def measured_steps(call, steps):
    """[(step, allocated before, max allocated, max reserved)] of `steps` calls outside the profiler."""
    rows = []
    for step in range(steps):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        call()
        torch.cuda.synchronize()
        rows.append((step, start, torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()))
    return rows


def check(config, variants):
    """Profiles and measures each variant; returns the rows of measured.csv."""
    environment = describe_environment(config.device)
    _warm_up_device(config)
    rows = []
    for name in variants:
        variant, shape = VARIANTS[name], _shape(config, config.seq_lens[0])
        call, _ = _workload(variant, shape, config)
        _profile(call, variant, shape, config, environment, config.out_dir / f"{name}.json.gz")
        for step, start, peak, reserved in measured_steps(call, config.steps):
            rows.append((name, step, start, peak, reserved))
            print(f"{name:18} step {step}: allocated at start {start:>13,}  max_memory_allocated {peak:>13,}"
                  f"  (+{peak - start:,})  max_memory_reserved {reserved:,}", flush=True)
        del call
        torch.cuda.empty_cache()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--steps", type=int, default=6)
    for key in ("batch", "heads", "head_dim"):
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, default=GPU_DEFAULT_SHAPE[key])
    parser.add_argument("--seq-len", type=int, default=GPU_DEFAULT_SHAPE["seq_lens"][0])
    parser.add_argument("--dtype", default=GPU_DEFAULT_SHAPE["dtype"])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("memory_check needs a CUDA GPU: max_memory_allocated is the CUDA allocator's")
    args.out.mkdir(parents=True, exist_ok=True)
    config = CaptureConfig(out_dir=args.out, variants=args.variants.split(","), device="cuda", batch=args.batch,
                           heads=args.heads, seq_lens=(args.seq_len,), head_dim=args.head_dim, dtype=args.dtype,
                           steps=args.steps, command=" ".join(["python -m tracekit.capture.memory_check", *sys.argv[1:]]),
                           profile_memory=True)
    rows = check(config, config.variants)
    with open(args.out / "measured.csv", "w", newline="") as sink:
        writer = csv.writer(sink)
        writer.writerow(COLUMNS)
        writer.writerows(rows)


if __name__ == "__main__":
    main()
