"""A training workload: a small causal transformer whose attention is one of the variants.

A training step (forward, loss, backward, optimizer) launches hundreds of small kernels, so a
small model is launch-bound on a big GPU: the trace shows the GPU idle most of each step,
which a forward-only capture of one big attention call never does. fp32 without TF32 puts its
GEMMs on the CUDA cores (SIMT); bf16 and fp16 run under autocast.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from tracekit.capture.variants import Shape


@dataclass(frozen=True)
class ModelShape:
    layers: int = 4
    vocab: int = 4096
    mlp_ratio: int = 4


class Block(nn.Module):
    def __init__(self, width, heads, mlp_ratio, attention):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp_ratio * width), nn.GELU(), nn.Linear(mlp_ratio * width, width))

    def forward(self, x):
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        heads = [t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v)]
        attended = self.attention(*heads).transpose(1, 2).reshape(batch, seq, width)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """Token embedding, `layers` pre-norm blocks with the given attention, a language-model head."""

    def __init__(self, shape, model, attention):
        super().__init__()
        width = shape.heads * shape.head_dim
        self.embed = nn.Embedding(model.vocab, width)
        self.position = nn.Parameter(torch.randn(shape.seq_len, width) / math.sqrt(width))
        self.blocks = nn.ModuleList(Block(width, shape.heads, model.mlp_ratio, attention) for _ in range(model.layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, model.vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_training_step(variant, shape, model=ModelShape(), seed=0, data_seed=None, wrap=None):
    """A `step()` that runs one training step of the transformer on fixed random tokens.

    The model's parameters are fp32; shape.dtype below fp32 runs the step under autocast, as a
    user would train in bf16. `wrap` wraps the model (DistributedDataParallel across ranks), and
    `data_seed` (default `seed`) picks the tokens: each rank of a job trains on its own batch.
    Returns (step, loss of the last step as a float)."""
    torch.manual_seed(seed)
    # The variant's own builder, at the model's attention shape (it makes its masks once here).
    attention = variant.build(Shape(shape.batch, shape.heads, shape.seq_len, shape.head_dim,
                                    shape.dtype, shape.causal, shape.device))
    net = TinyTransformer(shape, model, attention).to(shape.device)
    if wrap is not None:
        net = wrap(net)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    generator = torch.Generator(device="cpu").manual_seed(seed if data_seed is None else data_seed)
    tokens = torch.randint(0, model.vocab, (shape.batch, shape.seq_len + 1), generator=generator).to(shape.device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    autocast = shape.dtype in (torch.bfloat16, torch.float16)
    last = {}

    def step():
        with torch.autocast(device_type=shape.device, dtype=shape.dtype, enabled=autocast):
            logits = net(inputs)
            loss = nn.functional.cross_entropy(logits.float().reshape(-1, model.vocab), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        last["loss"] = loss.detach()

    def last_loss():
        return float(last["loss"]) if "loss" in last else None

    return step, last_loss
