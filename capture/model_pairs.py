"""Fix pairs on real models: the problems of capture/fix_pairs.py as they show up in GPT-2, Llama and
ResNet (built from their configs, random weights: nothing to download), each fix the one a user
reaches for. The same protocol: capture/fix_rounds.py times each loop without the profiler in
interleaved rounds in the process that traces it, under a profiler schedule with no per-step sync.

    python -m tracekit.capture.fix_rounds --pairs model_pairs --out DIR --only NAME,... [--rounds N]

The pairs (transformers and torchvision needed; bf16 autocast unless said):
  gpt2_train_item, gpt2_train_no_item       host_sync: GPT-2 (6 layers, 768 wide, batch 8 x 512
                                            tokens, AdamW) logging its loss with loss.item() every
                                            step, then keeping the losses on the GPU (loss.detach())
  gpt2_train_fp32, gpt2_train_tf32          simt_gemm: the same model trained in fp32 with TF32 off
                                            (PyTorch's default for matmuls), then with
                                            torch.backends.cuda.matmul.allow_tf32 on
  gpt2_infer_eager_attn, gpt2_infer_sdpa    fused attention: GPT-2's forward (batch 8 x 1024) with
                                            transformers' eager attention, then its SDPA attention
  llama_infer_eager, llama_infer_graph      launch_bound: a small Llama (8 layers, 512 wide) on 32
                                            tokens, eager, then replayed from a torch.cuda.CUDAGraph
  resnet_train_pageable, resnet_train_pinned  pageable_copy: ResNet-18 trained on a 77 MB fp32
                                            batch (128 x 3 x 224 x 224) copied from pageable memory
                                            each step, then from pinned memory with non_blocking
  resnet_train_cpu_prep, resnet_train_gpu_prep  the input pipeline on the CPU: each step's uint8
                                            batch normalised by torch on the CPU and copied as fp32,
                                            then copied as uint8 (pinned) and normalised on the GPU
  gpt2_train_eager_attn, gpt2_train_sdpa    fused attention in training: gpt2_train_item's model
                                            (loss kept on the GPU) with eager attention, then SDPA
  gpt2_train_adamw_foreach, gpt2_train_adamw_fused  the optimizer: AdamW's default (foreach), then
                                            AdamW(fused=True)
  resnet_train_loader_main, resnet_train_loader_workers  data loading: a DataLoader whose dataset
                                            normalises each uint8 image with torch, on the main
                                            thread (num_workers=0), then in 4 workers with
                                            pin_memory and non_blocking copies
  gpt2_train_sgd_foreach, gpt2_train_sgd_fused  the optimizer: SGD with momentum 0.9, its default
                                            (foreach), then SGD(fused=True)
  gpt2_train_bf16                           gpt2_train_fp32's model trained under bf16 autocast:
                                            the other fix for fp32 GEMMs, beside TF32
  gpt2_train_fp16_scaler_foreach,           AMP's fp16 recipe (fp16 autocast, a GradScaler):
  gpt2_train_fp16_scaler_fused              GradScaler reads found_inf (.item()) before each foreach
                                            AdamW step, then AdamW(fused=True) checks it in its kernel
  gpt2_infer_fp32_eager_attn, gpt2_infer_fp32_sdpa  fused attention on fp32 inputs (TF32 off), which
                                            SDPA runs on its memory-efficient kernel: GPT-2's forward
  baddbmm_train_fp32_eager, baddbmm_train_fp32_sdpa  and the baddbmm decoder trained, in fp32
  baddbmm_infer_eager, baddbmm_infer_sdpa   fused attention where the scores come from baddbmm, as
  baddbmm_train_eager, baddbmm_train_sdpa   Bloom's and the first GPT-NeoX's eager attention made
                                            them (the causal mask added as a bias in the same op):
                                            a 6-layer decoder (768 wide, 12 heads, batch 8 x 1024)
                                            in bf16, then the same weights through SDPA (is_causal)
  baddbmm_infer_fp32_eager, baddbmm_infer_fp32_sdpa  that decoder's forward in fp32 (TF32 off)
  llama_infer_fp32_eager_attn, llama_infer_fp32_sdpa  a Llama's forward in fp32 (8 layers 1024 wide,
                                            batch 4 x 1024), transformers' eager attention or SDPA
  encoder_infer_eager, encoder_infer_sdpa   the same model as an encoder (no causal mask: a zero
  encoder_infer_fp32_eager, encoder_infer_fp32_sdpa  bias, SDPA without is_causal), whose fused
  encoder_train_fp32_eager, encoder_train_fp32_sdpa  kernel does all of the scores' work: in bf16,
                                            and in fp32 forward and trained
  llama_train_item, llama_train_no_item     gpt2_train's pairs on a Llama trained with AdamW (8
  llama_train_eager_attn, llama_train_sdpa  layers 768 wide, SwiGLU, rotary; batch 8 x 512): the
  llama_train_adamw_foreach, llama_train_adamw_fused  loss read each step, eager attention, the
  llama_train_fp32, llama_train_tf32        foreach AdamW, fp32 GEMMs with TF32 off; and each fix
  llama_infer_eager_attn, llama_infer_sdpa  16-bit fused attention out of the sample its pace was
  llama_infer_hd128_eager_attn, llama_infer_hd128_sdpa  read off: llama_infer_fp32's Llama in bf16
  encoder_train_eager, encoder_train_sdpa   (heads of 64), the same with 16 heads of 128 (2048
                                            wide), and the encoder trained in bf16 (no causal skip)
  gpt2_train_gelu_new, gpt2_train_gelu_tanh  an elementwise chain op by op: GPT-2's own activation
  gpt2_infer_gelu_new, gpt2_infer_gelu_tanh  (`gelu_new`, the tanh GELU written out in 8 ops), then
                                            `gelu_pytorch_tanh` (one F.gelu), trained and forward
  llama_train_rmsnorm_eager,                and RMSNorm: transformers' LlamaRMSNorm (op by op),
  llama_train_rmsnorm_fused                 then F.rms_norm, in llama_train_item's model trained
  llama_infer_rmsnorm_eager,                and in llama_infer_sdpa's forward
  llama_infer_rmsnorm_fused
  t5_train_rmsnorm_eager, t5_train_rmsnorm_fused  out of the sample the chains' ends were read off:
  t5_infer_rmsnorm_eager, t5_infer_rmsnorm_fused  T5 (6 + 6 layers, 512 wide, batch 8 x 512 tokens
                                            in and out, dropout 0.1 in training), its T5LayerNorm
                                            (an RMSNorm op by op) then F.rms_norm, trained and forward
  gpt2_train_layernorm_eager,               and a LayerNorm written out as reference code writes it
  gpt2_train_layernorm_fused                (mean, x - mean, square, mean, sqrt, divide, scale and
  gpt2_infer_layernorm_eager,               shift: ConvNeXt's), then nn.LayerNorm, in GPT-2 (with
  gpt2_infer_layernorm_fused                F.gelu's tanh GELU), trained and forward
  qwen2_train_rmsnorm_eager,                out of the sample of the norm's second dispatch (a170ad8):
  qwen2_train_rmsnorm_fused,                Qwen2 (0.5B's widths, 8 layers, 14 query heads on 2
  qwen2_infer_rmsnorm_eager,                key-value heads), Qwen2RMSNorm then F.rms_norm, trained
  qwen2_infer_rmsnorm_fused                 (8 x 512 tokens) and forward (4 x 1024)
  qwen2_train_big_rmsnorm_eager, _fused     the same on batches the GPU bounds: trained on 16 x 1024
  qwen2_infer_big_rmsnorm_eager, _fused     tokens, forward on 16 x 2048
  t5_train_big_rmsnorm_eager, _fused        T5's the same way: trained and forward on 64 x 512 tokens
  t5_infer_big_rmsnorm_eager, _fused        in and out
"""

import torch

from tracekit.capture import loops
from tracekit.capture.fix_pairs import cuda_graph

Skip = loops.Skip


def _cuda_only(device, what):
    if device != "cuda":
        raise Skip(f"{what} need(s) CUDA")


def _causal_lm(kind, device, attention="sdpa", **sizes):
    """A causal language model from its config alone (random weights), with one attention backend."""
    try:
        import transformers
    except ImportError as missing:
        raise Skip(f"transformers is not installed ({missing})") from None
    config_class, model_class = {"gpt2": ("GPT2Config", "GPT2LMHeadModel"),
                                 "llama": ("LlamaConfig", "LlamaForCausalLM"),
                                 "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}[kind]
    config = getattr(transformers, config_class)(**sizes)
    config._attn_implementation = attention  # read by each attention layer as it is built
    model = getattr(transformers, model_class)(config)
    if getattr(model.config, "_attn_implementation", None) != attention and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attention)
    print(f"{kind}: attention {getattr(model.config, '_attn_implementation', '?')}, transformers"
          f" {transformers.__version__}", flush=True)
    return model.to(device)


def _gpt2(device, attention="sdpa", activation="gelu_new"):
    """GPT-2 with its MLP's activation as `activation` names it: transformers' `gelu_new` (GPT-2's
    own, its tanh GELU written out op by op) or `gelu_pytorch_tanh` (F.gelu(approximate="tanh"))."""
    return _causal_lm("gpt2", device, attention, n_layer=6, n_embd=768, n_head=12, n_positions=1024,
                      vocab_size=50257, activation_function=activation)


def gpt2_train_step(device, read_loss, fp32=False, tf32=False, attention="sdpa", fused=None, optimizer="AdamW",
                    fp16_scaler=False, activation="gelu_new", layer_norm="nn"):
    """GPT-2 training steps (AdamW, or SGD with momentum); with `read_loss` the step logs
    loss.item(), as a training script's progress line does, else it keeps the loss on the GPU.
    `fp32`: no autocast, matmuls in fp32 with TF32 on or off. `fused`: the optimizer's fused
    implementation (None: its default). `fp16_scaler`: fp16 autocast with a GradScaler.
    `activation`: _gpt2's. `layer_norm`: "nn" (nn.LayerNorm) or "written_out" (op by op)."""
    model = _gpt2(device, attention, activation)
    if layer_norm == "written_out":
        _written_out_layer_norms(model)
    tokens = torch.randint(0, model.config.vocab_size, (8, 512) if device == "cuda" else (1, 64), device=device)
    if optimizer == "SGD":
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, fused=fused)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    return _training_step(device, lambda: model(tokens, labels=tokens).loss, optimizer, read_loss, fp32, tf32,
                          fp16_scaler)


def _training_step(device, loss_of, optimizer, read_loss, fp32, tf32, fp16_scaler=False):
    """A step: the loss (`loss_of()`) under bf16 autocast unless `fp32` (then TF32 as `tf32`), its
    backward and the optimizer's step; `read_loss`: loss.item() each step, else kept on the GPU.
    `fp16_scaler`: fp16 autocast with AMP's GradScaler instead (on CUDA; bf16 on a CPU)."""
    losses = []
    scaler = torch.amp.GradScaler(device, enabled=fp16_scaler and device == "cuda")
    dtype = torch.float16 if fp16_scaler and device == "cuda" else torch.bfloat16

    def step():
        torch.backends.cuda.matmul.allow_tf32 = tf32  # read by each matmul
        with torch.autocast(device, dtype=dtype, enabled=not fp32):
            loss = loss_of()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item() if read_loss else loss.detach())
        del losses[:-10]
    return step


def _fused_rms_norms(model, kind="LlamaRMSNorm"):
    """Each of the model's RMSNorm layers of class `kind` (LlamaRMSNorm, T5LayerNorm, Qwen2RMSNorm)
    computed by F.rms_norm (one call into ATen) instead of transformers' op-by-op forward (to fp32,
    pow, mean, add, rsqrt, mul, back, times the weight)."""
    for module in model.modules():
        if type(module).__name__ == kind:
            module.forward = (lambda m: lambda x: torch.nn.functional.rms_norm(
                x, (x.shape[-1],), m.weight.to(x.dtype), m.variance_epsilon))(module)
    return model


def _written_out_layer_norms(model):
    """Each nn.LayerNorm of the model computed op by op, as reference code writes it (ConvNeXt's
    LayerNorm): the mean, the centred input squared and averaged, divided by the root, scaled and
    shifted; nn.LayerNorm itself is the fix."""
    def written_out(norm):
        def forward(x):
            mean = x.mean(-1, keepdim=True)
            variance = (x - mean).pow(2).mean(-1, keepdim=True)
            return norm.weight * ((x - mean) / torch.sqrt(variance + norm.eps)) + norm.bias
        return forward
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.forward = written_out(module)
    return model


def _t5(device, rms_norm):
    """T5 (v1.0's ReLU feed-forward; 6 + 6 layers, 512 wide, 8 heads) from its config, random
    weights; `rms_norm` "eager" (T5LayerNorm, op by op) or "fused" (F.rms_norm)."""
    try:
        import transformers
    except ImportError as missing:
        raise Skip(f"transformers is not installed ({missing})") from None
    config = transformers.T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                                   dropout_rate=0.1, feed_forward_proj="relu",
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = transformers.T5ForConditionalGeneration(config)
    print(f"t5: transformers {transformers.__version__}", flush=True)
    if rms_norm == "fused":
        _fused_rms_norms(model, "T5LayerNorm")
    return model.to(device)


def t5_train_step(device, rms_norm, batch=(8, 512)):
    """T5 trained with AdamW under bf16 autocast on `batch` tokens in and out (8 x 512), the loss kept
    on the GPU."""
    model = _t5(device, rms_norm)
    shape = batch if device == "cuda" else (1, 32)
    source = torch.randint(0, 32128, shape, device=device)
    target = torch.randint(0, 32128, shape, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return _training_step(device, lambda: model(input_ids=source, labels=target).loss, optimizer, False, False, False)


def t5_infer_step(device, rms_norm, batch=(8, 512)):
    """T5's forward (encoder and teacher-forced decoder), no grad, under bf16 autocast, on `batch`
    tokens (8 x 512)."""
    model = _t5(device, rms_norm).eval()
    shape = batch if device == "cuda" else (1, 32)
    source = torch.randint(0, 32128, shape, device=device)
    target = torch.randint(0, 32128, shape, device=device)

    def forward():
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
            return model(input_ids=source, decoder_input_ids=target).logits
    return forward


def llama_train_step(device, read_loss, fp32=False, tf32=False, attention="sdpa", fused=None, rms_norm="eager"):
    """A Llama trained with AdamW (8 layers 768 wide, 12 heads, SwiGLU 2048, batch 8 x 512 tokens):
    gpt2_train_step's problems and fixes on another architecture (RMSNorm, rotary embeddings, gated
    MLP), captured after the models they were fitted on. `rms_norm`: "eager" (transformers'
    LlamaRMSNorm) or "fused" (F.rms_norm)."""
    model = _causal_lm("llama", device, attention, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                       num_attention_heads=12, num_key_value_heads=12, vocab_size=32000,
                       max_position_embeddings=1024)
    if rms_norm == "fused":
        _fused_rms_norms(model)
    tokens = torch.randint(0, 32000, (8, 512) if device == "cuda" else (1, 64), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    return _training_step(device, lambda: model(input_ids=tokens, labels=tokens, use_cache=False).loss, optimizer,
                          read_loss, fp32, tf32)


def llama_attention_step(device, attention, bf16=False, head_dim=64, rms_norm="eager"):
    """A Llama's forward, no grad, long enough that its attention matters: 8 layers of 16 heads of
    `head_dim` (1024 wide at 64), batch 4 x 1024 tokens, with transformers' `eager` or `sdpa` attention
    (causal, its mask built by the model); in fp32 (TF32 off), or with `bf16` under bf16 autocast.
    `rms_norm`: llama_train_step's."""
    width = 16 * head_dim
    model = _causal_lm("llama", device, attention, hidden_size=width, intermediate_size=width * 11 // 4,
                       num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                       max_position_embeddings=2048).eval()
    if rms_norm == "fused":
        _fused_rms_norms(model)
    tokens = torch.randint(0, 32000, (4, 1024) if device == "cuda" else (1, 64), device=device)

    def forward():
        _fp32_matmuls(not bf16)
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16 and device == "cuda"):
            return model(input_ids=tokens, use_cache=False).logits
    return forward


def gpt2_infer_step(device, attention, fp32=False, activation="gelu_new", layer_norm="nn"):
    """GPT-2's forward, no grad, with transformers' `eager` or `sdpa` attention; `fp32`: no autocast,
    TF32 off; `activation`: _gpt2's; `layer_norm`: gpt2_train_step's."""
    model = _gpt2(device, attention, activation).eval()
    if layer_norm == "written_out":
        _written_out_layer_norms(model)
    tokens = torch.randint(0, model.config.vocab_size, (8, 1024) if device == "cuda" else (1, 128), device=device)

    def forward():
        if fp32:
            torch.backends.cuda.matmul.allow_tf32 = False
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=not fp32):
            return model(tokens).logits
    return forward


def _qwen2(device, rms_norm):
    """Qwen2-0.5B's widths (896 wide, 14 heads sharing 2 key-value heads, biased q/k/v, SwiGLU 4864)
    in 8 layers, vocabulary 32,000, random weights; `rms_norm` "eager" (Qwen2RMSNorm, op by op) or
    "fused" (F.rms_norm)."""
    model = _causal_lm("qwen2", device, "sdpa", hidden_size=896, intermediate_size=4864, num_hidden_layers=8,
                       num_attention_heads=14, num_key_value_heads=2, vocab_size=32000, max_position_embeddings=2048)
    return _fused_rms_norms(model, "Qwen2RMSNorm") if rms_norm == "fused" else model


def qwen2_train_step(device, rms_norm, batch=(8, 512)):
    """Qwen2 trained with AdamW under bf16 autocast on `batch` tokens (8 x 512), the loss kept on the GPU."""
    model = _qwen2(device, rms_norm)
    tokens = torch.randint(0, 32000, batch if device == "cuda" else (1, 64), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return _training_step(device, lambda: model(input_ids=tokens, labels=tokens, use_cache=False).loss, optimizer,
                          False, False, False)


def qwen2_infer_step(device, rms_norm, batch=(4, 1024)):
    """Qwen2's forward, no grad, under bf16 autocast, on `batch` tokens (4 x 1024)."""
    model = _qwen2(device, rms_norm).eval()
    tokens = torch.randint(0, 32000, batch if device == "cuda" else (1, 64), device=device)

    def forward():
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            return model(input_ids=tokens, use_cache=False).logits
    return forward


def llama_infer_step(device, graph):
    """A small Llama's forward on 32 tokens in bf16: hundreds of short kernels a step. With `graph`,
    the forward is captured once in a CUDA graph and each step copies its tokens into the graph's
    input and replays it."""
    if graph:
        _cuda_only(device, "CUDA graphs")
    model = _causal_lm("llama", device, hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                       num_attention_heads=8, num_key_value_heads=8, vocab_size=32000,
                       max_position_embeddings=2048).to(torch.bfloat16).eval()
    tokens = torch.randint(0, 32000, (1, 32), device=device)
    static_tokens = tokens.clone()
    positions = torch.arange(32, device=device).unsqueeze(0)

    def forward():
        with torch.no_grad():
            return model(input_ids=static_tokens, position_ids=positions, use_cache=False).logits
    if not graph:
        return forward
    try:
        replayed, logits = cuda_graph(forward)
    except RuntimeError as failed:
        raise Skip(f"the model cannot be captured in a CUDA graph ({str(failed).splitlines()[0]})") from None

    def replay():
        static_tokens.copy_(tokens)
        replayed.replay()
        return logits
    return replay


def _resnet18(device):
    try:
        import torchvision
    except ImportError as missing:
        raise Skip(f"torchvision is not installed ({missing})") from None
    return torchvision.models.resnet18(weights=None).to(device)


def _resnet_trainer(device):
    """(one training step on a batch on the device, batch size, image side)."""
    model = _resnet18(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch, side = (128, 224) if device == "cuda" else (2, 64)
    labels = torch.randint(0, 1000, (batch,), device=device)

    def train_on(images):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return train_on, batch, side


def resnet_copy_step(device, pinned):
    """ResNet-18 training on an fp32 batch that comes from host memory each step: pageable, or pinned
    and copied with non_blocking."""
    if pinned:
        _cuda_only(device, "pinned memory")
    train_on, batch, side = _resnet_trainer(device)
    host = torch.randn(batch, 3, side, side)
    if pinned:
        host = host.pin_memory()
    return lambda: train_on(host.to(device, non_blocking=pinned))


def resnet_prep_step(device, on_gpu):
    """ResNet-18 training whose batch arrives as uint8 pixels: normalised by torch on the CPU and
    copied as fp32, or copied as uint8 from pinned memory and normalised on the GPU."""
    if on_gpu:
        _cuda_only(device, "pinned memory")
    train_on, batch, side = _resnet_trainer(device)
    pixels = torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
    if not on_gpu:
        return lambda: train_on(((pixels.float() - mean) / std).to(device))
    pixels = pixels.pin_memory()
    mean, std = mean.to(device), std.to(device)
    return lambda: train_on((pixels.to(device, non_blocking=True).float() - mean) / std)


class _Images(torch.utils.data.Dataset):
    """uint8 images normalised with torch as each is read, as a torchvision transform does."""

    def __init__(self, count, side):
        self.pixels = torch.randint(0, 256, (count, 3, side, side), dtype=torch.uint8)
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1) * 255
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1) * 255

    def __len__(self):
        return len(self.pixels)

    def __getitem__(self, index):
        return (self.pixels[index].float() - self.mean) / self.std


def resnet_loader_step(device, workers):
    """ResNet-18 training on batches from a DataLoader over _Images: read on the main thread
    (`workers` 0), or by worker processes with pinned memory and copied with non_blocking."""
    if workers:
        _cuda_only(device, "pinned memory")
    train_on, batch, side = _resnet_trainer(device)
    loader = torch.utils.data.DataLoader(_Images(32 * batch, side), batch_size=batch, num_workers=workers,
                                         pin_memory=bool(workers), persistent_workers=bool(workers),
                                         prefetch_factor=2 if workers else None)
    batches = iter(())

    def step():
        nonlocal batches
        try:
            images = next(batches)
        except StopIteration:
            batches = iter(loader)
            images = next(batches)
        train_on(images.to(device, non_blocking=bool(workers)))
    return step


class _BaddbmmDecoder(torch.nn.Module):
    """A decoder whose eager attention computes its scores as Bloom's and the first GPT-NeoX's did:
    torch.baddbmm(causal bias, Q, Kᵀ, alpha=1/√D), softmax, bmm with V; or through
    scaled_dot_product_attention (is_causal) with the same weights. `causal=False`: an encoder's
    attention, every token seeing every other (a zero bias; SDPA without is_causal)."""

    def __init__(self, layers=6, width=768, heads=12, vocab=50257, tokens=1024, sdpa=False, causal=True):
        super().__init__()
        self.heads, self.sdpa, self.causal = heads, sdpa, causal
        self.embed = torch.nn.Embedding(vocab, width)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(width, 3 * width) for _ in range(layers))
        self.out = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.mlp = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                                           torch.nn.Linear(4 * width, width)) for _ in range(layers))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(2 * layers))
        self.head = torch.nn.Linear(width, vocab, bias=False)
        bias = torch.full((tokens, tokens), float("-inf")).triu(1) if causal else torch.zeros(tokens, tokens)
        self.register_buffer("bias", bias, persistent=False)

    def attend(self, x, layer):
        batch, tokens, width = x.shape
        head_dim = width // self.heads
        q, k, v = self.qkv[layer](x).view(batch, tokens, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            mixed = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            q, k, v = (t.reshape(batch * self.heads, tokens, head_dim) for t in (q, k, v))
            bias = self.bias[:tokens, :tokens].to(q.dtype).expand(batch * self.heads, tokens, tokens)
            scores = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=head_dim ** -0.5)
            mixed = torch.bmm(torch.softmax(scores, dim=-1), v).view(batch, self.heads, tokens, head_dim)
        return self.out[layer](mixed.transpose(1, 2).reshape(batch, tokens, width))

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in range(len(self.qkv)):
            x = x + self.attend(self.norms[2 * layer](x), layer)
            x = x + self.mlp[layer](self.norms[2 * layer + 1](x))
        return self.head(x)


def _fp32_matmuls(fp32):
    """TF32 off for an fp32 loop, set each step: a TF32 loop run in the same rounds turns it on."""
    if fp32:
        torch.backends.cuda.matmul.allow_tf32 = False


def baddbmm_step(device, sdpa, train, fp32=False, causal=True):
    """_BaddbmmDecoder's forward (no grad) or training step (AdamW fused: the optimizer is not the
    pair's question), bf16 autocast (`fp32`: none, TF32 off), batch 8 x 1024 tokens (8 x 512 in
    training); `causal=False`: its attention an encoder's."""
    autocast = device == "cuda" and not fp32
    model = _BaddbmmDecoder(sdpa=sdpa, causal=causal).to(device)
    shape = ((8, 512) if train else (8, 1024)) if device == "cuda" else (1, 128)
    tokens = torch.randint(0, 50257, shape, device=device)
    if not train:
        model.eval()

        def forward():
            _fp32_matmuls(fp32)
            with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                return model(tokens)
        return forward
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")

    def step():
        _fp32_matmuls(fp32)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def _norm_pair(pair, step, **options):
    """PAIRS' two loops of a model whose step takes its norm as "eager" or "fused": PAIR_eager, the
    problem, and PAIR_fused, its fix."""
    return {f"{pair}_eager": (pair, "before", lambda d: step(d, "eager", **options)),
            f"{pair}_fused": (pair, "after", lambda d: step(d, "fused", **options))}


# name: (pair, role, builder of the step)
PAIRS = {
    "gpt2_train_item": ("gpt2_train_item", "before", lambda d: gpt2_train_step(d, read_loss=True)),
    "gpt2_train_no_item": ("gpt2_train_item", "after", lambda d: gpt2_train_step(d, read_loss=False)),
    "gpt2_train_fp32": ("gpt2_train_tf32", "before", lambda d: gpt2_train_step(d, False, fp32=True, tf32=False)),
    "gpt2_train_tf32": ("gpt2_train_tf32", "after", lambda d: gpt2_train_step(d, False, fp32=True, tf32=True)),
    "gpt2_infer_eager_attn": ("gpt2_infer_sdpa", "before", lambda d: gpt2_infer_step(d, "eager")),
    "gpt2_infer_sdpa": ("gpt2_infer_sdpa", "after", lambda d: gpt2_infer_step(d, "sdpa")),
    "llama_infer_eager": ("llama_infer_graph", "before", lambda d: llama_infer_step(d, graph=False)),
    "llama_infer_graph": ("llama_infer_graph", "after", lambda d: llama_infer_step(d, graph=True)),
    "resnet_train_pageable": ("resnet_train_copy", "before", lambda d: resnet_copy_step(d, pinned=False)),
    "resnet_train_pinned": ("resnet_train_copy", "after", lambda d: resnet_copy_step(d, pinned=True)),
    "resnet_train_cpu_prep": ("resnet_train_prep", "before", lambda d: resnet_prep_step(d, on_gpu=False)),
    "resnet_train_gpu_prep": ("resnet_train_prep", "after", lambda d: resnet_prep_step(d, on_gpu=True)),
    "gpt2_train_eager_attn": ("gpt2_train_sdpa", "before", lambda d: gpt2_train_step(d, False, attention="eager")),
    "gpt2_train_sdpa": ("gpt2_train_sdpa", "after", lambda d: gpt2_train_step(d, False, attention="sdpa")),
    "gpt2_train_adamw_foreach": ("gpt2_train_adamw", "before", lambda d: gpt2_train_step(d, False, fused=None)),
    "gpt2_train_adamw_fused": ("gpt2_train_adamw", "after", lambda d: gpt2_train_step(d, False, fused=d == "cuda")),
    "resnet_train_loader_main": ("resnet_train_loader", "before", lambda d: resnet_loader_step(d, workers=0)),
    "resnet_train_loader_workers": ("resnet_train_loader", "after", lambda d: resnet_loader_step(d, workers=4)),
    "gpt2_train_sgd_foreach": ("gpt2_train_sgd", "before", lambda d: gpt2_train_step(d, False, optimizer="SGD")),
    "gpt2_train_sgd_fused": ("gpt2_train_sgd", "after",
                             lambda d: gpt2_train_step(d, False, fused=d == "cuda", optimizer="SGD")),
    "gpt2_train_bf16": ("gpt2_train_tf32", "after", lambda d: gpt2_train_step(d, False)),
    # AMP's fp16 recipe: GradScaler reads found_inf before each foreach step, not before a fused one
    "gpt2_train_fp16_scaler_foreach": ("gpt2_train_fp16_scaler", "before",
                                       lambda d: gpt2_train_step(d, False, fp16_scaler=True)),
    "gpt2_train_fp16_scaler_fused": ("gpt2_train_fp16_scaler", "after",
                                     lambda d: gpt2_train_step(d, False, fused=d == "cuda", fp16_scaler=True)),
    "baddbmm_infer_eager": ("baddbmm_infer_sdpa", "before", lambda d: baddbmm_step(d, sdpa=False, train=False)),
    "baddbmm_infer_sdpa": ("baddbmm_infer_sdpa", "after", lambda d: baddbmm_step(d, sdpa=True, train=False)),
    "baddbmm_train_eager": ("baddbmm_train_sdpa", "before", lambda d: baddbmm_step(d, sdpa=False, train=True)),
    "baddbmm_train_sdpa": ("baddbmm_train_sdpa", "after", lambda d: baddbmm_step(d, sdpa=True, train=True)),
    # GPU-bound in fp32 (TF32 off): a loop that runs ahead until its launch queue fills, fixed as
    # the bf16 loops above are
    # fused attention on fp32 inputs, out of the sample its pace was read from (gpt2_train_fp32_sdpa)
    "gpt2_infer_fp32_eager_attn": ("gpt2_infer_fp32_sdpa", "before", lambda d: gpt2_infer_step(d, "eager", fp32=True)),
    "gpt2_infer_fp32_sdpa": ("gpt2_infer_fp32_sdpa", "after", lambda d: gpt2_infer_step(d, "sdpa", fp32=True)),
    "baddbmm_train_fp32_eager": ("baddbmm_train_fp32_sdpa", "before",
                                 lambda d: baddbmm_step(d, sdpa=False, train=True, fp32=True)),
    "baddbmm_train_fp32_sdpa": ("baddbmm_train_fp32_sdpa", "after",
                                lambda d: baddbmm_step(d, sdpa=True, train=True, fp32=True)),
    "llama_infer_fp32_eager_attn": ("llama_infer_fp32_sdpa", "before", lambda d: llama_attention_step(d, "eager")),
    "llama_infer_fp32_sdpa": ("llama_infer_fp32_sdpa", "after", lambda d: llama_attention_step(d, "sdpa")),
    "baddbmm_infer_fp32_eager": ("baddbmm_infer_fp32_sdpa", "before",
                                 lambda d: baddbmm_step(d, sdpa=False, train=False, fp32=True)),
    "baddbmm_infer_fp32_sdpa": ("baddbmm_infer_fp32_sdpa", "after",
                                lambda d: baddbmm_step(d, sdpa=True, train=False, fp32=True)),
    # attention without a causal mask (an encoder's): the fused kernel does all of the scores' work
    "encoder_infer_eager": ("encoder_infer_sdpa", "before", lambda d: baddbmm_step(d, sdpa=False, train=False, causal=False)),
    "encoder_infer_sdpa": ("encoder_infer_sdpa", "after", lambda d: baddbmm_step(d, sdpa=True, train=False, causal=False)),
    "encoder_infer_fp32_eager": ("encoder_infer_fp32_sdpa", "before",
                                 lambda d: baddbmm_step(d, sdpa=False, train=False, fp32=True, causal=False)),
    "encoder_infer_fp32_sdpa": ("encoder_infer_fp32_sdpa", "after",
                                lambda d: baddbmm_step(d, sdpa=True, train=False, fp32=True, causal=False)),
    "encoder_train_fp32_eager": ("encoder_train_fp32_sdpa", "before",
                                 lambda d: baddbmm_step(d, sdpa=False, train=True, fp32=True, causal=False)),
    "encoder_train_fp32_sdpa": ("encoder_train_fp32_sdpa", "after",
                                lambda d: baddbmm_step(d, sdpa=True, train=True, fp32=True, causal=False)),
    # gpt2_train's pairs on a Llama, out of the sample the models were fitted on
    # 16-bit fused attention on shapes and a head size its pace was not read off
    "llama_infer_eager_attn": ("llama_infer_sdpa", "before", lambda d: llama_attention_step(d, "eager", bf16=True)),
    "llama_infer_sdpa": ("llama_infer_sdpa", "after", lambda d: llama_attention_step(d, "sdpa", bf16=True)),
    "llama_infer_hd128_eager_attn": ("llama_infer_hd128_sdpa", "before",
                                     lambda d: llama_attention_step(d, "eager", bf16=True, head_dim=128)),
    "llama_infer_hd128_sdpa": ("llama_infer_hd128_sdpa", "after",
                               lambda d: llama_attention_step(d, "sdpa", bf16=True, head_dim=128)),
    "encoder_train_eager": ("encoder_train_sdpa", "before", lambda d: baddbmm_step(d, sdpa=False, train=True, causal=False)),
    "encoder_train_sdpa": ("encoder_train_sdpa", "after", lambda d: baddbmm_step(d, sdpa=True, train=True, causal=False)),
    "llama_train_item": ("llama_train_item", "before", lambda d: llama_train_step(d, read_loss=True)),
    "llama_train_no_item": ("llama_train_item", "after", lambda d: llama_train_step(d, read_loss=False)),
    "llama_train_eager_attn": ("llama_train_sdpa", "before", lambda d: llama_train_step(d, False, attention="eager")),
    "llama_train_sdpa": ("llama_train_sdpa", "after", lambda d: llama_train_step(d, False, attention="sdpa")),
    "llama_train_adamw_foreach": ("llama_train_adamw", "before", lambda d: llama_train_step(d, False)),
    "llama_train_adamw_fused": ("llama_train_adamw", "after", lambda d: llama_train_step(d, False, fused=d == "cuda")),
    "llama_train_fp32": ("llama_train_tf32", "before", lambda d: llama_train_step(d, False, fp32=True, tf32=False)),
    "llama_train_tf32": ("llama_train_tf32", "after", lambda d: llama_train_step(d, False, fp32=True, tf32=True)),
    "gpt2_train_fp32_adamw_foreach": ("gpt2_train_fp32_adamw", "before",
                                      lambda d: gpt2_train_step(d, False, fp32=True, tf32=False, fused=None)),
    "gpt2_train_fp32_adamw_fused": ("gpt2_train_fp32_adamw", "after",
                                    lambda d: gpt2_train_step(d, False, fp32=True, tf32=False, fused=d == "cuda")),
    "gpt2_train_fp32_eager_attn": ("gpt2_train_fp32_sdpa", "before",
                                   lambda d: gpt2_train_step(d, False, fp32=True, tf32=False, attention="eager")),
    "gpt2_train_fp32_sdpa": ("gpt2_train_fp32_sdpa", "after",
                             lambda d: gpt2_train_step(d, False, fp32=True, tf32=False, attention="sdpa")),
    # an elementwise chain computed op by op, then by one fused op
    "gpt2_train_gelu_new": ("gpt2_train_gelu", "before", lambda d: gpt2_train_step(d, False, activation="gelu_new")),
    "gpt2_train_gelu_tanh": ("gpt2_train_gelu", "after",
                             lambda d: gpt2_train_step(d, False, activation="gelu_pytorch_tanh")),
    "gpt2_infer_gelu_new": ("gpt2_infer_gelu", "before", lambda d: gpt2_infer_step(d, "sdpa", activation="gelu_new")),
    "gpt2_infer_gelu_tanh": ("gpt2_infer_gelu", "after",
                             lambda d: gpt2_infer_step(d, "sdpa", activation="gelu_pytorch_tanh")),
    "llama_train_rmsnorm_eager": ("llama_train_rmsnorm", "before", lambda d: llama_train_step(d, False)),
    "llama_train_rmsnorm_fused": ("llama_train_rmsnorm", "after", lambda d: llama_train_step(d, False, rms_norm="fused")),
    "llama_infer_rmsnorm_eager": ("llama_infer_rmsnorm", "before",
                                  lambda d: llama_attention_step(d, "sdpa", bf16=True)),
    "llama_infer_rmsnorm_fused": ("llama_infer_rmsnorm", "after",
                                  lambda d: llama_attention_step(d, "sdpa", bf16=True, rms_norm="fused")),
    # out of the sample the chains' ends were read off: another model's RMSNorm, a LayerNorm written out
    **_norm_pair("t5_train_rmsnorm", t5_train_step),
    **_norm_pair("t5_infer_rmsnorm", t5_infer_step),
    "gpt2_train_layernorm_eager": ("gpt2_train_layernorm", "before",
                                   lambda d: gpt2_train_step(d, False, activation="gelu_pytorch_tanh",
                                                             layer_norm="written_out")),
    "gpt2_train_layernorm_fused": ("gpt2_train_layernorm", "after",
                                   lambda d: gpt2_train_step(d, False, activation="gelu_pytorch_tanh")),
    "gpt2_infer_layernorm_eager": ("gpt2_infer_layernorm", "before",
                                   lambda d: gpt2_infer_step(d, "sdpa", activation="gelu_pytorch_tanh",
                                                             layer_norm="written_out")),
    "gpt2_infer_layernorm_fused": ("gpt2_infer_layernorm", "after",
                                   lambda d: gpt2_infer_step(d, "sdpa", activation="gelu_pytorch_tanh")),
    # out of the sample of a170ad8's rule (a norm's fused op dispatches twice): a third model's RMSNorm
    **_norm_pair("qwen2_train_rmsnorm", qwen2_train_step),
    **_norm_pair("qwen2_infer_rmsnorm", qwen2_infer_step),
    # the same with batches the GPU bounds (a step's kernels outlast its launches): their saving is
    # GPU time, which a host whose CPU drifts between rounds moves least
    **_norm_pair("qwen2_train_big_rmsnorm", qwen2_train_step, batch=(16, 1024)),
    **_norm_pair("qwen2_infer_big_rmsnorm", qwen2_infer_step, batch=(16, 2048)),
    **_norm_pair("t5_train_big_rmsnorm", t5_train_step, batch=(64, 512)),
    **_norm_pair("t5_infer_big_rmsnorm", t5_infer_step, batch=(64, 512)),
}
