#!/usr/bin/env bash
# On a lent GPU machine: memory_check.py's profiled captures and its per-step max_memory_allocated,
# into $OUT/memcheck.tar (the traces and measured.csv). The machine has no duckdb: compare here with
# capture/memory_check.sql (docs/memory.md says how).
# Usage (repo root, OUT set): bash capture/device_memory_check.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
cd /tmp && python3 -m tracekit.capture.memory_check --out /tmp/memcheck 2>&1 | grep -v '^USDT:' | tee "$OUT/memory_check.log"
tar cf "$OUT/memcheck.tar" -C /tmp/memcheck .
