#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, the fix pairs of capture/fix_pairs.py (a profiler
# schedule, no per-step sync), each loop with its truth: for each finding rule that predicts a saving,
# a loop with the problem and the same loop fixed, the two in one process.
# Usage (repo root, OUT set): bash capture/device_fix_pairs.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
python3 -c 'import torch, sys, platform; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "kernel", platform.release())' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
pairs() { echo "+ fix_pairs $*"; python3 -m tracekit.capture.fix_pairs --out /tmp/fixes "$@"; }
{
  # One process for each kind of fix; before, then after, in it.
  pairs --only infer_launch_eager,infer_launch_graph,train_launch_eager,train_launch_graph
  pairs --only infer_item,infer_no_item,train_item,train_no_item
  pairs --only infer_stall,infer_no_stall
  pairs --only infer_mask_per_call,infer_mask_once,train_mask_per_call,train_mask_once
  pairs --only infer_fp32,infer_tf32,train_fp32,train_tf32
  pairs --only train_copy_pageable,train_copy_pinned
  pairs --only infer_sdpa_math,infer_sdpa_flash,train_sdpa_math,train_sdpa_flash
} 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/fixes.tar" -C /tmp fixes
ls -la /tmp/fixes
