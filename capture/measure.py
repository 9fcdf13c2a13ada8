"""Correctness against a float64 reference, and steady-state timing outside the profiler."""

import math
import time

import torch


def make_inputs(shape, seed=0):
    """Random q, k, v of the capture's shape (never zeros: they hide wrong results)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    dims = (shape.batch, shape.heads, shape.seq_len, shape.head_dim)
    return [
        torch.randn(dims, generator=generator).to(device=shape.device, dtype=shape.dtype)
        for _ in range(3)
    ]


def max_relative_error(out, q, k, v, causal):
    """Max over (batch, head) of ||out - ref|| / ||ref||, ref computed in float64.

    One head at a time keeps the float64 score matrix small enough for any GPU.
    """
    worst = 0.0
    scale = 1.0 / math.sqrt(q.shape[-1])
    seq = q.shape[-2]
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            qd, kd, vd = (t[b, h].double() for t in (q, k, v))
            scores = (qd @ kd.T) * scale
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            ref = torch.softmax(scores, dim=-1) @ vd
            err = (out[b, h].double() - ref).norm() / ref.norm()
            worst = max(worst, float(err))
    return worst


def steady_timings(call, device, warmup=3, repeat=20):
    """Milliseconds of each of `repeat` calls of `call()` after `warmup`, timed with CUDA events
    on a GPU (the GPU's time from the call's first launch to its last kernel's end)."""
    for _ in range(warmup):
        call()
    if device == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        if device == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def attention_flops(shape):
    """Forward FLOPs: two GEMMs of 2*S*S*D per (batch, head), halved when causal."""
    flops = 4 * shape.batch * shape.heads * shape.seq_len**2 * shape.head_dim
    return flops / 2 if shape.causal else flops
