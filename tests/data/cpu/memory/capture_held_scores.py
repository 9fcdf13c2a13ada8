"""Captures held_scores.json.gz and held_scores_inplace.json.gz: attention written as many modules
write it, the scores kept in a variable while masked_fill's copy of them goes to softmax
(`attn = softmax(scores.masked_fill(mask, -inf))`), so the step's peak holds the scores, their
masked copy and softmax's output; and the same with masked_fill_, which has no copy to hold.

    python tests/data/cpu/memory/capture_held_scores.py    (from the repository root; torch, CPU)

Shape as the other captures here: B=1 H=2 S=256 D=32 fp32 causal, 4 profiler steps.
"""

import gzip
import math
import tempfile
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

HERE = Path(__file__).resolve().parent
B, H, S, D, STEPS = 1, 2, 256, 32, 4


def held_scores(q, k, v, mask):
    scores = torch.matmul(q, k.transpose(-2, -1)).mul_(1.0 / math.sqrt(D))
    attn = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return torch.matmul(attn, v)


def held_scores_inplace(q, k, v, mask):
    scores = torch.matmul(q, k.transpose(-2, -1)).mul_(1.0 / math.sqrt(D))
    attn = torch.softmax(scores.masked_fill_(mask, float("-inf")), dim=-1)
    return torch.matmul(attn, v)


def capture(forward, name):
    # warmup=0: step 0 is the cold call, as in tracekit capture
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D) for _ in range(3))
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.json"
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=STEPS, repeat=1),
                     record_shapes=True, profile_memory=True,
                     on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
            for _ in range(STEPS):
                with torch.no_grad(), record_function(f"forward.{name}"):
                    out = forward(q, k, v, mask)
                del out
                prof.step()
        (HERE / f"{name}.json.gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
    capture(held_scores, "held_scores")
    capture(held_scores_inplace, "held_scores_inplace")
