"""Ordinary loops, profiled as users profile them: a torch.profiler `schedule` and no per-step sync,
so the GPU runs behind the CPU and work launched in the profiler's warmup runs inside its active
window. What tracekit's per-step figures are checked on (issue [14]), beside the truth of each
loop measured without the profiler: the time per step from CUDA events over many steps, and the
kernels one step launches, counted in a profile that synchronises every step.

    python -m tracekit.capture.loops --out DIR [--device cuda|cpu] [--only NAME,...]

Each loop writes DIR/<name>.json.gz and its truth into DIR/truth.json (tests/data keeps it as truth.csv). The loops:
  infer_naive, infer_inplace     the article's attention forward (out-of-place masked_fill, then
                                 in place) at B=8 H=16 S=1024 D=64 bf16: a fix and its saving
  infer_naive_rerun              infer_naive again in another process: run-to-run noise
  train_gpt2                     GPT-2 (6 layers, from its config, random weights) training steps, AdamW
  infer_gpt2                     the same model's forward passes, no grad
  stub_last_step                 infer_inplace whose last profiled step launches nothing (the loop
                                 ended; the profiler still had a step to record)
  iterations_no_profiler_step    no schedule and no ProfilerStep: record_function("iteration_N")
                                 around each of 6 steps of SDPA pinned to cuDNN, whose first call
                                 builds its plan (about 1 s on the CPU)
Fixes and what they save (issue [15]), each pair in one process:
  train_naive, train_inplace     the attention's forward and backward, out-of-place masked_fill and in place
  train_stall, train_no_stall    train_gpt2 with a 4 ms CPU stall between forward and backward, and without
  copy_pageable, copy_pinned     a 64 MiB host-to-device copy each step from pageable memory, and from
                                 pinned memory with non_blocking, before a GEMM
"""

import argparse
import gzip
import json
import shutil
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WAIT, WARMUP, ACTIVE = 1, 2, 5
TRUTH_STEPS = 30


def naive_attention(q, k, v, in_place):
    """The article's module: scores, scale, causal mask, softmax, weighted sum."""
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5)
    mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill_(mask, float("-inf")) if in_place else scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_step(device, in_place, shape=(8, 16, 1024, 64)):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if device == "cpu":
        shape = (1, 4, 256, 32)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    return lambda: naive_attention(q, k, v, in_place)


def gpt2_steps(device, train):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)
    model = GPT2LMHeadModel(config).to(device)
    tokens = torch.randint(0, config.vocab_size, (8, 1024), device=device)
    if not train:
        model.eval()

        def forward():
            with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
                return model(tokens).logits
        return forward
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_step():
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return train_step


def attention_train_step(device, in_place):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    shape = (8, 16, 1024, 64) if device == "cuda" else (1, 4, 256, 32)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))

    def step():
        naive_attention(q, k, v, in_place).float().sum().backward()
    return step


def stalled_train_step(device, stall_s):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)
    model = GPT2LMHeadModel(config).to(device)
    tokens = torch.randint(0, config.vocab_size, (8, 1024), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(tokens, labels=tokens).loss
        if stall_s:
            time.sleep(stall_s)  # the CPU busy elsewhere (a logger, a data loader's lock)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def copy_step(device, pinned):
    host = torch.randn(16 << 20)  # 64 MiB of fp32
    if pinned and device == "cuda":
        host = host.pin_memory()
    weight = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16 if device == "cuda" else torch.float32)

    def step():
        batch = host.to(device, non_blocking=pinned).view(4096, 4096).to(weight.dtype)
        return batch @ weight
    return step


def cudnn_sdpa_step(device):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, k, v = (torch.randn(4, 16, 2048, 64, device=device, dtype=dtype) for _ in range(3))
    backend = SDPBackend.CUDNN_ATTENTION if device == "cuda" else SDPBackend.MATH

    def step():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return step


def _activities(device):
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def profile_scheduled(step, device, path, stub_last=False, active=ACTIVE):
    """The loop as a user writes it: schedule(wait, warmup, active), prof.step() each iteration,
    no sync. With `stub_last`, the last active step launches nothing."""
    iterations = WAIT + WARMUP + active
    with profile(activities=_activities(device), schedule=schedule(wait=WAIT, warmup=WARMUP, active=active),
                 record_shapes=True, on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
        for index in range(iterations):
            if not (stub_last and index == iterations - 1):
                step()
            prof.step()
    _sync(device)


def profile_iterations(step, device, path, count=6):
    """No schedule, no ProfilerStep: a record_function range per iteration, as many scripts mark them."""
    with profile(activities=_activities(device), record_shapes=True) as prof:
        for index in range(count):
            with record_function(f"iteration_{index}"):
                step()
        _sync(device)
    prof.export_chrome_trace(str(path))


def kernels_per_step(step, device):
    """Kernels (and copies, fills) one step launches: a profile that synchronises every step."""
    if device != "cuda":
        return None
    step()
    _sync(device)
    with profile(activities=_activities(device)) as prof:
        for _ in range(3):
            step()
            _sync(device)
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(gpu) / 3


def step_time_us(step, device, count=TRUTH_STEPS):
    """Time per step of the loop run freely (no profiler, no per-step sync): CUDA events around
    `count` steps after a warm-up, the GPU's pace in a GPU-bound loop."""
    for _ in range(3):
        step()
    _sync(device)
    if device != "cuda":
        start = time.perf_counter()
        for _ in range(count):
            step()
        return (time.perf_counter() - start) / count * 1e6
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(count):
        step()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / count * 1e3


LOOPS = {
    "infer_naive": lambda device: (attention_step(device, False), "scheduled"),
    "infer_inplace": lambda device: (attention_step(device, True), "scheduled"),
    "infer_naive_rerun": lambda device: (attention_step(device, False), "scheduled"),
    "train_gpt2": lambda device: (gpt2_steps(device, True), "scheduled"),
    "infer_gpt2": lambda device: (gpt2_steps(device, False), "scheduled"),
    "stub_last_step": lambda device: (attention_step(device, True), "stub"),
    "iterations_no_profiler_step": lambda device: (cudnn_sdpa_step(device), "iterations"),
    "train_naive": lambda device: (attention_train_step(device, False), "scheduled"),
    "train_inplace": lambda device: (attention_train_step(device, True), "scheduled"),
    "train_stall": lambda device: (stalled_train_step(device, 0.004), "scheduled"),
    "train_no_stall": lambda device: (stalled_train_step(device, 0.0), "scheduled"),
    "copy_pageable": lambda device: (copy_step(device, False), "scheduled"),
    "copy_pinned": lambda device: (copy_step(device, True), "scheduled"),
}


def capture(name, device, out, loops=None):
    """Profiles loop `name` of `loops` (default LOOPS) into out/<name>.json.gz and returns its truth."""
    step, how = (loops or LOOPS)[name](device)
    raw = out / f"{name}.json"
    if how == "iterations":
        profile_iterations(step, device, raw)  # first: the cold cuDNN call is what it shows
    else:
        profile_scheduled(step, device, raw, stub_last=how == "stub")
    truth = {"loop": name, "how": how, "device": device,
             "step_us": round(step_time_us(step, device), 1), "kernels_per_step": kernels_per_step(step, device),
             "schedule": None if how == "iterations" else {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
             "torch": torch.__version__,
             "gpu": torch.cuda.get_device_name() if device == "cuda" else None}
    keep_gzipped(raw, out / f"{name}.json.gz")
    return truth


def keep_gzipped(raw, path):
    """The trace at `raw` gzipped into `path`, the raw file removed."""
    with open(raw, "rb") as source, gzip.open(path, "wb", compresslevel=9) as sink:
        shutil.copyfileobj(source, sink)
    raw.unlink()


def loop_parser(description):
    """The options every capture script of loops takes: --out, --device, --only."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", help="comma-separated loop names (default: all)")
    return parser


def main(argv=None):
    parser = loop_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(LOOPS)
    return capture_each(names, args.out, lambda name: capture(name, args.device, args.out), args.device)


class Skip(Exception):
    """A loop this torch or device cannot run."""


def capture_each(names, out, capture_one, device):
    """Runs capture_one(name) for each name into OUT/truth.json (kept between runs, so a second run
    adds to it); a loop that fails or cannot run here leaves the others to run. Exit status: 1 when
    any failed."""
    truths_path = out / "truth.json"
    truths = json.loads(truths_path.read_text()) if truths_path.exists() else {}
    failed = []
    for name in names:
        started = time.time()
        try:
            truths[name] = capture_one(name)
        except Skip as why:
            print(f"{name}: skipped on {device}: {why}", flush=True)
            continue
        except Exception:  # one loop's failure leaves the others to run
            traceback.print_exc()
            failed.append(name)
            continue
        print(f"{name}: {truths[name]} in {time.time() - started:.1f} s", flush=True)
        truths_path.write_text(json.dumps(truths, indent=1) + "\n")
    if failed:
        print("failed:", ",".join(failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
