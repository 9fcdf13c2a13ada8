"""Data-parallel training across ranks: one trace per rank, the job tracekit's rank views read.

`tracekit capture --train --ranks N` starts N processes (one GPU each over NCCL; gloo on a CPU),
each training training.py's transformer under DistributedDataParallel on its own batch, profiling
the same steps. `--slow-rank R --delay-ms MS` makes rank R sleep MS on its host before each step:
R launches its step late, so every other rank's gradient all-reduce waits for it, as behind a real
straggler; the sleep is a `tracekit.injected_delay` range in R's trace, so the truth is in the data.
"""

import datetime
import json
import os
import socket
import statistics
import time
import warnings
from dataclasses import asdict

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import record_function

from tracekit.capture.environment import describe_environment
from tracekit.capture.measure import steady_timings
from tracekit.capture.runner import DTYPES, VariantResult, _manifest, _profile, _reason, _release_memory
from tracekit.capture.training import build_training_step
from tracekit.capture.variants import VARIANTS, Shape


def rank_trace_name(variant, rank):
    return f"train_{variant}_rank{rank}.json.gz"


def run_ranks(config, ranks, slow_rank=None, delay_ms=0.0, report=lambda line: None):
    """Capture every variant as an N-rank data-parallel job; return the manifest (also on disk)."""
    config.out_dir.mkdir(parents=True, exist_ok=True)
    context = mp.get_context("spawn")
    results = []
    for variant_name in config.variants:
        queue = context.SimpleQueue()
        # A fresh port per job: the last job's store may still hold its port for a moment.
        port = _free_port()
        mp.spawn(_rank_main, args=(ranks, port, config, variant_name, slow_rank, delay_ms, queue),
                 nprocs=ranks, join=True)
        rank_results = sorted((queue.get() for _ in range(ranks)), key=lambda r: r["rank"])
        for rank_result in rank_results:
            result = VariantResult(**rank_result["result"])
            results.append(result)
            report(_progress_line(rank_result["rank"], ranks, result))
    manifest = _manifest(config, describe_environment(config.device), results)
    manifest["ranks"] = {"world_size": ranks, "backend": _backend(config.device),
                         "slow_rank": slow_rank, "delay_ms_per_step": delay_ms if slow_rank is not None else None}
    manifest["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    (config.out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _rank_main(rank, ranks, port, config, variant_name, slow_rank, delay_ms, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if config.device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(_backend(config.device), rank=rank, world_size=ranks)
    try:
        result = _capture_rank(rank, ranks, config, VARIANTS[variant_name], slow_rank, delay_ms)
    finally:
        dist.destroy_process_group()
    queue.put({"rank": rank, "result": asdict(result)})


def _capture_rank(rank, ranks, config, variant, slow_rank, delay_ms):
    shape = Shape(config.batch, config.heads, config.seq_lens[0], config.head_dim,
                  DTYPES[config.dtype], config.causal, config.device)
    file_name = rank_trace_name(variant.name, rank)
    result = VariantResult(variant.name, shape.seq_len, "skipped")
    if variant.needs_cuda and shape.device != "cuda":
        result.reason = f"needs CUDA: {variant.name} {variant.cuda_only_why}"
        return result
    delay_s = delay_ms / 1e3 if rank == slow_rank else 0.0
    path = config.out_dir / file_name
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            device_ids = [rank] if config.device == "cuda" else None
            step, _ = build_training_step(variant, shape, data_seed=rank,
                                          wrap=lambda net: DistributedDataParallel(net, device_ids=device_ids))
            call = _slowed(step, delay_s) if delay_s else step
            extra = {"rank": rank, "world_size": ranks, "variant": f"train_{variant.name}_rank{rank}",
                     "injected_delay_ms_per_step": delay_ms if delay_s else 0.0}
            _profile(call, variant, shape, config, describe_environment(config.device), path, extra)
            times = steady_timings(call, shape.device, repeat=config.timing_repeats)
        result.status, result.file, result.trace_bytes = "ran", file_name, path.stat().st_size
        result.steady_ms_per_call = statistics.median(times)
        result.steady_ms_min, result.steady_ms_max = min(times), max(times)
    except Exception as exc:  # a refused backend or a failed rank: report it; the job's others go on
        result.reason = _reason(exc, caught)
        path.unlink(missing_ok=True)
    finally:
        _release_memory(shape.device)
    return result


def _slowed(step, delay_s):
    def slowed_step():
        with record_function("tracekit.injected_delay"):
            time.sleep(delay_s)
        step()
    return slowed_step


def _backend(device):
    return "nccl" if device == "cuda" else "gloo"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _progress_line(rank, ranks, result):
    label = f"[rank {rank}/{ranks}] {result.variant}"
    if result.status != "ran":
        return f"{label}: skipped ({result.reason})"
    return (f"{label}: {result.steady_ms_per_call:.3f} ms/step (min {result.steady_ms_min:.3f}, "
            f"max {result.steady_ms_max:.3f}) -> {result.file}")
