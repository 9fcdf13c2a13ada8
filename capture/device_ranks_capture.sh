#!/usr/bin/env bash
# Captures, in one call to a lent machine with 2 GPUs (kind nvidia-h200-x2), the data-parallel job
# of issue [12]: 2 ranks of DDP over NCCL training the small causal transformer in bf16, once as is
# and once with rank 1 slowed by 20 ms a step, one trace per rank. Runs the GPU tests too.
# NVLink multicast stays off (NCCL, PyTorch and NVSHMEM), as the device tool's docs ask.
# Usage (repo root, OUT set): bash capture/device_ranks_capture.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
repo=$(pwd)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
nvidia-smi topo -m >> "$OUT/environment.txt" 2>&1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
capture() { echo "+ tracekit capture $*"; time python3 -m tracekit capture "$@"; }
{
  capture --ranks 2 --variants sdpa_default --dtype bf16 --steps 8 --out /tmp/c/ddp2
  capture --ranks 2 --variants sdpa_default --dtype bf16 --steps 8 --slow-rank 1 --delay-ms 20 --out /tmp/c/ddp2_slow1
} 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/ranks.tar" -C /tmp/c ddp2 ddp2_slow1
cp -r "$repo/tests" /tmp/tests && cd /tmp && python3 -m pytest -q -p no:cacheprovider /tmp/tests/test_capture_gpu.py /tmp/tests/test_capture_ranks.py 2>&1 | grep -v '^USDT:' | tee "$OUT/gpu_tests.log"
