"""Hand-written inline SVG charts: no JavaScript, no libraries, nothing fetched.

Every value a chart shows is text on it (a bar's value after the bar); a mark's <title> adds
detail a browser shows on hover, never the only way to read a value. Legends list only the keys
a chart draws. Text is placed by tracekit.outputs.report.svg, so it stays inside the chart and off
other text; colours of marks are attributes, so a chart also reads when saved alone.
"""

import math
from dataclasses import dataclass, field

from tracekit.outputs.report import svg
from tracekit.outputs.report.svg import BAR_H, ROW_H

# One colour per kernel class, the same on every chart; memcpy is red because it is the
# finding you look for.
CLASS_COLOURS = {
    "gemm": "#4e79a7", "convolution": "#2f4b7c", "attention": "#59a14f", "elementwise": "#f28e2b",
    "softmax": "#b07aa1", "reduction": "#edc948", "copy": "#76b7b2", "communication": "#ff9da7",
    "other": "#9c755f", "unclassified": "#bab0ac", "memcpy": "#e15759", "memset": "#5b5b5b",
    "CPU op": "#a0cbe8",  # a trace without GPU work: its CPU ops on the timeline
}
ACCENT = "#4e79a7"
VALUE_W = 96  # the value column right of the plot


@dataclass
class Bar:
    label: str
    value: float = None          # None: nothing to draw (the text says why)
    text: str = ""               # shown after the bar
    tooltip: str = ""
    colour: str = ACCENT


@dataclass
class Stack:
    label: str
    segments: list = field(default_factory=list)  # (key, value, tooltip)
    text: str = ""


def colour_of(key):
    return CLASS_COLOURS.get(key, CLASS_COLOURS["other"])


def present_keys(keys, drawn):
    """The keys of `drawn` in the order of `keys`, then any others sorted: a legend's entries."""
    drawn = set(drawn)
    known = [k for k in keys if k in drawn]
    return known + sorted(drawn - set(known))


def nice_ticks(top, count=5):
    """0, step, 2·step, ... reaching `top`, with step 1, 2, 2.5 or 5 × 10^k."""
    if not top or top <= 0 or math.isnan(top):
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def bar_chart(chart_id, title, bars, *, width=560, top=None, tick_fmt=None, empty_text="no data"):
    """Horizontal bars, one row per Bar, on a linear axis from 0 (to `top`, else the largest value)."""
    fr = svg.frame([b.label for b in bars], width, VALUE_W)
    values = [b.value for b in bars if b.value is not None]
    ticks = nice_ticks(top if top is not None else max(values, default=0))
    scale = fr.plot_w / ticks[-1]
    height = 8 + ROW_H * len(bars) + 24
    body = svg.axis(ticks, fr, scale, 4, 8 + ROW_H * len(bars), tick_fmt)
    for i, bar in enumerate(bars):
        mid = 8 + i * ROW_H + ROW_H / 2
        row = [svg.row_label(bar.label, fr, mid)]
        if bar.value is None:
            row.append(svg.note(bar.text or empty_text, fr.left + 4, mid, fr, bar.tooltip))
        else:
            w = max(bar.value * scale, 1.5 if bar.value > 0 else 0)
            row.append(f'<rect x="{fr.left:.1f}" y="{mid - BAR_H / 2:.1f}" width="{w:.1f}" height="{BAR_H}" '
                       f'rx="2" fill="{bar.colour}">{svg.title(bar.tooltip)}</rect>')
            row.append(svg.value_text(bar.text, fr.left + w, mid, fr))
        body.append(svg.group(bar.label, row))
    return svg.svg(chart_id, title, width, height, body)


def stacked_bar_chart(chart_id, title, stacks, keys, *, width=960, tick_fmt=None, top=None, colours=None):
    """One horizontal bar per Stack, its segments in the order of `keys`, with a legend of the
    keys it draws on top.

    `colours` maps keys to colours (default: the kernel-class colours); a Stack without
    segments shows its text as a note.
    """
    pick = (lambda k: colours.get(k) or colour_of(k)) if colours else colour_of
    fr = svg.frame([s.label for s in stacks], width, VALUE_W)
    drawn = present_keys(keys, [k for s in stacks for k, v, _ in s.segments if v > 0])
    legend_parts, legend_h = svg.legend([(k, pick(k)) for k in drawn], fr.left, 6, fr.plot_w + fr.right)
    top_y = 6 + legend_h + 8
    totals = [sum(v for _, v, _ in s.segments) for s in stacks]
    ticks = nice_ticks(top if top is not None else max(totals, default=0))
    scale = fr.plot_w / ticks[-1]
    height = top_y + ROW_H * len(stacks) + 24
    body = legend_parts + svg.axis(ticks, fr, scale, top_y - 4, top_y + ROW_H * len(stacks), tick_fmt)
    order = {k: n for n, k in enumerate(drawn)}
    for i, stack in enumerate(stacks):
        mid = top_y + i * ROW_H + ROW_H / 2
        row, x = [svg.row_label(stack.label, fr, mid)], fr.left
        for key, value, tooltip in sorted(stack.segments, key=lambda s: order.get(s[0], len(drawn))):
            w = value * scale
            if w > 0:
                row.append(f'<rect x="{x:.2f}" y="{mid - BAR_H / 2:.1f}" width="{max(w, 0.8):.2f}" '
                           f'height="{BAR_H}" fill="{pick(key)}">{svg.title(tooltip)}</rect>')
                x += w
        drew = x > fr.left
        row.append(svg.value_text(stack.text, x, mid, fr) if drew else svg.note(stack.text, fr.left + 4, mid, fr))
        body.append(svg.group(stack.label, row))
    return svg.svg(chart_id, title, width, height, body)


def log_pair_chart(chart_id, title, rows, series, *, width=560, unit="ms", empty_text="no data"):
    """Grouped horizontal bars on a log axis: rows are (label, [value per series], [tooltip per series])."""
    values = [v for _, vs, _ in rows for v in vs if v is not None and v > 0]
    fr = svg.frame([label for label, _, _ in rows], width, VALUE_W)
    drawn = [s for j, s in enumerate(series) if any(vs[j] is not None and vs[j] > 0 for _, vs, _ in rows)]
    legend_parts, legend_h = svg.legend(drawn, fr.left, 6, fr.plot_w + fr.right)
    top_y = 6 + legend_h + 8
    if not values:
        body = legend_parts + [svg.note(empty_text, fr.left, top_y + 10, fr)]
        return svg.svg(chart_id, title, width, top_y + 30, body)
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = hi if hi > lo else lo + 1
    group_h = 14 + 18 * len(series)
    height = top_y + group_h * len(rows) + 24
    bottom = top_y + group_h * len(rows)
    xs = [fr.left + (p - lo) / (hi - lo) * fr.plot_w for p in range(lo, hi + 1)]
    body = list(legend_parts)
    body += [f'<line x1="{x:.1f}" y1="{top_y - 4}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e6eb"/>' for x in xs]
    body += svg.tick_labels(xs, [f"{10.0 ** p:g} {unit}" for p in range(lo, hi + 1)], fr, bottom + 14)
    for i, (label, vals, tips) in enumerate(rows):
        y0 = top_y + i * group_h + 7
        row = [svg.row_label(label, fr, y0 + 9 * len(series))]
        for j, ((name, colour), value, tip) in enumerate(zip(series, vals, tips)):
            if value is None or value <= 0:
                continue
            # Bars start at the axis' first decade, so a value below it still shows.
            w = max((math.log10(value) - lo) / (hi - lo) * fr.plot_w, 1.5)
            y = y0 + 18 * j
            row.append(f'<rect x="{fr.left:.1f}" y="{y:.1f}" width="{w:.1f}" height="16" rx="2" '
                       f'fill="{colour}">{svg.title(tip)}</rect>')
            row.append(svg.value_text(f"{value:,.3g} {unit}", fr.left + w, y + 8, fr))
        body.append(svg.group(label, row))
    return svg.svg(chart_id, title, width, height, body)
