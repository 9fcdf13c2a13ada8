"""`tracekit whatif TRACE --apply FIX`: what a fix would save, replayed on the trace's graph."""

import click

from tracekit.cli import lake_option, source_to_read, wait_option
from tracekit.errors import TracekitError


@click.command()
@click.argument("trace")
@click.option("--apply", "fixes", multiple=True, metavar="FIX",
              help="A fix to replay with, repeatable: drop-copies:OP (the copies OP makes where you call it, "
                   "what its in-place form removes), drop:REGEX (GPU items whose name or op chain matches), "
                   "drop-sync:REGEX (runtime calls, by name or op chain, that stop waiting; not GradScaler's reads), drop-cpu-gaps:US[-US] "
                   "(a thread's own time of at least US µs, at most the second, between two calls), drop-cpu:REGEX (CPU ops that take "
                   "no time), tensor-cores[:REGEX] (SIMT GEMMs at their Tensor Core roofline), pin-copies[:REGEX] "
                   "(pageable copies from pinned memory, non_blocking), prefetch-copies[:REGEX] (the same copies on a "
                   "side stream, issued a step ahead), cuda-graph[:US] (each step's launches as one "
                   "graph), fuse-attention[:REGEX] (an attention op's calls as one fused kernel), fuse-optimizer (foreach "
                   "Adam/AdamW/SGD steps as fused=True, GradScaler's read before them gone), drop-scaler-checks "
                   "(GradScaler's reads wait no more), no-profiler[:US] "
                   "(the loop without the profiler: each recorded op's cost of US µs taken out; without US, or "
                   "no-profiler:trace, the cost the trace's own gaps between ops show).")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database holding TRACE [default: ./tracekit.duckdb, else the bundled samples].")
@lake_option
@click.option("-f", "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@wait_option
def whatif(trace, fixes, db, lake, fmt):
    """Replay TRACE's steps on its dependency graph (the one view critical_path walks), as they are and
    with the fixes applied, and say what the fixes save a steady step.

    The replay without change is the trace's own time (its fit is printed); each fix changes the
    graph and the replay says when each step would complete. Where the other ranks of TRACE's job
    are loaded, they are replayed with it, each with the fixes: a collective ends only once the
    last rank has arrived, so a rank that waited for another saves what the other saves. A trace
    without steps is replayed whole, as one step. Example:
    tracekit whatif naive --apply drop-copies:aten::masked_fill
    """
    from tracekit.api import whatif as run_whatif
    from tracekit.outputs.whatif_render import as_json, as_text
    from tracekit.replay.fixes import parse_fix

    try:
        for text in fixes:
            parse_fix(text)
    except TracekitError as exc:
        raise click.UsageError(str(exc)) from None
    path = source_to_read(db, lake, "replaying on")
    result = run_whatif(trace, fixes, db=path, lake=lake)
    click.echo(as_json(result) if fmt == "json" else as_text(result), nl=False)


COMMANDS = [whatif]
