"""Run each attention variant under torch.profiler and write its trace and the manifest.

Step convention: one forward call per `ProfilerStep#N`. Step 0 is the variant's
cold first call (cuDNN's plan build, flex's compile and first-use allocations
land there); steps 1.. are steady. The CUDA context and cuBLAS are warmed once
before any variant, so step 0 holds the variant's own cold cost and not the
process's.
"""

import datetime
import gc
import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tracekit import __version__
from tracekit.capture.environment import describe_environment
from tracekit.capture.measure import (
    attention_flops, make_inputs, max_relative_error, steady_ms_per_call,
)
from tracekit.capture.variants import VARIANTS, Shape

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GPU_DEFAULT_SHAPE = {"batch": 4, "heads": 16, "seq_lens": (2048,), "head_dim": 64, "dtype": "bf16"}
CPU_DEFAULT_SHAPE = {"batch": 1, "heads": 2, "seq_lens": (128,), "head_dim": 32, "dtype": "fp32"}
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


@dataclass
class VariantResult:
    variant: str
    seq_len: int
    status: str  # "ran" or "skipped"
    file: str | None = None
    reason: str | None = None
    max_rel_error: float | None = None
    steady_ms_per_call: float | None = None
    tflops: float | None = None
    trace_bytes: int | None = None
    warnings: list = field(default_factory=list)


def run_capture(config, report=lambda line: None):
    """Capture every (variant, seq_len); return the manifest dict (also written to disk)."""
    config.out_dir.mkdir(parents=True, exist_ok=True)
    environment = describe_environment(config.device)
    _warm_up_device(config)
    results = []
    total = len(config.variants) * len(config.seq_lens)
    for seq_len in config.seq_lens:
        for variant_name in config.variants:
            shape = _shape(config, seq_len)
            file_name = _trace_name(variant_name, seq_len, len(config.seq_lens) > 1)
            result = _capture_one(VARIANTS[variant_name], shape, config, environment, file_name)
            results.append(result)
            report(_progress_line(len(results), total, result))
    manifest = _manifest(config, environment, results)
    (config.out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _shape(config, seq_len):
    return Shape(config.batch, config.heads, seq_len, config.head_dim,
                 DTYPES[config.dtype], config.causal, config.device)


def _trace_name(variant, seq_len, is_sweep):
    return f"{variant}_s{seq_len}.json.gz" if is_sweep else f"{variant}.json.gz"


def _warm_up_device(config):
    if config.device != "cuda":
        return
    a = torch.randn(256, 256, device="cuda", dtype=DTYPES[config.dtype])
    (a @ a).sum().item()
    torch.cuda.synchronize()


def _capture_one(variant, shape, config, environment, file_name):
    result = VariantResult(variant.name, shape.seq_len, "skipped")
    if variant.needs_cuda and shape.device != "cuda":
        result.reason = f"{variant.name} needs a CUDA GPU (it is compiled with Triton)"
        return result
    path = config.out_dir / file_name
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # warmup=0 is deliberate: step 0 must be the cold call.
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            q, k, v = make_inputs(shape)
            forward = variant.build(shape)
            out = _profile(forward, q, k, v, variant, shape, config, environment, path)
            result.max_rel_error = max_relative_error(out, q, k, v, shape.causal)
            result.steady_ms_per_call = steady_ms_per_call(
                forward, q, k, v, shape.device, repeat=config.timing_repeats)
        result.status = "ran"
        result.file = file_name
        result.trace_bytes = path.stat().st_size
        result.tflops = attention_flops(shape) / (result.steady_ms_per_call * 1e-3) / 1e12
        result.warnings = _distinct_messages(caught)
    except Exception as exc:  # any backend refusal or failure: report it, keep capturing
        result.reason = _reason(exc, caught)
        path.unlink(missing_ok=True)
    finally:
        _release_memory(shape.device)
    return result


def _profile(forward, q, k, v, variant, shape, config, environment, path):
    activities = [ProfilerActivity.CPU]
    if shape.device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    # One cycle of `steps` active steps: the trace is written once, when it ends.
    steps = schedule(wait=0, warmup=0, active=config.steps, repeat=1)
    metadata = _trace_metadata(variant, shape, config, environment)
    out = None
    with torch.no_grad(), profile(
        activities=activities, schedule=steps, record_shapes=True,
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        prof.add_metadata_json(METADATA_KEY, json.dumps(metadata))
        for _ in range(config.steps):
            with record_function(f"tracekit.forward.{variant.name}"):
                out = forward(q, k, v)
            if shape.device == "cuda":
                torch.cuda.synchronize()
            prof.step()
    if not path.exists():
        raise RuntimeError("the profiler wrote no trace")
    return out


def _trace_metadata(variant, shape, config, environment):
    return {
        "tracekit_version": __version__,
        "variant": variant.name,
        "description": variant.description,
        "requested_backend": variant.requested_backend,
        "batch": shape.batch,
        "heads": shape.heads,
        "seq_len": shape.seq_len,
        "head_dim": shape.head_dim,
        "dtype": config.dtype,
        "causal": shape.causal,
        "steps": config.steps,
        "cold_step": 0,
        "flops_per_call": attention_flops(shape),
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
        "step_convention": "one forward per ProfilerStep#N; step 0 is the cold first call",
        "timing": f"median of {config.timing_repeats} steady calls outside the profiler "
                  "(CUDA events on a GPU); tflops from 4*B*H*S^2*D, halved when causal",
        "variants": [asdict(r) for r in results],
    }


def _progress_line(index, total, result):
    label = f"[{index}/{total}] {result.variant} s={result.seq_len}"
    if result.status != "ran":
        return f"{label}: skipped ({result.reason})"
    return (f"{label}: {result.steady_ms_per_call:.3f} ms/call, {result.tflops:.3g} TFLOP/s, "
            f"max rel err {result.max_rel_error:.1e} -> {result.file}")


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
