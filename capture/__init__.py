"""Capture: record torch.profiler (Kineto) traces of attention variants.

This package knows nothing of DuckDB. Only this file is importable without
torch, so the CLI can list and check variant names before torch loads.
"""

VARIANT_NAMES = (
    "naive", "naive_inplace", "naive_mul_inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash",
    "sdpa_cudnn", "sdpa_default", "flex",
)
