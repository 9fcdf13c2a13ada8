#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, the fix pairs on real models of capture/model_pairs.py
# (GPT-2, Llama, ResNet from their configs) with capture/fix_rounds.py: one process per pair, each
# loop timed without the profiler in interleaved rounds before and after its trace.
# Usage (repo root, OUT set): bash capture/device_model_pairs.sh
# MODEL_GROUPS (groups separated by spaces, loops in a group by commas) narrows it; ROUNDS (default
# 5) and GROUP_TIMEOUT (seconds a group may take, default 90) bound the call.
# Writes $OUT/model_pairs.tar, $OUT/capture.log, $OUT/environment.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys, platform; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "kernel", platform.release())'
  python3 -c 'import transformers, torchvision; print("transformers", transformers.__version__, "torchvision", torchvision.__version__)'
  nproc; lscpu | grep -i -E "model name|numa node\(s\)|thread\(s\) per core"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
rm -rf /tmp/model_pairs  # a warm machine's earlier call left its own
default_groups="llama_infer_eager,llama_infer_graph gpt2_train_item,gpt2_train_no_item
resnet_train_pageable,resnet_train_pinned resnet_train_cpu_prep,resnet_train_gpu_prep
gpt2_infer_eager_attn,gpt2_infer_sdpa gpt2_train_fp32,gpt2_train_tf32
gpt2_train_eager_attn,gpt2_train_sdpa gpt2_train_adamw_foreach,gpt2_train_adamw_fused
resnet_train_loader_main,resnet_train_loader_workers"
read -r -a groups <<< "$(echo ${MODEL_GROUPS:-$default_groups})"
{
  for group in "${groups[@]}"; do
    echo "+ fix_rounds --pairs model_pairs $group ($(date +%T))"
    timeout "${GROUP_TIMEOUT:-90}" python3 -m tracekit.capture.fix_rounds --pairs model_pairs --out /tmp/model_pairs \
      --only "$group" --rounds "${ROUNDS:-5}" || echo "+ $group: exit $?"
    tar cf "$OUT/model_pairs.tar" -C /tmp model_pairs  # after each group: a call cut short keeps what it has
  done
} 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
ls -la /tmp/model_pairs
