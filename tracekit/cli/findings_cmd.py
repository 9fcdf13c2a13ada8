"""`tracekit findings`: what the finding rules (queries/findings/) see in the traces, ranked by saving."""

import click

from tracekit.cli import lake_option
from tracekit.cli.analysis_cmd import check_output_file, emit, output_format, output_options


@click.command()
@click.option("--db", type=click.Path(dir_okay=False),
              help="Database [default: ./tracekit.duckdb, else the bundled sample traces].")
@click.option("-p", "--param", "params", nargs=2, multiple=True, metavar="NAME VALUE",
              help="A rule's parameter: `-p trace NAME` for one trace, or a threshold ($NAME in the rules' SQL).")
@click.option("--rule", help="Run only this rule.")
@click.option("--list", "list_rules", is_flag=True, help="List the rules (what each detects, its fix) and exit.")
@click.option("--evidence/--no-evidence", default=False, show_default=True,
              help="Include the evidence column (the events each finding rests on, as JSON).")
@lake_option
@output_options
def findings(db, params, rule, list_rules, evidence, lake, fmt, force, output, columns, escape_formulas):
    """Explain the traces: what each rule finds, with the fix and the step time it would save.

    Each finding names its fix (whatif) and tracekit replays it on the trace's graph:
    saving_us_per_step is what the loop would save as it runs without the profiler (each op the
    trace records costs the CPU time that the trace's gaps between back-to-back ops show: `tracekit
    whatif TRACE --apply no-profiler --apply FIX` less `--apply no-profiler`),
    traced_saving_us_per_step the same fix on the loop as traced (`whatif TRACE --apply FIX`);
    estimate_us_per_step is the rule's own figure. Ranked by saving (largest first); findings without one come last, then
    each trace's fixes together (all_fixes). With no --db and no tracekit.duckdb here, it runs
    on the bundled sample traces.
    """
    from tracekit.cli import connect_source, source_to_read
    from tracekit.analysis.findings_engine import FINDING_KEYS, rules, run_findings
    from tracekit.analysis.rows import Rows

    fmt = output_format(fmt, output)
    if list_rules:
        import pandas as pd
        rows = [{"rule": r.rule, "detects": r.detects, "fix": r.fix, "saving": r.saving,
                 "params": ", ".join(f"{k}={d if d is not None else 'NULL'}" for k, (d, _) in r.params.items())}
                for r in rules().values()]
        check_output_file(output, fmt, force)
        emit(Rows.from_frame(pd.DataFrame(rows)), fmt, output, columns, escape_formulas, keys=("rule", "detects"))
        return
    path = source_to_read(db, lake, "explaining")
    check_output_file(output, fmt, force, database=path, lake=lake)
    con = connect_source(path, lake)
    try:
        frame = run_findings(con, rule=rule, params=dict(params))
    finally:
        con.close()
    emit(Rows.from_frame(frame if evidence else frame.drop(columns=["evidence"])), fmt, output, columns,
         escape_formulas, FINDING_KEYS)


COMMANDS = [findings]
