#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, the traces that findings and diff are checked on:
# two separate runs of one variant (run-to-run noise), fp32 without and with TF32 (SIMT against
# Tensor Core GEMMs), FlashAttention and cuDNN at head dim 128 (Kineto's occupancy of 0), and
# training steps of a small transformer in fp32 and bf16 (launch-bound). Runs the GPU tests too.
# Usage (repo root, OUT set): bash capture/device_more_captures.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
repo=$(pwd)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
capture() { echo "+ tracekit capture $*"; time python3 -m tracekit capture "$@"; }
{
  # Two separate processes, the same variant and shape: what differs is noise.
  capture --variants naive_inplace --steps 12 --out /tmp/c/rerun_a
  capture --variants naive_inplace --steps 12 --out /tmp/c/rerun_b
  capture --variants naive,naive_inplace,sdpa_math --dtype fp32 --no-tf32 --out /tmp/c/fp32
  capture --variants naive,naive_inplace,sdpa_math --dtype fp32 --tf32 --out /tmp/c/fp32_tf32
  capture --variants sdpa_flash,sdpa_cudnn,sdpa_efficient --head-dim 128 --out /tmp/c/hd128
  capture --train --variants sdpa_default,naive --dtype fp32 --no-tf32 --steps 8 --out /tmp/c/train_fp32
  capture --train --variants sdpa_default --dtype bf16 --steps 8 --out /tmp/c/train_bf16
} 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/rerun.tar" -C /tmp/c rerun_a rerun_b
tar cf "$OUT/fp32.tar" -C /tmp/c fp32 fp32_tf32
tar cf "$OUT/hd128.tar" -C /tmp/c hd128
tar cf "$OUT/train.tar" -C /tmp/c train_fp32 train_bf16
cp -r "$repo/tests" /tmp/tests && cd /tmp && python3 -m pytest -q -p no:cacheprovider /tmp/tests/test_capture_gpu.py /tmp/tests/test_capture_cli.py 2>&1 | grep -v '^USDT:' | tee "$OUT/gpu_tests.log"
