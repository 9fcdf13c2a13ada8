"""CUDA graphs captured inside the profiler's window: the trace holds the capture (the ops and their
launch calls, which run no kernel then) and the replays (one cudaGraphLaunch whose kernels name no
op), so a replayed kernel's work can come from the op that launched it at capture.

    python -m tracekit.capture.graph_in_trace --out DIR [--only NAME,...]

Each loop is fix_pairs' launch loop (40 Linear(512)+ReLU at batch 32, bf16), profiled with
schedule(wait=1, warmup=1, active=5), record_shapes, no per-step sync. Its steps run eager until the
first active one, which warms the step up on a side stream, captures it in a torch.cuda.CUDAGraph
(fix_pairs.cuda_graph) and replays it; the four steps after replay it. Writes DIR/<name>.json.gz
and DIR/truth.json: kernels_per_step, the GPU activities of one replay (a profile that synchronises
every step) and step_us, the replay's time per step without the profiler (loops.step_time_us).
  infer_graph_in_trace   the forward under no_grad
  train_graph_in_trace   forward, backward and SGD, the whole step in the graph
  infer_compiled_graph   the forward under no_grad, torch.compile(mode="reduce-overhead"), profiled with
                         schedule(wait=0, warmup=1, active=5): the warm-up step compiles and warms up,
                         the first active one records the CUDA graph tree's graph, the four after
                         replay it (a schedule without a warm-up step records only its last step)
"""

import sys

import torch
from torch.profiler import profile, schedule

from tracekit.capture import fix_pairs, loops

WAIT, WARMUP, ACTIVE = 1, 1, 5


def graph_loop(train):
    """(eager step, make_replay): the launch loop eager, and a function that captures it in a graph
    and returns the replaying step."""
    width, depth, batch = 512, 40, 32
    model = fix_pairs.mlp([width] * (depth + 1), "cuda", torch.bfloat16)
    batch_in = torch.randn(batch, width, device="cuda", dtype=torch.bfloat16)
    static_in = batch_in.clone()
    eager = fix_pairs.inference_or_training(lambda: model(static_in), list(model.parameters()), train)

    def make_replay():
        graph, outputs = fix_pairs.cuda_graph(eager)

        def replay():
            static_in.copy_(batch_in)
            graph.replay()
            return outputs
        return replay
    return eager, make_replay


def capture(name, device, out):
    if device != "cuda":
        raise loops.Skip("CUDA graphs need CUDA")
    eager, make_replay = graph_loop(train=name.startswith("train"))
    raw = out / f"{name}.json"
    replay = None
    with profile(activities=loops._activities(device), schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
                 record_shapes=True, on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw))) as prof:
        for index in range(WAIT + WARMUP + ACTIVE):
            if index < WAIT + WARMUP:
                eager()
            else:
                replay = replay or make_replay()
                replay()
            prof.step()
    return _kept(name, raw, out, replay, device, WAIT, WARMUP)


def _kept(name, raw, out, step, device, wait, warmup):
    """The trace at `raw` gzipped into `out`, and the loop's truth: `step`'s time without the
    profiler and its GPU activities a step."""
    torch.cuda.synchronize()
    loops.keep_gzipped(raw, out / f"{name}.json.gz")
    return {"loop": name, "device": device, "step_us": round(loops.step_time_us(step, device), 1),
            "kernels_per_step": loops.kernels_per_step(step, device),
            "schedule": {"wait": wait, "warmup": warmup, "active": ACTIVE}, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name()}


def capture_compiled(name, device, out):
    """infer_compiled_graph: see the module's docstring."""
    if device != "cuda":
        raise loops.Skip("CUDA graphs need CUDA")
    width, depth, batch = 512, 40, 32
    model = fix_pairs.mlp([width] * (depth + 1), "cuda", torch.bfloat16)
    batch_in = torch.randn(batch, width, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(model, mode="reduce-overhead")

    def step():
        with torch.no_grad():
            return compiled(batch_in)
    raw = out / f"{name}.json"
    with profile(activities=loops._activities(device), schedule=schedule(wait=0, warmup=1, active=ACTIVE),
                 record_shapes=True, on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw))) as prof:
        for _ in range(1 + ACTIVE):
            step()
            prof.step()
    return _kept(name, raw, out, step, device, 0, 1)


LOOPS = ["infer_graph_in_trace", "train_graph_in_trace", "infer_compiled_graph"]


def main(argv=None):
    parser = loops.loop_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else LOOPS
    return loops.capture_each(names, args.out, lambda name: (capture_compiled if name == "infer_compiled_graph" else capture)(
        name, args.device, args.out), args.device)


if __name__ == "__main__":
    sys.exit(main())
