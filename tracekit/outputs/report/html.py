"""The report page: one self-contained HTML file (inline CSS and SVG, no scripts, nothing fetched)."""

from tracekit.version import __version__
from tracekit.outputs.report import units
from tracekit.outputs.report.data import (all_captures, fastest_of_groups, like_groups, present, step_time,
                                          steps_wording, table_heading)
from tracekit.outputs.report.findings_section import html_section
from tracekit.outputs.report import memory_section
from tracekit.outputs.report.table import shown_columns, table_frame
from tracekit.outputs.safe_text import html_text

_CSS = """
:root { --ink:#1f2933; --muted:#5f6b7a; --line:#e3e6eb; --bg:#f5f6f8; --card:#fff;
        --good:#2f7d32; --bad:#c0392b; --info:#7b8794;
        --high:#c0392b; --medium:#e07b1f; --low:#c9a227; }
* { box-sizing:border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; }
header { background:#1f2a37; color:#fff; padding:28px 0 24px; }
.wrap { max-width:1320px; margin:0 auto; padding:0 28px; }
h1 { margin:0 0 6px; font-size:26px; font-weight:650; letter-spacing:-.01em; }
header .meta { color:#c3cad4; font-size:13px; }
header .over { color:#8fa3b8; font-size:12px; text-transform:uppercase; letter-spacing:.08em; margin-bottom:4px; }
header .meta b { color:#fff; font-weight:600; }
h2 { font-size:18px; margin:34px 0 12px; font-weight:650; }
h3 { font-size:14.5px; margin:0 0 2px; font-weight:650; }
.kpis { display:grid; grid-template-columns:repeat(auto-fit,minmax(190px,1fr)); gap:12px; margin-top:-18px; }
.kpi { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 14px;
       box-shadow:0 1px 2px rgba(16,24,40,.05); }
.kpi .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.kpi .v { font-size:22px; font-weight:650; font-variant-numeric:tabular-nums; margin:2px 0; }
.kpi .s { color:var(--muted); font-size:12.5px; }
.overview { color:var(--muted); margin:-4px 0 10px; }
.rule-group { margin:0 0 18px; }
.rule-group h3 { font-size:15px; margin:0; } .rule-group h3 .count { color:var(--muted); font-weight:500; }
.rule-group .cap { color:var(--muted); font-size:12.5px; margin:0 0 8px; }
.findings { display:grid; grid-template-columns:1fr 1fr; gap:12px; align-items:start; margin:0 0 10px; }
.finding { background:var(--card); border:1px solid var(--line); border-left:4px solid var(--info);
           border-radius:8px; padding:12px 16px; overflow-wrap:anywhere; }
.finding.high { border-left-color:var(--high); } .finding.medium { border-left-color:var(--medium); }
.finding.low { border-left-color:var(--low); } .finding.info { border-left-color:var(--info); }
.finding .topic { font-size:12px; color:var(--muted); font-weight:600; }
.sev { display:inline-block; font-size:10.5px; text-transform:uppercase; letter-spacing:.05em; color:#fff;
       background:var(--info); border-radius:3px; padding:0 5px; margin-right:4px; font-weight:650; }
.high .sev, .sev.high { background:var(--high); } .medium .sev, .sev.medium { background:var(--medium); }
.low .sev, .sev.low { background:var(--low); } .info .sev, .sev.info { background:var(--info); }
.finding p { margin:3px 0; font-size:13px; color:#3a4450; }
.finding p.title { font-weight:600; font-size:14px; color:var(--ink); }
.finding p.saving { color:var(--good); }
details.more { margin:-4px 0 0; font-size:13px; color:#3a4450; }
details.more summary { cursor:pointer; color:var(--muted); }
details.more li { margin:2px 0; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:16px 18px;
        box-shadow:0 1px 2px rgba(16,24,40,.05); }
/* A table wider than the page scrolls inside its own box rather than losing or squashing columns. */
.tablewrap { overflow-x:auto; padding:0; max-width:100%; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { padding:7px 8px; border-bottom:1px solid var(--line); white-space:nowrap; }
th { text-align:left; font-weight:600; color:var(--muted); background:#fafbfc; font-size:12px; white-space:normal; vertical-align:bottom; line-height:1.25; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; }
tbody tr:nth-child(even) { background:#fbfcfd; }
tbody tr.best { background:#eef7ee; }
td.variant { font-weight:600; white-space:normal; overflow-wrap:anywhere; min-width:196px; max-width:236px; }
td.variant small { display:block; font-weight:400; color:var(--muted); line-height:1.3; }
td.kernel { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:11.5px;
            max-width:200px; overflow:hidden; text-overflow:ellipsis; }
.cellbar { display:flex; align-items:center; gap:8px; justify-content:flex-end; }
.cellbar span.b { display:inline-block; height:8px; background:#4e79a7; border-radius:2px; }
.bad-cell { color:var(--bad); font-weight:600; }
.figs { display:grid; grid-template-columns:1fr 1fr; gap:14px; }
figure { margin:0; } figure.wide { grid-column:1 / -1; }
figure { min-width:0; } figure .cap { color:var(--muted); font-size:12.5px; margin:0 0 10px; }
/* A chart keeps its drawn size where it fits and shrinks to the width where it does not. Font
   sizes are the SVG's own attributes: its text was placed for them. */
svg.chart { max-width:100%; height:auto; display:block; }
svg.chart text { font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif; }
svg.chart .lbl { fill:#1f2933; font-weight:500; } svg.chart .val { fill:#3a4450; }
svg.chart .val-in { fill:#fff; font-weight:600; }
svg.chart .tick { fill:#7b8794; } svg.chart .note { fill:#8a94a3; font-style:italic; }
svg.chart .legend { fill:#3a4450; }
svg.chart rect:hover { opacity:.8; }
table.values { width:auto; min-width:60%; font-size:12px; margin-top:10px; } table.values th, table.values td { padding:4px 8px; }
table.values td { text-align:right; font-variant-numeric:tabular-nums; } table.values td:first-child { text-align:left; font-weight:600; }
footer { color:var(--muted); font-size:12.5px; margin:36px 0 40px; border-top:1px solid var(--line); padding-top:14px; }
footer p { margin:4px 0; }
@media (max-width:900px) { .kpis { grid-template-columns:1fr 1fr; } .findings { grid-template-columns:1fr; } .figs { grid-template-columns:1fr; } }
@media print {
  @page { size:A4 landscape; margin:10mm; }
  * { -webkit-print-color-adjust:exact; print-color-adjust:exact; }
  body { background:#fff; font-size:11px; }
  header { background:#fff; color:#000; padding:0 0 6px; } header .meta, header .over { color:#3a4450; }
  header .meta b { color:#000; }
  .wrap { max-width:none; padding:0; }
  .kpis { margin-top:0; grid-template-columns:repeat(5,1fr); }
  .kpi, .card, .finding { box-shadow:none; }
  /* Nothing scrolls on paper: the table wraps its cells to fit the page instead. */
  .tablewrap { overflow:visible; }
  table { font-size:9.5px; }
  th, td { white-space:normal; padding:3px 4px; }
  td.variant { min-width:0; max-width:none; }
  td.kernel { max-width:none; overflow:visible; text-overflow:clip; overflow-wrap:anywhere; }
  tr, .finding, figure, .kpi { break-inside:avoid; }
  h2, h3 { break-after:avoid; }
  .findings, .figs { grid-template-columns:1fr 1fr; }
  figure.wide { grid-column:1 / -1; }
  /* A folded list prints unfolded: a reader of paper cannot click it open. */
  details.more::details-content { content-visibility:visible; display:block; }
  details.more > summary { list-style:none; }
}
"""


def _e(text):
    return html_text(text)


def _unique(values):
    return sorted({str(v) for v in values if present(v)})


def _context(data):
    """The header's facts: device, shape, torch, steps, all from the data."""
    meta = [t.metadata for t in data.traces.itertuples() if isinstance(t.metadata, dict)]
    facts = [f"<b>{len(data.summary)}</b> trace(s) from {_e(data.source or 'a tracekit database')}"]
    devices = _unique(data.traces["device_name"])
    if devices:
        facts.append(_e(", ".join(devices)))
    shapes = _unique(f"B={m.get('batch')} H={m.get('heads')} S={m.get('seq_len')} D={m.get('head_dim')} "
                     f"{m.get('dtype')}{' causal' if m.get('causal') else ''}" for m in meta)
    if len(shapes) == 1:
        facts.append(_e(shapes[0]))
    elif shapes:
        facts.append(f"{len(shapes)} shapes")
    torches = _unique(m.get("torch") for m in meta)
    if torches:
        facts.append("torch " + _e(", ".join(torches)))
    facts.append(_e(steps_wording(data.summary)))
    return " · ".join(facts)


def _headline(data):
    """Names attention variants only when every trace is a `tracekit capture` of one."""
    if all_captures(data):
        return "Attention variants: where the GPU time goes"
    return "Where the GPU time goes"


def _kpi(key, value, sub):
    return f'<div class="kpi"><div class="k">{_e(key)}</div><div class="v">{_e(value)}</div><div class="s">{_e(sub)}</div></div>'


def _fastest_kpi(data):
    """The fastest trace among traces of one shape on one device (the largest such group): a
    trace is never called fastest against traces that ran something else, or elsewhere."""
    groups = like_groups(data)
    if not groups:
        return _kpi("Fastest", "—", "no time per step")
    variants = dict(zip(data.summary["trace"], data.summary["variant"].fillna(data.summary["trace"])))
    # The group comparing the most variants (then the most traces): repeats of one variant compare none.
    shape, traces = max(groups.items(), key=lambda item: (len({variants[t] for t in item[1]}), len(item[1])))
    if len(traces) < 2:
        return _kpi("Fastest", "—", "no two traces of one shape on one device" if len(data.summary) > 1
                    else "one trace: nothing to compare")
    row = data.summary[data.summary["trace"] == traces[0]].iloc[0]
    value, where = step_time(row)
    sub = f"{units.us(value)} {where} per step"
    if len(groups) > 1:
        sub += f" · of {len(traces)} at {shape}"
    return _kpi("Fastest", traces[0], sub)


def _kpis(data):
    s = data.summary
    cards = [_fastest_kpi(data)]
    if s["variant"].notna().any():  # a speed-up against naive means something only among captures
        cards.append(_speedup_kpi(s))
    copy = s.loc[s["memcpy_bytes_per_step"].idxmax()]
    cards.append(_kpi("Largest memcpy / step", units.bytes_text(copy.memcpy_bytes_per_step)
                      if copy.memcpy_bytes_per_step > 0 else "none",
                      copy.trace if copy.memcpy_bytes_per_step > 0 else "in any step"))
    plan = data.plans.loc[data.plans["plan_ms"].idxmax()] if not data.plans.empty else None
    cards.append(_kpi("cuDNN first-call plan", units.ms(plan.plan_ms) if plan is not None else "—",
                      plan.trace if plan is not None else "no cuDNN attention"))
    most = s.sort_values(["kernels_per_step", "trace"], ascending=[False, True]).iloc[0]
    cards.append(_kpi("Most kernels / step", units.per_step(most.kernels_per_step), most.trace)
                 if most.kernels_per_step > 0 else _kpi("Most kernels / step", "none", "no trace launched a kernel"))
    return '<div class="kpis">' + "".join(cards) + "</div>"


def _speedup_kpi(s):
    ups = s[s["speedup_vs_naive"].notna() & (s["variant"] != "naive")]
    top = ups.loc[ups["speedup_vs_naive"].idxmax()] if not ups.empty else None
    return _kpi("Best speed-up vs naive", units.times(top.speedup_vs_naive) if top is not None else "—",
                top.trace if top is not None else
                "no naive trace of the same shape" if (s["variant"] == "naive").any() else "no naive trace loaded")


def _cell(column, row, descriptions, widest):
    value = row[column.key]
    text = _e(column.text(value))
    if column.key == "trace":
        desc = descriptions.get(value)
        # Break long trace names at their underscores rather than mid-word.
        text = text.replace("_", "_<wbr>")
        return f'<td class="variant">{text}' + (f"<small>{_e(desc)}</small>" if desc else "") + "</td>"
    if column.key == "gpu_us_per_step" and widest > 0:
        width = 80 * float(value) / widest
        return f'<td class="n"><div class="cellbar">{text}<span class="b" style="width:{width:.1f}px"></span></div></td>'
    if column.key == "top_kernel":
        return f'<td class="kernel" title="{_e(value)}">{text}</td>'
    bad = ((column.key == "memcpy_bytes_per_step" and present(value) and value > 0)
           or (column.key == "tensor_core_pct" and present(value) and value < 50)
           or (column.key == "plan_ms" and present(value) and value >= 100))
    return f'<td class="n{" bad-cell" if bad else ""}">{text}</td>'


def _table(data):
    frame = table_frame(data)
    descriptions = {t.trace: t.metadata.get("description") for t in data.traces.itertuples()
                    if isinstance(t.metadata, dict)}
    widest = float(frame["gpu_us_per_step"].max() or 0)
    columns = shown_columns(frame)
    head = "".join(f'<th class="{"n" if c.numeric else ""}" title="{_e(c.help)}">{_e(c.header)}</th>' for c in columns)
    rows = []
    fastest = fastest_of_groups(data)
    for _, row in frame.iterrows():
        cls = ' class="best"' if row["trace"] in fastest else ""
        cells = "".join(_cell(c, row, descriptions, widest) for c in columns)
        rows.append(f'<tr{cls} data-trace="{_e(row["trace"])}">{cells}</tr>')
    return (f'<section id="summary"><h2>{_e(table_heading(data))}</h2>'
            '<div class="card tablewrap">'
            f'<table id="summary-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</div></section>")


def _values(rows):
    """A chart's values as a small table under it (visible text, for paper and for reading)."""
    if not rows:
        return ""
    head = "".join(f"<th>{_e(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in rows[1:])
    return f'<div class="tablewrap"><table class="values"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _figures(figs):
    parts = []
    for f in figs:
        parts.append(f'<figure class="card{" wide" if f.wide else ""}" id="fig-{_e(f.id)}"><h3>{_e(f.title)}</h3>'
                     f'<p class="cap">{_e(f.caption)}</p>{f.svg}{_values(f.values)}</figure>')
    return '<section id="charts"><h2>Charts</h2><div class="figs">' + "".join(parts) + "</div></section>"


def page(data, figures):
    """The whole report as one HTML document."""
    title = f"tracekit report · {len(data.summary)} variant(s)"
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f'<header><div class="wrap"><div class="over">tracekit report</div><h1>{_e(_headline(data))}</h1>'
            f'<div class="meta">{_context(data)}</div></div></header>'
            f'<main class="wrap">{_kpis(data)}{html_section(data.findings)}{_table(data)}'
            f'{memory_section.html_section(data.memory)}{_figures(figures)}'
            "<footer><p>Steady steps are every ProfilerStep#N but the first (the cold call that pays for "
            "cuDNN plans, torch.compile and allocator warm-up), or the only one where a trace has one; a "
            "trace without ProfilerStep#N counts as one step, the whole trace. GPU time per step is the GPU's busy "
            "time (the union of its kernel, memcpy and memset intervals, concurrent streams counted once); a "
            "trace without GPU work is timed by its CPU span per step. A step's time where a finding says just "
            "\"step\" is its wall time (view step_bounds: from the previous step's completion to its own). "
            "Occupancy is "
            "the occupancy a kernel's launch allows (registers, shared memory and block size against the SM's "
            "limits), the figure the low_occupancy findings give. A trace is called fastest only among traces "
            "of its shape on its device, and compared with the naive trace of that shape.</p>"
            f"<p>Generated by tracekit {_e(__version__)} (<code>tracekit report</code>) from the named queries "
            "summary, gemm_classes, occupancy and cudnn_plan_time, and the findings of the rules in "
            "queries/findings/ (<code>tracekit findings --list</code>). This file is self-contained: "
            "no scripts, no external resources.</p></footer></main></body></html>\n")
