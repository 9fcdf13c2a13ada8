#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, capture/side_streams.py's loops (a stream waiting for
# another, Kineto's CUDA sync events on), each with its truth. Usage (repo root, OUT set):
#   bash capture/device_side_streams.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
python3 -m tracekit.capture.side_streams --out /tmp/side_streams 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/side_streams.tar" -C /tmp side_streams
ls -la /tmp/side_streams
