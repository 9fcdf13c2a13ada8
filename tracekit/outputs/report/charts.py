"""Hand-written inline SVG charts: no JavaScript, no libraries, nothing fetched.

Every mark carries a <title>, which browsers show on hover. Text is styled by the page's CSS
(classes lbl, val, tick, note, legend); colours of marks are attributes, so a chart also reads
when saved alone.
"""

import math
from dataclasses import dataclass, field
from html import escape

# One colour per kernel class, the same on every chart; memcpy is red because it is the
# finding you look for.
CLASS_COLOURS = {
    "gemm": "#4e79a7", "convolution": "#2f4b7c", "attention": "#59a14f", "elementwise": "#f28e2b",
    "softmax": "#b07aa1", "reduction": "#edc948", "copy": "#76b7b2", "communication": "#ff9da7",
    "other": "#9c755f", "unclassified": "#bab0ac", "memcpy": "#e15759", "memset": "#5b5b5b",
}
ACCENT = "#4e79a7"
MUTED = "#c9ced6"
LABEL_W, VALUE_W, ROW_H, BAR_H = 170, 96, 26, 16
LABEL_CHARS = 19
TEXT_W = 6.6  # width of a character of 12px text, for placing labels without measuring them


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


def _t(text):
    return escape(str(text), quote=True)


def _title(text):
    return f"<title>{_t(text)}</title>" if text else ""


def _label(text, x, y, cls="lbl", anchor="end"):
    shown = text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"
    return (f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" '
            f'dominant-baseline="middle">{_title(text) if shown != text else ""}{_t(shown)}</text>')


def _svg(chart_id, title, width, height, body):
    return (f'<svg id="{_t(chart_id)}" class="chart" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'aria-labelledby="{_t(chart_id)}-title"><title id="{_t(chart_id)}-title">{_t(title)}</title>'
            + "".join(body) + "</svg>")


def nice_ticks(top, count=5):
    """0, step, 2·step, ... reaching `top`, with step 1, 2, 2.5 or 5 × 10^k."""
    if not top or top <= 0 or math.isnan(top):
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def _tick_text(value, fmt):
    return fmt(value) if fmt else (f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}")


def _axis(ticks, x0, scale, top, bottom, fmt):
    parts = []
    for tick in ticks:
        x = x0 + tick * scale
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
                     f'stroke="#e3e6eb" stroke-width="1"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">'
                     f'{_t(_tick_text(tick, fmt))}</text>')
    return parts


def bar_chart(chart_id, title, bars, *, width=560, top=None, tick_fmt=None, empty_text="no data"):
    """Horizontal bars, one row per Bar, on a linear axis from 0 (to `top`, else the largest value)."""
    values = [b.value for b in bars if b.value is not None]
    ticks = nice_ticks(top if top is not None else max(values, default=0))
    plot_w = width - LABEL_W - VALUE_W
    scale = plot_w / ticks[-1]
    height = 8 + ROW_H * len(bars) + 24
    body = _axis(ticks, LABEL_W, scale, 4, 8 + ROW_H * len(bars), tick_fmt)
    for i, bar in enumerate(bars):
        mid = 8 + i * ROW_H + ROW_H / 2
        row = [_label(bar.label, LABEL_W - 8, mid)]
        if bar.value is None:
            row.append(_note(bar.text or empty_text, LABEL_W + 4, mid, bar.tooltip))
        else:
            w = max(bar.value * scale, 1.5 if bar.value > 0 else 0)
            row.append(f'<rect x="{LABEL_W}" y="{mid - BAR_H / 2:.1f}" width="{w:.1f}" height="{BAR_H}" '
                       f'rx="2" fill="{bar.colour}">{_title(bar.tooltip)}</rect>')
            row.append(_value_text(bar.text, LABEL_W + w, mid, width))
        body.append(_group(bar.label, row))
    return _svg(chart_id, title, width, height, body)


def _group(label, parts):
    """One row of a chart, findable by its label (data-row)."""
    return f'<g class="row" data-row="{_t(label)}">' + "".join(parts) + "</g>"


def _note(text, x, mid, tooltip=""):
    return (f'<text class="note" x="{x}" y="{mid:.1f}" dominant-baseline="middle">'
            f'{_title(tooltip)}{_t(text)}</text>')


def _value_text(text, bar_end, mid, width):
    """The value after its bar, or inside the bar's end when it would run off the chart."""
    if bar_end + 6 + TEXT_W * len(text) <= width:
        return (f'<text class="val" x="{bar_end + 6:.1f}" y="{mid:.1f}" dominant-baseline="middle">'
                f'{_t(text)}</text>')
    return (f'<text class="val-in" x="{bar_end - 6:.1f}" y="{mid:.1f}" text-anchor="end" '
            f'dominant-baseline="middle">{_t(text)}</text>')


def legend(items, x, y, width):
    """Swatches for (name, colour) items, wrapping at `width`; returns (svg parts, height used)."""
    parts, cx, cy = [], x, y
    for key, colour in items:
        item_w = 17 + TEXT_W * len(key) + 16
        if cx + item_w > x + width and cx > x:
            cx, cy = x, cy + 18
        parts.append(f'<rect x="{cx}" y="{cy}" width="12" height="12" rx="2" fill="{colour}"/>')
        parts.append(f'<text class="legend" x="{cx + 17}" y="{cy + 6}" dominant-baseline="middle">{_t(key)}</text>')
        cx += item_w
    return parts, cy - y + 18


def stacked_bar_chart(chart_id, title, stacks, keys, *, width=1100, tick_fmt=None, top=None, colours=None):
    """One horizontal bar per Stack, its segments in the order of `keys`, with a legend on top.

    `colours` maps keys to colours (default: the kernel-class colours); a Stack without
    segments shows its text as a note.
    """
    colour = (colours or {}).get
    pick = (lambda k: colour(k) or colour_of(k)) if colours else colour_of
    legend_parts, legend_h = legend([(k, pick(k)) for k in keys], LABEL_W, 6, width - LABEL_W - VALUE_W)
    top_y = 6 + legend_h + 8
    totals = [sum(v for _, v, _ in s.segments) for s in stacks]
    ticks = nice_ticks(top if top is not None else max(totals, default=0))
    scale = (width - LABEL_W - VALUE_W) / ticks[-1]
    height = top_y + ROW_H * len(stacks) + 24
    body = legend_parts + _axis(ticks, LABEL_W, scale, top_y - 4, top_y + ROW_H * len(stacks), tick_fmt)
    order = {k: n for n, k in enumerate(keys)}
    for i, stack in enumerate(stacks):
        mid = top_y + i * ROW_H + ROW_H / 2
        row, x = [_label(stack.label, LABEL_W - 8, mid)], LABEL_W
        for key, value, tooltip in sorted(stack.segments, key=lambda s: order.get(s[0], len(keys))):
            w = value * scale
            if w > 0:
                row.append(f'<rect x="{x:.2f}" y="{mid - BAR_H / 2:.1f}" width="{max(w, 0.8):.2f}" '
                           f'height="{BAR_H}" fill="{pick(key)}">{_title(tooltip)}</rect>')
                x += w
        row.append(_value_text(stack.text, x, mid, width) if stack.segments else _note(stack.text, LABEL_W + 4, mid))
        body.append(_group(stack.label, row))
    return _svg(chart_id, title, width, height, body)


def log_pair_chart(chart_id, title, rows, series, *, width=560, unit="ms", empty_text="no data"):
    """Grouped horizontal bars on a log axis: rows are (label, [value per series], [tooltip per series])."""
    values = [v for _, vs, _ in rows for v in vs if v is not None and v > 0]
    legend_parts, legend_h = legend(series, LABEL_W, 6, width - LABEL_W)
    top_y = 6 + legend_h + 8
    if not values:
        body = legend_parts + [f'<text class="note" x="{LABEL_W}" y="{top_y + 14}">{_t(empty_text)}</text>']
        return _svg(chart_id, title, width, top_y + 40, body)
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = hi if hi > lo else lo + 1
    plot_w = width - LABEL_W - VALUE_W
    group_h = 14 + 18 * len(series)
    height = top_y + group_h * len(rows) + 24
    body = list(legend_parts)
    for p in range(lo, hi + 1):
        x = LABEL_W + (p - lo) / (hi - lo) * plot_w
        body.append(f'<line x1="{x:.1f}" y1="{top_y - 4}" x2="{x:.1f}" y2="{top_y + group_h * len(rows)}" '
                    f'stroke="#e3e6eb"/>')
        body.append(f'<text class="tick" x="{x:.1f}" y="{top_y + group_h * len(rows) + 14}" '
                    f'text-anchor="middle">{_t(f"{10.0 ** p:g} {unit}")}</text>')
    for i, (label, vals, tips) in enumerate(rows):
        y0 = top_y + i * group_h + 7
        row = [_label(label, LABEL_W - 8, y0 + 9 * len(series))]
        for j, ((name, colour), value, tip) in enumerate(zip(series, vals, tips)):
            if value is None or value <= 0:
                continue
            # Bars start at the axis' first decade, so a value below it still shows.
            w = max((math.log10(value) - lo) / (hi - lo) * plot_w, 1.5)
            y = y0 + 18 * j
            row.append(f'<rect x="{LABEL_W}" y="{y:.1f}" width="{w:.1f}" height="16" rx="2" '
                       f'fill="{colour}">{_title(tip)}</rect>')
            row.append(_value_text(f"{value:,.3g} {unit}", LABEL_W + w, y + 8, width))
        body.append(_group(label, row))
    return _svg(chart_id, title, width, height, body)


def timeline_chart(chart_id, title, rows, keys, *, width=1100, tick_fmt=None):
    """One lane per row (label, note, [(start, dur, key, tooltip)]), all on one time axis."""
    ends = [start + dur for _, _, events in rows for start, dur, _, _ in events]
    legend_parts, legend_h = legend([(k, colour_of(k)) for k in keys], LABEL_W, 6, width - LABEL_W - VALUE_W)
    top_y = 6 + legend_h + 8
    ticks = nice_ticks(max(ends, default=0))
    scale = (width - LABEL_W - VALUE_W) / ticks[-1]
    height = top_y + ROW_H * len(rows) + 24
    body = legend_parts + _axis(ticks, LABEL_W, scale, top_y - 4, top_y + ROW_H * len(rows), tick_fmt)
    for i, (label, note, events) in enumerate(rows):
        mid = top_y + i * ROW_H + ROW_H / 2
        row = [_label(label, LABEL_W - 8, mid),
               f'<line x1="{LABEL_W}" y1="{mid:.1f}" x2="{width - VALUE_W}" y2="{mid:.1f}" '
               f'stroke="#eef0f3" stroke-width="{BAR_H}"/>']
        end = LABEL_W
        for start, dur, key, tooltip in events:
            x, w = LABEL_W + start * scale, max(dur * scale, 1.0)
            end = max(end, x + w)
            row.append(f'<rect x="{x:.2f}" y="{mid - BAR_H / 2:.1f}" width="{w:.2f}" height="{BAR_H}" '
                       f'fill="{colour_of(key)}" stroke="#ffffff" stroke-width="0.5">{_title(tooltip)}</rect>')
        row.append(_value_text(note, end, mid, width))
        body.append(_group(label, row))
    return _svg(chart_id, title, width, height, body)
