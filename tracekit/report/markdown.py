"""The report for a terminal or a pull request: the comparative table and the findings."""

from tracekit.render import as_markdown
from tracekit.rows import Rows
from tracekit.report.table import display_frame


def markdown(data, findings):
    """Markdown text: a heading, the table (fastest first) and one bullet per finding."""
    lines = ["# tracekit report", "",
             f"{len(data.summary)} trace(s) from {data.source or 'a tracekit database'}; per-step figures "
             "are means over the steady steps (all but the first).", "",
             "## Variants, fastest first", "", as_markdown(Rows.from_frame(display_frame(data))).rstrip(), "",
             "## Findings", ""]
    for finding in findings:
        lines.append(f"- **{finding.title}**")
        lines += [f"  - {line}" for line in finding.lines]
    return "\n".join(lines) + "\n"
