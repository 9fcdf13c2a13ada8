"""What tracekit hands out: rendered rows, the report, Perfetto traces and server, HTA's tables, the shell."""
