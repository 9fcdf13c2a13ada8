#!/bin/sh
# Captures the traces of this folder: each variant in a process of its own, so the CPU allocator's
# Total Allocated (counted from when profiling began) holds this variant's memory alone; the
# captures' manifests go into manifest.json, one under "runs" per process.
# Run from the repository root: sh tests/data/cpu/memory/capture.sh
set -e
out=tests/data/cpu/memory
tmp=/tmp/tracekit-memory-capture
for variant in naive naive_inplace naive_mul_inplace sdpa_math sdpa_flash; do
    rm -rf "$tmp/$variant"
    python -m tracekit capture --device cpu --variants "$variant" --batch 1 --heads 2 --seq-len 256 \
        --head-dim 32 --steps 4 --profile-memory --out "$tmp/$variant"
    cp "$tmp/$variant/$variant.json.gz" "$out/"
done
python - "$tmp" "$out" <<'PY'
import json, sys
from pathlib import Path
tmp, out = Path(sys.argv[1]), Path(sys.argv[2])
runs = [json.loads((tmp / v / "manifest.json").read_text())
        for v in ("naive", "naive_inplace", "naive_mul_inplace", "sdpa_math", "sdpa_flash")]
(out / "manifest.json").write_text(json.dumps({"runs": runs}, indent=1) + "\n")
PY
