"""`tracekit report`: one self-contained HTML page (or markdown) comparing the loaded traces.

    import tracekit
    html = tracekit.report()                             # the API: what `tracekit report` writes
    from tracekit.report import build_report
    html = build_report(db="tracekit.duckdb")            # or db=None: ./tracekit.duckdb, else the samples
    text = build_report(fmt="markdown")

The numbers come from the named queries (summary, gemm_classes, occupancy, cudnn_plan_time)
and the public views; the findings are the findings engine's rows (queries/findings/), as
`tracekit findings` lists them.
"""

import sys
import types

from tracekit.errors import TracekitError

FORMATS = ("html", "markdown")


def render(data, fmt="html"):
    """The report of a ReportData in `fmt` (html or markdown)."""
    if fmt == "html":
        from tracekit.report.figures import figures
        from tracekit.report.html import page
        return page(data, figures(data))
    if fmt == "markdown":
        from tracekit.report.markdown import markdown
        return markdown(data)
    raise TracekitError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")


def build_report(db=None, fmt="html"):
    """The report of database `db` (./tracekit.duckdb, else the bundled sample traces) as text."""
    from tracekit.report.data import load
    return render(load(db), fmt)


class _CallablePackage(types.ModuleType):
    """Makes `tracekit.report(...)` the API's report() (tracekit.api.report): importing this
    package sets the attribute tracekit.report to the package, which would hide the function."""

    def __call__(self, *args, **kwargs):
        from tracekit.api import report
        return report(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
