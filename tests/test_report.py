"""`tracekit report`: the HTML page (table, every chart, findings), markdown, errors, and the page
rendered in headless Chromium."""

import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from conftest import CPU_TRACE, SAMPLE_TRACES
from tracekit.cli import cli
from tracekit.database import connect
from tracekit.loader import load_file
from tracekit.named_queries import run_named
from tracekit.report import build_report, render
from tracekit.report.data import collect
from tracekit.report.findings import findings

CHART_IDS = ["chart-gpu-by-class", "chart-timeline", "chart-kernels-per-step", "chart-memcpy-bytes",
             "chart-tensor-core", "chart-cudnn-plan", "chart-occupancy"]
SVG_NS = "{http://www.w3.org/2000/svg}"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def sample_html(sample_db):
    return build_report(sample_db, "html")


@pytest.fixture(scope="module")
def sample_findings(sample_db):
    con = connect(sample_db, read_only=True)
    try:
        return {f.topic: f for f in findings(collect(con))}
    finally:
        con.close()


def db_with(tmp_path, *names):
    path = tmp_path / "some.duckdb"
    con = connect(path)
    for name in names:
        assert load_file(con, SAMPLE_TRACES / f"{name}.json.gz").status == "loaded"
    con.close()
    return path


class _Table(HTMLParser):
    """The rows of <table id="summary-table">: (data-trace, [cell texts])."""

    def __init__(self):
        super().__init__()
        self.rows, self._inside, self._cell = [], False, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "summary-table":
            self._inside = True
        elif self._inside and tag == "tr" and "data-trace" in attrs:
            self.rows.append((attrs["data-trace"], []))
        elif self._inside and tag == "td" and self.rows:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._inside = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html):
    parser = _Table()
    parser.feed(html)
    return parser.rows


def svg(html, chart_id):
    match = re.search(rf'<svg id="{chart_id}".*?</svg>', html, flags=re.S)
    assert match, f"no <svg id={chart_id}>"
    return ET.fromstring(match.group(0))


def chart_row(root, label):
    rows = [g for g in root.iter(f"{SVG_NS}g") if g.get("data-row") == label]
    assert len(rows) == 1, f"row {label!r}"
    return rows[0]


def test_the_table_holds_the_eight_variants_fastest_first(sample_html, sample_con):
    rows = table_rows(sample_html)
    summary = run_named(sample_con, "summary")
    assert len(rows) == 8
    assert [trace for trace, _ in rows] == list(summary.sort_values("gpu_us_per_step")["trace"])
    assert rows[0][0] == "sdpa_default" and rows[-1][0] == "sdpa_math"
    cells = dict(rows)
    # variant, GPU µs/step, speed-up, TFLOP/s, kernels/step, CPU µs/step, memcpy/step, bytes, TC %, ...
    assert cells["sdpa_default"][1:3] == ["100.6", "22.6×"]
    assert cells["naive"][2] == "1.00×" and cells["naive"][7] == "512 MiB"
    assert cells["sdpa_math"][4] == "20" and cells["sdpa_math"][8] == "0%"
    assert cells["sdpa_flash"][10] == "13%"
    assert cells["sdpa_cudnn"][11] == "869.3 ms"


@pytest.mark.parametrize("chart_id", CHART_IDS)
def test_every_chart_is_an_inline_svg_with_a_row_per_variant(sample_html, chart_id):
    root = svg(sample_html, chart_id)
    assert root.find(f"{SVG_NS}title").text
    assert len(list(root.iter(f"{SVG_NS}rect"))) > 0
    rows = [g.get("data-row") for g in root.iter(f"{SVG_NS}g") if g.get("data-row")]
    expected = 2 if chart_id == "chart-cudnn-plan" else 8
    assert len(rows) == expected


def test_charts_show_the_data(sample_html):
    memcpy = svg(sample_html, "chart-memcpy-bytes")
    assert "512 MiB" in "".join(chart_row(memcpy, "naive").itertext())
    assert "0 B" in "".join(chart_row(memcpy, "naive_inplace").itertext())
    # One steady step: naive = 2 GEMMs, scale, masked_fill, softmax, the memcpy and a memset.
    timeline = svg(sample_html, "chart-timeline")
    assert len(chart_row(timeline, "naive").findall(f"{SVG_NS}rect")) == 7
    assert len(chart_row(timeline, "naive_inplace").findall(f"{SVG_NS}rect")) == 6
    assert len(chart_row(timeline, "sdpa_math").findall(f"{SVG_NS}rect")) == 20
    naive_fills = {r.get("fill") for r in chart_row(timeline, "naive").findall(f"{SVG_NS}rect")}
    assert "#e15759" in naive_fills  # the memcpy's colour
    plan = svg(sample_html, "chart-cudnn-plan")
    assert "869 ms" in "".join(chart_row(plan, "sdpa_cudnn").itertext())
    stacked = svg(sample_html, "chart-gpu-by-class")
    tips = [t.text for t in chart_row(stacked, "sdpa_math").iter(f"{SVG_NS}title")]
    assert any(t.startswith("sdpa_math · gemm: 1,840.9 µs per step") for t in tips)


def test_findings_are_computed_from_the_data(sample_findings, sample_html):
    memcpy = sample_findings["memcpy"].lines
    naive = next(line for line in memcpy if line.startswith("naive:"))
    assert "1 Memcpy DtoD of 512 MiB per step from aten::masked_fill" in naive
    assert "naive_inplace: none" in memcpy
    flash = next(line for line in sample_findings["occupancy"].lines if line.startswith("sdpa_flash:"))
    assert "flash_fwd_kernel at 13% estimated occupancy" in flash
    cudnn = next(line for line in sample_findings["cudnn"].lines if line.startswith("sdpa_cudnn:"))
    assert "869.3 ms spent building the plan" in cudnn
    assert sample_findings["speed"].title.startswith("sdpa_default is the fastest: 100.6 µs")
    assert "22.6× faster than naive" in sample_findings["speed"].title
    assert "sdpa_math runs its GEMMs as FP32 SIMT" in sample_findings["gemm"].title
    assert sample_findings["kernels"].title.startswith("sdpa_math launches the most kernels: 20 per step")
    # The page holds the same sentences.
    assert "aten::masked_fill" in sample_html and "naive_inplace: none" in sample_html


def test_findings_change_when_the_data_does(tmp_path):
    con = connect(db_with(tmp_path, "naive_inplace", "sdpa_flash"), read_only=True)
    try:
        found = {f.topic: f for f in findings(collect(con))}
    finally:
        con.close()
    assert found["speed"].title.startswith("sdpa_flash is the fastest: 158.4 µs")
    assert any("No naive trace" in line for line in found["speed"].lines)
    assert found["memcpy"].title == "No variant copies memory in its steady steps."
    assert found["cudnn"].title == "No trace calls cuDNN attention."
    assert found["gemm"].title == "Every GEMM runs on Tensor Cores."
    assert "sdpa_math" not in " ".join(f.title + " ".join(f.lines) for f in found.values())


def test_report_on_a_trace_without_gpu_work(tmp_path):
    path = tmp_path / "cpu.duckdb"
    con = connect(path)
    load_file(con, CPU_TRACE)
    con.close()
    html = build_report(path)
    assert len(table_rows(html)) == 1
    assert "No trace ran any GPU work." in html
    for chart_id in CHART_IDS:
        svg(html, chart_id)
    assert "No trace calls cuDNN attention." in build_report(path, "markdown")


def test_the_page_is_self_contained(sample_html):
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', sample_html, flags=re.I)
    assert "<script" not in sample_html.lower()
    assert "@import" not in sample_html and "url(" not in sample_html
    assert "<link" not in sample_html.lower()


def test_markdown_prints_the_table_and_findings(sample_db):
    result = invoke("report", "--db", sample_db, "-f", "markdown")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| variant |"))
    rows = lines[header + 2: header + 10]
    assert [r.split("|")[1].strip() for r in rows][:2] == ["sdpa_default", "sdpa_cudnn"]
    assert rows[-1].startswith("| sdpa_math | 5,128.7 |")
    assert not lines[header + 10].startswith("|")
    assert "## Findings" in result.output
    assert "  - naive_inplace: none" in lines
    assert "<svg" not in result.output


def test_cli_writes_html_to_report_html_by_default(sample_db, isolated_cwd):
    result = invoke("report", "--db", sample_db)
    assert result.exit_code == 0, result.output
    html = (isolated_cwd / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and len(table_rows(html)) == 8
    out = isolated_cwd / "sub.html"
    assert invoke("report", "--db", sample_db, "-o", out).exit_code == 0
    assert out.read_text(encoding="utf-8") == html


def test_without_a_database_it_reports_on_the_samples(isolated_cwd):
    result = invoke("report", "-f", "markdown")
    assert result.exit_code == 0, result.output
    assert "bundled sample traces" in result.output
    assert "| sdpa_default | 100.6 | 22.6× |" in result.output


def test_errors_are_one_line_and_exit_1(tmp_path, sample_db, fresh_db):
    missing = invoke("report", "--db", tmp_path / "missing.duckdb")
    assert missing.exit_code == 1 and missing.output.startswith("Error: ") and "missing.duckdb" in missing.output
    connect(fresh_db).close()
    empty = invoke("report", "--db", fresh_db)
    assert empty.exit_code == 1 and "no traces loaded" in empty.output
    assert len(empty.output.strip().splitlines()) == 1
    unwritable = invoke("report", "--db", sample_db, "-o", tmp_path / "no" / "such" / "dir.html")
    assert unwritable.exit_code == 1 and "cannot write" in unwritable.output
    assert "Traceback" not in missing.output + empty.output + unwritable.output


def test_render_rejects_an_unknown_format(sample_db):
    from tracekit.errors import TracekitError
    from tracekit.report.data import load
    with pytest.raises(TracekitError, match="unknown report format"):
        render(load(sample_db), "pdf")


# --- the page in a real browser ---------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium binary (CI: apt-get install -y chromium)")


def chromium(tmp_path, url, *extra):
    """Runs headless Chromium on `url`; returns (stdout, the console lines it logged)."""
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", *extra, url]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return done.stdout, console


@needs_chromium
def test_chromium_would_catch_a_console_error(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    _, console = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert any("Uncaught ReferenceError" in line for line in console)


@needs_chromium
def test_the_page_renders_in_chromium_without_console_errors(tmp_path, sample_html):
    page = tmp_path / "report.html"
    page.write_text(sample_html, encoding="utf-8")
    dom, console = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert console == []
    assert len(table_rows(dom)) == 8
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}"' in dom
    shot = tmp_path / "report.png"
    _, console = chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1400,3000")
    assert console == []
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1400, 3000)
    assert len(png) > 100_000, "a blank page compresses to a few KB; the report's screenshot does not"
