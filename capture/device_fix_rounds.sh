#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine, every fix pair of capture/fix_pairs.py again with its
# truth timed in the same process (capture/fix_rounds.py: one process per pair kind), and the CUDA
# graphs captured inside the profiler's window (capture/graph_in_trace.py), and the work models'
# loop of the ops the other loops do not reach (capture/work_model_loops.py train_more_ops).
# Usage (repo root, OUT set): bash capture/device_fix_rounds.sh
# FIX_GROUPS (groups separated by spaces, loops in a group by commas), GRAPH_LOOPS (graph_in_trace's
# --only), GRAPH=0 (no graph loops) and MORE_OPS=0 (no work-model loop) narrow it to a second call's captures.
# Writes $OUT/fix_rounds.tar, $OUT/graph_in_trace.tar (not with GRAPH=0), $OUT/more_ops.tar (not with
# MORE_OPS=0), $OUT/capture.log, $OUT/environment.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys, platform; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "kernel", platform.release())'
  nproc; lscpu | grep -i -E "model name|numa node\(s\)|thread\(s\) per core"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
cd /tmp
rm -rf /tmp/fix_rounds /tmp/graph_in_trace /tmp/more_ops  # a warm machine's earlier call left its own
# the pair kinds of capture/fix_pairs.py, a process each (the copy kind with its prefetching fix too)
mapfile -t groups < <(sed "s/^train_copy_pageable,train_copy_pinned$/&,train_copy_prefetch/" "$here/fix_groups.txt")
if [ -n "${FIX_GROUPS:-}" ]; then read -r -a groups <<< "$FIX_GROUPS"; fi
{
  for group in "${groups[@]}"; do
    echo "+ fix_rounds $group"
    python3 -m tracekit.capture.fix_rounds --out /tmp/fix_rounds --only "$group" --rounds "${ROUNDS:-7}"
    tar cf "$OUT/fix_rounds.tar" -C /tmp fix_rounds  # after each group: a call cut short keeps what it has
  done
  if [ "${GRAPH:-1}" != 0 ]; then
    echo "+ graph_in_trace"
    python3 -m tracekit.capture.graph_in_trace --out /tmp/graph_in_trace ${GRAPH_LOOPS:+--only "$GRAPH_LOOPS"}
  fi
  if [ "${MORE_OPS:-1}" != 0 ]; then
    echo "+ work_model_loops train_more_ops"
    python3 -m tracekit.capture.work_model_loops --out /tmp/more_ops --only train_more_ops
  fi
} 2>&1 | grep -v '^USDT:' | tee "$OUT/capture.log"
tar cf "$OUT/fix_rounds.tar" -C /tmp fix_rounds
[ -d /tmp/graph_in_trace ] && tar cf "$OUT/graph_in_trace.tar" -C /tmp graph_in_trace
[ -d /tmp/more_ops ] && tar cf "$OUT/more_ops.tar" -C /tmp more_ops
ls -la /tmp/fix_rounds
