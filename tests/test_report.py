"""`tracekit report`: the HTML page (table, every chart, findings), markdown, errors, and the page
rendered in headless Chromium."""

import re
import struct
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import CPU_TRACE, SAMPLE_TRACES, TEST_DATA, invoke_cli as invoke
from report_checks import CHROMIUM, CHART_IDS, SVG_NS, needs_chromium, svg, table_rows
from tracekit.store.database import connect
from tracekit.ingest.loader import load_file
from tracekit.analysis.named_queries import run_named
from tracekit.outputs.report import build_report, render
from tracekit.analysis.findings_engine import rules, run_findings
from tracekit.outputs.report import figures
from tracekit.outputs.report.data import load
from tracekit.outputs.report.findings_section import CARDS_PER_RULE


@pytest.fixture(scope="module")
def sample_html(sample_db):
    return build_report(sample_db, "html")


@pytest.fixture(scope="module")
def engine(sample_db):
    """The findings engine's rows on the sample traces: what the report must show."""
    con = connect(sample_db, read_only=True)
    try:
        return run_findings(con)
    finally:
        con.close()


def db_with(tmp_path, *names):
    path = tmp_path / "some.duckdb"
    con = connect(path)
    for name in names:
        assert load_file(con, SAMPLE_TRACES / f"{name}.json.gz").status == "loaded"
    con.close()
    return path


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
    assert cells["sdpa_flash"][10] == "12.5%"  # its launch's occupancy, as the low_occupancy finding says
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


class _Findings(HTMLParser):
    """The findings section: its rule groups in order, each with its cards and its folded list."""

    def __init__(self):
        super().__init__()
        self.groups, self._text, self._into = [], None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if "rule-group" in classes:
            self.groups.append({"rule": attrs["data-rule"], "cards": [], "more": []})
        elif "finding" in classes:
            self.groups[-1]["cards"].append({"rule": attrs["data-rule"], "trace": attrs["data-trace"],
                                             "severity": attrs["data-severity"], "tone": classes[1]})
        elif tag == "p" and self.groups and self.groups[-1]["cards"] and classes:
            self._text, self._into = [], (self.groups[-1]["cards"][-1], classes[0])
        elif tag == "li" and "data-trace" in attrs:
            self._text, self._into = [], (attrs["data-trace"], None)

    def handle_endtag(self, tag):
        if self._text is None or tag not in ("p", "li"):
            return
        text = "".join(self._text).strip()
        target, key = self._into
        if key is None:
            self.groups[-1]["more"].append((target, text))
        else:
            target[key] = text
        self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def finding_groups(html):
    parser = _Findings()
    parser.feed(re.search(r'<section id="findings">.*?</section>', html, flags=re.S).group(0))
    return parser.groups


def test_findings_are_the_engines_rows_grouped_by_rule_in_its_ranking(sample_html, engine):
    groups = finding_groups(sample_html)
    assert [g["rule"] for g in groups] == list(dict.fromkeys(engine["rule"]))
    for group in groups:
        rows = engine[engine["rule"] == group["rule"]]
        cards = [(c["trace"], c["severity"], c["title"], c["detail"], c["fix"]) for c in group["cards"]]
        expected = [(r.trace, r.severity, r.title, r.detail, "Fix: " + r.fix) for r in rows.itertuples()]
        assert cards == expected[:CARDS_PER_RULE]
        assert [trace for trace, _ in group["more"]] == list(rows["trace"])[CARDS_PER_RULE:]
        assert all(c["tone"] == c["severity"] for c in group["cards"])
    assert sum(len(g["cards"]) + len(g["more"]) for g in groups) == len(engine)


def test_the_articles_findings_are_cards_with_their_fix_and_saving(sample_html):
    cards = {(c["rule"], c["trace"]): c for g in finding_groups(sample_html) for c in g["cards"]}
    copy = cards["hidden_copy", "naive"]
    assert copy["title"] == "1 Memcpy DtoD of 512 MiB per step from aten::masked_fill"
    assert copy["tone"] == "high" and copy["fix"] == "Fix: use masked_fill_ (in place) instead of masked_fill"
    assert copy["saving"] == "Saves about 255 µs per step"  # replayed, to 0.1 µs; the copies took 253.7 µs of GPU time
    simt = cards["simt_gemm", "sdpa_math"]
    # replayed with the math backend's calls fused, on the loop without the profiler's cost (9.0 µs an
    # op, as the trace's gaps show): flash saved 4,970.3 µs of GPU time; as traced, 5,004.6 replayed
    assert simt["saving"] == "Saves about 5,009.2 µs per step" and "fused backend" in simt["fix"]
    cudnn = cards["cold_start", "sdpa_cudnn"]
    assert cudnn["title"].endswith(": cuDNN") and "saving" not in cudnn  # a one-time cost: no saving per step
    assert ("hidden_copy", "naive_inplace") not in cards and ("simt_gemm", "sdpa_flash") not in cards


def test_many_findings_of_a_rule_are_capped_and_counted(sample_html, engine):
    (group,) = [g for g in finding_groups(sample_html) if g["rule"] == "low_occupancy"]
    total = int((engine["rule"] == "low_occupancy").sum())
    assert total > CARDS_PER_RULE  # the samples have more than fit: the rest are folded, not dropped
    assert len(group["cards"]) == CARDS_PER_RULE and len(group["more"]) == total - CARDS_PER_RULE
    assert f"{total - CARDS_PER_RULE} more low_occupancy finding(s)</summary>" in sample_html


def test_past_the_folded_list_only_a_count_is_left(sample_db, engine, monkeypatch):
    from tracekit.outputs.report import findings_section
    monkeypatch.setattr(findings_section, "LISTED_PER_RULE", 2)
    data = load(sample_db)
    html, markdown = render(data, "html"), render(data, "markdown")
    (group,) = [g for g in finding_groups(html) if g["rule"] == "low_occupancy"]
    left = int((engine["rule"] == "low_occupancy").sum()) - CARDS_PER_RULE - 2
    traces = list(engine[engine["rule"] == "low_occupancy"]["trace"])
    assert left > 0 and [t for t, _ in group["more"]] == traces[CARDS_PER_RULE:CARDS_PER_RULE + 2]
    assert f"<li>… and {left} more</li>" in html
    more = next(line for line in markdown.splitlines() if "more low_occupancy finding(s): " in line)
    assert more.endswith(f"; and {left} more")


def test_findings_change_when_the_data_does(tmp_path):
    db = db_with(tmp_path, "naive_inplace", "sdpa_flash")
    html = build_report(db)
    con = connect(db, read_only=True)
    try:
        expected = run_findings(con)
    finally:
        con.close()
    cards = [(c["rule"], c["trace"], c["title"]) for g in finding_groups(html) for c in g["cards"]]
    assert cards and sorted(cards) == sorted(expected[["rule", "trace", "title"]].itertuples(index=False, name=None))
    assert not {"hidden_copy", "simt_gemm"} & {rule for rule, _, _ in cards}
    assert "sdpa_math" not in re.search(r'<section id="findings">.*?</section>', html, flags=re.S).group(0)


def test_report_on_a_trace_without_gpu_work(tmp_path):
    path = tmp_path / "cpu.duckdb"
    con = connect(path)
    load_file(con, CPU_TRACE)
    assert run_findings(con).empty
    con.close()
    html = build_report(path)
    assert len(table_rows(html)) == 1
    assert finding_groups(html) == []
    assert "No finding rule found anything in these traces." in html
    # Its CPU time is charted instead (tests/test_report_cpu.py); the charts of GPU work alone are left out.
    assert "CPU time per steady step by op (no trace has GPU work)" in html
    for chart_id in CHART_IDS[:2]:
        svg(html, chart_id)
    assert not any(f'<svg id="{chart_id}"' in html for chart_id in CHART_IDS[2:])
    markdown = build_report(path, "markdown")
    assert "## Findings\n\nNo finding rule found anything in these traces.\n" in markdown


def test_the_occupancy_charts_threshold_is_the_low_occupancy_rules(sample_html):
    assert figures.LOW_OCCUPANCY_PCT == float(rules()["low_occupancy"].params["max_pct"][0]) == 25.0
    chart = svg(sample_html, "chart-occupancy")
    fills = {trace: {r.get("fill") for r in chart_row(chart, trace).findall(f"{SVG_NS}rect")}
             for trace in ("sdpa_flash", "sdpa_efficient")}
    assert fills == {"sdpa_flash": {figures.BAD}, "sdpa_efficient": {"#4e79a7"}}  # 13% red; 25% is not below 25


def test_the_page_is_self_contained(sample_html):
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', sample_html, flags=re.I)
    assert "<script" not in sample_html.lower()
    assert "@import" not in sample_html and "url(" not in sample_html
    assert "<link" not in sample_html.lower()


def test_markdown_prints_the_table_and_findings(sample_db, engine):
    result = invoke("report", "--db", sample_db, "-f", "markdown")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| variant |"))
    rows = lines[header + 2: header + 10]
    assert [r.split("|")[1].strip() for r in rows][:2] == ["sdpa_default", "sdpa_cudnn"]
    assert rows[-1].startswith("| sdpa_math | 5,128.7 |")
    assert not lines[header + 10].startswith("|")
    assert "<svg" not in result.output
    findings = result.output[result.output.index("## Findings"):]
    assert ("- **high · naive: 1 Memcpy DtoD of 512 MiB per step from aten::masked_fill** "
            "(saves about 255 µs per step)\n  - 5 copies in 5 steady step(s)") in findings
    assert "  - Fix: use masked_fill\\_ (in place) instead of masked_fill\n" in findings
    # Rules in the engine's order, each with its count; past the cap, one line names the rest.
    headings = [line for line in lines if line.startswith("### ")]
    assert [h.split()[1] for h in headings] == list(dict.fromkeys(engine["rule"]))
    occupancy = engine[engine["rule"] == "low_occupancy"]
    assert f"### low_occupancy ({len(occupancy)}): kernels whose launch lets few warps" in findings
    hidden = len(occupancy) - CARDS_PER_RULE
    more = next(line for line in lines if line.startswith(f"- {hidden} more low_occupancy finding(s): "))
    assert len(re.findall(r"\((?:high|medium|low|info)\): ", more)) == hidden
    assert "sdpa_flash (info): void pytorch_flash::flash_fwd_kernel" in more
    assert "(\\_\\_launch_bounds\\_\\_," in findings and "(__launch_bounds__," not in findings


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
    with pytest.raises(TracekitError, match="unknown report format"):
        render(load(sample_db), "pdf")


# --- the page in a real browser ---------------------------------------------------------------


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


def _report_of(folder, files, fmt):
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "r.duckdb"
    con = connect(db)
    for file in files:
        assert load_file(con, file).status == "loaded"
    con.close()
    return build_report(db=db, fmt=fmt)


def test_a_trace_without_steps_is_said_to_count_as_one_step(tmp_path):
    # A public CPU-only training trace with no ProfilerStep#N, and one beside a capture that has steps.
    foreign = CPU_TRACE.parent.parent / "foreign" / "cpu_only_linear_train_step.json.gz"
    alone = _report_of(tmp_path / "a", [foreign], "markdown")
    assert "no trace has ProfilerStep#N steps: each counts as one step, its figures the whole trace's." in alone
    assert "means over the steady steps" not in alone
    mixed = _report_of(tmp_path / "b", [foreign, SAMPLE_TRACES / "naive.json.gz"], "markdown")
    assert "a trace without ProfilerStep#N counts as one step, the whole trace." in mixed
    stepped = _report_of(tmp_path / "c", [SAMPLE_TRACES / "naive.json.gz"], "markdown")
    assert "per-step figures are means over the steady steps (all but the first)." in stepped


def test_the_speed_up_card_says_when_naive_is_loaded_but_not_at_this_shape(tmp_path):
    h200 = CPU_TRACE.parent.parent / "h200"
    # naive in fp32 and flash at head dim 128: no trace shares naive's shape.
    page = _report_of(tmp_path / "a", [h200 / "fp32" / "naive.json.gz", h200 / "hd128" / "sdpa_flash.json.gz"], "html")
    assert "no naive trace of the same shape" in page and "no naive trace loaded" not in page
    without = _report_of(tmp_path / "b", [h200 / "hd128" / "sdpa_flash.json.gz"], "html")
    assert "no naive trace loaded" in without


def test_tflops_of_a_trace_without_the_captures_flops_come_from_its_counted_kernels(tmp_path):
    # Training captures carry no flops_per_call: the column shows the FLOPs tracekit counts on
    # the kernels (GEMMs and fused attention) of the steady steps over their GPU time.
    path = tmp_path / "train.duckdb"
    con = connect(path)
    assert load_file(con, TEST_DATA / "h200" / "train_bf16" / "train_sdpa_default.json.gz").status == "loaded"
    flops, steps, gpu_us = con.execute(
        "SELECT sum(k.flops), any_value(w.steps), any_value(t.gpu_us_per_step) FROM kernels k "
        "JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step "
        "JOIN step_totals t ON t.trace = k.trace").fetchone()
    con.close()
    assert flops > 0 and steps == 7
    expected = flops / steps / (gpu_us * 1e-6) / 1e12
    rows = dict(table_rows(build_report(path, "html")))
    assert rows["train_sdpa_default"][2] == f"{expected:,.0f}" and 20 < expected < 200
