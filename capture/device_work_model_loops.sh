#!/usr/bin/env bash
# On a lent GPU machine: the loops of capture/work_model_loops.py (convolutions, norms, FP8 and
# grouped GEMMs, optimizers, flex attention), into $OUT/work_models.tar (traces and truth.json) and
# $OUT/work_models.log.
# Usage (repo root, OUT set): bash capture/device_work_model_loops.sh [--only NAME,...]
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site
cd /tmp && python3 -m tracekit.capture.work_model_loops --out /tmp/work_models "$@" 2>&1 | grep -v '^USDT:' | tee "$OUT/work_models.log"
tar cf "$OUT/work_models.tar" -C /tmp work_models
