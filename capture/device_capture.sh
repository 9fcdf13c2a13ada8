#!/usr/bin/env bash
# Captures sample_traces/ on a lent GPU machine in one call and runs the GPU tests there.
# The machine has torch but no duckdb and no network: tracekit is installed without deps.
# Usage (repo root, OUT set): bash capture/device_capture.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
repo=$(pwd)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
[ "${SKIP_CAPTURE:-}" ] || { cd /tmp && time python3 -m tracekit capture --out sample_traces 2>&1 | tee "$OUT/capture.log"
tar cf "$OUT/sample_traces.tar" -C /tmp/sample_traces . ; }
# The capture tests only: the device has no duckdb for the analysis tests.
# Tests run from a copy so that `tracekit` resolves to the installed package, not ./tracekit.
cp -r "$repo/tests" /tmp/tests && cd /tmp && python3 -m pytest -q -p no:cacheprovider /tmp/tests/test_capture_gpu.py /tmp/tests/test_capture_cli.py 2>&1 | tee "$OUT/gpu_tests.log"
