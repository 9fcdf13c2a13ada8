#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, one variant five times, each in a process of its own
# (capture/repeat_runs.py): the GPU's run-to-run noise, from which `tracekit diff` takes its default
# run-to-run term (tracekit/analysis/run_noise_floors.csv, by benchmarks/run_to_run.py). The capture
# is rerun_a's and rerun_b's (tests/data/h200): seven runs of one variant at one shape.
# Usage (repo root, OUT set): bash capture/device_repeat_captures.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
python3 -m tracekit.capture.repeat_runs --runs 5 --out /tmp/repeats -- --variants naive_inplace --steps 12 || exit 1
tar cf "$OUT/repeats.tar" -C /tmp repeats
ls -la /tmp/repeats
