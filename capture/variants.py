"""The attention variants tracekit captures, each as a builder of a forward callable.

A builder takes the capture's `Shape` and returns `forward(q, k, v) -> out`.
Anything a variant needs besides q, k, v (the naive mask, flex's block mask,
the compiled function) is made once in the builder, outside the timed and
profiled calls, as a user of that variant would write it.
"""

import contextlib
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    dtype: torch.dtype
    causal: bool
    device: str


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    # The backend asked for ("math", "flash", ...), or None when none is pinned.
    requested_backend: str | None
    build: Callable[[Shape], Callable]
    needs_cuda: bool = False
    cuda_only_why: str = ""  # said when a CPU capture skips it


def _causal_mask(shape):
    # True above the diagonal: the positions a query may not attend to.
    ones = torch.ones(shape.seq_len, shape.seq_len, dtype=torch.bool, device=shape.device)
    if not shape.causal:
        return torch.zeros_like(ones)
    return torch.triu(ones, diagonal=1)


def _build_naive(shape):
    """The article's module: out-of-place masked_fill, which hides a Memcpy."""
    scale = 1.0 / math.sqrt(shape.head_dim)
    mask = _causal_mask(shape)

    def forward(q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = scores * scale
        scores = scores.masked_fill(mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        return torch.matmul(attn, v)

    return forward


def _build_naive_inplace(shape):
    """The article's fix: masked_fill_ writes into the scores, no copy."""
    scale = 1.0 / math.sqrt(shape.head_dim)
    mask = _causal_mask(shape)

    def forward(q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = torch.mul(scores, scale)
        scores.masked_fill_(mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        return torch.matmul(attn, v)

    return forward


def _build_naive_mul_inplace(shape):
    """The fix carried through: the scale in place too (mul_), so the step holds one score matrix."""
    scale = 1.0 / math.sqrt(shape.head_dim)
    mask = _causal_mask(shape)

    def forward(q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores.mul_(scale)
        scores.masked_fill_(mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        return torch.matmul(attn, v)

    return forward


def _sdpa_builder(backend_name):
    def build(shape):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name) if backend_name else None

        def forward(q, k, v):
            pin = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
            with pin:
                return F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)

        return forward

    return build


def _build_flex(shape):
    """flex_attention compiled by torch.compile; the first call compiles."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = None
    if shape.causal:
        def causal(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        block_mask = create_block_mask(
            causal, B=None, H=None, Q_LEN=shape.seq_len, KV_LEN=shape.seq_len,
            device=shape.device,
        )
    compiled = torch.compile(flex_attention)

    def forward(q, k, v):
        return compiled(q, k, v, block_mask=block_mask)

    return forward


VARIANTS = {
    v.name: v
    for v in [
        Variant("naive", "matmul, scale, out-of-place masked_fill, softmax, matmul",
                None, _build_naive),
        Variant("naive_inplace", "the naive module with in-place masked_fill_",
                None, _build_naive_inplace),
        Variant("naive_mul_inplace", "naive_inplace with the scale in place too (mul_)",
                None, _build_naive_mul_inplace),
        Variant("sdpa_math", "F.scaled_dot_product_attention pinned to the math backend",
                "math", _sdpa_builder("MATH")),
        Variant("sdpa_efficient", "SDPA pinned to the memory-efficient (xFormers) backend",
                "efficient", _sdpa_builder("EFFICIENT_ATTENTION"), needs_cuda=True,
                cuda_only_why="pins SDPA's memory-efficient backend, which has no CPU kernel"),
        Variant("sdpa_flash", "SDPA pinned to the FlashAttention backend",
                "flash", _sdpa_builder("FLASH_ATTENTION")),
        Variant("sdpa_cudnn", "SDPA pinned to the cuDNN backend",
                "cudnn", _sdpa_builder("CUDNN_ATTENTION"), needs_cuda=True,
                cuda_only_why="pins SDPA's cuDNN backend, which runs on NVIDIA GPUs only"),
        Variant("sdpa_default", "SDPA with no pin: whatever PyTorch dispatches to",
                None, _sdpa_builder(None)),
        Variant("flex", "flex_attention with a causal block mask under torch.compile",
                "flex", _build_flex, needs_cuda=True,
                cuda_only_why="is compiled with Triton, which generates GPU kernels"),
    ]
}

# The CLI checks names against the torch-free list; the two must agree.
from tracekit.capture import VARIANT_NAMES  # noqa: E402

assert tuple(VARIANTS) == VARIANT_NAMES, "capture/__init__.py VARIANT_NAMES is out of date"
