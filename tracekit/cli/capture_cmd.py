"""`tracekit capture`: options in, the capture runner (which imports torch) called lazily."""

import sys

import click

from tracekit.capture import VARIANT_NAMES
from tracekit.errors import TracekitError


def _comma_list(value):
    return [part.strip() for part in value.split(",") if part.strip()] if value else []


def _parse_variants(ctx, param, value):
    names = _comma_list(value) or list(VARIANT_NAMES)
    unknown = [n for n in names if n not in VARIANT_NAMES]
    if unknown:
        raise click.BadParameter(
            f"unknown variant {', '.join(unknown)} (choose from {', '.join(VARIANT_NAMES)})")
    return names


def _parse_seq_lens(ctx, param, value):
    if value is None:
        return None
    try:
        lens = tuple(int(part) for part in _comma_list(value))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers")
    if not lens or min(lens) < 1:
        raise click.BadParameter(f"{value!r}: each sequence length must be at least 1")
    return lens


@click.command()
@click.option("--out", "out_dir", default="traces", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the traces and manifest.json.")
@click.option("--variants", callback=_parse_variants,
              help=f"Comma-separated variants [default: all: {','.join(VARIANT_NAMES)}].")
@click.option("--device", type=click.Choice(["cuda", "cpu"]),
              help="Where to run [default: cuda when a GPU is visible, else cpu].")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size B [GPU 4, CPU 1].")
@click.option("--heads", type=click.IntRange(min=1), help="Attention heads H [GPU 16, CPU 2].")
@click.option("--seq-len", "seq_lens", callback=_parse_seq_lens,
              help="Sequence length S, or a comma-separated sweep [GPU 2048, CPU 128].")
@click.option("--head-dim", type=click.IntRange(min=1), help="Head dimension D [GPU 64, CPU 32].")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]),
              help="Input dtype [GPU bf16, CPU fp32].")
@click.option("--causal/--no-causal", default=True, show_default=True,
              help="Causal masking.")
@click.option("--steps", type=click.IntRange(min=2), default=6, show_default=True,
              help="Profiler steps per variant: step 0 is the cold call, the rest steady.")
@click.option("--train", is_flag=True,
              help="Profile training steps (forward, backward, AdamW) of a small 4-layer causal transformer "
                   "whose attention is each variant, into train_<variant>.json.gz [shape: GPU B=8 H=4 S=256 "
                   "D=64 fp32, CPU B=2 H=2 S=64 D=32 fp32; bf16/fp16 train under autocast].")
@click.option("--tf32/--no-tf32", default=None,
              help="Let fp32 matmuls and convolutions use TF32 Tensor Cores, or not [default: PyTorch's: "
                   "matmuls off, convolutions on].")
@click.option("--profile-memory", is_flag=True,
              help="Record the allocator's [memory] events (torch.profiler's profile_memory): views "
                   "memory_timeline and memory_steps then give each step's peak.")
@click.option("--ranks", type=click.IntRange(min=2),
              help="Train data-parallel on this many ranks (DDP; one GPU each over NCCL, gloo on a CPU): "
                   "one trace per rank, train_<variant>_rank<R>.json.gz. Implies --train.")
@click.option("--slow-rank", type=click.IntRange(min=0),
              help="With --ranks: the rank to slow down on purpose, by --delay-ms before each step.")
@click.option("--delay-ms", type=click.FloatRange(min=0, min_open=True), default=20.0, show_default=True,
              help="With --slow-rank: milliseconds the slow rank sleeps before each step.")
@click.option("--with-stack", is_flag=True,
              help="Record the Python stack (torch.profiler's with_stack=True), so that tracekit names each "
                   "op's, kernel's and copy's source line (source_file, source_line, source_function); "
                   "the trace grows several times.")
def capture(out_dir, variants, device, batch, heads, seq_lens, head_dim, dtype, causal, steps, train, tf32,
            profile_memory, ranks, slow_rank, delay_ms, with_stack):
    """Record a torch.profiler (Kineto) trace of each attention variant.

    Writes <variant>.json.gz (<variant>_s<S>.json.gz in a sweep) and manifest.json
    into --out. A variant the device or dtype cannot run is reported as skipped;
    the command fails only when nothing could be captured.
    """
    from pathlib import Path

    try:
        import torch
    except ImportError:
        raise TracekitError("tracekit capture needs torch: pip install 'tracekit[capture]' "
                            "with a pinned torch, e.g. torch==2.13.0")
    from tracekit.capture.runner import (
        CPU_DEFAULT_SHAPE, CPU_TRAIN_SHAPE, GPU_DEFAULT_SHAPE, GPU_TRAIN_SHAPE, CaptureConfig, run_capture,
    )

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise click.BadParameter("no CUDA GPU is visible", param_hint="'--device'")
    _check_ranks(ranks, slow_rank, seq_lens, device, torch)
    train = train or ranks is not None
    if train:
        defaults = GPU_TRAIN_SHAPE if device == "cuda" else CPU_TRAIN_SHAPE
    else:
        defaults = GPU_DEFAULT_SHAPE if device == "cuda" else CPU_DEFAULT_SHAPE
    config = CaptureConfig(
        out_dir=Path(out_dir), variants=variants, device=device,
        batch=batch or defaults["batch"], heads=heads or defaults["heads"],
        seq_lens=seq_lens or defaults["seq_lens"], head_dim=head_dim or defaults["head_dim"],
        dtype=dtype or defaults["dtype"], causal=causal, steps=steps,
        command=" ".join(["tracekit", *sys.argv[1:]]), train=train, tf32=tf32,
        profile_memory=profile_memory, with_stack=with_stack,
    )
    click.echo(f"capturing {'training steps with ' if train else ''}{len(variants)} variant(s) x {len(config.seq_lens)} shape(s) on "
               f"{device}: B={config.batch} H={config.heads} S={','.join(map(str, config.seq_lens))} "
               f"D={config.head_dim} {config.dtype} {'causal' if causal else 'non-causal'}", err=True)
    if ranks:
        from tracekit.capture.ranks import run_ranks
        click.echo(f"on {ranks} ranks{f', rank {slow_rank} slowed by {delay_ms:g} ms a step' if slow_rank is not None else ''}",
                   err=True)
        manifest = run_ranks(config, ranks, slow_rank, delay_ms, report=lambda line: click.echo(line, err=True))
    else:
        manifest = run_capture(config, report=lambda line: click.echo(line, err=True))
    ran = [v for v in manifest["variants"] if v["status"] == "ran"]
    if not ran:
        raise TracekitError(f"{out_dir}: nothing could be captured (see manifest.json for why)")
    click.echo(f"wrote {len(ran)} trace(s) and manifest.json to {out_dir}", err=True)


def _check_ranks(ranks, slow_rank, seq_lens, device, torch):
    if ranks is None:
        if slow_rank is not None:
            raise click.BadParameter("needs --ranks", param_hint="'--slow-rank'")
        return
    if slow_rank is not None and slow_rank >= ranks:
        raise click.BadParameter(f"rank {slow_rank} is not one of the {ranks} ranks (0 to {ranks - 1})",
                                 param_hint="'--slow-rank'")
    if seq_lens and len(seq_lens) > 1:
        raise click.BadParameter("one sequence length with --ranks, not a sweep", param_hint="'--seq-len'")
    if device == "cuda" and torch.cuda.device_count() < ranks:
        raise click.BadParameter(f"{ranks} ranks need {ranks} GPUs; {torch.cuda.device_count()} visible",
                                 param_hint="'--ranks'")


COMMANDS = [capture]
