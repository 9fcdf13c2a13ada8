"""A fix pair across the ranks of a data-parallel job: DistributedDataParallel copying each bucket
back to the gradients after its all-reduce (gradient_as_bucket_view=False, the default), then with
gradient_as_bucket_view=True, the fix hidden_copy names for DDP's reducer::copy_bucket_to_grad.

    python -m tracekit.capture.ddp_pairs --out DIR [--ranks 2] [--rounds 5] [--device cuda]

Each rank is a process (one GPU each over NCCL; gloo on the CPU) that builds both loops and runs
capture/fix_rounds.py's protocol on them in lockstep with the other ranks: unprofiled rounds
(`pre`), each loop profiled (a schedule, record_shapes, no per-step sync) and timed right after
(`truth`), more rounds (`post`). The model is a stack of wide Linear layers on few tokens, so the
gradients' copy is a share of the step a timing can tell from the rounds' noise: 8 layers of 4096 x
4096 (134 M parameters, 537 MB of fp32 gradients a step) on 64 tokens a rank, bf16 autocast,
AdamW(fused=True). Writes DIR/<loop>_rank<R>.json.gz and DIR/timings.csv (rank 0's clock; the
ranks wait for each other at every all-reduce): loop,pair,role,phase,round,step_us.
"""

import argparse
import datetime
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from tracekit.capture.fix_rounds import capture_rounds, timings_recorder

SIZES = {"cuda": (4096, 8, 64), "cpu": (256, 4, 16)}  # width, layers, tokens a rank


def ddp_step(device, rank, bucket_view):
    """One training step of the wide stack under DDP, with or without gradient_as_bucket_view."""
    width, depth, tokens = SIZES[device]
    torch.manual_seed(0)  # every rank starts from the same weights, as DDP's broadcast makes them
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(device)
    ddp = DistributedDataParallel(model, device_ids=[rank] if device == "cuda" else None,
                                  gradient_as_bucket_view=bucket_view)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=device == "cuda")
    batch = torch.randn(tokens, width, device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = ddp(batch).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def _pairs(rank):
    return {"ddp_bucket_copy": ("ddp_bucket_view", "before", lambda device: ddp_step(device, rank, False)),
            "ddp_bucket_view": ("ddp_bucket_view", "after", lambda device: ddp_step(device, rank, True))}


def _rank(rank, ranks, out, rounds, port, device):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(minutes=5))
    pairs = _pairs(rank)
    folder = out / f"rank{rank}"
    folder.mkdir(parents=True, exist_ok=True)
    # rank 0's clock: the ranks wait for each other at every all-reduce
    record = timings_recorder(out / "timings.csv", pairs) if rank == 0 else (lambda rows: None)
    try:
        capture_rounds(pairs, list(pairs), device, folder, rounds, record, keep_going=False)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    args = parser.parse_args(argv)
    if args.device == "cuda" and torch.cuda.device_count() < args.ranks:
        print(f"{args.ranks} ranks need {args.ranks} GPUs; this machine has {torch.cuda.device_count()}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    mp.start_processes(_rank, args=(args.ranks, args.out, args.rounds, _free_port(), args.device), nprocs=args.ranks,
                       start_method="spawn")
    for rank in range(args.ranks):
        for trace in (args.out / f"rank{rank}").glob("*.json.gz"):
            trace.rename(args.out / f"{trace.name[:-len('.json.gz')]}_rank{rank}.json.gz")
        (args.out / f"rank{rank}").rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
