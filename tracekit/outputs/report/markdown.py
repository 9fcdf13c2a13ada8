"""The report for a terminal or a pull request: the comparative table and the findings."""

from tracekit.outputs.render import as_markdown
from tracekit.analysis.rows import Rows
from tracekit.outputs.safe_text import markdown_text
from tracekit.outputs.report.data import steps_wording, table_heading
from tracekit.outputs.report.findings_section import markdown_section
from tracekit.outputs.report import memory_section
from tracekit.outputs.report.table import display_frame


def markdown(data):
    """Markdown text: a heading, the table (fastest first) and one bullet per finding."""
    lines = ["# tracekit report", "",
             f"{len(data.summary)} trace(s) from {markdown_text(data.source or 'a tracekit database')}; "
             f"{steps_wording(data.summary)}.", "",
             f"## {table_heading(data)}", "", as_markdown(Rows.from_frame(display_frame(data))).rstrip(), ""]
    memory = memory_section.markdown_section(data.memory)
    return "\n".join(lines) + "\n" + (memory + "\n" if memory else "") + markdown_section(data.findings)
