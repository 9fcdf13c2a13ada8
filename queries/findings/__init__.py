"""Finding rules: one SQL file each, run by tracekit.findings (its header says what, why, the fix and the saving)."""
