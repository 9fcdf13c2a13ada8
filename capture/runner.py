"""Run each attention variant under torch.profiler and write its trace and the manifest.

Step convention: one forward call per `ProfilerStep#N`. Step 0 is the variant's
cold first call (cuDNN's plan build, flex's compile and first-use allocations
land there); steps 1.. are steady. The CUDA context and cuBLAS are warmed once
before any variant, so step 0 holds the variant's own cold cost and not the
process's.
"""

import contextlib
import datetime
import gc
import json
import statistics
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tracekit import __version__
from tracekit.capture.environment import describe_environment
from tracekit.capture.measure import attention_flops, make_inputs, max_relative_error, steady_timings
from tracekit.capture.training import ModelShape, build_training_step
from tracekit.capture.variants import VARIANTS, Shape

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GPU_DEFAULT_SHAPE = {"batch": 4, "heads": 16, "seq_lens": (2048,), "head_dim": 64, "dtype": "bf16"}
CPU_DEFAULT_SHAPE = {"batch": 1, "heads": 2, "seq_lens": (128,), "head_dim": 32, "dtype": "fp32"}
# Training a small model: launch-bound on a big GPU, as many real training jobs are.
GPU_TRAIN_SHAPE = {"batch": 8, "heads": 4, "seq_lens": (256,), "head_dim": 64, "dtype": "fp32"}
CPU_TRAIN_SHAPE = {"batch": 2, "heads": 2, "seq_lens": (64,), "head_dim": 32, "dtype": "fp32"}
TRAIN_LAYERS = ModelShape().layers
# The name of the top-level key that holds tracekit's metadata in every trace.
METADATA_KEY = "tracekit"


@dataclass
class CaptureConfig:
    out_dir: Path
    variants: list
    device: str
    batch: int
    heads: int
    seq_lens: tuple
    head_dim: int
    dtype: str
    causal: bool = True
    steps: int = 6
    command: str = ""
    timing_repeats: int = 20
    train: bool = False  # a training step of a small transformer per profiler step, not one forward
    tf32: bool | None = None  # TF32 for fp32 matmuls and convolutions; None leaves PyTorch's defaults
    profile_memory: bool = False  # the allocator's [memory] events (torch.profiler's profile_memory)
    # Record the Python stack (with_stack=True): python_function events, from which tracekit
    # names each op's source line; it makes the trace several times larger.
    with_stack: bool = False


@dataclass
class VariantResult:
    variant: str
    seq_len: int
    status: str  # "ran" or "skipped"
    file: str | None = None
    reason: str | None = None
    max_rel_error: float | None = None
    steady_ms_per_call: float | None = None  # median
    steady_ms_min: float | None = None
    steady_ms_max: float | None = None
    tflops: float | None = None
    trace_bytes: int | None = None
    warnings: list = field(default_factory=list)


def run_capture(config, report=lambda line: None):
    """Capture every (variant, seq_len); return the manifest dict (also written to disk)."""
    config.out_dir.mkdir(parents=True, exist_ok=True)
    with _tf32(config.tf32):
        return _run_capture(config, report)


def _run_capture(config, report):
    environment = describe_environment(config.device)
    _warm_up_device(config)
    results = []
    total = len(config.variants) * len(config.seq_lens)
    for seq_len in config.seq_lens:
        for variant_name in config.variants:
            shape = _shape(config, seq_len)
            file_name = _trace_name(variant_name, seq_len, len(config.seq_lens) > 1, config.train)
            result = _capture_one(VARIANTS[variant_name], shape, config, environment, file_name)
            results.append(result)
            report(_progress_line(len(results), total, result))
    manifest = _manifest(config, environment, results)
    (config.out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _shape(config, seq_len):
    return Shape(config.batch, config.heads, seq_len, config.head_dim,
                 DTYPES[config.dtype], config.causal, config.device)


def _trace_name(variant, seq_len, is_sweep, train=False):
    stem = f"train_{variant}" if train else variant
    return f"{stem}_s{seq_len}.json.gz" if is_sweep else f"{stem}.json.gz"


@contextlib.contextmanager
def _tf32(tf32):
    """TF32 on or off for the capture (None: as it is), put back afterwards: a capture run from
    Python must not change the matmuls of the rest of the process."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    if tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _warm_up_device(config):
    # On the CPU too: the first call of a process pays for thread pools and kernels' first use,
    # which made identical CPU captures differ a hundredfold.
    a = torch.randn(256, 256, device=config.device, dtype=DTYPES[config.dtype])
    for _ in range(3):
        torch.softmax(a @ a, dim=-1).sum().item()
    if config.device == "cuda":
        torch.cuda.synchronize()


def _capture_one(variant, shape, config, environment, file_name):
    result = VariantResult(variant.name, shape.seq_len, "skipped")
    if variant.needs_cuda and shape.device != "cuda":
        result.reason = f"needs CUDA: {variant.name} {variant.cuda_only_why}"
        return result
    path = config.out_dir / file_name
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # warmup=0 is deliberate: step 0 must be the cold call.
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            call, check = _workload(variant, shape, config)
            _profile(call, variant, shape, config, environment, path)
            result.max_rel_error = check()
            times = steady_timings(call, shape.device, repeat=config.timing_repeats)
        result.status = "ran"
        result.file = file_name
        result.trace_bytes = path.stat().st_size
        result.steady_ms_per_call = statistics.median(times)
        result.steady_ms_min, result.steady_ms_max = min(times), max(times)
        if not config.train:
            result.tflops = attention_flops(shape) / (result.steady_ms_per_call * 1e-3) / 1e12
        result.warnings = _distinct_messages(caught)
    except Exception as exc:  # any backend refusal or failure: report it, keep capturing
        result.reason = _reason(exc, caught)
        path.unlink(missing_ok=True)
    finally:
        _release_memory(shape.device)
    return result


def _workload(variant, shape, config):
    """(call, check): what one profiler step runs, and its correctness figure afterwards (the
    forward's max relative error against float64; None for training, which has no reference)."""
    if config.train:
        step, _ = build_training_step(variant, shape)
        return step, lambda: None
    q, k, v = make_inputs(shape)
    forward = variant.build(shape)
    last = {}

    def call():
        with torch.no_grad():
            last["out"] = forward(q, k, v)

    return call, lambda: max_relative_error(last["out"], q, k, v, shape.causal)


def _profile(call, variant, shape, config, environment, path, extra_metadata=None):
    activities = [ProfilerActivity.CPU]
    if shape.device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    # One cycle of `steps` active steps: the trace is written once, when it ends.
    steps = schedule(wait=0, warmup=0, active=config.steps, repeat=1)
    metadata = {**_trace_metadata(variant, shape, config, environment), **(extra_metadata or {})}
    label = f"tracekit.{'train_step' if config.train else 'forward'}.{variant.name}"
    with profile(
        activities=activities, schedule=steps, record_shapes=True, profile_memory=config.profile_memory,
        with_stack=config.with_stack,
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        prof.add_metadata_json(METADATA_KEY, json.dumps(metadata))
        for _ in range(config.steps):
            with record_function(label):
                call()
            if shape.device == "cuda":
                torch.cuda.synchronize()
            prof.step()
    if not path.exists():
        raise RuntimeError("the profiler wrote no trace")


def _trace_metadata(variant, shape, config, environment):
    return {
        "tracekit_version": __version__,
        "variant": f"train_{variant.name}" if config.train else variant.name,
        "workload": "train" if config.train else "forward",
        "attention": variant.name,
        "description": (f"training steps of a {TRAIN_LAYERS}-layer causal transformer with {variant.name} attention"
                        if config.train else variant.description),
        "requested_backend": variant.requested_backend,
        "batch": shape.batch,
        "heads": shape.heads,
        "seq_len": shape.seq_len,
        "head_dim": shape.head_dim,
        "dtype": config.dtype,
        "causal": shape.causal,
        "steps": config.steps,
        "cold_step": 0,
        "flops_per_call": None if config.train else attention_flops(shape),
        "tf32": torch.backends.cuda.matmul.allow_tf32,
        "profile_memory": config.profile_memory,
        "with_stack": config.with_stack,
        "command": config.command,
        **environment,
    }


def _manifest(config, environment, results):
    return {
        "tracekit_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": config.command,
        "environment": environment,
        "shape": {"batch": config.batch, "heads": config.heads, "seq_lens": list(config.seq_lens),
                  "head_dim": config.head_dim, "dtype": config.dtype, "causal": config.causal},
        "steps": config.steps,
        "workload": "train" if config.train else "forward",
        "tf32": torch.backends.cuda.matmul.allow_tf32,
        "with_stack": config.with_stack,
        "step_convention": f"one {'training step' if config.train else 'forward'} per ProfilerStep#N; "
                           "step 0 is the cold first call",
        "timing": f"median (and min, max) of {config.timing_repeats} steady calls outside the profiler "
                  "(CUDA events on a GPU); tflops from 4*B*H*S^2*D, halved when causal",
        "variants": [asdict(r) for r in results],
    }


def _progress_line(index, total, result):
    label = f"[{index}/{total}] {result.variant} s={result.seq_len}"
    if result.status != "ran":
        return f"{label}: skipped ({result.reason})"
    figures = [f"{result.steady_ms_per_call:.3f} ms/call (min {result.steady_ms_min:.3f}, max {result.steady_ms_max:.3f})"]
    if result.tflops is not None:
        figures += [f"{result.tflops:.3g} TFLOP/s", f"max rel err {result.max_rel_error:.1e}"]
    return f"{label}: {', '.join(figures)} -> {result.file}"


def _reason(exc, caught):
    # SDPA explains a refused backend in warnings and raises a bare "No available kernel".
    why = _distinct_messages(caught)
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return "; ".join([first_line, *why])[:1000]


def _distinct_messages(caught):
    seen = []
    for w in caught:
        text = " ".join(str(w.message).split())
        if text not in seen:
            seen.append(text)
    return seen


def _release_memory(device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
