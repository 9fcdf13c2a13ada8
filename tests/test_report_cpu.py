"""The report on captures without GPU work (tests/data/cpu: the variants of one shape, naive_cpu of
that shape from another capture, repeats of another shape, and a gloo training job): CPU time
charted, the naive trace of each shape found, fastest first by CPU time, and a trace called fastest
only among traces of its shape; and one occupancy figure on the sample traces' page."""

import re

import pytest

from conftest import TEST_DATA, invoke_cli as invoke
from report_checks import CHART_IDS, SVG_NS, svg, table_rows
from tracekit.analysis.named_queries import run_named
from tracekit.outputs.report import build_report
from tracekit.store.database import connect

CPU = TEST_DATA / "cpu"
SHAPE = "1x2x128x32 fp32 causal forward on the CPU"


@pytest.fixture(scope="module")
def cpu_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("cpu") / "cpu.duckdb"
    # the folders the module's docstring names (tests/data/cpu holds other captures too)
    result = invoke("load", CPU / "naive_cpu.json.gz", CPU / "variants", CPU / "repeats", CPU / "gloo_job", "--db", db)
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def summary(cpu_db):
    con = connect(cpu_db, read_only=True)
    try:
        return run_named(con, "summary").set_index("trace")
    finally:
        con.close()


@pytest.fixture(scope="module")
def cpu_html(cpu_db):
    return build_report(cpu_db, "html")


def text_of(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def row(root, label):
    (found,) = [g for g in root.iter(f"{SVG_NS}g") if g.get("data-row") == label]
    return found


def test_a_shape_is_the_captures_dims_dtype_causal_and_workload_on_its_device(cpu_db):
    con = connect(cpu_db, read_only=True)
    try:
        shapes = dict(con.execute("SELECT trace, shape FROM trace_shapes").fetchall())
    finally:
        con.close()
    assert {t for t, s in shapes.items() if s == SHAPE} == {"naive", "naive_inplace", "sdpa_math", "naive_cpu"}
    assert {shapes[f"run{i}"] for i in range(1, 6)} == {"1x2x64x16 fp32 causal forward on the CPU"}
    assert shapes["train_naive_inplace_rank0"] == "2x2x64x32 fp32 causal train on the CPU"


def test_the_speed_up_of_a_cpu_trace_is_against_the_naive_trace_of_its_shape_on_cpu_time(summary):
    naive = summary.loc["naive", "cpu_us_per_step"]
    for trace in ("naive", "naive_inplace", "sdpa_math", "naive_cpu"):
        assert summary.loc[trace, "speedup_vs_naive"] == round(naive / summary.loc[trace, "cpu_us_per_step"], 2)
    assert summary.loc["naive_inplace", "speedup_vs_naive"] == 2.19   # 451.6 µs over 206.3 µs
    # No naive trace of the repeats' shape, nor of the training job's workload.
    assert summary.loc[[f"run{i}" for i in range(1, 6)] + ["train_naive_inplace_rank0"], "speedup_vs_naive"].isna().all()


def test_the_table_is_fastest_first_by_cpu_time(cpu_html, summary):
    order = [trace for trace, _ in table_rows(cpu_html)]
    assert order == list(summary.sort_values("cpu_us_per_step").index)
    assert order[:4] == ["run4", "run1", "naive_inplace", "naive"]


def test_fastest_is_named_only_among_traces_of_one_shape(cpu_html):
    # run4 (115.4 µs) is quicker, but at another shape: the variants' group (4 traces, 3 variants) is compared.
    kpi = re.search(r'<div class="kpi"><div class="k">Fastest</div>.*?</div></div>', cpu_html).group(0)
    assert text_of(kpi).split() == ["Fastest", "naive_inplace", "206.3", "µs", "CPU", "per", "step", "·", "of", "4",
                                    "at", *SHAPE.split()]
    best = re.findall(r'<tr class="best" data-trace="([^"]+)"', cpu_html)
    assert best == ["run4", "naive_inplace", "train_naive_inplace_rank0"]   # each group's fastest
    assert "Best speed-up vs naive" in cpu_html and "2.19×" in text_of(cpu_html)
    assert "no naive trace of the same shape" not in cpu_html


def test_the_first_chart_plots_cpu_op_time_and_says_so(cpu_html, cpu_db):
    chart = svg(cpu_html, "chart-gpu-by-class")
    assert chart.find(f"{SVG_NS}title").text == "CPU time per steady step by op (no trace has GPU work)"
    naive = row(chart, "naive_cpu")
    segments = {}
    for rect in naive.findall(f"{SVG_NS}rect"):
        op, us = re.fullmatch(r"naive_cpu · (.+): ([\d,.]+) µs of CPU per step", rect.find(f"{SVG_NS}title").text).groups()
        segments[op] = float(us.replace(",", ""))
    # The outermost ops of naive_cpu's steady steps, per step, straight from the cpu_ops view.
    con = connect(cpu_db, read_only=True)
    try:
        want = dict(con.execute(
            "SELECT name, sum(dur_us) / 5 FROM cpu_ops WHERE trace = 'naive_cpu' AND step BETWEEN 1 AND 5 "
            "AND parent = 'tracekit.forward.naive' GROUP BY name").fetchall())
    finally:
        con.close()
    assert set(want) == {"aten::transpose", "aten::matmul", "aten::mul", "aten::masked_fill", "aten::softmax"}
    # The six ops with the most time over all traces (the training job's, mostly) get a colour each;
    # naive_cpu's others are one "other CPU ops" segment.
    named = set(segments) - {"other CPU ops"}
    assert named and named < set(want) and all(abs(segments[op] - want[op]) <= 0.05 for op in named)
    assert abs(segments["other CPU ops"] - sum(want[op] for op in set(want) - named)) <= 0.05
    assert "1,808.1 µs CPU" in "".join(naive.itertext())


def test_the_timeline_shows_cpu_ops_and_the_gpu_charts_are_left_out(cpu_html, tmp_path):
    chart = svg(cpu_html, "chart-timeline")
    assert chart.find(f"{SVG_NS}title").text == "One step per trace on the CPU (no trace has GPU work)"
    lane = "".join(row(chart, "naive").itertext())
    assert "on the CPU" in lane and "no GPU work" not in lane
    assert "no GPU work" not in text_of(cpu_html)
    # The variants alone (steps of 0.2 to 2 ms: no 100 ms training step beside them): blocks wide
    # enough carry their op's name.
    db = tmp_path / "variants.duckdb"
    assert invoke("load", CPU / "variants", "--db", db).exit_code == 0
    labels = {t.text for t in svg(build_report(db, "html"), "chart-timeline").iter(f"{SVG_NS}text")
              if t.get("class") == "blk"}
    assert {"matmul", "softmax"} <= labels
    assert not any(f'<svg id="{chart_id}"' in cpu_html for chart_id in CHART_IDS[2:])
    assert "the charts of kernel launches, memcpy bytes, Tensor Core share, cuDNN plans and occupancy are left out" in cpu_html


def test_one_occupancy_figure_on_the_page(sample_db, sample_con):
    html = build_report(sample_db, "html")
    cells = dict(table_rows(html))
    chart = svg(html, "chart-occupancy")
    # The low_occupancy cards shown: (trace, the kernel's name as the title gives it) -> occupancy.
    cards = {(trace, name): pct for trace, name, pct in re.findall(
        r'data-rule="low_occupancy" data-trace="([^"]+)"[^>]*>.*?<p class="title">([^<]+?) runs at ([\d.]+%) '
        r"theoretical occupancy", html)}
    top = dict(sample_con.execute("SELECT trace, top_kernel FROM (" + _summary_sql() + ")").fetchall())
    compared = 0
    for trace, values in cells.items():
        (value,) = [t for t in row(chart, trace).iter(f"{SVG_NS}text") if t.get("class") in ("val", "val-in")]
        shown = "".join(value.itertext()).split(" · ")[0]
        assert values[10] == shown, trace              # table and chart: one figure
        launch = sample_con.execute(
            "SELECT round(mode(theoretical_occupancy_pct), 1) FROM kernels k JOIN steady_window w "
            "ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step WHERE k.trace = ? AND k.name = ?",
            [trace, top[trace]]).fetchone()[0]
        assert shown == f"{launch:.1f}%"
        card = [pct for (t, name), pct in cards.items() if t == trace and top[trace].startswith(name.rstrip("."))]
        assert card in ([], [shown])                   # a card of the same kernel: the same figure
        compared += len(card)
    assert compared >= 2
    assert cells["sdpa_default"][10] == "18.8%"   # the chart said "no estimate" beside the card's 18.8%
    assert "no estimate" not in html


def _summary_sql():
    from tracekit.analysis.named_queries import get_query
    return get_query("summary").sql.replace("$trace", "NULL").rstrip().rstrip(";")
