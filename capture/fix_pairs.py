"""Fix pairs: for each finding rule that predicts a saving, a loop with the problem and the same loop
fixed, profiled as capture/loops.py profiles (a torch.profiler `schedule`, no per-step sync) with each
loop's truth measured without the profiler, so a rule's predicted saving can be checked against what
the fix really saves (the before loop's step_us less the after loop's).

    python -m tracekit.capture.fix_pairs --out DIR [--device cuda|cpu] [--only NAME,...] [--repeat ROUNDS]

Each loop writes DIR/<name>.json.gz and its truth into DIR/truth.json (loops.capture does both), with
three more keys: `pair`, `role` (before or after) and `gpu_busy_us`, the GPU's busy time per step (the
union of its kernels', copies' and fills' spans, from CUPTI, in a profile that synchronises every
step). With --repeat, no traces: each loop's step_us again, in interleaved rounds, into DIR/repeats.json
(repeat_truth). Capture a pair's two loops in one process, before then after: the same shapes. On a CPU the
loops are small, and those that need CUDA (graphs, pinned memory) are skipped. The pairs (bf16 on a GPU
unless said):
  infer_launch_eager, infer_launch_graph    launch_bound: 40 Linear(512)+ReLU at batch 32, eager, then
                                            replayed from a torch.cuda.CUDAGraph (captured once; a
                                            copy into its static input, then replay(), each step)
  train_launch_eager, train_launch_graph    the same trained (MSE-like loss, SGD), eager, then the
                                            whole step (forward, backward, SGD) in one graph
  infer_item, infer_no_item                 host_sync: a GPU-heavy trunk (4 Linear(4096) at batch 4096,
                                            long kernels) and a launch-heavy head (30 Linear(256)),
                                            with `if h.abs().amax().item() > 1e4` between them, then
                                            the same check kept on the GPU with torch.where
  train_item, train_no_item                 the same trained
  infer_stall, infer_no_stall               a CPU stall the GPU cannot hide: a 3 ms time.sleep between
                                            two halves of the trunk (about 0.8 ms of GPU work), then none
  infer_mask_per_call, infer_mask_once      per_call_setup: 8 chained attention layers (B=1 H=8 S=2048
                                            D=64, in-place masked_fill_) that build their causal mask
                                            (ones().triu(1)) on every call, then once
  train_mask_per_call, train_mask_once      the same trained
  infer_fp32, infer_tf32                    simt_gemm: an fp32 MLP, 4 Linear(4096) at batch 4096, with
                                            torch.backends.cuda.matmul.allow_tf32 False, then True
  train_fp32, train_tf32                    the same trained
  train_copy_pageable, train_copy_pinned    pageable_copy in training: a 64 MiB fp32 batch copied from
                                            pageable memory each step, then from pinned memory with
                                            non_blocking, into 2 Linear(4096) trained with SGD
  train_copy_prefetch                       the other fix of train_copy_pageable, captured after it
                                            in its own process: pinned, copied a step ahead on a
                                            side stream (a prefetcher)
  infer_sdpa_math, infer_sdpa_flash         fused attention: SDPA pinned to the math backend, then to
                                            flash, B=8 H=16 S=1024 D=64 causal
  train_sdpa_math, train_sdpa_flash         the same, forward and backward
  infer_sdpa_efficient, infer_sdpa_cudnn    the math backend's other fixes, the article's other
  train_sdpa_efficient, train_sdpa_cudnn    backends: SDPA pinned to memory-efficient, or cuDNN
  train_scaler_foreach, train_scaler_fused  host_sync in AMP's gradient scaler: sync_step's model
                                            (no .item() of its own) trained under fp16 autocast with
                                            a GradScaler and AdamW(fused=False), which with foreach
                                            unset runs the for-loop implementation (a parameter at
                                            a time), its step let run only after GradScaler reads
                                            found_inf (.item()); then fused=True, which checks it
                                            in its kernel (bf16 and no scaler on a CPU)
  train_scaler_default                      the same with AdamW's default, foreach (fused unset)
  train_bool_index, train_masked_loss       host_sync from a data-dependent shape: sync_step's model
                                            (no .item()) trained on a loss over the outputs a mask
                                            keeps, out[mask] (aten::index sizes its result by the
                                            mask's count, read from the GPU), then the same loss
                                            with the mask multiplied in (no read)
  infer_naive, infer_naive_inplace,         the article's module (capture/loops.naive_attention:
  infer_naive_sdpa                          masked_fill out of place, a hidden copy), then in place,
  train_naive, train_naive_inplace,         then F.scaled_dot_product_attention (is_causal, the
  train_naive_sdpa                          backend SDPA picks), at the SDPA pairs' shape
"""

import json
import sys
import time
import traceback

import torch
import torch.nn.functional as F
from torch.profiler import profile

from tracekit.capture import loops


Skip = loops.Skip  # a loop this device cannot run (CUDA graphs or pinned memory on a CPU)


def _dtype(device):
    return torch.bfloat16 if device == "cuda" else torch.float32


def _cuda_only(device, what):
    if device != "cuda":
        raise Skip(f"{what} need(s) CUDA")


def mlp(widths, device, dtype):
    """Linear+ReLU layers from widths[0] features to widths[-1]."""
    layers = []
    for width_in, width_out in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(width_in, width_out), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device, dtype)


def inference_or_training(forward, parameters, train):
    """The step around forward(): under no_grad, or a training step (a loss, backward, SGD)."""
    if not train:
        def infer():
            with torch.no_grad():
                return forward()
        return infer
    optimizer = torch.optim.SGD(parameters, lr=1e-4)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        forward().float().pow(2).mean().backward()
        optimizer.step()
    return train_step


def cuda_graph(body, warmup=3):
    """body() captured in a torch.cuda.CUDAGraph, after warm-up calls on a side stream (as the
    torch.cuda.graphs documentation does); returns the graph and body's outputs, in the graph's memory.
    Gradients that body sets to None are made, then rewritten on each replay, by the graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = body()
    return graph, outputs


def launch_step(device, train, graph):
    """Many short kernels: 40 Linear(512)+ReLU at batch 32, eager or replayed from a CUDA graph."""
    if graph:
        _cuda_only(device, "CUDA graphs")
    width, depth, batch = (512, 40, 32) if device == "cuda" else (64, 40, 8)
    model = mlp([width] * (depth + 1), device, _dtype(device))
    batch_in = torch.randn(batch, width, device=device, dtype=_dtype(device))
    static_in = batch_in.clone()  # the graph's input buffer; eager reads it too
    step = inference_or_training(lambda: model(static_in), list(model.parameters()), train)
    if not graph:
        return step
    replayed, outputs = cuda_graph(step)

    def replay():
        static_in.copy_(batch_in)  # this step's batch into the graph's input
        replayed.replay()
        return outputs
    return replay


def trunk(device):
    """A GPU-heavy trunk: 4 Linear(4096) at batch 4096 (long kernels, few launches), then a projection
    to 256 features. Returns the layers and the batch."""
    wide, narrow, batch = (4096, 256, 4096) if device == "cuda" else (256, 32, 64)
    layers = mlp([wide] * 5 + [narrow], device, _dtype(device))
    return layers, torch.randn(batch, wide, device=device, dtype=_dtype(device))


def head(device, depth=30):
    """A launch-heavy head: `depth` Linear(256)+ReLU (short kernels, many launches)."""
    narrow = 256 if device == "cuda" else 32
    return mlp([narrow] * (depth + 1), device, _dtype(device))


def sync_step(device, train, read):
    """The trunk, a check of its output, the head. With `read`, the check is a Python if on a GPU
    value: .item() waits for the GPU to finish the trunk, and only then does the CPU launch the head.
    Without, the same check stays on the GPU (torch.where)."""
    body, batch = trunk(device)
    tail = head(device)

    def forward():
        h = body(batch)
        if read:
            if h.abs().amax().item() > 1e4:
                h = h.clamp(-1e4, 1e4)
        else:
            h = torch.where(h.abs().amax() > 1e4, h.clamp(-1e4, 1e4), h)
        return tail(h)
    return inference_or_training(forward, list(body.parameters()) + list(tail.parameters()), train)


def scaler_step(device, fused):
    """sync_step's model without its check, trained as AMP's recipe trains in fp16: autocast, a
    GradScaler, AdamW(fused=`fused`). fused=False with foreach unset picks AdamW's for-loop
    implementation, whose step GradScaler.step lets run after reading found_inf; a fused step takes
    found_inf into its kernel. On a CPU, bf16 and no scaler (the reads are CUDA's)."""
    body, batch = trunk(device)
    tail = head(device)
    body, tail = body.float(), tail.float()  # fp32 weights: autocast makes the fp16 copies
    batch = batch.float()
    parameters = list(body.parameters()) + list(tail.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=1e-4, fused=fused if device == "cuda" else None)
    scaler = torch.amp.GradScaler(device, enabled=device == "cuda")
    dtype = torch.float16 if device == "cuda" else torch.bfloat16

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype):
            loss = tail(body(batch)).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return train_step


def bool_index_step(device, indexed):
    """sync_step's model without its check, trained on the mean square of the outputs above 0:
    `indexed`, out[out > 0] (a boolean index: its size is the mask's count, which the CPU reads from
    the GPU before it can go on); else the mask multiplied in and the count kept on the GPU."""
    body, batch = trunk(device)
    tail = head(device)

    def loss_of_kept():
        out = tail(body(batch)).float()
        kept = out > 0
        if indexed:
            return out[kept].pow(2).mean()
        return (out.pow(2) * kept).sum() / kept.sum().clamp(min=1)
    optimizer = torch.optim.SGD(list(body.parameters()) + list(tail.parameters()), lr=1e-4)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss_of_kept().backward()
        optimizer.step()
    return train_step


def stall_step(device, stall_s):
    """The trunk's forward with the CPU stalled between its halves (a logger, a lock): the GPU runs
    out of queued work (about 0.8 ms of it) long before the stall ends."""
    body, batch = trunk(device)
    first, second = body[:4], body[4:]

    def forward():
        h = first(batch)
        if stall_s:
            time.sleep(stall_s)
        return second(h)
    return inference_or_training(forward, None, train=False)


def mask_step(device, train, per_call, layers=8):
    """Chained attention layers (q = k = v = the last layer's output, in-place masked_fill_) that
    build their causal mask on every call, or take one built once (a registered buffer)."""
    batch, heads, seq, dim = (1, 8, 2048, 64) if device == "cuda" else (1, 2, 128, 16)
    x = torch.randn(batch, heads, seq, dim, device=device, dtype=_dtype(device), requires_grad=train)
    once = torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1)

    def forward():
        h = x
        for _ in range(layers):
            mask = torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1) if per_call else once
            scores = h @ h.transpose(-2, -1) * (dim ** -0.5)
            h = torch.softmax(scores.masked_fill_(mask, float("-inf")), dim=-1) @ h
        return h
    return inference_or_training(forward, [x], train)


def precision_step(device, train, tf32):
    """An fp32 MLP, 4 Linear(4096) at batch 4096: SIMT FMAs with TF32 off, Tensor Cores with it on."""
    width, batch = (4096, 4096) if device == "cuda" else (128, 128)
    model = mlp([width] * 5, device, torch.float32)
    x = torch.randn(batch, width, device=device)
    inner = inference_or_training(lambda: model(x), list(model.parameters()), train)

    def step():
        torch.backends.cuda.matmul.allow_tf32 = tf32  # read by each matmul: cuBLAS picks per call
        return inner()
    return step


def copy_train_step(device, pinned):
    """A training step whose 64 MiB fp32 batch comes from host memory: pageable, or pinned and
    copied with non_blocking."""
    if pinned:
        _cuda_only(device, "pinned memory")
    width = 4096 if device == "cuda" else 256
    host = torch.randn(width, width)  # 64 MiB of fp32, as a data loader hands a batch over
    if pinned:
        host = host.pin_memory()
    model = mlp([width] * 3, device, _dtype(device))
    return inference_or_training(lambda: model(host.to(device, non_blocking=pinned).to(_dtype(device))),
                                 list(model.parameters()), train=True)


def copy_prefetch_train_step(device):
    """The same training step, its batch pinned and copied a step ahead on a side stream (a
    prefetcher, as NVIDIA's and PyTorch Lightning's): the step waits for the side stream
    (wait_stream), takes the batch, queues the next batch's copy there, then computes."""
    _cuda_only(device, "pinned memory and streams")
    width = 4096
    host = torch.randn(width, width).pin_memory()
    model = mlp([width] * 3, device, _dtype(device))
    side = torch.cuda.Stream()
    ahead = {}

    def prefetch():
        with torch.cuda.stream(side):
            ahead["batch"] = host.to(device, non_blocking=True)

    def forward():
        torch.cuda.current_stream().wait_stream(side)
        batch = ahead["batch"]
        batch.record_stream(torch.cuda.current_stream())  # its memory is the main stream's to free
        prefetch()
        return model(batch.to(_dtype(device)))

    prefetch()
    return inference_or_training(forward, list(model.parameters()), train=True)


def sdpa_step(device, train, backend):
    """scaled_dot_product_attention pinned to one backend (MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION,
    CUDNN_ATTENTION), causal; backend None: the one SDPA picks."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = _attention_inputs(device, train)

    def forward():
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return inference_or_training(forward, [q, k, v], train)


def naive_step(device, train, in_place):
    """The article's module (loops.naive_attention) at sdpa_step's shape."""
    q, k, v = _attention_inputs(device, train)
    return inference_or_training(lambda: loops.naive_attention(q, k, v, in_place), [q, k, v], train)


def _attention_inputs(device, train):
    shape = (8, 16, 1024, 64) if device == "cuda" else (1, 4, 256, 32)
    return [torch.randn(shape, device=device, dtype=_dtype(device), requires_grad=train) for _ in range(3)]


# name: (pair, role, builder of the step)
PAIRS = {
    "infer_launch_eager": ("infer_launch", "before", lambda d: launch_step(d, False, graph=False)),
    "infer_launch_graph": ("infer_launch", "after", lambda d: launch_step(d, False, graph=True)),
    "train_launch_eager": ("train_launch", "before", lambda d: launch_step(d, True, graph=False)),
    "train_launch_graph": ("train_launch", "after", lambda d: launch_step(d, True, graph=True)),
    "infer_item": ("infer_item", "before", lambda d: sync_step(d, False, read=True)),
    "infer_no_item": ("infer_item", "after", lambda d: sync_step(d, False, read=False)),
    "train_item": ("train_item", "before", lambda d: sync_step(d, True, read=True)),
    "train_no_item": ("train_item", "after", lambda d: sync_step(d, True, read=False)),
    "infer_stall": ("infer_stall", "before", lambda d: stall_step(d, 0.003)),
    "infer_no_stall": ("infer_stall", "after", lambda d: stall_step(d, 0.0)),
    "infer_mask_per_call": ("infer_mask", "before", lambda d: mask_step(d, False, per_call=True)),
    "infer_mask_once": ("infer_mask", "after", lambda d: mask_step(d, False, per_call=False)),
    "train_mask_per_call": ("train_mask", "before", lambda d: mask_step(d, True, per_call=True)),
    "train_mask_once": ("train_mask", "after", lambda d: mask_step(d, True, per_call=False)),
    "infer_fp32": ("infer_tf32", "before", lambda d: precision_step(d, False, tf32=False)),
    "infer_tf32": ("infer_tf32", "after", lambda d: precision_step(d, False, tf32=True)),
    "train_fp32": ("train_tf32", "before", lambda d: precision_step(d, True, tf32=False)),
    "train_tf32": ("train_tf32", "after", lambda d: precision_step(d, True, tf32=True)),
    "train_copy_pageable": ("train_copy", "before", lambda d: copy_train_step(d, pinned=False)),
    "train_copy_pinned": ("train_copy", "after", lambda d: copy_train_step(d, pinned=True)),
    # captured apart (tests/data/h200/prefetch), after train_copy_pageable in the same process
    "train_copy_prefetch": ("train_copy", "after", lambda d: copy_prefetch_train_step(d)),
    "infer_sdpa_math": ("infer_sdpa", "before", lambda d: sdpa_step(d, False, "MATH")),
    "infer_sdpa_flash": ("infer_sdpa", "after", lambda d: sdpa_step(d, False, "FLASH_ATTENTION")),
    "train_sdpa_math": ("train_sdpa", "before", lambda d: sdpa_step(d, True, "MATH")),
    "train_sdpa_flash": ("train_sdpa", "after", lambda d: sdpa_step(d, True, "FLASH_ATTENTION")),
    "infer_sdpa_efficient": ("infer_sdpa", "after", lambda d: sdpa_step(d, False, "EFFICIENT_ATTENTION")),
    "infer_sdpa_cudnn": ("infer_sdpa", "after", lambda d: sdpa_step(d, False, "CUDNN_ATTENTION")),
    "train_sdpa_efficient": ("train_sdpa", "after", lambda d: sdpa_step(d, True, "EFFICIENT_ATTENTION")),
    "train_sdpa_cudnn": ("train_sdpa", "after", lambda d: sdpa_step(d, True, "CUDNN_ATTENTION")),
    "train_scaler_foreach": ("train_scaler", "before", lambda d: scaler_step(d, fused=False)),
    "train_scaler_fused": ("train_scaler", "after", lambda d: scaler_step(d, fused=True)),
    # the same with AdamW's default (foreach): GradScaler's read before a foreach step
    "train_scaler_default": ("train_scaler", "before", lambda d: scaler_step(d, fused=None)),
    "train_bool_index": ("train_bool_index", "before", lambda d: bool_index_step(d, indexed=True)),
    "train_masked_loss": ("train_bool_index", "after", lambda d: bool_index_step(d, indexed=False)),
    "infer_naive": ("infer_naive", "before", lambda d: naive_step(d, False, in_place=False)),
    "infer_naive_inplace": ("infer_naive", "after", lambda d: naive_step(d, False, in_place=True)),
    "infer_naive_sdpa": ("infer_naive", "after", lambda d: sdpa_step(d, False, None)),
    "train_naive": ("train_naive", "before", lambda d: naive_step(d, True, in_place=False)),
    "train_naive_inplace": ("train_naive", "after", lambda d: naive_step(d, True, in_place=True)),
    "train_naive_sdpa": ("train_naive", "after", lambda d: sdpa_step(d, True, None)),
}


def gpu_busy_us(step, device, count=3):
    """The GPU's busy time per step: the union of the spans of its kernels, copies and fills (CUPTI's
    timestamps) in a profile that synchronises every step. None off CUDA or with no GPU activity."""
    if device != "cuda":
        return None
    step()
    torch.cuda.synchronize()
    with profile(activities=loops._activities(device)) as prof:
        for _ in range(count):
            step()
            torch.cuda.synchronize()
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, busy_until = 0.0, float("-inf")
    for start, end in spans:
        if end > busy_until:
            busy += end - max(start, busy_until)
            busy_until = end
    return round(busy / count, 1) if spans else None


def capture(name, device, out):
    """Profiles and measures one loop with loops.capture; adds its pair, role and GPU busy time."""
    pair, role, build = PAIRS[name]
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        step = build(device)
        truth = loops.capture(name, device, out, {name: lambda _: (step, "scheduled")})
        try:
            busy = gpu_busy_us(step, device)
        except Exception:  # optional: the truth stands without it
            traceback.print_exc()
            busy = None
        truth.update(pair=pair, role=role, gpu_busy_us=busy)
        return truth
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32  # precision_step sets it for the loops after it


def repeat_truth(names, device, rounds):
    """step_us of each loop, `rounds` times with the loops interleaved (drift hits each alike), in a
    process that has not run the profiler; then as many rounds again after one profiler session per
    loop (kernels_per_step), to see whether having profiled changes the CPU's pace."""
    steps = {}
    for name in names:
        try:
            steps[name] = PAIRS[name][2](device)
        except Skip as why:
            print(f"{name}: skipped on {device}: {why}", flush=True)

    def rounds_of_steps():
        times = {name: [] for name in steps}
        for _ in range(rounds):
            for name, step in steps.items():
                times[name].append(round(loops.step_time_us(step, device), 1))
        return times
    unprofiled = rounds_of_steps()
    for step in steps.values():
        loops.kernels_per_step(step, device)
    profiled = rounds_of_steps()
    return {name: {"unprofiled": unprofiled[name], "after_profiler": profiled[name]} for name in steps}


def main(argv=None):
    parser = loops.loop_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, metavar="ROUNDS",
                        help="no traces: only step_us, ROUNDS times per loop, interleaved (repeat_truth), into DIR/repeats.json")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(PAIRS)
    if args.repeat:
        repeats_path = args.out / "repeats.json"
        repeats = json.loads(repeats_path.read_text()) if repeats_path.exists() else {}
        repeats.update(repeat_truth(names, args.device, args.repeat))
        repeats_path.write_text(json.dumps(repeats, indent=1) + "\n")
        for name in names:
            print(f"{name}: {repeats.get(name)}", flush=True)
        return 0
    return loops.capture_each(names, args.out, lambda name: capture(name, args.device, args.out), args.device)


if __name__ == "__main__":
    sys.exit(main())
