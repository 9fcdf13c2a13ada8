"""Real traces captured on the GPU by tracekit capture (see README.md here)."""
