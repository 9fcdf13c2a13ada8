"""The report's memory section: each trace's highest steady-step peak (view memory_steps) and what
was live at it, for the traces captured with memory events; nothing for the others."""

from tracekit.outputs.report import units
from tracekit.outputs.safe_text import html_text, markdown_text

HEADERS = ("trace", "step", "device", "peak", "over the step's start", "allocated in the step", "live at the peak")
NOTE = ("The most memory allocated at once in a steady step (Kineto's Total Allocated, as "
        "torch.cuda.max_memory_allocated gives it), above what the step began with, and the largest "
        "blocks live then with the ops that allocated them (view memory_peak_blocks has them all).")


def _mib(value):
    return "—" if units.missing(value) else f"{units.number(value / 1048576, 3)} MiB"


def _cells(row):
    device = row["device_type"] if row["device_type"] == "cpu" else f"{row['device_type']}:{row['device']}"
    return (row["trace"], "whole trace" if units.missing(row["step"]) else str(int(row["step"])), device,
            _mib(row["peak_allocated_bytes"]), _mib(row["peak_over_start_bytes"]), _mib(row["allocated_bytes"]),
            row["live_at_peak"] or "—")


def markdown_section(memory):
    """'## Memory' and a table, or '' when no trace has memory events."""
    if memory.empty:
        return ""
    lines = ["## Memory", "", NOTE, "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for _, row in memory.iterrows():
        lines.append("| " + " | ".join(markdown_text(cell) for cell in _cells(row)) + " |")
    return "\n".join(lines) + "\n"


def html_section(memory):
    """<section id="memory"> with the table, or '' when no trace has memory events."""
    if memory.empty:
        return ""
    head = "".join(f"<th>{html_text(h)}</th>" for h in HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{html_text(cell)}</td>" for cell in _cells(row)) + "</tr>"
                   for _, row in memory.iterrows())
    return (f'<section id="memory"><h2>Memory</h2><p class="cap">{html_text(NOTE)}</p>'
            f'<div class="card tablewrap"><table id="memory-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div></section>")
