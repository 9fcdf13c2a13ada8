"""The pieces every chart is made of: the <svg> element, text that is placed where it fits, row
labels, legends and axes.

Text is never measured (a report is plain text, made without a browser); its width is estimated
from the glyph widths of DejaVu Sans, the widest common sans-serif (Linux's default; system-ui on a
Mac or Windows is narrower), and never less than EM_PER_CHAR of its font size per character. Every
text is placed, or shortened with "…", so that its estimated box stays inside the chart and off
every other text.
Font sizes are attributes (the <svg> sets the default), so a chart keeps its layout when saved alone
and a test can check the boxes from the SVG itself.
"""

import os
from dataclasses import dataclass, field

from tracekit.outputs.safe_text import html_text

EM_PER_CHAR = 0.6  # the least a character is taken to need, in em
# Em widths of DejaVu Sans glyphs, rounded up, by class; any other character takes WIDE_EM.
_NARROW = dict.fromkeys("il|.,:;'!I[]() /-", 0.40)
_MEDIUM = dict.fromkeys("frtjJ*\"", 0.50)
_WIDE = dict.fromkeys("mwMW@%…#", 1.0)
_EM = {**_NARROW, **_MEDIUM, **dict.fromkeys("0123456789µ_", 0.64), **_WIDE}
UPPER_EM, OTHER_EM = 0.80, 0.66
BOLD = 1.1  # bold glyphs are this much wider
FONT = 12          # labels, values and notes
TICK_FONT = 11
LEGEND_FONT = 11
ROW_H, BAR_H = 26, 16
GAP = 6            # between a bar and its value, a label and the plot
MIN_LEFT = 90      # the narrowest label column
LEFT_SHARE = 0.32  # the widest label column, as a share of the chart's width


@dataclass
class Frame:
    """A chart's horizontal layout: the label column [0, left), the plot, the value column."""

    width: int
    left: float
    right: float
    shown: dict = field(default_factory=dict)  # row name -> the text its label shows (row_labels)

    @property
    def plot_w(self):
        return self.width - self.left - self.right

    @property
    def plot_end(self):
        return self.width - self.right


def t(text):
    return html_text(text)


def title(text):
    return f"<title>{t(text)}</title>" if text else ""


def _em(char):
    return _EM.get(char) or (UPPER_EM if char.isupper() else OTHER_EM)


def text_width(text, size=FONT, bold=False):
    """The estimated width of `text` in px: its glyphs' widths, at least EM_PER_CHAR each."""
    text = str(text)
    width = max(sum(_em(c) for c in text), EM_PER_CHAR * len(text)) * size
    return width * BOLD if bold else width


def fit(text, width, size=FONT, bold=False):
    """`text`, or its beginning and "…", in at most `width` px ("" when not even "…" fits)."""
    text = str(text)
    if text_width(text, size, bold) <= width:
        return text
    keep = min(len(text) - 1, int(width / (EM_PER_CHAR * size)))  # no character is narrower than that
    while keep > 0 and text_width(text[:keep] + "…", size, bold) > width:
        keep -= 1
    return text[:keep] + "…" if text_width("…", size, bold) <= width else ""


def fit_middle(text, width, size=FONT):
    """`text` shortened in the middle ("a100_sxm4…gemm_cutlass"), so names that share a
    beginning stay apart."""
    text = str(text)
    if text_width(text, size) <= width:
        return text
    for keep in range(min(len(text) - 1, int(width / (EM_PER_CHAR * size))), 1, -1):
        head, tail = (keep + 1) // 2, keep // 2
        shown = text[:head] + "…" + text[len(text) - tail:]
        if text_width(shown, size) <= width:
            return shown
    return fit(text, width, size)


def row_labels(labels, room):
    """Each row's name as shown in a label column `room` px wide: whole where it fits, else
    shortened in the middle; names that would then read alike are shown from just before where
    they differ."""
    shown = [fit_middle(label, room) for label in labels]
    for alike in _alike(labels, shown):
        common = len(os.path.commonprefix([labels[i] for i in alike]))
        for i in alike:
            shown[i] = fit("…" + labels[i][max(common - 4, 0):], room)
    return shown


def _alike(labels, shown):
    """Groups of row indexes whose names differ but whose shown texts do not."""
    groups = {}
    for i, text in enumerate(shown):
        groups.setdefault(text, []).append(i)
    return [g for g in groups.values() if len({labels[i] for i in g}) > 1]


def frame(labels, width, right):
    """The Frame whose label column holds the longest of `labels` (within MIN_LEFT and
    LEFT_SHARE of the width)."""
    labels = [str(label) for label in labels]
    longest = max((text_width(label) for label in labels), default=0)
    left = round(min(max(longest + 2 * GAP + 4, MIN_LEFT), width * LEFT_SHARE))
    return Frame(width, left, right, dict(zip(labels, row_labels(labels, left - 2 * GAP))))


def svg(chart_id, title_text, width, height, body):
    return (f'<svg id="{t(chart_id)}" class="chart" viewBox="0 0 {width:g} {height:g}" '
            f'width="{width:g}" height="{height:g}" font-size="{FONT}" xmlns="http://www.w3.org/2000/svg" '
            f'role="img" aria-labelledby="{t(chart_id)}-title"><title id="{t(chart_id)}-title">{t(title_text)}'
            "</title>" + "".join(body) + "</svg>")


def text(content, x, y, *, cls, anchor="start", size=None, tooltip="", fill=None, middle=True):
    """One <text>; `middle` centres it on y (else y is its baseline)."""
    attrs = f' font-size="{size:g}"' if size else ""
    attrs += f' text-anchor="{anchor}"' if anchor != "start" else ""
    attrs += ' dominant-baseline="middle"' if middle else ""
    attrs += f' fill="{fill}"' if fill else ""
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}"{attrs}>{title(tooltip)}{t(content)}</text>'


def row_label(label, fr, mid):
    """The row's name as its frame shows it (row_labels), right-aligned in the label column, with
    the full name as its tooltip when it is shortened."""
    shown = fr.shown.get(label, label)
    return text(shown, fr.left - GAP, mid, cls="lbl", anchor="end", tooltip=label if shown != label else "")


def group(label, parts):
    """One row of a chart, findable by its label (data-row)."""
    return f'<g class="row" data-row="{t(label)}">' + "".join(parts) + "</g>"


def note(content, x, mid, fr, tooltip=""):
    """Grey italic text from x, shortened to end inside the chart."""
    return text(fit(content, fr.width - x - 2), x, mid, cls="note", tooltip=tooltip)


def value_text(content, bar_end, mid, fr):
    """The value after its bar; inside the bar's end when it does not fit after it but fits in
    the bar; else shortened to fit after it."""
    after = fr.width - bar_end - GAP - 2
    if text_width(content) <= after:
        return text(content, bar_end + GAP, mid, cls="val")
    if text_width(content, bold=True) + 2 * GAP <= bar_end - fr.left:
        return text(content, bar_end - GAP, mid, cls="val-in", anchor="end")
    return text(fit(content, after), bar_end + GAP, mid, cls="val", tooltip=content)


def legend(items, x, y, width):
    """Swatches for (name, colour) items, wrapping at `width`; returns (svg parts, height used)."""
    parts, cx, cy = [], x, y
    for key, colour in items:
        item_w = 17 + text_width(key, LEGEND_FONT) + 14
        if cx + item_w > x + width and cx > x:
            cx, cy = x, cy + 18
        parts.append(f'<rect x="{cx:.1f}" y="{cy}" width="12" height="12" rx="2" fill="{colour}"/>')
        parts.append(text(fit(key, x + width - cx - 17, LEGEND_FONT), cx + 17, cy + 6, cls="legend", size=LEGEND_FONT))
        cx += item_w
    return parts, (cy - y + 18 if items else 0)


def tick_labels(positions, texts, fr, y):
    """Tick texts centred under their ticks, every other one dropped until none overlaps; the
    last is kept inside the chart."""
    keep = list(range(len(positions)))
    stride = 1
    while stride < len(positions):
        boxes = [(positions[i] - text_width(texts[i], TICK_FONT) / 2, positions[i] + text_width(texts[i], TICK_FONT) / 2)
                 for i in keep]
        if all(a[1] + 4 <= b[0] for a, b in zip(boxes, boxes[1:])):
            break
        stride *= 2
        keep = list(range(0, len(positions), stride))
    parts = []
    for i in keep:
        x, half = positions[i], text_width(texts[i], TICK_FONT) / 2
        x = min(max(x, half + 1), fr.width - half - 1)
        parts.append(text(texts[i], x, y, cls="tick", anchor="middle", size=TICK_FONT, middle=False))
    return parts


def axis(ticks, fr, scale, top, bottom, fmt):
    """Grid lines at `ticks` over the plot and their labels under it."""
    xs = [fr.left + tick * scale for tick in ticks]
    parts = [f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e6eb" '
             f'stroke-width="1"/>' for x in xs]
    return parts + tick_labels(xs, [tick_text(tick, fmt) for tick in ticks], fr, bottom + 14)


def tick_text(value, fmt):
    return fmt(value) if fmt else (f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}")
