#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, the fix pairs of capture/fix_pairs.py (a profiler
# schedule, no per-step sync), each loop with its truth: for each finding rule that predicts a saving,
# a loop with the problem and the same loop fixed, the two in one process. Then, in fresh processes
# that never profile before measuring, each pair's step_us again, interleaved (repeats.json).
# Usage (repo root, OUT set): bash capture/device_fix_pairs.sh [all|captures|repeats]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
what=${1:-all}
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/environment.txt" 2>&1
python3 -c 'import torch, sys, platform; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "kernel", platform.release())' >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
# the pair kinds of capture/fix_pairs.py, a process each
mapfile -t groups < "$here/fix_groups.txt"
# FIX_GROUPS (groups separated by spaces, loops in a group by commas) captures those instead
if [ -n "${FIX_GROUPS:-}" ]; then read -r -a groups <<< "$FIX_GROUPS"; fi
pairs() { echo "+ fix_pairs $*"; python3 -m tracekit.capture.fix_pairs --out /tmp/fixes "$@"; }
if [ "$what" != repeats ]; then
  # One process for each kind of fix; before, then after, in it.
  for group in "${groups[@]}"; do pairs --only "$group"; done 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
fi
if [ "$what" != captures ]; then
  for group in "${groups[@]}"; do pairs --only "$group" --repeat 5; done 2>&1 | grep -v '^USDT:' | tee "$OUT/repeats.log"
fi
tar cf "$OUT/fixes.tar" -C /tmp fixes
ls -la /tmp/fixes
