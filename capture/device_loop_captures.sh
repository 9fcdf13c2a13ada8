#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, the ordinary loops of capture/loops.py (a profiler
# schedule, no per-step sync: the GPU behind the CPU) with each loop's truth (issues [14], [15]).
# Usage (repo root, OUT set): bash capture/device_loop_captures.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
python3 -c 'import torch, transformers, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "transformers", transformers.__version__)' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
loops() { echo "+ loops $*"; python3 -m tracekit.capture.loops --out /tmp/loops "$@"; }
{
  # A cold process for the cuDNN first call; the rerun in a process of its own (run-to-run noise).
  loops --only iterations_no_profiler_step
  loops --only infer_naive,infer_inplace,stub_last_step,train_naive,train_inplace
  loops --only infer_naive_rerun
  loops --only copy_pageable,copy_pinned
  loops --only train_gpt2,infer_gpt2,train_stall,train_no_stall
} 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/loops.tar" -C /tmp loops
ls -la /tmp/loops
