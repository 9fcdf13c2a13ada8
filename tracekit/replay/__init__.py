"""What a step's time would be with a fix applied: a replay of the trace's dependency graph.

The graph (graph.py) is the one the view critical_path walks: GPU work (kernels, copies, fills)
runs in order on its stream, each item after its launch call; each CPU thread runs its runtime
calls in order, with its own time between them; a call that synchronises waits for the GPU item
it waited for in the trace. Replaying it (simulate.py) with each piece's observed duration gives
the trace back; a fix (fixes.py) changes durations or drops waits, and the replay says when each
step would then complete (whatif.py). Everything is arrays: one vectorised pass per thread and
stream, repeated until the CPU and the GPU agree, never a Python object per event.

Layer: beside tracekit.analysis (it reads the database's tables); imports nothing from outputs,
api or cli.
"""

FIX_SEPARATOR = "; "  # between the fixes of one whatif (a finding's, or all of a trace's together)
