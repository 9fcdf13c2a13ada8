"""`tracekit diff` on real H200 captures: the article's fixes, a rerun of the same capture, a trace
against itself, and the exit status a CI job acts on; `--by kernel`'s base names of real kernels."""

import json
import re

import pytest

import tracekit
from conftest import SAMPLE_TRACES, TEST_DATA, invoke_cli, read_trace
from tracekit.analysis.compare import parse_condition
from tracekit.analysis.diff_result import METRICS
from tracekit.analysis.kernel_names import base_kernel_name
from tracekit.store.database import connect
from tracekit.errors import TracekitError
from tracekit.ingest.loader import load_file

RERUN = TEST_DATA / "h200"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The sample traces and the two separate captures of naive_inplace (rerun_a, rerun_b)."""
    path = tmp_path_factory.mktemp("diff") / "diff.duckdb"
    con = connect(path)
    for file in sorted(SAMPLE_TRACES.glob("*.json.gz")):
        assert load_file(con, file).status == "loaded"
    for run in ("rerun_a", "rerun_b"):
        file = RERUN / run / "naive_inplace.json.gz"
        assert load_file(con, file).status == "loaded"
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [run, str(file.resolve())])
    con.close()
    return path


def _json(db, *args):
    result = invoke_cli("diff", *args, "--db", db, "-f", "json")
    return result.exit_code, json.loads(result.output)


def _figure(payload, metric):
    return next(f for f in payload["figures"] if f["metric"] == metric)


def test_inplace_fix_drops_the_copy_and_its_time(db):
    code, out = _json(db, "naive", "naive_inplace")
    assert code == 0 and out["verdict"] == "pass"
    gpu = _figure(out, "gpu_us_per_step")
    # The Memcpy DtoD of 512 MiB took ~254 us per step: GPU time drops by about that, beyond noise.
    assert -280 < gpu["change"] < -230 and gpu["significant"] and gpu["ci_high"] < 0
    assert _figure(out, "memcpy_bytes_per_step")["b"] == 0
    memcpy = next(r for r in out["attribution"] if r["key"] == "memcpy")
    assert memcpy["status"] == "disappeared" and memcpy["share_pct"] > 90
    assert "hidden_copy" in [f["rule"] for f in out["findings_gone"]]


def test_a_gate_compares_the_per_step_figures_the_summary_prints(db):
    """Each metric a --fail-on condition names is the summary's column of that name (the kernels'
    summed time is the summary's kernel_sum_us_per_step), per trace: a gate holds what a person
    read in the summary, never the step's wall time or another figure called "step"."""
    code, out = _json(db, "naive_inplace", "naive")
    summary = tracekit.query("summary", db=db).set_index("trace")
    columns = {metric: metric for metric in METRICS} | {"kernel_us_per_step": "kernel_sum_us_per_step"}
    assert code == 0 and set(columns.values()) <= set(summary.columns)
    for metric, column in columns.items():
        for side, trace in (("a", "naive_inplace"), ("b", "naive")):
            # the summary rounds µs to 0.1 for people; the diff keeps the trace's figure
            assert _figure(out, metric)[side] == pytest.approx(summary.loc[trace, column], abs=0.051), (metric, trace)
    assert summary.loc["naive", "gpu_us_per_step"] == 2277.6 and summary.loc["naive", "cpu_us_per_step"] == 2574.3


def test_fail_on_memcpy_bytes_passes_the_fix_and_fails_the_reverse(db):
    assert invoke_cli("diff", "naive", "naive_inplace", "--db", db, "--fail-on", "memcpy_bytes_per_step>0").exit_code == 0
    result = invoke_cli("diff", "naive_inplace", "naive", "--db", db, "--fail-on", "memcpy_bytes_per_step>0",
                        "--fail-on", "finding:hidden_copy")
    assert result.exit_code == 1
    fails = [line for line in result.output.splitlines() if line.startswith("FAIL: ")]
    assert len(fails) == 2 and "536,870,912" in fails[0] and "hidden_copy appeared in naive" in fails[1]


def test_math_to_flash_drops_to_one_kernel_and_the_simt_gemms_go(db):
    code, out = _json(db, "sdpa_math", "sdpa_flash", "--by", "kernel", "--top", "30")
    kernels = _figure(out, "kernels_per_step")
    assert (kernels["a"], kernels["b"]) == (20.0, 1.0)
    gone = {r["key"] for r in out["attribution"] if r["status"] == "disappeared"}
    assert any(k.startswith("sm80_xmma_gemm_f32f32") for k in gone)
    appeared = [r["key"] for r in out["attribution"] if r["status"] == "appeared"]
    assert appeared == ["pytorch_flash::flash_fwd_kernel"]  # template arguments cut
    assert {"simt_gemm", "per_call_setup"} <= {f["rule"] for f in out["findings_gone"]}


def test_two_captures_of_the_same_variant_differ_only_by_noise(db):
    result = invoke_cli("diff", "rerun_a", "rerun_b", "--db", db, "--fail-on", "gpu_us_per_step>+5%",
                        "--fail-on", "kernels_per_step>+10%")
    assert result.exit_code == 0, result.output
    code, out = _json(db, "rerun_a", "rerun_b")
    gpu = _figure(out, "gpu_us_per_step")
    assert out["steps"] == [11, 11] and abs(gpu["change_pct"]) < 1


def test_a_trace_against_itself_is_no_change(db):
    code, out = _json(db, "sdpa_cudnn", "sdpa_cudnn", "--fail-on", "gpu_us_per_step>+0%")
    assert code == 0
    for figure in out["figures"]:
        assert figure["change"] == 0 and not figure["significant"]
    assert out["findings_appeared"] == [] and out["findings_gone"] == []


def test_sides_of_another_device_or_shape_are_said_to_differ(db, tmp_path):
    """An H200 bf16 S=2048 capture against a CPU fp32 S=128 one: the change is mostly the device's
    and the shape's, and the diff says so; the H200 captures of one shape differ in neither
    (issue [16] item 8)."""
    _, same = _json(db, "naive", "naive_inplace")
    assert same["unlike_because"] == []
    result = invoke_cli("diff", SAMPLE_TRACES / "naive.json.gz", TEST_DATA / "cpu" / "naive_cpu.json.gz")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("Warning: ")]
    assert warnings == [
        "Warning: the sides ran on different devices: NVIDIA H200 against no GPU, so a change may be theirs, not the code's",
        "Warning: the sides ran on different shapes: 4x16x2048x64 bf16 against 1x2x128x32 fp32, so a change may be "
        "theirs, not the code's"]


def test_a_gpu_the_trace_leaves_unnamed_is_its_maker_and_arch_not_no_gpu(foreign_db):
    """The public MI300X trace names no device, but says AMD and gfx942: it was called 'no GPU'."""
    result = invoke_cli("diff", "rtx4090_tp2_rank0_nccl_allreduce", "amd_mi300_gfx942_bf16_gemm", "--db", foreign_db)
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if "different devices" in line] == [
        "Warning: the sides ran on different devices: NVIDIA GeForce RTX 4090 against AMD gfx942 GPU, so a change may be "
        "theirs, not the code's"]


def test_markdown_is_a_pull_request_comment(db):
    result = invoke_cli("diff", "naive_inplace", "naive", "--db", db, "-f", "markdown", "--fail-on", "gpu_us_per_step>+3%")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "### tracekit diff: `naive_inplace` → `naive`: ❌ **fail**"
    assert any(line.startswith("| gpu_us_per_step |") for line in lines) and "**Top causes (by class)**" in lines


def test_two_files_are_compared_in_a_temporary_database():
    result = invoke_cli("diff", SAMPLE_TRACES / "naive.json.gz", SAMPLE_TRACES / "naive_inplace.json.gz",
                        "--fail-on", "memcpy_per_step>+0")
    assert result.exit_code == 0 and "tracekit diff: naive (baseline) → naive_inplace" in result.output


@pytest.mark.parametrize("args, message", [
    (["--fail-on", "gpu_time>+3%"], "no metric 'gpu_time'"),
    (["--fail-on", "gpu_us_per_step~3"], "write METRIC>VALUE"),
    (["--fail-on", "finding:hiden_copy"], "no finding rule 'hiden_copy' (rules: cold_start, gpu_idle,"),
    (["--by", "step"], "'step' is not one of"),
])
def test_usage_errors_exit_2(db, args, message):
    result = invoke_cli("diff", "naive", "naive_inplace", "--db", db, *args)
    assert result.exit_code == 2 and message in result.output


def test_an_unknown_trace_is_one_line_and_exit_1(db):
    result = invoke_cli("diff", "naive", "nope", "--db", db)
    assert result.exit_code == 1 and "no trace named 'nope'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_conditions_parse_into_what_they_compare():
    c = parse_condition("gpu_us_per_step>+3%")
    assert (c.metric, c.op, c.value, c.relative, c.change) == ("gpu_us_per_step", ">", 3.0, True, True)
    c = parse_condition("memcpy_bytes_per_step>0")
    assert (c.value, c.relative, c.change) == (0.0, False, False)
    c = parse_condition("kernels_per_step<=-2")
    assert (c.op, c.value, c.relative, c.change) == ("<=", -2.0, False, True)
    assert parse_condition("finding:hidden_copy").finding == "hidden_copy"
    with pytest.raises(TracekitError):
        parse_condition("finding:")


def test_python_api_returns_the_result(db):
    import tracekit
    result = tracekit.diff("naive", "naive_inplace", db=db, fail_on=["memcpy_bytes_per_step>0"])
    assert result.verdict == "pass" and result.steps == (5, 5)
    assert result.figures[0]["metric"] == "gpu_us_per_step"


def _real_kernel_names():
    """The kernel, memcpy and memset names of real traces."""
    names = set()
    # The samples, other people's traces, and a training step (forward and backward kernels).
    for path in [*SAMPLE_TRACES.glob("*.json.gz"), *(TEST_DATA / "foreign").glob("*.json.gz"),
                 TEST_DATA / "h200" / "train_fp32" / "train_naive.json.gz"]:
        content = read_trace(path)
        events = content.get("traceEvents", []) if isinstance(content, dict) else content
        names |= {e["name"] for e in events if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")}
    return sorted(names)


def _stem(name):
    """What tells two kernels apart, found another way: the text before the first template
    argument or parameter list, with every `(anonymous namespace)` scope taken out first."""
    return re.split(r"[<(]", re.sub(r"^void ", "", name).replace("(anonymous namespace)::", ""))[0].strip()


def test_base_names_of_real_kernels_are_whole_distinct_and_trimmed():
    names = _real_kernel_names()
    assert len(names) > 150
    bases = {name: base_kernel_name(name) for name in names}
    for name, base in bases.items():
        assert base and base == base.strip() and "  " not in base, (name, base)
        assert not re.search(r"[<>]", base) and "(" not in base.replace("(anonymous namespace)", ""), (name, base)
        assert _stem(name) == base.replace("(anonymous namespace)::", ""), (name, base)
    # Two kernels with different stems never share a base name.
    by_base = {}
    for name, base in bases.items():
        by_base.setdefault(base, set()).add(_stem(name))
    assert {base: stems for base, stems in by_base.items() if len(stems) > 1} == {}


# Each a name that the regular expression before (`^void ` off, then all from the first < or ( cut)
# got wrong: empty, a trailing space, merged with another kernel.
@pytest.mark.parametrize("name, base", [
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 7, false, false>(float*, float const*, "
     "int, int, int, bool const*, int, bool)", "(anonymous namespace)::softmax_warp_forward"),
    ("void (anonymous namespace)::softmax_warp_backward<float, float, float, 7, false, false>(float*, float const*, "
     "float const*, int, int, int, bool const*)", "(anonymous namespace)::softmax_warp_backward"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<4u>, "
     "unsigned int, 3, 64, 64>(at::native::(anonymous namespace)::OpaqueType<4u>*)",
     "at::native::(anonymous namespace)::CatArrayBatchedCopy"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD"),
    ("Memset (Device)", "Memset"),
    ("ns::launch(int)::{lambda(int)#1}::operator()(int) const", "ns::launch::{lambda(int)#1}::operator()"),
    ("void Reduce<float>::operator()<4>(float*)", "Reduce::operator()"),
    ("  ", "(no name)"),
])
def test_base_kernel_name_cuts_what_cpp_adds(name, base):
    assert base_kernel_name(name) == base


def test_diff_by_kernel_keeps_forward_and_backward_softmax_apart():
    foreign = TEST_DATA / "foreign"
    result = invoke_cli("diff", foreign / "v100_dgxs_mlp_train_step.json.gz", foreign / "t4_resnet50_train.json.gz",
                        "--by", "kernel", "--top", "100", "-f", "json")
    keys = [row["key"] for row in json.loads(result.output)["attribution"]]
    assert "(anonymous namespace)::softmax_warp_forward" in keys
    assert "(anonymous namespace)::softmax_warp_backward" in keys
    assert "Memcpy HtoD" in keys and all(key and key == key.strip() for key in keys)
    assert len(keys) == len(set(keys))


def test_diff_without_fail_on_gates_nothing_and_says_so(sample_db):
    """No --fail-on: no PASS the user never asked for; JSON says gated false beside its verdict."""
    text = invoke_cli("diff", "naive", "naive_inplace", "--db", sample_db)
    assert text.exit_code == 0 and "PASS" not in text.output
    assert text.output.splitlines()[-1] == "nothing gated: --fail-on METRIC>+N% (or finding:RULE) makes this a gate"
    ungated = json.loads(invoke_cli("diff", "naive", "naive_inplace", "--db", sample_db, "-f", "json").output)
    gated = json.loads(invoke_cli("diff", "naive", "naive_inplace", "--db", sample_db, "-f", "json",
                                  "--fail-on", "gpu_us_per_step>+50%").output)
    assert (ungated["gated"], gated["gated"]) == (False, True) and gated["verdict"] == "pass"
