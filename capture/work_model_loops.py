"""Loops whose kernels the work models of issue [17] must count: convolutions, norms, FP8 and
grouped GEMMs, optimizer steps, flex attention. Profiled as loops.py profiles (a schedule, no
per-step sync, record_shapes=True), each with its truth, so that each formula of
tracekit/store/knowledge/op_work_models.csv meets a real trace of its op.

    python -m tracekit.capture.work_model_loops --out DIR [--device cuda|cpu] [--only NAME,...]

The loops (GPU shapes; a CPU run uses small ones):
  train_resnet50       ResNet-50 (timm or torchvision, random weights), batch 32 at 224x224, bf16
                       autocast, channels_last, SGD with momentum (foreach): cuDNN convolutions
                       forward, dgrad and wgrad, batch norm, max and average pools, cross-entropy
  train_llama          a 4-layer Llama (transformers, from its config, random weights) at batch 4,
                       1,024 tokens, bf16 weights, fused AdamW: RMS norm, embedding and its backward,
                       rotary, SiLU, SDPA, cross-entropy
  train_norms          layer, group and batch norm, forward and backward, bf16, then AdamW (foreach)
  fp8_gemm             torch._scaled_mm of e4m3 8192x8192x8192, tensor-wise then row-wise scales
  grouped_gemm         torch._grouped_mm of 8 bf16 groups (a mixture of experts' layout)
  flex_attention       torch.compile'd flex_attention, causal, B=4 H=16 S=2048 D=64 bf16, forward
                       and backward (Triton kernels)
  train_more_ops       a conv net at batch 32, 64x56x56 with average, adaptive and upsampling
                       layers and an embedding bag, MSE, smooth L1 and BCE-with-logits losses, fp16
                       autocast with AMP's gradient scaler, gradient clipping, AdamW (foreach); then
                       sort, top-k, cumsum, arg max, random fills and an rFFT under no_grad
A loop this torch or machine cannot run is skipped and says why; the others still run.
"""

import sys

import torch
import torch.nn.functional as F

from tracekit.capture import loops


Skip = loops.Skip


def _gpu(device):
    return device == "cuda"


def _resnet50(device):
    try:
        import timm
        return timm.create_model("resnet50", pretrained=False)
    except ImportError:
        pass
    try:
        import torchvision
        return torchvision.models.resnet50(weights=None)
    except ImportError:
        raise Skip("neither timm nor torchvision is installed") from None


def resnet_train_step(device):
    model = _resnet50(device).to(device).to(memory_format=torch.channels_last)
    batch, size = (32, 224) if _gpu(device) else (2, 64)
    images = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    dtype = torch.bfloat16

    def step():
        with torch.autocast(device, dtype=dtype):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def llama_train_step(device):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise Skip("transformers is not installed") from None
    gpu = _gpu(device)
    config = LlamaConfig(hidden_size=1024 if gpu else 64, intermediate_size=2816 if gpu else 128,
                         num_hidden_layers=4 if gpu else 2, num_attention_heads=16 if gpu else 4,
                         num_key_value_heads=16 if gpu else 4, vocab_size=32000 if gpu else 1000,
                         max_position_embeddings=2048, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16 if gpu else torch.float32)
    tokens = torch.randint(0, config.vocab_size, (4, 1024) if gpu else (1, 64), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)

    def step():
        loss = model(tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def norms_train_step(device):
    gpu = _gpu(device)
    dtype = torch.bfloat16 if gpu else torch.float32
    channels, size, batch = (256, 56, 32) if gpu else (16, 8, 2)
    layer = torch.nn.LayerNorm(4096 if gpu else 64, device=device, dtype=dtype)
    group = torch.nn.GroupNorm(32 if gpu else 4, channels, device=device, dtype=dtype)
    batch_norm = torch.nn.BatchNorm2d(channels, device=device, dtype=dtype)
    tokens = torch.randn(8192 if gpu else 16, 4096 if gpu else 64, device=device, dtype=dtype, requires_grad=True)
    images = torch.randn(batch, channels, size, size, device=device, dtype=dtype, requires_grad=True)
    parameters = [*layer.parameters(), *group.parameters(), *batch_norm.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=1e-4, foreach=True)

    def step():
        loss = layer(tokens).float().square().mean() + group(images).float().square().mean() \
            + batch_norm(images).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def fp8_gemm_step(device):
    if not _gpu(device) or not hasattr(torch, "float8_e4m3fn"):
        raise Skip("FP8 GEMMs need a CUDA GPU")
    if torch.cuda.get_device_capability() < (8, 9):
        raise Skip("FP8 GEMMs need sm_89 or later")
    n = 8192
    a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.ones((), device=device)
    rows, columns = torch.ones(n, 1, device=device), torch.ones(1, n, device=device)

    def step():
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch._scaled_mm(a, b, scale_a=rows, scale_b=columns, out_dtype=torch.bfloat16)
    return step


def grouped_gemm_step(device):
    if not _gpu(device) or not hasattr(torch, "_grouped_mm"):
        raise Skip("torch._grouped_mm needs a CUDA GPU and torch 2.8 or later")
    groups, tokens, width, hidden = 8, 4096, 2048, 4096
    x = torch.randn(groups * tokens, width, device=device, dtype=torch.bfloat16)
    w = torch.randn(groups, width, hidden, device=device, dtype=torch.bfloat16)
    offsets = torch.arange(tokens, groups * tokens + 1, tokens, device=device, dtype=torch.int32)

    def step():
        return torch._grouped_mm(x, w, offs=offsets)
    return step


def flex_attention_step(device):
    if not _gpu(device):
        raise Skip("compiled flex_attention needs a CUDA GPU")
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        raise Skip("this torch has no flex_attention") from None
    batch, heads, seq, dim = 4, 16, 2048, 64
    q, k, v = (torch.randn(batch, heads, seq, dim, device=device, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, seq, seq, device=device)
    attend = torch.compile(flex_attention)

    def step():
        attend(q, k, v, block_mask=block_mask).sum().backward()
    return step


def more_ops_train_step(device):
    """Ops the other loops do not reach: average and adaptive pools, upsampling, embedding bags,
    MSE, smooth L1 and BCE-with-logits losses, AMP's gradient scaler, gradient clipping (a foreach
    norm), then under no_grad a sort, top-k, cumulative sum, arg max, random fills and an FFT."""
    gpu = _gpu(device)
    channels, size, batch, rows = (64, 56, 32, 100_000) if gpu else (8, 8, 2, 100)
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1, device=device)
    bag = torch.nn.EmbeddingBag(rows, 128, mode="sum", device=device)
    head = torch.nn.Linear(channels + 128, 256, device=device)
    images = torch.randn(batch, channels, size, size, device=device)
    indices = torch.randint(0, rows, (batch * 20,), device=device)
    offsets = torch.arange(0, batch * 20, 20, device=device)
    target = torch.randn(batch, 256, device=device)
    labels = torch.rand(batch, 256, device=device).round()
    parameters = [*conv.parameters(), *bag.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=1e-4, foreach=True)
    # AMP's fp16 autocast with its gradient scaler on a GPU; bf16 autocast, no scaler, on a CPU
    scaler = torch.amp.GradScaler(device, enabled=gpu)
    autocast = torch.autocast(device, dtype=torch.float16 if gpu else torch.bfloat16)

    def step():
        with autocast:
            h = F.avg_pool2d(conv(images), 2)
            h = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
            h = F.interpolate(h, scale_factor=0.5, mode="nearest")
            pooled = F.adaptive_avg_pool2d(h, 1).flatten(1)
            out = head(torch.cat([pooled, bag(indices, offsets)], dim=1))
            loss = F.mse_loss(out.float(), target) + F.smooth_l1_loss(out.float(), target) \
                + F.binary_cross_entropy_with_logits(out.float(), labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            scores = out.float()
            torch.sort(scores, dim=-1)
            torch.topk(scores, 8, dim=-1)
            torch.cumsum(scores, dim=-1)
            scores.argmax(dim=-1)
            noise = torch.empty_like(scores).normal_()
            torch.bernoulli(torch.full_like(scores, 0.5))
            torch.fft.rfft(noise + scores, dim=-1)
    return step


LOOPS = {
    "train_resnet50": resnet_train_step,
    "train_llama": llama_train_step,
    "train_norms": norms_train_step,
    "fp8_gemm": fp8_gemm_step,
    "grouped_gemm": grouped_gemm_step,
    "flex_attention": flex_attention_step,
    "train_more_ops": more_ops_train_step,
}


def main(argv=None):
    parser = loops.loop_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(LOOPS)
    return loops.capture_each(names, args.out, lambda name: _capture(name, args.device, args.out), args.device)


def _capture(name, device, out):
    step = LOOPS[name](device)
    step()  # compiles, plans and allocates before the profiler's window
    loops._sync(device)
    return loops.capture(name, device, out, {name: lambda _: (step, "scheduled")})


if __name__ == "__main__":
    sys.exit(main())
