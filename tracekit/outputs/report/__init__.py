"""`tracekit report`: one self-contained HTML page (or markdown) comparing the loaded traces.

    import tracekit
    html = tracekit.report()                             # the API: what `tracekit report` writes
    from tracekit.outputs.report import build_report
    html = build_report(db="tracekit.duckdb")            # or db=None: ./tracekit.duckdb, else the samples
    text = build_report(fmt="markdown")

The numbers come from the named queries (summary, gemm_classes, occupancy, cudnn_plan_time)
and the public views; the findings are the findings engine's rows (queries/findings/), as
`tracekit findings` lists them.
"""

from tracekit.errors import TracekitError

FORMATS = ("html", "markdown")


def render(data, fmt="html"):
    """The report of a ReportData in `fmt` (html or markdown)."""
    if fmt == "html":
        from tracekit.outputs.report.figures import figures
        from tracekit.outputs.report.html import page
        return page(data, figures(data))
    if fmt == "markdown":
        from tracekit.outputs.report.markdown import markdown
        return markdown(data)
    raise TracekitError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")


def build_report(db=None, fmt="html"):
    """The report of database `db` (./tracekit.duckdb, else the bundled sample traces) as text."""
    from tracekit.outputs.report.data import load
    return render(load(db), fmt)

