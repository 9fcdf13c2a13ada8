#!/usr/bin/env bash
# Recaptures the traces of this folder (CPU only; torch installed). Run from the repository root:
#   bash tests/data/cpu/stack/make_traces.sh
# naive and naive_inplace with the Python stack (with_stack=True), at the CPU default shape.
set -euo pipefail
out=tests/data/cpu/stack
python -m tracekit capture --device cpu --with-stack --variants naive,naive_inplace --out "$out"
# Training steps (forward, backward, AdamW) of the small transformer with naive attention: the
# stack of a training loop, with autograd's backward thread (which has no Python frames).
python -m tracekit capture --device cpu --with-stack --train --variants naive --steps 3 --out "$out/train"
