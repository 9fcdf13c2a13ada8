"""`tracekit diff A B`: compare two traces and gate CI on the change."""

import sys

import click

from tracekit.errors import TracekitError


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database holding traces A and B [default: ./tracekit.duckdb, else the bundled samples]; "
                   "not needed when A and B are trace files.")
@click.option("--by", type=click.Choice(["class", "kernel", "op"]), default="class", show_default=True,
              help="Attribute the change to kernel classes, kernels (template arguments cut) or launching ops.")
@click.option("--fail-on", "fail_on", multiple=True, metavar="EXPR",
              help="Exit 1 when this holds beyond noise: METRIC>+N% (relative change), METRIC>+N (absolute "
                   "change), METRIC>N (B's value), finding:RULE (the finding appears in B). Repeatable. A change "
                   "condition whose interval holds both no change and N is undecided: said so, exit 0.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Attribution rows shown: the N largest changes, and beyond them every row that appeared or "
                   "went away.")
@click.option("-f", "--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True, help="table for a terminal, markdown for a pull-request comment, json for scripts.")
def diff(a, b, db, by, fail_on, top, fmt):
    """Compare trace B against baseline A, per steady step, with 95% intervals from a bootstrap over steps
    and a run-to-run term.

    A and B are trace names in --db, or trace files (loaded into a temporary database). Each may be
    several runs of one variant: a quoted glob of names ('base_run*'), or a folder or quoted glob of
    files ('base/*.json.gz'), whose spread then sets the run-to-run term. With one run a side the
    term is a default per device, and the output says the interval cannot be trusted.
    Exit status: 0 when no --fail-on holds beyond noise, 1 when one does, 2 for a usage error.
    """
    from tracekit.api import diff as run_diff, names_trace_files
    from tracekit.analysis.fail_on import parse_condition
    from tracekit.outputs.compare_render import as_json, as_markdown_summary, as_text

    try:
        conditions = [parse_condition(text) for text in fail_on]
    except TracekitError as exc:
        raise click.UsageError(str(exc)) from None
    if not (names_trace_files(a) and names_trace_files(b)):
        from tracekit.cli import database_to_read
        db, _ = database_to_read(db, "comparing in")
    result = run_diff(a, b, db=db, by=by, fail_on=conditions, top=top)
    if fmt == "json":
        click.echo(as_json(result), nl=False)
    elif fmt == "markdown":
        click.echo(as_markdown_summary(result), nl=False)
    else:
        from tracekit.cli.analysis_cmd import terminal_width
        click.echo(as_text(result, terminal_width()), nl=False)
    sys.exit(1 if result.failed else 0)


COMMANDS = [diff]
