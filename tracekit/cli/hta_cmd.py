"""`tracekit hta` and `tracekit hta diff`: HTA's analyses of loaded traces, into hta_* tables."""

from pathlib import Path

import click

from tracekit.cli import wait_option
from tracekit.errors import TracekitError

DB_HELP = "Database with the loaded traces [default: ./tracekit.duckdb]."


def _writable_db(db):
    """HTA writes tables, so unlike `query` there is no fallback to the read-only samples."""
    from tracekit.store.database import DEFAULT_DB
    path = Path(db or DEFAULT_DB)
    if not path.is_file():
        raise TracekitError(f"{path}: no database: load traces first (tracekit load TRACE... --db {path})")
    return path


def _plural(count, word):
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _report(result):
    """One line for what was stored, then one per analysis that failed (on stderr)."""
    done = [f"{run.analysis} {_plural(run.rows, 'row')}" for run in result.runs
            if run.ok and run.analysis != "parse"]
    label = result.trace if result.test_trace is None else f"{result.trace} vs {result.test_trace}"
    if done:
        click.echo(f"{label}: {', '.join(done)} in {result.seconds:.1f} s")
    for run in result.runs:
        if not run.ok:
            click.echo(f"{label}: {run.analysis} failed: {run.message}", err=True)


class _TraceListGroup(click.Group):
    """Lets `--trace a b c` name several traces, as `--trace a --trace b --trace c` does: the words
    after a --trace, up to the next option or a subcommand's name, are traces too."""

    def parse_args(self, ctx, args):
        spread, state = [], None  # state: "value" right after --trace, "list" after its value
        for arg in args:
            if state == "list" and not arg.startswith("-") and arg not in self.commands:
                spread += ["--trace", arg]
                continue
            spread.append(arg)
            if state == "value":
                state = "list"
            else:
                state = "value" if arg == "--trace" else "list" if arg.startswith("--trace=") else None
        return super().parse_args(ctx, spread)


@click.group(cls=_TraceListGroup, invoke_without_command=True)
@click.option("--db", type=click.Path(dir_okay=False), help=DB_HELP)
@click.option("--trace", "traces", multiple=True, metavar="NAME...",
              help="Analyse these loaded traces: --trace a b, or --trace a --trace b [default: every loaded trace].")
@wait_option
@click.pass_context
def hta(ctx, db, traces):
    """Run Holistic Trace Analysis on loaded traces and store its results as tables.

    Each trace gets HTA's kernel breakdown (tables hta_kernel_breakdown and
    hta_kernel_type_breakdown), temporal breakdown (hta_temporal_breakdown), idle time
    (hta_idle_time) and CUDA kernel launch stats (hta_launch_stats); hta_runs says which
    analyses ran or failed and why. A re-run replaces that trace's rows. HTA reads the
    original trace files (never changed); needs `pip install 'tracekit[hta]'`.
    """
    ctx.ensure_object(dict)["db"] = db
    if ctx.invoked_subcommand is not None:
        return
    from tracekit.store.database import connect
    from tracekit.outputs.hta_tables import run_all

    con = connect(_writable_db(db))
    try:
        results = run_all(con, traces, on_result=_report,
                          on_error=lambda name, exc: click.echo(f"{name}: not analysed: {exc}", err=True))
    finally:
        con.close()
    if not any(result.stored for result in results):
        raise TracekitError("nothing stored: HTA could not analyse any trace")


@hta.command()
@click.argument("control")
@click.argument("test")
@click.option("--db", type=click.Path(dir_okay=False), help=DB_HELP)
@wait_option
@click.pass_context
def diff(ctx, control, test, db):
    """Compare two loaded traces with HTA's TraceDiff into hta_trace_diff.

    One row per CPU op and GPU kernel name: counts and total time in CONTROL and TEST
    over all their ProfilerSteps, and TEST minus CONTROL.
    """
    from tracekit.store.database import connect
    from tracekit.outputs.hta_tables import run_diff

    con = connect(_writable_db(db or ctx.obj.get("db")))
    try:
        result = run_diff(con, control, test)
    finally:
        con.close()
    _report(result)
    if not result.stored:
        raise TracekitError(f"nothing stored: HTA's trace diff of {control} and {test} failed")


COMMANDS = [hta]
