"""The report on traces that are not our captures (foreign, CPU-only, one step, no ProfilerStep#N),
at 900 px, on paper, and for a big database: the real page of real traces (sample_traces/,
tests/data/foreign, tests/data/h200, and a big trace built from a sample by tests/make_big_timeline.py)."""

import csv
import io
import json
import re
import subprocess

import pytest

import make_big_timeline
from conftest import SAMPLE_TRACES, TEST_DATA, db_rows, invoke_cli
from report_checks import CHROMIUM, CHART_IDS, SVG_NS, needs_chromium, svg, table_rows
from tracekit.ingest.loader import load_file
from tracekit.outputs.report import build_report, render, timeline
from tracekit.outputs.report.data import load, steps_wording
from tracekit.outputs.report.downsample import downsample
from tracekit.outputs.report.svg import EM_PER_CHAR, text_width
from tracekit.store.database import connect

FOREIGN = TEST_DATA / "foreign"
H200 = TEST_DATA / "h200"
PAGE_BOUND = 1_500_000  # bytes


def database(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "r.duckdb"
    con = connect(path)
    for file in files:
        assert load_file(con, file).status == "loaded", file
    con.close()
    return path


@pytest.fixture(scope="module")
def dbs(tmp_path_factory, sample_db, foreign_db):
    """Databases of real traces, by what they hold."""
    root = tmp_path_factory.mktemp("fit")
    return {
        "samples": sample_db,
        "foreign": foreign_db,
        "h200": database(root / "h200", [H200 / "fp32" / "naive.json.gz", H200 / "hd128" / "sdpa_flash.json.gz",
                                         H200 / "train_fp32" / "train_naive.json.gz"]),
    }


@pytest.fixture(scope="module")
def pages(dbs):
    return {name: build_report(db) for name, db in dbs.items()}


def charts_of(html):
    return {chart_id: svg(html, chart_id) for chart_id in CHART_IDS}


# --- what a step is ---------------------------------------------------------------------------

@pytest.mark.parametrize("files, wording", [
    ([FOREIGN / "t4_resnet50_train.json.gz", FOREIGN / "cpu_only_linear_train_step.json.gz"],
     "no trace has ProfilerStep#N steps: each counts as one step, its figures the whole trace's"),
    ([FOREIGN / "l4_square_memcpy_two_steps.json.gz"],
     "each trace has one steady step: per-step figures are that step's"),
    ([FOREIGN / "t4_resnet50_train.json.gz", SAMPLE_TRACES / "naive.json.gz"],
     "per-step figures are means over the steady steps (all but the first); a trace without ProfilerStep#N "
     "counts as one step, the whole trace"),
    ([FOREIGN / "l4_square_memcpy_two_steps.json.gz", SAMPLE_TRACES / "naive.json.gz"],
     "per-step figures are means over the steady steps (all but the first); a trace with one steady step "
     "has that step's"),
])
def test_the_page_and_the_markdown_say_the_same_of_steps(tmp_path, files, wording):
    data = load(database(tmp_path, files))
    html, markdown = render(data), render(data, "markdown")
    assert steps_wording(data.summary) == wording
    assert f"; {wording}." in markdown.splitlines()[2]
    meta = re.search(r'<div class="meta">(.*?)</div>', html).group(1)
    assert meta.endswith(" · " + wording.replace("'", "&#x27;"))
    if "means over" not in wording:
        assert "means over the steady steps" not in html and "mean over the steady steps" not in html
        assert "per steady step" not in html  # chart titles say "per step"


def test_summary_and_report_agree_on_a_trace_without_steps(tmp_path):
    """A foreign GPU trace without ProfilerStep#N is one step, the whole trace, in both."""
    db = database(tmp_path, [FOREIGN / "t4_resnet50_train.json.gz"])
    result = invoke_cli("query", "summary", "--db", db, "-f", "csv")
    assert result.exit_code == 0, result.output
    (row,) = list(csv.DictReader(io.StringIO(result.output)))
    whole = db_rows(db, "SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memcpy) "
                        "+ (SELECT count(*) FROM memset), (SELECT count(*) FROM kernels)")[0]
    assert row["steps"] == "1" and float(row["kernels_per_step"]) == whole[1] == 751

    html = build_report(db)
    (cells,) = [cells for _, cells in table_rows(html)]
    assert cells[1] == f"{float(row['gpu_us_per_step']):,.0f}" and cells[2] == "751"  # GPU µs, kernels / step
    lane = chart_row(svg(html, "chart-timeline"), "t4_resnet50_train")
    assert "whole trace · " in "".join(lane.itertext())
    assert len(lane.findall(f"{SVG_NS}rect")) == whole[0]  # every GPU event of the trace, none merged
    # The chart's values table: the whole trace's GEMM time, as the kernels view has it.
    gemm_us = db_rows(db, "SELECT sum(dur_us) FROM kernels WHERE kernel_class = 'gemm'")[0][0]
    values = values_table(html)
    assert float(values["t4_resnet50_train"]["gemm"].removesuffix(" µs").replace(",", "")) == pytest.approx(gemm_us, abs=0.05)


def chart_row(root, label):
    (row,) = [g for g in root.iter(f"{SVG_NS}g") if g.get("data-row") == label]
    return row


def values_table(html):
    """The GPU-by-class chart's values table: {trace: {class: cell text}}."""
    table = re.search(r'<figure[^>]*id="fig-chart-gpu-by-class".*?<table class="values">(.*?)</table>', html, flags=re.S)
    rows = [re.findall(r"<t[hd]>(.*?)</t[hd]>", r) for r in re.findall(r"<tr>(.*?)</tr>", table.group(1))]
    return {r[0]: dict(zip(rows[0][1:], r[1:])) for r in rows[1:]}


# --- no "vs naive" without a naive ------------------------------------------------------------

def headers(html):
    return re.findall(r"<th[^>]*>([^<]*)</th>", re.search(r'<table id="summary-table">.*?</thead>', html, flags=re.S).group(0))


def test_vs_naive_only_where_a_naive_trace_is_loaded(pages, dbs):
    assert "vs naive" in headers(pages["samples"]) and "TFLOP/s" in headers(pages["samples"])
    foreign = headers(pages["foreign"])
    assert not {"vs naive", "cuDNN plan"} & set(foreign) and "GPU µs / step" in foreign
    # Their GEMMs' recorded shapes give counted FLOPs, so TFLOP/s stays (see test_report).
    assert "TFLOP/s" in foreign
    assert "speed-up vs naive" not in pages["foreign"].lower()  # no card either: none is a capture
    markdown = build_report(dbs["foreign"], "markdown")
    assert "| vs naive |" not in markdown and "| GPU µs / step |" in markdown
    # Foreign traces are traces, not variants of one attention module.
    assert "<h2>Traces, fastest first</h2>" in pages["foreign"] and "\n## Traces, fastest first\n" in markdown
    assert "<h2>Variants, fastest first</h2>" in pages["samples"]


# --- 900 px -----------------------------------------------------------------------------------

def css(html):
    return re.search(r"<style>(.*?)</style>", html, flags=re.S).group(1)


def rule(style, selector):
    return re.search(rf"(?m)^\s*{re.escape(selector)}\s*\{{([^}}]*)\}}", style).group(1)


def test_the_table_scrolls_in_its_own_box_and_charts_scale_to_the_width(pages):
    html = pages["foreign"]
    assert re.search(r'<div class="card tablewrap"><table id="summary-table">', html)
    style = css(html)
    assert "overflow-x:auto" in rule(style, ".tablewrap")
    chart_css = rule(style, "svg.chart")
    assert "max-width:100%" in chart_css and "height:auto" in chart_css
    for chart_id, root in charts_of(html).items():
        _, _, w, h = (float(v) for v in root.get("viewBox").split())
        assert (float(root.get("width")), float(root.get("height"))) == (w, h), chart_id


# --- text inside its chart, off other text ----------------------------------------------------

def text_boxes(root, default=None):
    """(text, box) of every <text> of a chart (or of a part of it, its font size `default`), its
    width the larger of 0.6 em per character and the report's own estimate, its height one em."""
    default = float(default or root.get("font-size"))
    boxes = []
    for node in root.iter(f"{SVG_NS}text"):
        content = "".join(node.itertext()) if node.find(f"{SVG_NS}title") is None else \
            (node.find(f"{SVG_NS}title").tail or "")
        size = float(node.get("font-size", default))
        width = max(EM_PER_CHAR * size * len(content), text_width(content, size, node.get("class") == "val-in"))
        x, y = float(node.get("x")), float(node.get("y"))
        left = {"start": x, "middle": x - width / 2, "end": x - width}[node.get("text-anchor", "start")]
        top = y - size / 2 if node.get("dominant-baseline") == "middle" else y - 0.8 * size
        boxes.append((content, (left, top, left + width, top + size), node))
    return boxes


@pytest.mark.parametrize("name", ["samples", "foreign", "h200"])
def test_chart_text_stays_inside_its_chart_and_off_other_text(pages, name):
    for chart_id, root in charts_of(pages[name]).items():
        _, _, width, height = (float(v) for v in root.get("viewBox").split())
        boxes = text_boxes(root)
        assert boxes, chart_id
        for content, (x0, y0, x1, y1), _ in boxes:
            assert x0 >= 0 and y0 >= 0 and x1 <= width and y1 <= height, (chart_id, content)
        for i, (a, box_a, _) in enumerate(boxes):
            for b, box_b, _ in boxes[i + 1:]:
                apart = box_a[2] <= box_b[0] or box_b[2] <= box_a[0] or box_a[3] <= box_b[1] or box_b[3] <= box_a[1]
                assert apart, (chart_id, a, b)


def test_timeline_labels_stay_inside_their_blocks(pages):
    labelled = 0
    chart = svg(pages["samples"], "chart-timeline")
    for row in chart.iter(f"{SVG_NS}g"):
        rects = row.findall(f"{SVG_NS}rect")
        for content, (x0, _, x1, _), node in text_boxes(row, chart.get("font-size")):
            if node.get("class") != "blk":
                continue
            labelled += 1
            assert any(float(r.get("x")) <= x0 and x1 <= float(r.get("x")) + float(r.get("width")) for r in rects), content
    assert labelled >= 10  # the wide blocks of naive, naive_inplace and sdpa_math


def test_long_names_are_shortened_with_an_ellipsis_and_kept_whole_in_the_tooltip(pages, dbs):
    occupancy = svg(pages["foreign"], "chart-occupancy")
    amd = chart_row(occupancy, "amd_mi300_gfx942_bf16_gemm")
    note = next(t for t in amd.iter(f"{SVG_NS}text") if t.get("class") == "note")
    shown, tooltip = note.find(f"{SVG_NS}title").tail, note.find(f"{SVG_NS}title").text
    # Cut in the middle, as a table on a terminal cuts it (kernel_names.short_kernel_names).
    head, tail = shown.split(" · ")[-1].split("…")
    assert head == "Cijk_Ailk_Bljk_BBS_BH_MT" and tail == "GRB0_WS64_WG64_4_1_WGM1"
    full = tooltip.splitlines()[0]
    assert full.startswith(head) and len(full) > len(head + tail) + 1
    # A timeline block's label is its kernel's name, cut with "…" where the block ends.
    cut = 0
    for row in svg(pages["samples"], "chart-timeline").iter(f"{SVG_NS}g"):
        rects = row.findall(f"{SVG_NS}rect")
        for label in (t for t in row.findall(f"{SVG_NS}text") if t.get("class") == "blk"):
            x = float(label.get("x"))
            (rect,) = [r for r in rects if float(r.get("x")) <= x <= float(r.get("x")) + float(r.get("width"))][:1]
            kernel = rect.find(f"{SVG_NS}title").text.split("\n")[0]
            if label.text.endswith("…"):
                cut += 1
                assert label.text[:-1] in kernel, (label.text, kernel)
    assert cut > 0
    names = [t.find(f"{SVG_NS}title").tail if t.find(f"{SVG_NS}title") is not None else t.text
             for t in svg(pages["foreign"], "chart-kernels-per-step").iter(f"{SVG_NS}text") if t.get("class") == "lbl"]
    shortened = [n for n in names if "…" in n]
    assert shortened and len(set(names)) == len(names) == 14  # shortened in the middle, still apart


# --- legends ----------------------------------------------------------------------------------

def legend_and_marks(root):
    """The legend's (name, colour) swatches and the colours of the marks the rows draw."""
    swatches = [r.get("fill") for r in root.findall(f"{SVG_NS}rect")]   # legend swatches sit outside the rows
    names = [t.text for t in root.findall(f"{SVG_NS}text") if t.get("class") == "legend"]
    marks = {r.get("fill") for g in root.findall(f"{SVG_NS}g") for r in g.iter(f"{SVG_NS}rect")}
    return list(zip(names, swatches)), marks


@pytest.mark.parametrize("name", ["samples", "foreign", "h200"])
def test_legends_list_only_what_the_chart_draws(pages, name):
    for chart_id in ("chart-gpu-by-class", "chart-timeline", "chart-tensor-core", "chart-cudnn-plan"):
        items, marks = legend_and_marks(svg(pages[name], chart_id))
        assert {colour for _, colour in items} == marks, (name, chart_id)
    items, _ = legend_and_marks(svg(pages["foreign"], "chart-cudnn-plan"))
    assert items == []  # no trace calls cuDNN attention: no legend


def test_a_legend_leaves_out_what_no_row_has(tmp_path, pages):
    both, _ = legend_and_marks(svg(pages["samples"], "chart-tensor-core"))
    assert [name for name, _ in both] == ["Tensor Core", "FP32 SIMT"]  # sdpa_math runs its GEMMs as SIMT
    html = build_report(database(tmp_path, [SAMPLE_TRACES / "naive.json.gz"]))
    tensor_core, _ = legend_and_marks(svg(html, "chart-tensor-core"))
    assert [name for name, _ in tensor_core] == ["Tensor Core"]
    classes, _ = legend_and_marks(svg(html, "chart-timeline"))
    assert "attention" not in dict(classes) and {"gemm", "softmax", "memcpy"} <= set(dict(classes))


# --- on paper ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["samples", "foreign"])
def test_every_value_is_text_on_the_page(pages, name):
    html = pages[name]
    visible = re.sub(r"<style>.*?</style>|<title>.*?</title>|title=\"[^\"]*\"", "", html, flags=re.S)
    assert "hover" not in visible.lower()
    for chart_id, root in charts_of(html).items():
        for row in root.iter(f"{SVG_NS}g"):
            if row.get("data-row") is None or not row.findall(f".//{SVG_NS}rect"):
                continue
            shown = [t for t in row.iter(f"{SVG_NS}text") if t.get("class") in ("val", "val-in", "note")]
            assert shown and all("".join(t.itertext()).strip() for t in shown), (chart_id, row.get("data-row"))
    # Each segment of the GPU-by-class chart, whose value is its tooltip, is a cell of the table under it.
    values = values_table(html)
    for title in svg(html, "chart-gpu-by-class").iter(f"{SVG_NS}title"):
        match = re.match(r"(.+) · (\w+): (.+ µs) per step", title.text or "")
        if match:
            assert values[match.group(1)][match.group(2)] == match.group(3), title.text


def test_the_page_has_a_print_stylesheet_that_keeps_the_table_whole(pages):
    style = css(pages["samples"])
    printing = style[style.index("@media print"):]
    assert re.search(r"\.tablewrap \{ overflow:visible; \}", printing)
    assert re.search(r"th, td \{ white-space:normal;", printing)
    assert re.search(r"td\.kernel \{[^}]*text-overflow:clip", printing)
    assert "details.more::details-content { content-visibility:visible;" in printing
    assert "break-inside:avoid" in printing


# --- a big database ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    written = make_big_timeline.build(folder / "big.json", 50_000)
    db = database(folder, [folder / "big.json"])
    return db, written


def test_a_big_trace_gives_a_page_of_bounded_size(big, monkeypatch):
    db, written = big
    data = load(db)
    html = render(data)
    events = db_rows(db, "SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memcpy) "
                         "+ (SELECT count(*) FROM memset)")[0][0]
    assert events == written >= 50_000
    assert len(html.encode()) < PAGE_BOUND
    rects = chart_row(svg(html, "chart-timeline"), "big").findall(f"{SVG_NS}rect")
    assert 0 < len(rects) <= timeline.MAX_BLOCKS
    assert f"Downsampled: {events:,} GPU events drawn as {len(rects):,} block(s)" in html
    merged = sum(int(re.match(r"([\d,]+) ", r.find(f"{SVG_NS}title").text).group(1).replace(",", ""))
                 if " merged · " in r.find(f"{SVG_NS}title").text else 1 for r in rects)
    assert merged == events  # every event is in exactly one block
    # Drawn in full, the same data makes a page over the bound: the bound is the downsampling's.
    monkeypatch.setattr(timeline, "MAX_BLOCKS", events)
    assert len(render(data).encode()) > PAGE_BOUND


def test_downsampling_keeps_every_event_in_one_block(sample_db):
    """Each sample lane, forced down to a few blocks: both passes, checked against the events."""
    data = load(sample_db)
    for trace, events in data.timeline.groupby("trace"):
        start, dur = events["start_us"].to_numpy(float), events["dur_us"].to_numpy(float)
        cls, names = events["kernel_class"].to_numpy(object), events["name"].to_numpy(object)
        px = (start + dur).max() / 200
        whole = downsample(start, dur, cls, names, [""] * len(start), px, len(start))
        assert [(b.start, b.cls, b.name) for b in whole] == list(zip(start, cls, names))
        for budget in (1, 3, max(len(start) // 2, 1)):
            blocks = downsample(start, dur, cls, names, [""] * len(start), px, budget)
            assert len(blocks) <= max(budget, 1) or len(start) <= budget, (trace, budget)
            assert sum(b.events for b in blocks) == len(start)
            assert sum(b.busy_us for b in blocks) == pytest.approx(dur.sum())
            assert blocks[0].start == start.min() and max(b.end for b in blocks) == pytest.approx((start + dur).max())
            assert all(a.end <= b.start + 1e-9 for a, b in zip(blocks, blocks[1:])) or budget >= len(start)
            assert {b.cls for b in blocks} <= set(cls)


# --- in a real browser at 900 px --------------------------------------------------------------

MEASURE = r"""<script>
window.addEventListener('load', () => {
  const out = {page: [document.documentElement.scrollWidth, document.documentElement.clientWidth], charts: {}};
  const wrap = document.querySelector('.tablewrap');
  out.table = [wrap.scrollWidth, wrap.clientWidth];
  for (const s of document.querySelectorAll('svg.chart')) {
    const vb = s.viewBox.baseVal;
    out.charts[s.id] = {box: [vb.width, vb.height], texts: Array.from(s.querySelectorAll('text')).map(t => {
      const b = t.getBBox(); return [t.textContent, b.x, b.y, b.width, b.height]; })};
  }
  const pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@needs_chromium
@pytest.mark.parametrize("name", ["foreign"])
def test_at_900_px_the_page_does_not_overflow_and_text_stays_in_its_chart(tmp_path, pages, name):
    """Chromium's own text boxes (not estimates): the page is no wider than the window, the
    table scrolls inside its box, and every chart text lies inside its chart."""
    page = tmp_path / "measure.html"
    page.write_text(pages[name].replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--window-size=900,2000",
                           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    import html as html_lib
    measured = json.loads(html_lib.unescape(re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, flags=re.S).group(1)))
    scroll, client = measured["page"]
    assert scroll <= client <= 900
    assert measured["table"][0] > measured["table"][1]  # wider than its box: it scrolls there
    for chart_id, chart in measured["charts"].items():
        width, height = chart["box"]
        for content, x, y, w, h in chart["texts"]:
            assert x >= -0.5 and y >= -0.5 and x + w <= width + 0.5 and y + h <= height + 0.5, (chart_id, content)
