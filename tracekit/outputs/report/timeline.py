"""The timeline chart: one lane per trace, its GPU events as blocks on one time axis shared by
every lane, so lengths compare directly.

A page must stay small for a database of big traces, so a chart draws at most MAX_BLOCKS blocks
(tracekit.outputs.report.downsample merges events past each lane's share) and a tooltip shows at
most TOOLTIP_NAME_CHARS of a kernel's name. A block wide enough for a few characters is labelled
with its kernel (or, merged, its class and count), shortened with "…" to fit inside the block;
each lane ends with a note (the step it shows and its span) in a column of its own.
"""

from dataclasses import dataclass, field

import numpy as np

from tracekit.analysis.kernel_names import short_kernel_name
from tracekit.outputs.report import svg, units
from tracekit.outputs.report.charts import VALUE_W, colour_of, nice_ticks, present_keys
from tracekit.outputs.report.downsample import downsample
from tracekit.outputs.report.svg import BAR_H, GAP, ROW_H

MAX_BLOCKS = 2000
TOOLTIP_NAME_CHARS = 240
BLOCK_FONT = 11
MIN_LABEL_CHARS = 4  # a block label shorter than this (with its "…") says nothing: none is drawn


@dataclass
class Lane:
    label: str
    note: str
    start: list = field(default_factory=list)    # µs from the lane's first event, sorted
    dur: list = field(default_factory=list)      # µs
    cls: list = field(default_factory=list)      # kernel class, memcpy or memset
    name: list = field(default_factory=list)
    detail: list = field(default_factory=list)   # extra text of an event (a memcpy's bytes) or ""


@dataclass
class Drawn:
    svg: str
    events: int  # GPU events in the chart's lanes
    blocks: int  # blocks drawn for them (== events unless downsampled)


def _ink(colour):
    """Text colour that reads on a block of `colour`: white on dark, the page's ink on light."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#ffffff" if 0.299 * r + 0.587 * g + 0.114 * b < 150 else "#1f2933"


def _tooltip(block):
    span = f"+{block.start:,.1f} to +{block.end:,.1f} µs"
    if block.events == 1 and block.name is not None:
        name = block.name if len(block.name) <= TOOLTIP_NAME_CHARS else block.name[:TOOLTIP_NAME_CHARS - 1] + "…"
        return (f"{name}\n{block.cls}{block.detail} · starts at +{block.start:,.1f} µs · "
                f"lasts {units.us(block.end - block.start)}")
    what = f"GPU events, mostly {block.cls}" if block.mixed else f"{block.cls} events"
    return f"{block.events:,} {what}, merged · {span} · {units.us(block.busy_us)} busy"


def _label(block):
    """A kernel's function without its namespaces (what tells blocks apart), a copy's name, or
    a merged block's class and count."""
    if block.events == 1 and block.name is not None:
        # Whole, not cut to SHORT_KERNEL_CHARS: the block's own width cuts the label.
        return short_kernel_name(block.name).split("::")[-1] if block.cls not in ("memcpy", "memset") else block.name
    return f"{block.cls} ×{block.events:,}"


def _budgets(counts, total):
    """Blocks each lane may draw, `total` in all: a lane needing less than an equal share of what
    is left keeps all its events and leaves the rest to the bigger lanes."""
    budgets, left = [0] * len(counts), total
    for done, i in enumerate(sorted(range(len(counts)), key=lambda i: counts[i])):
        budgets[i] = min(counts[i], max(left // (len(counts) - done), 1))
        left -= budgets[i]
    return budgets


def _lane(lane, blocks, fr, scale, mid):
    """The lane's row: label, background, blocks with the labels that fit, note."""
    row = [svg.row_label(lane.label, fr, mid),
           f'<line x1="{fr.left:.1f}" y1="{mid:.1f}" x2="{fr.plot_end:.1f}" y2="{mid:.1f}" '
           f'stroke="#eef0f3" stroke-width="{BAR_H}"/>']
    labels, free_from = [], fr.left
    for block in blocks:
        x, w = fr.left + block.start * scale, max((block.end - block.start) * scale, 1.0)
        colour = colour_of(block.cls)
        # A thin white edge keeps one event's block apart from the next; merged blocks, often a
        # pixel or two wide, would be mostly edge.
        edge = ' stroke="#ffffff" stroke-width="0.5"' if block.events == 1 else ""
        row.append(f'<rect x="{x:.2f}" y="{mid - BAR_H / 2:.1f}" width="{w:.2f}" height="{BAR_H}" '
                   f'fill="{colour}"{edge}>{svg.title(_tooltip(block))}</rect>')
        shown = svg.fit(_label(block), w - GAP, BLOCK_FONT)
        # Blocks of concurrent streams overlap: a label starts only where the last one ended.
        if len(shown) >= MIN_LABEL_CHARS and x + GAP / 2 >= free_from:
            labels.append(svg.text(shown, x + GAP / 2, mid, cls="blk", size=BLOCK_FONT, fill=_ink(colour)))
            free_from = x + GAP / 2 + svg.text_width(shown, BLOCK_FONT) + 2
    row += labels
    row.append(svg.note(lane.note, fr.plot_end + GAP, mid, fr))
    return svg.group(lane.label, row)


def timeline_chart(chart_id, title, lanes, keys, *, width=960, tick_fmt=None):
    """The chart of `lanes` (Lane), legend keys ordered as `keys`; returns a Drawn."""
    notes = max((svg.text_width(lane.note) for lane in lanes), default=0)
    fr = svg.frame([lane.label for lane in lanes], width, min(max(notes + 2 * GAP, VALUE_W), width * 0.3))
    ends = [float(np.max(np.asarray(lane.start) + np.asarray(lane.dur))) for lane in lanes if len(lane.start)]
    ticks = nice_ticks(max(ends, default=0))
    scale = fr.plot_w / ticks[-1]
    budgets = _budgets([len(lane.start) for lane in lanes], MAX_BLOCKS)
    blocks = [downsample(lane.start, lane.dur, lane.cls, lane.name, lane.detail, 1 / scale, budget)
              for lane, budget in zip(lanes, budgets)]
    classes = {b.cls for lane_blocks in blocks for b in lane_blocks}
    legend_parts, legend_h = svg.legend([(k, colour_of(k)) for k in present_keys(keys, classes)],
                                        fr.left, 6, fr.plot_w + fr.right)
    top_y = 6 + legend_h + 8
    bottom = top_y + ROW_H * len(lanes)
    body = legend_parts + svg.axis(ticks, fr, scale, top_y - 4, bottom, tick_fmt)
    body += [_lane(lane, lane_blocks, fr, scale, top_y + i * ROW_H + ROW_H / 2)
             for i, (lane, lane_blocks) in enumerate(zip(lanes, blocks))]
    events = sum(len(lane.start) for lane in lanes)
    return Drawn(svg.svg(chart_id, title, width, bottom + 24, body), events, sum(len(b) for b in blocks))
