#!/usr/bin/env bash
# Captures, in one call to a lent machine with 2 GPUs (kind nvidia-h100-x2), capture/ddp_pairs.py's
# fix pair across the ranks of a DDP job: gradient_as_bucket_view off, then on, each loop timed in
# interleaved rounds before and after its traces, one trace per rank.
# NVLink multicast stays off (NCCL, PyTorch and NVSHMEM), as the device tool's docs ask.
# Usage (repo root, OUT set): bash capture/device_ddp_pairs.sh; RANKS=1 runs a one-rank job on one GPU
# (DDP still all-reduces its buckets and copies them back) where no machine of 2 GPUs is lent.
# Writes $OUT/ddp_pairs.tar, $OUT/capture.log, $OUT/environment.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  nproc
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
timeout "${CAPTURE_TIMEOUT:-420}" python3 -m tracekit.capture.ddp_pairs --out /tmp/ddp_pairs --ranks "${RANKS:-2}" --rounds "${ROUNDS:-5}" 2>&1 \
  | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/ddp_pairs.tar" -C /tmp ddp_pairs
ls -la /tmp/ddp_pairs
