"""Findings' savings, replayed, against the fixes captured for them (tests/data/h200/fixes: a
problem and its fix in one process each, profiled with no per-step sync, in inference and
training). The profiler slows the CPU, so a prediction is the replayed share of the traced step
applied to the unprofiled step (repeats.csv: the median of 5 interleaved rounds of CUDA-event
timings), as benchmarks/findings_vs_fixes.py prints it; or the fix replayed on the loop without the
profiler (`no-profiler`: each recorded op's cost, measured on the fixed loops, taken out), which
the pairs whose profiled loop the CPU bounds need."""

import csv
import functools
import importlib.util
import re
import statistics

import pytest

from conftest import TEST_DATA, cli_loaded, invoke_cli

# the benchmark's replay of several findings' fixes together, the one the tests check its table by
_spec = importlib.util.spec_from_file_location("findings_vs_fixes", TEST_DATA.parent.parent / "benchmarks" / "findings_vs_fixes.py")
findings_vs_fixes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(findings_vs_fixes)
# the benchmark that reads a recapture's rounds: its timings and what it counts as a steady host
_spec = importlib.util.spec_from_file_location("fix_rounds", TEST_DATA.parent.parent / "benchmarks" / "fix_rounds.py")
fix_rounds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fix_rounds)

FIXES = TEST_DATA / "h200" / "fixes"


def _median_rounds(path, phase):
    """{loop: the median step_us of its rounds of `phase`} of a timings file (repeats.csv, timings.csv)."""
    rounds = {}
    for row in csv.DictReader(open(path)):
        if row["phase"] == phase:
            rounds.setdefault(row["loop"], []).append(float(row["step_us"]))
    return {loop: statistics.median(values) for loop, values in rounds.items()}


def _unprofiled():
    return _median_rounds(FIXES / "repeats.csv", "unprofiled")


PAIRS = [
    ("launch_bound", "cuda-graph:1000", "infer_launch_eager", "infer_launch_graph"),
    ("launch_bound", "cuda-graph:1000", "train_launch_eager", "train_launch_graph"),  # autograd's thread handed over
    ("gpu_idle", "drop-cpu-gaps:3182-3312", "infer_stall", "infer_no_stall"),  # a 3 ms stall the GPU cannot hide
    ("simt_gemm", "tensor-cores", "infer_fp32", "infer_tf32"),
    ("simt_gemm", "tensor-cores", "train_fp32", "train_tf32"),
    ("pageable_copy", "pin-copies", "train_copy_pageable", "train_copy_pinned"),
    # the math SDPA backend's fix: a fused backend (flash), its call and backward as one kernel each
    ("simt_gemm", "fuse-attention", "infer_sdpa_math", "infer_sdpa_flash"),
    ("simt_gemm", "fuse-attention", "train_sdpa_math", "train_sdpa_flash"),
]


# The pairs whose traced loop the CPU bounds only because it is profiled: the .item() in training,
# the mask built per call; replayed without the profiler's cost, with the others.
UNPROFILED_PAIRS = PAIRS + [
    ("host_sync", "drop-sync:aten::item", "train_item", "train_no_item"),
    ("per_call_setup", "drop:^(?!.*aten::_safe_softmax → )(.*→ )?(aten::ones|aten::triu)( →|$)",
     "infer_mask_per_call", "infer_mask_once"),
    ("per_call_setup", "drop:^(?!.*aten::_safe_softmax → )(.*→ )?(aten::ones|aten::triu)( →|$)",
     "train_mask_per_call", "train_mask_once"),
]


@pytest.fixture(scope="module")
def fixes_db(tmp_path_factory):
    """The pairs' traces, the fixed loops the profiler's cost is measured on, and infer_item (the
    pair out of 25%)."""
    db = tmp_path_factory.mktemp("fixes") / "fixes.duckdb"
    after = [row["loop"] for row in csv.DictReader(open(FIXES / "truth.csv")) if row["role"] == "after"]
    names = dict.fromkeys([name for pair in UNPROFILED_PAIRS for name in pair[2:]] + after + ["infer_item"])
    result = invoke_cli("load", *[FIXES / f"{name}.json.gz" for name in names], "--db", db)
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def fixes_found(fixes_db):
    import tracekit

    traced = tracekit.query(sql="SELECT trace, avg(step_us) AS step_us FROM step_bounds JOIN steady_steps "
                                "USING (trace, step) GROUP BY trace", db=fixes_db)
    return tracekit.findings(db=fixes_db), dict(zip(traced["trace"], traced["step_us"]))


@pytest.mark.parametrize("rule, whatif, before, after", PAIRS)
def test_the_replayed_saving_predicts_the_captured_fix(fixes_found, rule, whatif, before, after):
    found, traced = fixes_found
    row = found[(found["trace"] == before) & (found["rule"] == rule) & (found["whatif"] == whatif)].iloc[0]
    unprofiled = _unprofiled()
    predicted = row["traced_saving_us_per_step"] / traced[before] * unprofiled[before]
    measured = unprofiled[before] - unprofiled[after]
    assert predicted == pytest.approx(measured, rel=0.25)
    assert row["traced_saving_us_per_step"] < traced[before]  # a saving is never more than the step


def test_every_saving_is_less_than_its_step_and_all_fixes_end_each_trace(fixes_found):
    found, traced = fixes_found
    known = found[found["saving_us_per_step"].notna()]
    assert len(known) > 30 and (known["saving_us_per_step"] < known["trace"].map(traced)).all()
    together = found[found["rule"] == "all_fixes"]
    assert set(together["trace"]) == set(known["trace"])
    assert found.index[found["rule"] == "all_fixes"].min() > found.index[found["rule"] != "all_fixes"].max()


def test_the_stall_is_its_own_finding_apart_from_the_launch_rate(fixes_found):
    """infer_stall sleeps 3 ms mid-step: gpu_idle names the stall (no runtime call for 3.3 ms) with
    its own fix and saving (3.1 ms replayed, measured 2.7 ms unprofiled), apart from the launch-rate
    idle a CUDA graph would remove."""
    found, _ = fixes_found
    idle = found[(found["trace"] == "infer_stall") & (found["rule"] == "gpu_idle")].set_index("whatif")
    stall = idle.loc["drop-cpu-gaps:3182-3312"]
    assert ("the CPU stalled: no runtime call, and no launch on another thread, for up to 3.3 ms (most in Python between"
            " ops)") in stall["title"]
    assert "a sleep, a lock" in stall["fix"]
    # From a graph, the launches around the sleep would cost less: 366 µs, a ninth of the stall.
    assert idle.loc["cuda-graph:1000", "saving_us_per_step"] < 0.15 * stall["saving_us_per_step"]
    # the fixed loop has no stall
    assert not found[(found["trace"] == "infer_no_stall") & found["title"].str.contains("stalled")].any().any()


def test_a_thread_silent_while_another_launched_is_no_stall(fixes_found):
    """Autograd's thread makes no call through the forward the main thread launches, then launches
    the backward: up to 12.4 ms of silence in train_launch_eager's steps, which gpu_idle once took
    for a stall ("no runtime call for up to 12.4 ms", saving nothing) where the GPU idled 1.2 ms
    behind the main thread's launches. Those gaps are the launch rate's: the training loops keep
    no stall finding, and their launch-rate idle takes the gaps in."""
    found, _ = fixes_found
    idle = found[found["rule"] == "gpu_idle"]
    for trace in ("train_launch_eager", "train_mask_per_call", "train_sdpa_flash"):
        assert not idle[(idle["trace"] == trace) & idle["title"].str.contains("stalled")].any().any(), trace
    rate = idle[(idle["trace"] == "train_launch_eager") & (idle["whatif"] == "cuda-graph:1000")].iloc[0]
    assert "GPU idle 13266.3 µs per step" in rate["title"]  # 12,022.6 before, and 1,243.7 called a stall


def test_a_saving_far_below_the_rules_figure_says_why(fixes_found):
    """Where the replay saves under half of what the rule counts, the detail says why: the training
    loop with its mask built per call looks launch-bound as traced (the GPU busy 47% of the step,
    graphing saves 5.3 ms replayed as traced), but without the profiler's cost its CPU keeps ahead
    and graphing saves almost nothing; the stall loop's launch rate is small beside its 3 ms sleep."""
    found, _ = fixes_found
    rows = found.set_index(["trace", "rule"])
    profiled = rows.loc[("train_mask_per_call", "launch_bound")]
    assert profiled["saving_us_per_step"] < 0.05 * profiled["estimate_us_per_step"]
    assert profiled["traced_saving_us_per_step"] > 0.5 * profiled["estimate_us_per_step"]
    assert "much of what the rule counts here is the profiler's own cost" in profiled["detail"]
    held = rows.loc[("infer_stall", "launch_bound")]
    assert held["saving_us_per_step"] < 0.1 * held["estimate_us_per_step"]
    assert "the step's time is held by other work" in held["detail"] and "profiler's own" not in held["detail"]
    both = found.dropna(subset=["saving_us_per_step", "estimate_us_per_step"])
    close = both[both["saving_us_per_step"] >= 0.5 * both["estimate_us_per_step"]]
    assert len(close) > 10 and not close["detail"].str.contains("held by other work|profiler's own cost").any()


def _profiler_cost_per_op(traced, ops):
    """µs the profiler cost per recorded op: on the fixed loops the CPU bounds unprofiled (1.3x
    their GPU busy time or more), their traced step less their unprofiled one, per op recorded."""
    truth = {row["loop"]: row for row in csv.DictReader(open(FIXES / "truth.csv"))}
    unprofiled = _unprofiled()
    costs = [(traced[loop] - unprofiled[loop]) / ops[loop] for loop, row in truth.items()
             if row["role"] == "after" and loop in traced and unprofiled[loop] >= 1.3 * float(row["gpu_busy_us"])]
    assert len(costs) >= 2
    return statistics.median(costs)


# The pair no cost per op brings within 25% (docs/findings.md says why): replayed all the same, for
# the README's table.
MISSED_PAIR = ("host_sync", "drop-sync:aten::item", "infer_item", "infer_no_item")


@pytest.fixture(scope="module")
def without_the_profiler(fixes_db):
    """{before: saving predicted with the fix replayed on the loop without the profiler}, each pair of
    UNPROFILED_PAIRS and MISSED_PAIR; the cost per op (7.9 µs on the H200's host) comes from the fixed
    loops, the predictions are for the problem loops."""
    import tracekit
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    per_step = tracekit.query(sql="SELECT s.trace, avg(s.step_us) AS step_us, (SELECT count(*) FROM cpu_ops o JOIN "
                                  "steady_steps w USING (trace, step) WHERE o.trace = s.trace) / count(*) AS ops "
                                  "FROM step_bounds s JOIN steady_steps USING (trace, step) GROUP BY s.trace", db=fixes_db)
    traced, ops = dict(zip(per_step["trace"], per_step["step_us"])), dict(zip(per_step["trace"], per_step["ops"]))
    cost = _profiler_cost_per_op(traced, ops)
    assert 5 < cost < 12
    unprofiled_fix = f"no-profiler:{cost:.1f}"
    con = connect_for_queries(fixes_db)
    try:
        predicted = {}
        for _, whatif, before, _ in UNPROFILED_PAIRS + [MISSED_PAIR]:
            replayer = TraceReplay(con, before)
            predicted[before] = (replayer.saving(f"{unprofiled_fix}; {whatif}").saving_us
                                 - replayer.saving(unprofiled_fix).saving_us)
    finally:
        con.close()
    return predicted


# The pairs out of 25% at the fixed loops' median cost per op, with their error in percent: the eager
# inference loop's own ops cost 9.0 µs each on this host (its traced less its unprofiled step, per
# op), not 7.9, so its step replayed without the profiler is 28% slower than it ran; its graph
# replays within 45 µs of the captured graph's unprofiled step (229 against 184).
COST_MISSES = {"infer_launch_eager": 29}


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS)
def test_replayed_without_the_profiler_the_fix_predicts_what_it_saved(without_the_profiler, rule, whatif, before, after):
    """10 of the 12 pairs of fixes/ within 25% (the .item() in inference: -39%, not here)."""
    unprofiled = _unprofiled()
    measured = unprofiled[before] - unprofiled[after]
    if before in COST_MISSES:
        assert 100 * (without_the_profiler[before] - measured) / measured == pytest.approx(COST_MISSES[before], abs=1.5)
    else:
        assert without_the_profiler[before] == pytest.approx(measured, rel=0.25)


def _readme_rows(host=0):
    """{(before, after): (predicted, measured, error %)} of the README's table of fix pairs, on the
    H200 (host 0) or the H100 (host 1)."""
    rows = {}
    for line in (TEST_DATA.parent.parent / "README.md").read_text().splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        if len(cells) == 9 and " → " in cells[2] and cells[3][:1].isdigit():
            before, after = (name.strip("` ") for name in cells[2].split("→"))
            numbers = cells[3 + 3 * host:6 + 3 * host]
            rows[(before, after)] = (float(numbers[0].replace(",", "")), float(numbers[1].replace(",", "")),
                                     float(numbers[2].rstrip("%")))
    return rows


def test_the_readme_table_is_what_findings_predicts(fixes_found):
    """The README's predicted-against-measured table holds findings' own saving_us_per_step and the
    captured timings: it cannot drift from either."""
    found, _ = fixes_found
    rows = _readme_rows()
    unprofiled = _unprofiled()
    pairs = UNPROFILED_PAIRS + [MISSED_PAIR]
    assert set(rows) == {(before, after) for _, _, before, after in pairs}
    for rule, whatif, before, after in pairs:
        saving = found[(found["trace"] == before) & (found["rule"] == rule) & (found["whatif"] == whatif)].iloc[0]
        predicted, measured, error = rows[(before, after)]
        assert predicted == pytest.approx(saving["saving_us_per_step"], abs=0.6), before
        assert measured == pytest.approx(unprofiled[before] - unprofiled[after], abs=0.6), before
        assert error == round(100 * (saving["saving_us_per_step"] - measured) / measured), before


def test_without_the_profiler_a_handoff_between_threads_loses_the_ops_in_its_lag(fixes_db):
    """In training the main thread waits in backward() for autograd's thread, which records the
    backward's last ops after its last launch (transposes, AccumulateGrad: 18 a step); the main
    thread then records 2 of its own before its next call (the optimizer's). Without the profiler
    those records go from the lag after the handoff too, not only from the gaps: train_sdpa_flash
    replays at about 1,070 µs a step, from 1,275 with the gaps' ops alone (unprofiled: 769)."""
    import numpy as np

    from tracekit.replay.fixes import apply
    from tracekit.replay.graph import read_graph
    from tracekit.replay.whatif import step_times
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(fixes_db)
    try:
        graph = read_graph(con, "train_sdpa_flash")
        changed = apply(graph, [("no-profiler", "7.9")], con)
    finally:
        con.close()
    handoffs = np.flatnonzero(graph.call_after >= 0)
    main_lane = graph.steps[0]["lane"]
    to_main = handoffs[graph.call_lane[handoffs] == main_lane]
    assert len(to_main) >= 4 and (graph.call_lag_ops[to_main] == 20).all()
    assert (graph.call_lag[to_main] - changed["call_lag"][to_main] == 20 * 7_900).all()

    def steady_us(arrays):
        chosen = [s for s in step_times(graph, arrays) if s.step in graph.steady]
        return sum(s.fixed_us for s in chosen) / len(chosen)

    gaps_alone = steady_us({**changed, "call_lag": graph.call_lag})
    assert steady_us(changed) == pytest.approx(1070, rel=0.03)
    assert gaps_alone == pytest.approx(1275, rel=0.03)
    assert abs(steady_us(changed) - _unprofiled()["train_sdpa_flash"]) < abs(gaps_alone - _unprofiled()["train_sdpa_flash"])


def test_the_item_pair_records_the_same_work_at_another_pace(fixes_db):
    """Why no cost per op brings the .item() in inference within 25% (docs/findings.md): its two
    loops record the same ops and runtime calls a step, but every kind of them took longer while
    infer_item was traced, so the same cost taken off leaves it slower than its loop runs."""
    import tracekit

    per_step = tracekit.query(sql="""
        SELECT o.trace, count(*) / count(DISTINCT o.step) AS ops,
               median(o.dur_us) FILTER (WHERE o.name = 'aten::addmm') AS addmm_us,
               median(o.dur_us) FILTER (WHERE o.name = 'aten::t') AS t_us,
               (SELECT count(*) FROM runtime r JOIN steady_steps w USING (trace, step) WHERE r.trace = o.trace)
                   / count(DISTINCT o.step) AS calls,
               (SELECT median(r.dur_us) FROM runtime r JOIN steady_steps w USING (trace, step)
                WHERE r.trace = o.trace AND r.name = 'cudaLaunchKernel') AS launch_us
        FROM cpu_ops o JOIN steady_steps USING (trace, step)
        WHERE o.trace IN ('infer_item', 'infer_no_item') GROUP BY o.trace""", db=fixes_db).set_index("trace")
    item, no_item = per_step.loc["infer_item"], per_step.loc["infer_no_item"]
    assert (item["ops"], item["calls"]) == (254, 79) and (no_item["ops"], no_item["calls"]) == (258, 80)
    for column, at_least in (("addmm_us", 1.15), ("t_us", 1.5), ("launch_us", 1.1)):
        assert item[column] > at_least * no_item[column], column


ROUNDS = TEST_DATA / "h200" / "item_rounds"


@pytest.fixture(scope="module")
def rounds_db(tmp_path_factory):
    """tests/data/h200/item_rounds: the .item() pair and infer_launch_eager, 4 captures each."""
    db = tmp_path_factory.mktemp("rounds") / "rounds.duckdb"
    result = invoke_cli("load", *sorted(ROUNDS.glob("*.json.gz")), "--db", db)
    assert result.exit_code == 0, result.output
    return db


def _round_timings():
    """{(phase, loop): step_us} of timings.csv: pre0-2 and post0-2 the unprofiled rounds, truth0-3
    the step right after each round's capture (the `cpu` lines, where the thread ran, left out)."""
    rows = [line.split(",") for line in (ROUNDS / "timings.csv").read_text().splitlines() if line]
    return {(row[0], row[1]): float(row[2]) for row in rows if row[0] != "cpu"}


@pytest.mark.parametrize("capture", range(4))
def test_recaptured_the_item_pair_in_inference_comes_within_25_percent(rounds_db, capture):
    """The .item() pair out of 25% in tests/data/h200/fixes, captured again 4 times in one process
    on another H200 machine: the profiler cost 2.0-4.7 µs an op there (infer_launch_eager, a loop
    outside the pair, traced less unprofiled per recorded op), and replayed without it each capture
    of infer_item predicts 557-610 µs of saving against the 604 its loop saved (median of 6
    unprofiled rounds each): -8% to +1%."""
    import tracekit
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    timings = _round_timings()
    launch = f"infer_launch_eager_{capture}"
    per_step = tracekit.query(sql="SELECT avg(s.step_us) AS step_us, (SELECT count(*) FROM cpu_ops o JOIN steady_steps w "
                                  "USING (trace, step) WHERE o.trace = s.trace) / count(*) AS ops FROM step_bounds s "
                                  f"JOIN steady_steps USING (trace, step) WHERE s.trace = '{launch}' GROUP BY s.trace",
                              db=rounds_db).iloc[0]
    cost = (per_step["step_us"] - timings[(f"truth{capture}", "infer_launch_eager")]) / per_step["ops"]
    assert 1.5 < cost < 5  # 7.9 µs when tests/data/h200/fixes was captured: the host's, at the time
    con = connect_for_queries(rounds_db)
    try:
        replayer = TraceReplay(con, f"infer_item_{capture}")
        without = f"no-profiler:{cost:.2f}"
        predicted = replayer.saving(f"{without}; drop-sync:aten::item").saving_us - replayer.saving(without).saving_us
    finally:
        con.close()

    def unprofiled(loop):
        return statistics.median(us for (phase, name), us in timings.items() if name == loop and phase[:3] in ("pre", "pos"))
    assert predicted == pytest.approx(unprofiled("infer_item") - unprofiled("infer_no_item"), rel=0.25)



PREFETCH = TEST_DATA / "h200" / "prefetch"


def test_prefetching_the_pageable_copy_saves_what_the_replay_says(tmp_path):
    """The other fix of the pageable copy (tests/data/h200/prefetch, one process): pinned and copied a
    step ahead on a side stream, which takes the copy off the step's path, not only its staging.
    Replayed with prefetch-copies, the traced share of the saving predicts the unprofiled saving
    within 25% (8,951 µs against 10,539: -15%), and more than pin-copies, the rule's own fix."""
    import json

    import tracekit

    db = tmp_path / "prefetch.duckdb"
    result = invoke_cli("load", PREFETCH / "train_copy_pageable.json.gz", PREFETCH / "train_copy_prefetch.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    found = tracekit.findings(db=db)
    copy = found[(found["trace"] == "train_copy_pageable") & (found["rule"] == "pageable_copy")].iloc[0]
    assert copy["whatif"] == "pin-copies" and "64.0 MiB" in copy["title"]
    prefetched = tracekit.whatif("train_copy_pageable", apply=["prefetch-copies"], db=db)
    assert abs(prefetched.fit_pct) < 5
    rounds = json.loads((PREFETCH / "repeats.json").read_text())
    unprofiled = {loop: statistics.median(r["unprofiled"]) for loop, r in rounds.items()}
    measured = unprofiled["train_copy_pageable"] - unprofiled["train_copy_prefetch"]
    predicted = prefetched.saving_us / prefetched.mean("trace_us") * unprofiled["train_copy_pageable"]
    assert predicted == pytest.approx(measured, rel=0.25)
    assert prefetched.saving_us > copy["saving_us_per_step"]


# Each pair's saving_us_per_step (findings' own: replayed without the profiler's cost as the trace's
# gaps between back-to-back ops estimate it, no figure measured off-line) against the captured fix:
# error in percent as benchmarks/findings_vs_fixes.py prints it. Two pairs miss 25% (docs/findings.md):
# infer_launch_eager's trace shows the smallest gaps of the host's CPU-bound loops (1.6 µs) while its
# ops cost the most (9.0 µs against 6.3-8.0), and infer_item is the capture that ran slow throughout.
OWN_ESTIMATE_ERRORS = {"infer_launch_eager": 76, "train_launch_eager": 24, "infer_item": -42, "train_item": -3,
                       "infer_stall": 6, "infer_mask_per_call": -7, "train_mask_per_call": -3, "infer_fp32": -1,
                       "train_fp32": 3, "train_copy_pageable": 17, "infer_sdpa_math": 1, "train_sdpa_math": -10}


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS + [MISSED_PAIR])
def test_findings_saving_without_the_profiler_holds_against_the_captured_fix(fixes_found, rule, whatif, before, after):
    found, _ = fixes_found
    row = found[(found["trace"] == before) & (found["rule"] == rule) & (found["whatif"] == whatif)].iloc[0]
    unprofiled = _unprofiled()
    measured = unprofiled[before] - unprofiled[after]
    error = 100 * (row["saving_us_per_step"] - measured) / measured
    assert error == pytest.approx(OWN_ESTIMATE_ERRORS[before], abs=1.5)
    assert "without the profiler's cost" in found[(found["trace"] == before) & (found["rule"] == "all_fixes")].iloc[0]["detail"]


def test_the_estimate_tracks_the_host(fixes_db, rounds_db):
    """The profiler cost 6.3-9.1 µs a recorded op on the CPU-bound loops of tests/data/h200/fixes and
    1.9-6.2 on item_rounds' host: the gaps between back-to-back ops give 6.0-8.3 and 2.8-4.7."""
    from tracekit.replay.profiler_cost import cost_per_op_us
    from tracekit.store.database import connect_for_queries

    def estimates(db, traces):
        con = connect_for_queries(db)
        try:
            return [cost_per_op_us(con, trace) for trace in traces]
        finally:
            con.close()

    fixes = estimates(fixes_db, ["infer_launch_eager", "train_launch_eager", "infer_item", "infer_no_item",
                                 "train_item", "train_no_item"])
    rounds = estimates(rounds_db, [f"{loop}_{n}" for loop in ("infer_item", "infer_no_item", "infer_launch_eager")
                                   for n in range(4)])
    assert 5.5 < min(fixes) and max(fixes) < 9 and 2.5 < min(rounds) and max(rounds) < 5
    assert min(fixes) > 1.2 * max(rounds)


@pytest.mark.parametrize("capture", range(4))
def test_recaptured_the_item_pair_findings_own_saving_comes_within_25_percent(rounds_db, capture):
    """infer_item's 4 captures on item_rounds' host, each replayed without the profiler at the cost
    its own gaps show (2.8-4.7 µs an op, where 7.9 was measured on the host of fixes/)."""
    import tracekit

    found = tracekit.findings(db=rounds_db, trace=f"infer_item_{capture}", rule="host_sync")
    row = found[found["whatif"] == "drop-sync:aten::item"].iloc[0]
    timings = _round_timings()

    def unprofiled(loop):
        return statistics.median(us for (phase, name), us in timings.items() if name == loop and phase[:3] in ("pre", "pos"))
    assert row["saving_us_per_step"] == pytest.approx(unprofiled("infer_item") - unprofiled("infer_no_item"), rel=0.25)
    assert row["traced_saving_us_per_step"] < row["saving_us_per_step"]  # the profiler slowed the launches


def test_no_profiler_without_a_cost_takes_the_traces_own(fixes_db):
    """`no-profiler` and `no-profiler:trace` replay with 4.0 times the trace's median gap between
    back-to-back ops inside an ATen op (1.6 µs in infer_launch_eager: 6.4 µs an op); a CUDA graph's
    loop records 2 ops a step, no such gap: the error says to give the cost."""
    import re

    from tracekit.replay.profiler_cost import COST_PER_GAP, sibling_gap_us
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(fixes_db)
    try:
        gap, count = sibling_gap_us(con, "infer_launch_eager")
    finally:
        con.close()
    assert count == 160 and gap == pytest.approx(1.6, abs=0.01)

    def saved(fix):
        result = invoke_cli("whatif", "infer_launch_eager", "--apply", fix, "--db", fixes_db)
        assert result.exit_code == 0, result.output
        return float(re.search(r"they save ([\d.,]+) µs", result.output).group(1).replace(",", ""))
    own = saved("no-profiler")
    assert own == saved("no-profiler:trace") == saved(f"no-profiler:{COST_PER_GAP * gap}")
    assert 1700 < own < 1900  # of the traced 3,588 µs step; unprofiled the loop runs 1,068
    result = invoke_cli("whatif", "infer_launch_graph", "--apply", "no-profiler", "--db", fixes_db)
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "give it: no-profiler:US" in result.output


H100_ROUNDS = TEST_DATA / "h100" / "fix_rounds"
# Out of sample: every pair captured again on an H100 host (tests/data/h100), each loop timed in its
# own process before any profiler ran there; findings' own saving_us_per_step against the medians'
# saving, error in percent as benchmarks/fix_rounds.py prints it. One pair misses 25%: the host's
# profiler cost 2.5 µs an op on train_launch_eager, where its trace's gaps say 3.5 (its graph's step
# replays at 809 µs against the captured graph's 723).
H100_ERRORS = {"infer_launch_eager": -7, "train_launch_eager": -28, "infer_item": -4, "train_item": -3,
               "infer_stall": 6, "infer_mask_per_call": -5, "train_mask_per_call": -10, "infer_fp32": 1,
               "train_fp32": 5, "train_copy_pageable": -2, "infer_sdpa_math": 1, "train_sdpa_math": 0}
# A second lease of an H100 (tests/data/h100/fix_rounds_b), captured the same way: again 12 of 13.
# The miss: train_item, whose own unprofiled rounds ran 7.4-10.7 ms (the first lease's 6.1-6.4), so
# its measured saving ran from -1,457 to 2,926 µs round by round; the trace's steps held one pace.
H100_B_ROUNDS = TEST_DATA / "h100" / "fix_rounds_b"
H100_B_ERRORS = {"infer_launch_eager": -14, "train_launch_eager": -9, "infer_item": 8, "train_item": -43,
                 "infer_stall": 11, "infer_mask_per_call": -2, "train_mask_per_call": -5, "infer_fp32": 1,
                 "train_fp32": 3, "train_copy_pageable": -8, "infer_sdpa_math": 1, "train_sdpa_math": 4}

# A fifth H100 lease (tests/data/h100/fix_rounds_d), the whole set captured with the code of this
# model, out of sample: all 12 within 25% (train_launch_eager's -22% the same profiler cost as on the
# first lease: 2.5-3.3 µs an op in training where the trace's gaps say 3.5-4.0).
H100_D_ROUNDS = TEST_DATA / "h100" / "fix_rounds_d"
H100_D_ERRORS = {"infer_launch_eager": -4, "train_launch_eager": -22, "infer_item": -8, "train_item": -9,
                 "infer_stall": 1, "infer_mask_per_call": -5, "train_mask_per_call": -6, "infer_fp32": 1,
                 "train_fp32": 4, "train_copy_pageable": -1, "infer_sdpa_math": 1, "train_sdpa_math": 0}


def _rounds_db(tmp_path_factory, folder, afters=True):
    """The pairs' loops of `folder` loaded: the "before" loops (whose findings predict), and with
    `afters` the fixed ones too."""
    names = {pair[2] for pair in UNPROFILED_PAIRS + [MISSED_PAIR]}
    if afters:
        names |= {pair[3] for pair in UNPROFILED_PAIRS + [MISSED_PAIR]}
    return cli_loaded(tmp_path_factory, folder.name, *[folder / f"{name}.json.gz" for name in sorted(names)])


@pytest.fixture(scope="module")
def h100_db(tmp_path_factory):
    return _rounds_db(tmp_path_factory, H100_ROUNDS)


@pytest.fixture(scope="module")
def h100_b_found(tmp_path_factory):
    import tracekit

    return tracekit.findings(db=_rounds_db(tmp_path_factory, H100_B_ROUNDS, afters=False))


@pytest.fixture(scope="module")
def h100_found(h100_db):
    import tracekit

    return tracekit.findings(db=h100_db)


def _pre_rounds(folder=H100_ROUNDS):
    return _median_rounds(folder / "timings.csv", "pre")


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS + [MISSED_PAIR])
def test_on_another_host_findings_saving_holds_against_the_recaptured_fix(h100_found, rule, whatif, before, after):
    assert _saving_error(h100_found, H100_ROUNDS, rule, before, after) == pytest.approx(H100_ERRORS[before], abs=1.5)


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS + [MISSED_PAIR])
def test_on_a_second_lease_findings_saving_holds_against_the_recaptured_fix(h100_b_found, rule, whatif, before, after):
    assert _saving_error(h100_b_found, H100_B_ROUNDS, rule, before, after) == pytest.approx(H100_B_ERRORS[before], abs=1.5)


@pytest.fixture(scope="module")
def h100_d_found(tmp_path_factory):
    import tracekit

    return tracekit.findings(db=_rounds_db(tmp_path_factory, H100_D_ROUNDS, afters=False))


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS + [MISSED_PAIR])
def test_on_a_fifth_lease_every_pair_is_within_a_quarter_of_its_fix(h100_d_found, rule, whatif, before, after):
    error = _saving_error(h100_d_found, H100_D_ROUNDS, rule, before, after)
    assert error == pytest.approx(H100_D_ERRORS[before], abs=1.5) and abs(error) < 25


# An eighth lease (tests/data/h100/fix_rounds_e), asked for as an H200 and served by an H100, captured
# with the code as it stood (56ab4c9), nothing fitted on it since: 12 of 13 within 25%; the miss,
# train_item (+119%), on rounds 1.35x apart (its saving round by round from 82 to 1,530 µs).
H100_E_ROUNDS = TEST_DATA / "h100" / "fix_rounds_e"
H100_E_ERRORS = {"infer_launch_eager": 5, "train_launch_eager": 17, "infer_item": 7, "train_item": 119,
                 "infer_stall": 2, "infer_mask_per_call": -6, "train_mask_per_call": -6, "infer_fp32": 1,
                 "train_fp32": 4, "train_copy_pageable": -4, "infer_sdpa_math": 1, "train_sdpa_math": -1}


def _pace(folder, loop):
    """The longest over the shortest of `loop`'s unprofiled rounds before its trace, as
    benchmarks/fix_rounds.py reads them."""
    rounds = fix_rounds.timings(folder)[loop]["pre"]
    return max(rounds) / min(rounds)


def _pair_pace(folder, before, after):
    """The pair's pace: the wider of its two loops' (_pace)."""
    return max(_pace(folder, before), _pace(folder, after))


@pytest.fixture(scope="module")
def h100_e_found(tmp_path_factory):
    import tracekit

    return tracekit.findings(db=_rounds_db(tmp_path_factory, H100_E_ROUNDS, afters=False))


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS + [MISSED_PAIR])
def test_on_an_eighth_lease_each_pair_is_within_a_quarter_of_its_fix_where_the_host_held_its_pace(
        h100_e_found, rule, whatif, before, after):
    error = _saving_error(h100_e_found, H100_E_ROUNDS, rule, before, after)
    assert error == pytest.approx(H100_E_ERRORS[before], abs=1.5)
    held = _pair_pace(H100_E_ROUNDS, before, after) < fix_rounds.STEADY_HOST
    assert abs(error) < 25 or not held, (before, error)


def test_on_the_eighth_lease_the_one_miss_is_a_loop_whose_rounds_ran_far_apart():
    assert _pace(H100_E_ROUNDS, "train_item") == pytest.approx(1.35, abs=0.01)
    assert [loop for loop, error in H100_E_ERRORS.items() if abs(error) >= 25] == ["train_item"]


H100_G_ROUNDS = TEST_DATA / "h100" / "fix_rounds_g"
# A thirteenth lease (an H100), nothing fitted on it: every pair captured again with the code at
# 73da665, and the article's variants (H100_F_PAIRS) on a second host. 11 of 12 within 25%; the
# miss is the pageable copy, whose loop held its pace: its 64 MiB copies ran slower traced than
# unprofiled on this host, and the replay takes the traced copy.
H100_G_ERRORS = {"infer_launch_eager": -5, "train_launch_eager": 5, "infer_item": -12, "train_item": 21,
                 "infer_stall": 2, "infer_mask_per_call": -5, "train_mask_per_call": -7, "infer_fp32": 0,
                 "train_fp32": 4, "train_copy_pageable": 44, "infer_sdpa_math": 1, "train_sdpa_math": -1}


@pytest.fixture(scope="module")
def h100_g_db(tmp_path_factory):
    return _rounds_db(tmp_path_factory, H100_G_ROUNDS, afters=False)


@pytest.fixture(scope="module")
def h100_g_found(h100_g_db):
    import tracekit

    return tracekit.findings(db=h100_g_db)


@pytest.mark.parametrize("rule, whatif, before, after", UNPROFILED_PAIRS + [MISSED_PAIR])
def test_on_a_thirteenth_lease_each_pair_but_the_pageable_copy_is_within_a_quarter_of_its_fix(
        h100_g_found, rule, whatif, before, after):
    error = _saving_error(h100_g_found, H100_G_ROUNDS, rule, before, after)
    assert error == pytest.approx(H100_G_ERRORS[before], abs=1.5)
    assert (abs(error) < 25) == (before != "train_copy_pageable")


def test_on_the_thirteenth_lease_the_pageable_copy_is_slower_traced_than_the_loop_runs(h100_g_db):
    """The miss held its pace (its rounds 1.11x apart): its fix's step replays at what the pinned loop
    measured (2,737 µs a step against 2,733), but its own step, without the profiler, at 6,861 where
    its rounds took 5,604: the traced copies took 4,147 µs of each 7,503 µs step."""
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    rounds = _pre_rounds(H100_G_ROUNDS)
    assert _pair_pace(H100_G_ROUNDS, "train_copy_pageable", "train_copy_pinned") < fix_rounds.STEADY_HOST
    con = connect_for_queries(h100_g_db)
    try:
        unprofiled = TraceReplay(con, "train_copy_pageable").saving("no-profiler").fixed_us
        fixed = TraceReplay(con, "train_copy_pageable").saving("no-profiler; pin-copies").fixed_us
    finally:
        con.close()
    assert unprofiled == pytest.approx(6861.4, abs=0.5) and rounds["train_copy_pageable"] == pytest.approx(5603.5, abs=0.1)
    assert fixed == pytest.approx(rounds["train_copy_pinned"], rel=0.01)


H100_F_ROUNDS = TEST_DATA / "h100" / "fix_rounds_f"
# A twelfth lease (an H100), captured after the fused kernels' pace was set (attention_fix's
# FUSED_*_SHARE_OF_PEAK), nothing fitted on it: the article's variants as fix pairs, no per-step
# sync, B=8 H=16 S=1024 D=64 bf16 causal. The math backend against each fused backend SDPA can be
# pinned to (simt_gemm's fix, fuse-attention: one prediction for the three), and the article's naive
# module against its in-place form (hidden_copy) and against SDPA as it picks (unfused_attention).
# With the eager GEMMs' roofline the SDPA rows were -8, -6, -9, -11, -5, -11% and the naive -9, -4%.
H100_F_PAIRS = [("simt_gemm", "infer_sdpa_math", "infer_sdpa_flash", 1),
                ("simt_gemm", "infer_sdpa_math", "infer_sdpa_efficient", 4),
                ("simt_gemm", "infer_sdpa_math", "infer_sdpa_cudnn", 0),
                ("simt_gemm", "train_sdpa_math", "train_sdpa_flash", 1),
                ("simt_gemm", "train_sdpa_math", "train_sdpa_efficient", 8),
                ("simt_gemm", "train_sdpa_math", "train_sdpa_cudnn", 1),
                ("hidden_copy", "infer_naive", "infer_naive_inplace", 1),
                ("unfused_attention", "infer_naive", "infer_naive_sdpa", -1),
                ("hidden_copy", "train_naive", "train_naive_inplace", -1),
                ("unfused_attention", "train_naive", "train_naive_sdpa", 0)]


# The same pairs on the thirteenth lease (fix_rounds_g, another host)
H100_G_VARIANT_ERRORS = [1, 4, 0, -1, 7, -2, 2, -1, 1, -4]


@pytest.fixture(scope="module")
def variants_found(tmp_path_factory):
    """{folder: findings of the article's variants' "before" loops} of the twelfth and thirteenth leases."""
    import tracekit

    befores = sorted({f"{before}.json.gz" for _, before, _, _ in H100_F_PAIRS})
    return {folder: tracekit.findings(db=cli_loaded(tmp_path_factory, folder.name, *[folder / name for name in befores]))
            for folder in (H100_F_ROUNDS, H100_G_ROUNDS)}


@pytest.mark.parametrize("folder, rule, before, after, error",
                         [(H100_F_ROUNDS, *pair) for pair in H100_F_PAIRS]
                         + [(H100_G_ROUNDS, *pair[:3], error) for pair, error in zip(H100_F_PAIRS, H100_G_VARIANT_ERRORS)])
def test_the_articles_variants_as_fix_pairs_each_within_a_tenth_of_its_fix(variants_found, folder, rule, before, after,
                                                                          error):
    """Every pair within 10% on two hosts, whichever fused backend the fix lands on: flash, cuDNN and
    the memory-efficient kernel saved 2,895, 2,931 and 2,812 µs of the math backend's 2,991
    (inference, the twelfth lease), one prediction (2,933) for the three."""
    measured = _saving_error(variants_found[folder], folder, rule, before, after)
    assert measured == pytest.approx(error, abs=1.5)
    assert abs(measured) < 10


def _predicted_saving(found, rule, before, db=None):
    """findings' saving (µs a step) for the pair's `before` loop; `rule` a tuple of rules: their
    findings' fixes replayed together on `db`, without the profiler."""
    if isinstance(rule, tuple):
        return _saving_together(db, found, before, rule)
    # the rule's finding, whatever its fix's parameter on this host (the stall's gap threshold)
    return found[(found["trace"] == before) & (found["rule"] == rule)]["saving_us_per_step"].max()


def _saving_error(found, folder, rule, before, after, db=None):
    """findings' saving for the pair against the medians of its rounds before any profiler ran, in %."""
    predicted = _predicted_saving(found, rule, before, db)
    unprofiled = _pre_rounds(folder)
    measured = unprofiled[before] - unprofiled[after]
    return 100 * (predicted - measured) / measured


def _saving_together(db, found, trace, rules):
    """What the fixes of `trace`'s findings of `rules` save together, as the benchmark replays them
    (findings_vs_fixes.saving_together): the switch to SDPA's fixes are the chains' and the mask's sync."""
    from tracekit.store.database import connect_for_queries

    fixes = set(found[(found["trace"] == trace) & found["rule"].isin(rules)]["whatif"].dropna())
    assert {"fuse-attention-chains", "drop-sync:aten::to"} <= fixes
    con = connect_for_queries(db)
    try:
        return findings_vs_fixes.saving_together(con, found, trace, rules)
    finally:
        con.close()


def test_the_readme_table_holds_the_h100s_findings_too(h100_found):
    rows = _readme_rows(host=1)
    unprofiled = _pre_rounds()
    pairs = UNPROFILED_PAIRS + [MISSED_PAIR]
    assert set(rows) == {(before, after) for _, _, before, after in pairs}
    for rule, _, before, after in pairs:
        predicted = h100_found[(h100_found["trace"] == before) & (h100_found["rule"] == rule)]["saving_us_per_step"].max()
        shown, measured, error = rows[(before, after)]
        assert shown == pytest.approx(predicted, abs=0.6), before
        assert measured == pytest.approx(unprofiled[before] - unprofiled[after], abs=0.6), before
        assert error == round(100 * (predicted - measured) / measured), before


def test_on_another_host_every_loop_replays_without_the_profiler_near_its_unprofiled_step(h100_db):
    """The execution model out of sample: each of the H100's 24 loops, replayed without the profiler
    at the cost its own trace's gaps show, against its time before any profiler ran in its process:
    all within 25%, half within 1.5% (train_launch_eager the farthest, -22%)."""
    from tracekit.replay.savings import TraceReplay
    from tracekit.replay.whatif import whatif
    from tracekit.store.database import connect_for_queries

    unprofiled = _pre_rounds()
    con = connect_for_queries(h100_db)
    try:
        errors = {}
        for loop in sorted({name for pair in UNPROFILED_PAIRS + [MISSED_PAIR] for name in pair[2:]}):
            replayed = TraceReplay(con, loop).saving("no-profiler").fixed_us
            if replayed is None:  # too few ops back to back to estimate from: the loop as traced
                replayed = whatif(con, loop, []).mean("replayed_us")
            errors[loop] = 100 * (replayed - unprofiled[loop]) / unprofiled[loop]
    finally:
        con.close()
    assert len(errors) == 24 and all(abs(e) <= 25 for e in errors.values()), errors
    assert statistics.median(abs(e) for e in errors.values()) < 1.5
    assert min(errors, key=errors.get) == "train_launch_eager" and errors["train_launch_eager"] == pytest.approx(-22, abs=1)


def test_a_trace_whose_steady_steps_ran_at_unlike_paces_says_so(tmp_path):
    """tests/data/h100/fix_rounds_busy: a host that stalled the process mid-trace stretched
    train_item's steady steps to 18.2-57.8 ms; findings says its figures are their mean. Its
    train_no_item ran 16.6-25.0 ms; the first H100 host's train_item held one pace."""
    import tracekit

    db = tmp_path / "busy.duckdb"
    busy = TEST_DATA / "h100" / "fix_rounds_busy"
    result = invoke_cli("load", busy / "train_item.json.gz", H100_ROUNDS / "train_launch_eager.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    found = tracekit.findings(db=db)
    details = dict(zip(found[found["rule"] == "all_fixes"]["trace"], found[found["rule"] == "all_fixes"]["detail"]))
    assert "its steady steps took 18,246 to 57,786 µs as traced, not one pace" in details["train_item"]
    assert "not one pace" not in details["train_launch_eager"]


MODEL_ROUNDS = TEST_DATA / "h100" / "model_pairs"
SDPA_SWITCH = ("unfused_attention", "host_sync", "per_call_setup")  # the findings one switch answers
# Real models (capture/model_pairs.py: GPT-2, a small Llama, ResNet-18 from their configs), captured
# as the fix rounds are: the rule each pair's fix answers, findings' saving_us_per_step against the
# medians' saving, error in percent (benchmarks/fix_rounds.py). Before this round, loss.item() at the
# end of a GPT-2 training step got no host_sync finding (a wait with nothing launched after it in its
# step was left out), eager attention and AdamW's foreach passes no finding at all. Switching
# transformers' eager attention to SDPA answers three findings (its eager path also builds a causal
# mask each step from a CPU scalar copied with a sync: per_call_setup and host_sync): their fixes are
# replayed together, as benchmarks/findings_vs_fixes.py does (unfused_attention's alone: -8%, -35%).
MODEL_PAIRS = [("launch_bound", "llama_infer_eager", "llama_infer_graph", 0),
               ("host_sync", "gpt2_train_item", "gpt2_train_no_item", 21),
               ("pageable_copy", "resnet_train_pageable", "resnet_train_pinned", 1),
               ("all_fixes", "resnet_train_cpu_prep", "resnet_train_gpu_prep", -14),
               (SDPA_SWITCH, "gpt2_infer_eager_attn", "gpt2_infer_sdpa", -4),
               ("simt_gemm", "gpt2_train_fp32", "gpt2_train_tf32", 7),
               (SDPA_SWITCH, "gpt2_train_eager_attn", "gpt2_train_sdpa", -6),
               ("unfused_optimizer", "gpt2_train_adamw_foreach", "gpt2_train_adamw_fused", -3),
               ("gpu_idle", "resnet_train_loader_main", "resnet_train_loader_workers", -18)]


MODEL_B_ROUNDS = TEST_DATA / "h100" / "model_pairs_b"
# Six of the pairs captured again on another lease, out of sample: all within 25%, on a host less
# steady than the first (the eager Llama's rounds 1.50x apart).
MODEL_B_PAIRS = [("launch_bound", "llama_infer_eager", "llama_infer_graph", -15),
                 ("host_sync", "gpt2_train_item", "gpt2_train_no_item", -12),
                 ("pageable_copy", "resnet_train_pageable", "resnet_train_pinned", -22),
                 (SDPA_SWITCH, "gpt2_infer_eager_attn", "gpt2_infer_sdpa", -10),
                 ("unfused_optimizer", "gpt2_train_adamw_foreach", "gpt2_train_adamw_fused", -4),
                 ("gpu_idle", "resnet_train_loader_main", "resnet_train_loader_workers", -23)]


@pytest.fixture(scope="module")
def model_b_db(tmp_path_factory):
    return cli_loaded(tmp_path_factory, "model_pairs_b", *[MODEL_B_ROUNDS / f"{before}.json.gz" for _, before, _, _ in MODEL_B_PAIRS])


@pytest.fixture(scope="module")
def model_b_found(model_b_db):
    import tracekit

    return tracekit.findings(db=model_b_db)


@pytest.mark.parametrize("rule, before, after, error", MODEL_B_PAIRS)
def test_on_real_models_captured_again_findings_saving_holds(model_b_found, model_b_db, rule, before, after, error):
    assert _saving_error(model_b_found, MODEL_B_ROUNDS, rule, before, after, model_b_db) == pytest.approx(error, abs=1.5)


@pytest.fixture(scope="module")
def model_db(tmp_path_factory):
    return cli_loaded(tmp_path_factory, "model_pairs", *sorted({MODEL_ROUNDS / f"{before}.json.gz" for _, before, _, _ in MODEL_PAIRS}))


@pytest.fixture(scope="module")
def model_found(model_db):
    import tracekit

    return tracekit.findings(db=model_db)


@pytest.mark.parametrize("rule, before, after, error", MODEL_PAIRS)
def test_on_real_models_findings_saving_holds_against_the_captured_fix(model_found, model_db, rule, before, after, error):
    assert _saving_error(model_found, MODEL_ROUNDS, rule, before, after, model_db) == pytest.approx(error, abs=1.5)



def test_a_loss_read_at_the_end_of_each_step_is_the_steps_first_fix(model_found):
    """gpt2_train_item: 5.8 ms of its 31.5 ms replayed step, where a CUDA graph would save 4.9: the
    fix is to stop reading the loss each step, and the finding is high."""
    rows = model_found[model_found["trace"] == "gpt2_train_item"]
    first = rows.iloc[0]
    assert (first["rule"], first["whatif"], first["severity"]) == ("host_sync", "drop-sync:aten::item", "high")
    assert "aten::item" in first["title"] and "read it every N steps" in first["fix"]


def test_a_saving_far_above_the_rules_figure_says_why(model_found):
    """gpt2_train_item: the loss's .item() waits 213 µs a step, but without it the CPU launches the
    next step while the GPU runs this one: 5.8 ms replayed, where the captured fix saved 4.8 ms (the
    +20% this file's pairs hold). As traced, the profiler's cost keeps the CPU the bound either way.
    gpu_idle's own drop-sync finding on it says the same; findings whose saving is near their figure
    say nothing of it."""
    rows = model_found[model_found["trace"] == "gpt2_train_item"].set_index("rule")
    item = rows.loc["host_sync"]
    assert item["saving_us_per_step"] > 20 * item["estimate_us_per_step"]
    assert item["traced_saving_us_per_step"] < 2 * item["estimate_us_per_step"]
    assert (f"replayed, the fix saves {item['saving_us_per_step']:,.1f} µs a step, more than the "
            f"{item['estimate_us_per_step']:,.1f} the rule counts: the wait also held the CPU back") in item["detail"]
    before, after = re.search(r"the two overlap instead of taking turns \(the step, replayed without the profiler, "
                              r"from ([\d,.]+) µs to ([\d,.]+)\)", item["detail"]).groups()
    assert float(before.replace(",", "")) - float(after.replace(",", "")) == pytest.approx(item["saving_us_per_step"], abs=0.11)
    assert f"as traced it saves {item['traced_saving_us_per_step']:,.1f}" in item["detail"]
    # gpu_idle's drop-sync names the sync by the op that made it, as host_sync does: one fix, one saving
    waits = rows[rows["whatif"].str.startswith("drop-sync", na=False)]
    assert list(waits["whatif"]) == ["drop-sync:aten::item", "drop-sync:aten::item"]
    assert waits["saving_us_per_step"].nunique() == 1
    assert waits["detail"].str.contains("more than the").all()
    assert item["detail"].endswith("; the same saving as 1 other finding of this trace (`gpu_idle`): their fixes "
                                   "replay the same, one saving, not to be added")
    assert rows.loc["gpu_idle"].set_index("whatif").loc["drop-sync:aten::item", "detail"].endswith(
        "(`host_sync`): their fixes replay the same, one saving, not to be added")
    both = model_found.dropna(subset=["saving_us_per_step", "estimate_us_per_step"])
    near = both[(both["saving_us_per_step"] < 2 * both["estimate_us_per_step"]) & (both["rule"] != "all_fixes")]
    assert len(near) > 10 and not near["detail"].str.contains("more than the").any()
    far = both[(both["saving_us_per_step"] >= 2 * both["estimate_us_per_step"])
               & (both["saving_us_per_step"] - both["estimate_us_per_step"] >= 1000)]
    assert far["detail"].str.contains("more than the").all()


def test_eager_attention_is_found_and_its_fused_form_replayed(model_found):
    row = model_found[(model_found["trace"] == "gpt2_infer_eager_attn") & (model_found["rule"] == "unfused_attention")]
    assert len(row) == 1
    row = row.iloc[0]
    assert row["whatif"] == "fuse-attention-chains" and row["severity"] == "high"
    assert row["title"].startswith("Attention computed op by op: 6 chain(s) of softmax(Q·Kᵀ)·V per step")
    assert "1024 queries by 1024 keys, head dimension 64" in row["detail"]
    assert 'attn_implementation="sdpa"' in row["fix"]


def test_input_preparation_on_the_main_thread_is_host_work_not_launch_rate(model_found):
    """resnet_train_cpu_prep normalises each uint8 batch with torch on the CPU (aten::to, sub, div:
    21 ms a traced step, no CUDA call) before its copy: gpu_idle names that host work, with workers
    or the GPU as the fix, and drop-host-ops replays it gone."""
    rows = model_found[(model_found["trace"] == "resnet_train_cpu_prep") & (model_found["rule"] == "gpu_idle")]
    host = rows[rows["whatif"] == "drop-host-ops:100"]
    assert len(host) == 1
    host = host.iloc[0]
    assert "the CPU computed on host tensors, making no CUDA call (most in aten::div)" in host["title"]
    assert "DataLoader workers" in host["fix"] and "on the GPU" in host["fix"]
    assert 12_000 < host["saving_us_per_step"] < 20_000  # of a 54.0 ms replayed step


def test_dropping_host_ops_leaves_the_ops_that_launch_gpu_work(model_db):
    """drop-host-ops takes the time of ATen ops that made no CUDA call: on the pageable loop, whose
    only long op is the copy (a cudaMemcpyAsync inside), it saves nothing."""
    from tracekit.replay.fixes import parse_fix
    from tracekit.replay.whatif import whatif
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(model_db)  # MODEL_PAIRS's loops, resnet_train_pageable and _cpu_prep among them
    try:
        pageable = whatif(con, "resnet_train_pageable", [parse_fix("drop-host-ops:100")])
        prep = whatif(con, "resnet_train_cpu_prep", [parse_fix("drop-host-ops:100")])
        regex = whatif(con, "resnet_train_cpu_prep", [parse_fix("drop-cpu:^aten::(to|sub|div)$")])
        both = whatif(con, "resnet_train_cpu_prep", [parse_fix("drop-cpu:^aten::(to|sub|div)$"), parse_fix("drop-host-ops:100")])
    finally:
        con.close()
    assert pageable.saving_us < 0.01 * pageable.mean("replayed_us")
    assert prep.saving_us > 15_000  # traced: aten::to, sub and div on the CPU, 21 ms a step
    # two fixes that drop the same CPU time drop it once
    assert both.saving_us == pytest.approx(max(regex.saving_us, prep.saving_us), rel=0.02)


def cli_loaded_once(tmp_path, *files):
    db = tmp_path / "loaded.duckdb"
    result = invoke_cli("load", *files, "--db", db)
    assert result.exit_code == 0, result.output
    return db


def test_fusing_the_chains_leaves_the_math_backends_own_to_fuse_attention(fixes_db):
    """train_sdpa_math's only chain is inside SDPA's math backend: fuse-attention-chains changes
    nothing there, and together with fuse-attention saves what fuse-attention alone does (an item
    is fused once)."""
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(fixes_db)
    try:
        found = TraceReplay(con, "train_sdpa_math").savings(
            ["fuse-attention-chains", "fuse-attention", "fuse-attention; fuse-attention-chains"])
    finally:
        con.close()
    assert found["fuse-attention-chains"].why == "the fix changes nothing the trace shows"
    assert found["fuse-attention"].saving_us > 3000
    assert found["fuse-attention; fuse-attention-chains"].saving_us == pytest.approx(found["fuse-attention"].saving_us)


def test_adamws_foreach_passes_are_found_and_its_fused_step_is_not(model_found, tmp_path):
    """AdamW's default step: 40 foreach kernels moving 20 times the parameters' bytes, where its
    fused step moves 7 times: 1.7 ms of a GPU-bound 25.8 ms step, replayed. The fused loop's trace
    has no such finding."""
    import tracekit

    row = model_found[(model_found["trace"] == "gpt2_train_adamw_foreach") & (model_found["rule"] == "unfused_optimizer")]
    assert len(row) == 1
    row = row.iloc[0]
    assert row["title"] == "AdamW steps with its foreach implementation: 40 kernels, 2535.3 µs of GPU time per step"
    assert "20.0 times the parameters' 327.7 MB" in row["detail"] and "fused=True" in row["fix"]
    assert row["whatif"] == "fuse-optimizer" and row["saving_us_per_step"] == pytest.approx(1712, abs=20)
    fused = cli_loaded_once(tmp_path, MODEL_ROUNDS / "gpt2_train_adamw_fused.json.gz")
    assert len(tracekit.findings(db=fused, rule="unfused_optimizer")) == 0


MODEL_C_ROUNDS = TEST_DATA / "h100" / "model_pairs_c"
# A third call, for what the first two did not cover: SGD's fused step (unfused_optimizer takes SGD
# with momentum: its foreach step moves 8 times the parameters' bytes, its fused one 5), attention
# whose scores come from baddbmm (its first input the mask as a bias, Q and Kᵀ after it), and bf16
# autocast as the fix of fp32 GEMMs, where simt_gemm's finding replays TF32's.
MODEL_C_PAIRS = [("unfused_optimizer", "gpt2_train_sgd_foreach", "gpt2_train_sgd_fused", -9),
                 ("unfused_attention", "baddbmm_infer_eager", "baddbmm_infer_sdpa", -7),
                 ("unfused_attention", "baddbmm_train_eager", "baddbmm_train_sdpa", -4),
                 ("simt_gemm", "gpt2_train_fp32", "gpt2_train_bf16", -4)]


def _pairs_loaded(tmp_path_factory, folder, pairs, afters=True):
    """A database of the loops of each of `pairs` (rule, before, after, error) in `folder`: the "before"
    loops (whose findings predict), and with `afters` the fixed ones too."""
    return cli_loaded(tmp_path_factory, folder.name, *[folder / f"{name}.json.gz" for _, before, after, _ in pairs
                                                       for name in ((before, after) if afters else (before,))])


@pytest.fixture(scope="module")
def model_c_db(tmp_path_factory):
    return _pairs_loaded(tmp_path_factory, MODEL_C_ROUNDS, MODEL_C_PAIRS)


@functools.lru_cache(maxsize=None)
def _findings_of(db):
    import tracekit

    return tracekit.findings(db=db)


@pytest.fixture(scope="module")
def model_c_found(model_c_db):
    return _findings_of(model_c_db)


def test_attention_whose_scores_come_from_baddbmm_is_found(model_c_db):
    """baddbmm(bias, Q, Kᵀ): the chain's shapes are read from its second and third inputs, 6 chains a
    step of 1024 queries by 1024 keys (512 in training), head dimension 64; the SDPA loops have none."""
    import tracekit

    chains = tracekit.query(sql="SELECT trace, count(*) AS n, min(queries) AS s, max(keys) AS t, max(head_dim) AS d "
                                "FROM attention_chains JOIN steady_steps USING (trace, step) GROUP BY trace ORDER BY trace",
                            db=model_c_db)
    steps = dict(tracekit.query(sql="SELECT trace, count(*) AS n FROM steady_steps GROUP BY trace", db=model_c_db).values)
    rows = {row.trace: (row.n / steps[row.trace], row.s, row.t, row.d) for row in chains.itertuples()}
    assert rows == {"baddbmm_infer_eager": (6, 1024, 1024, 64), "baddbmm_train_eager": (6, 512, 512, 64)}


def test_sgds_foreach_momentum_step_is_found_and_its_fused_step_is_not(model_c_found):
    """SGD with momentum, foreach: 15 kernels moving 8 times the parameters' 327.7 MB a step (the
    buffers' mul_ and add_, the update's add_), where the fused step moves 5 times: 375 µs of GPU
    time, 395 µs of step replayed; the fused loop's trace has no such finding."""
    rows = model_c_found[model_c_found["rule"] == "unfused_optimizer"]
    sgd = rows[rows["trace"] == "gpt2_train_sgd_foreach"].iloc[0]
    assert sgd["title"] == "SGD steps with its foreach implementation: 15 kernels, 1000.9 µs of GPU time per step"
    assert "8.0 times the parameters' 327.7 MB, where a fused step moves 5 times" in sgd["detail"]
    assert "torch.optim.SGD(model.parameters(), ..., fused=True)" in sgd["fix"]
    assert sgd["estimate_us_per_step"] == pytest.approx(375.3, abs=1) and sgd["saving_us_per_step"] == pytest.approx(395, abs=10)
    assert "gpt2_train_sgd_fused" not in set(rows["trace"])


def test_sgd_without_momentum_has_nothing_to_fuse(tmp_path):
    """Plain SGD's foreach step is one update (params += -lr * grads), the pass its fused step makes
    too: optimizer_steps gives its fused bytes as the bytes it moves, and no finding."""
    import tracekit

    db = cli_loaded_once(tmp_path, H100_ROUNDS / "train_launch_eager.json.gz")
    steps = tracekit.query(sql="SELECT optimizer, foreach_kernels, foreach_bytes, fused_bytes FROM optimizer_steps", db=db)
    assert set(steps["optimizer"]) == {"SGD"} and (steps["foreach_kernels"] == 2).all()
    assert (steps["fused_bytes"] == steps["foreach_bytes"]).all()
    assert len(tracekit.findings(db=db, rule="unfused_optimizer")) == 0


def test_an_optimizer_step_whose_bytes_are_unknown_is_reported_without_a_saving(tmp_path):
    """Where a foreach kernel has no work model (its bytes NULL: here the momentum's mul_ kernels
    made so in a copy of the SGD capture's database), the rule still reports the foreach steps, says
    the bytes are unknown and estimates nothing, rather than dropping them; the replay has nothing
    to fuse, so the rule's severity stands."""
    import duckdb
    import tracekit

    db = cli_loaded_once(tmp_path, MODEL_C_ROUNDS / "gpt2_train_sgd_foreach.json.gz")
    con = duckdb.connect(str(db))
    try:
        con.execute("UPDATE kernel_rows SET bytes = NULL WHERE rowid IN (SELECT k.rowid FROM kernel_rows k "
                    "JOIN cpu_op_rows o ON o.trace_id = k.trace_id AND o.op_id = k.cpu_op_id "
                    "WHERE o.name = 'aten::_foreach_mul_')")
    finally:
        con.close()
    row = tracekit.findings(db=db, rule="unfused_optimizer").iloc[0]
    assert row["severity"] == "medium" and "the kernels' bytes are unknown" in row["detail"]
    assert row["estimate_us_per_step"] != row["estimate_us_per_step"]  # NULL: not estimated


def test_a_cuda_graphs_nodes_run_as_close_as_the_trace_shows(h100_db):
    """cuda-graph runs the GPU work a graph holds at its nodes' gap: a trace's own graph launches
    show it (0.448 µs in train_launch_graph's), else 0.45 µs (the H100 and H200 graphs' largest). On
    the eager loop, the graph replays a step at 809 µs where the captured graph ran 723 unprofiled,
    and the autograd thread's start (its lag after backward() handed over) is the graph's too."""
    from tracekit.replay.fixes import GRAPH_NODE_GAP_NS, graph_node_gap, parse_fix
    from tracekit.replay.job import Jobs
    from tracekit.replay.profiler_cost import cost_per_op_us
    from tracekit.replay.whatif import whatif
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(h100_db)  # H100_ROUNDS's loops, train_launch_eager and _graph among them
    try:
        gaps = {trace: graph_node_gap(Jobs(con).of(trace).graphs[trace]) for trace in ("train_launch_graph", "train_launch_eager")}
        fixed = whatif(con, "train_launch_eager", [parse_fix(f"no-profiler:{cost_per_op_us(con, 'train_launch_eager')}"),
                                                   parse_fix("cuda-graph")]).mean("fixed_us")
    finally:
        con.close()
    assert gaps == {"train_launch_graph": 448, "train_launch_eager": GRAPH_NODE_GAP_NS}
    assert fixed == pytest.approx(809, abs=5)
    assert fixed < 1.25 * _pre_rounds()["train_launch_graph"]


H200_C_ROUNDS = TEST_DATA / "h200" / "fix_rounds_c"
# The launch and .item() pairs captured again on an H200 lease (out of sample, the protocol of
# tests/data/h100/fix_rounds): error in percent. train_item's rounds ran 1.37x and 1.60x apart.
H200_C_ERRORS = {"infer_launch_eager": 1, "train_launch_eager": -24, "infer_item": -19, "train_item": -58}


@pytest.fixture(scope="module")
def h200_c(tmp_path_factory):
    import tracekit

    # the "before" loops alone: the tests read the findings of those (findings are a trace's own)
    db = cli_loaded(tmp_path_factory, "fix_rounds_c", *[H200_C_ROUNDS / f"{before}.json.gz" for before in sorted(H200_C_ERRORS)])
    return db, tracekit.findings(db=db)


@pytest.mark.parametrize("rule, whatif, before, after",
                         [pair for pair in UNPROFILED_PAIRS + [MISSED_PAIR] if pair[2] in H200_C_ERRORS])
def test_on_an_h200_lease_findings_saving_holds_against_the_recaptured_fix(h200_c, rule, whatif, before, after):
    db, found = h200_c
    error = _saving_error(found, H200_C_ROUNDS, rule, before, after)
    assert error == pytest.approx(H200_C_ERRORS[before], abs=1.5)


DDP_ROUNDS = TEST_DATA / "h200" / "ddp_pairs"


def test_ddps_bucket_copies_are_found_and_their_fix_saves_what_the_cpu_bound_step_allows(tmp_path):
    """DDP copying each bucket back to the gradients (one rank, tests/data/h200/ddp_pairs): 8 copies
    of 64 MiB, 264.7 µs of GPU time a step, the fix gradient_as_bucket_view=True; the fixed loop's
    GPU busy time is 269 µs less, but its step is the CPU's (4.3 ms unprofiled against 2.6 ms of GPU
    work), so the replay saves nothing, and nothing is what the unprofiled rounds show: their
    medians 140 µs the other way, each round's saving from -384 to 83 µs."""
    import tracekit

    db = cli_loaded_once(tmp_path, *sorted(DDP_ROUNDS.glob("*.json.gz")))
    found = tracekit.findings(db=db)
    row = found[(found["rule"] == "hidden_copy") & (found["whatif"] ==
                                                    "drop-copies:torch.distributed.ddp.reducer::copy_bucket_to_grad")]
    assert list(row["trace"]) == ["ddp_bucket_copy_rank0"]
    row = row.iloc[0]
    assert row["title"] == "8 Memcpy DtoD of 64 MiB per step from torch.distributed.ddp.reducer::copy_bucket_to_grad"
    assert "gradient_as_bucket_view=True" in row["fix"]
    assert row["estimate_us_per_step"] == pytest.approx(264.7, abs=0.1) and row["saving_us_per_step"] == 0
    busy = dict(tracekit.query(sql="SELECT trace, gpu_us_per_step FROM step_totals", db=db).values)
    assert busy["ddp_bucket_copy_rank0"] - busy["ddp_bucket_view_rank0"] == pytest.approx(row["estimate_us_per_step"], rel=0.05)
    rounds = {}
    for line in csv.DictReader(open(DDP_ROUNDS / "timings.csv")):
        if line["phase"] == "pre":
            rounds.setdefault(line["loop"], []).append(float(line["step_us"]))
    paired = [b - a for b, a in zip(rounds["ddp_bucket_copy"], rounds["ddp_bucket_view"])]
    measured = statistics.median(rounds["ddp_bucket_copy"]) - statistics.median(rounds["ddp_bucket_view"])
    assert measured == pytest.approx(-140.3, abs=0.1) and min(paired) < row["saving_us_per_step"] < max(paired)


MODEL_D_ROUNDS = TEST_DATA / "h100" / "model_pairs_d"
# The real-model pairs captured again on a third H100 lease, out of sample (five of its eleven
# pairs kept here). On this host the fp32 GPT-2 loop ran so far ahead of its GPU that the launch
# queue filled: 100 launches a step were held, 41 ms of its 57 ms CPU span.
MODEL_D_PAIRS = [("launch_bound", "llama_infer_eager", "llama_infer_graph", -13),
                 ("pageable_copy", "resnet_train_pageable", "resnet_train_pinned", -4),
                 (SDPA_SWITCH, "gpt2_infer_eager_attn", "gpt2_infer_sdpa", -4),
                 ("simt_gemm", "gpt2_train_fp32", "gpt2_train_tf32", 6),
                 ("unfused_attention", "baddbmm_infer_eager", "baddbmm_infer_sdpa", -7)]


@pytest.fixture(scope="module")
def model_d_db(tmp_path_factory):
    # the "before" loops alone: the tests read no fixed loop's trace here (findings are a trace's own)
    return _pairs_loaded(tmp_path_factory, MODEL_D_ROUNDS, MODEL_D_PAIRS, afters=False)


MODEL_E_ROUNDS = TEST_DATA / "h200" / "model_pairs_e"
# GPT-2 trained in fp32 on an H200, its launch queue full: two fixes other than TF32 on such a loop.
# The SDPA switch keeps fp32, so its fused kernel is the memory-efficient one.
MODEL_E_PAIRS = [("unfused_optimizer", "gpt2_train_fp32_adamw_foreach", "gpt2_train_fp32_adamw_fused", 5),
                 (SDPA_SWITCH, "gpt2_train_fp32_eager_attn", "gpt2_train_fp32_sdpa", 0)]


@pytest.fixture(scope="module")
def model_e_db(tmp_path_factory):
    return _pairs_loaded(tmp_path_factory, MODEL_E_ROUNDS, MODEL_E_PAIRS)


MODEL_F_ROUNDS = TEST_DATA / "h100" / "model_pairs_f"
# fp32 attention to SDPA on an H100: as captured, out of sample for the memory-efficient kernel's
# pace (then the chains' SIMT GEMMs' own time, forward and backward), -18% and -28%; the fused
# forward ran at 0.68x its GEMMs' time in GPT-2's inference. With the forward at 0.7x of it
# (attention_fix.FUSED_FP32_FORWARD, read off these and model_pairs_g's forwards):
MODEL_F_PAIRS = [(SDPA_SWITCH, "gpt2_infer_fp32_eager_attn", "gpt2_infer_fp32_sdpa", 0),
                 ("unfused_attention", "baddbmm_train_fp32_eager", "baddbmm_train_fp32_sdpa", -14)]


@pytest.fixture(scope="module")
def model_f_db(tmp_path_factory):
    # the "before" loops alone: the tests read no fixed loop's trace here (findings are a trace's own)
    return _pairs_loaded(tmp_path_factory, MODEL_F_ROUNDS, MODEL_F_PAIRS, afters=False)


MODEL_G_ROUNDS = TEST_DATA / "h100" / "model_pairs_g"
# A sixth lease: the baddbmm decoder's fp32 forward (causal), and the same model as an encoder (no
# causal mask) in bf16 and fp32. As the chains' GEMMs' own time the fp32 forwards were -46% and -19%,
# the encoder's training +14%; with the forward at 0.7x: -18%, +23%, and the encoder's training +37%,
# a miss: without the causal skip its fused kernels ran 0.84x (forward) and 1.03x (trained) the
# GEMMs' time, where the causal decoders' ran 0.57-0.68x and 0.77-1.07x, and an eager chain does not
# say whether its mask was causal.
MODEL_G_PAIRS = [("unfused_attention", "baddbmm_infer_fp32_eager", "baddbmm_infer_fp32_sdpa", -18),
                 ("unfused_attention", "encoder_infer_eager", "encoder_infer_sdpa", -6),
                 ("unfused_attention", "encoder_infer_fp32_eager", "encoder_infer_fp32_sdpa", 23),
                 ("unfused_attention", "encoder_train_fp32_eager", "encoder_train_fp32_sdpa", 37)]


@pytest.fixture(scope="module")
def model_g_db(tmp_path_factory):
    # the "before" loops alone: the tests read no fixed loop's trace here (findings are a trace's own)
    return _pairs_loaded(tmp_path_factory, MODEL_G_ROUNDS, MODEL_G_PAIRS, afters=False)


MODEL_H_ROUNDS = TEST_DATA / "h100" / "model_pairs_h"
# A seventh lease, captured after the fused fp32 forward's pace was set: a Llama's fp32 forward (its
# fused forward ran 0.75x its chains' GEMMs' time) and GPT-2 trained in fp32 on an H100 (1.05x, as
# on the H200).
MODEL_H_PAIRS = [(SDPA_SWITCH, "llama_infer_fp32_eager_attn", "llama_infer_fp32_sdpa", 12),
                 (SDPA_SWITCH, "gpt2_train_fp32_eager_attn", "gpt2_train_fp32_sdpa", 10)]


@pytest.fixture(scope="module")
def model_h_db(tmp_path_factory):
    # the "before" loops alone: the tests read no fixed loop's trace here (findings are a trace's own)
    return _pairs_loaded(tmp_path_factory, MODEL_H_ROUNDS, MODEL_H_PAIRS, afters=False)


MODEL_I_ROUNDS = TEST_DATA / "h100" / "model_pairs_i"
# An eighth lease: the encoder trained in fp32 captured again, +39% where model_pairs_g gave +37%: the
# miss is the model's (a causal decoder's fused pace for a chain whose mask the trace cannot tell
# causal or not), not the host's (each loop's rounds within 1.001x).
MODEL_I_PAIRS = [("unfused_attention", "encoder_train_fp32_eager", "encoder_train_fp32_sdpa", 39)]


@pytest.fixture(scope="module")
def model_i_db(tmp_path_factory):
    # the "before" loops alone: the tests read no fixed loop's trace here (findings are a trace's own)
    return _pairs_loaded(tmp_path_factory, MODEL_I_ROUNDS, MODEL_I_PAIRS, afters=False)


MODEL_L_ROUNDS = TEST_DATA / "h100" / "model_pairs_l"
# An eleventh lease (an H100), captured after the fused kernels' pace (attention_fix's
# FUSED_*_SHARE_OF_PEAK) was read off the leases above: 16-bit attention on shapes it was not read
# off (a Llama's bf16 forward with heads of 64 and of 128, the encoder trained in bf16), and GPT-2's
# forward again. With the eager GEMMs' roofline the replay said +63%, -1%, -10% and -9%.
MODEL_L_PAIRS = [(SDPA_SWITCH, "llama_infer_eager_attn", "llama_infer_sdpa", 63),
                 (SDPA_SWITCH, "llama_infer_hd128_eager_attn", "llama_infer_hd128_sdpa", 1),
                 ("unfused_attention", "encoder_train_eager", "encoder_train_sdpa", -4),
                 (SDPA_SWITCH, "gpt2_infer_eager_attn", "gpt2_infer_sdpa", -4)]


@pytest.fixture(scope="module")
def model_l_db(tmp_path_factory):
    # the before loops, and the Llama's SDPA loop, whose own replay says where its pair's miss lies
    return cli_loaded(tmp_path_factory, "model_pairs_l", *[MODEL_L_ROUNDS / f"{before}.json.gz" for _, before, _, _ in MODEL_L_PAIRS],
                      MODEL_L_ROUNDS / "llama_infer_sdpa.json.gz")


@pytest.mark.parametrize("rule, before, after, error", MODEL_L_PAIRS)
def test_out_of_the_fused_paces_sample_each_pair_holds_but_where_the_profilers_cost_is_misjudged(
        model_l_db, rule, before, after, error):
    """Three of four within 25% (the loops' rounds within 1.04x). The miss, the Llama's forward with
    heads of 64 (+63%), is CPU-bound on both sides, and its fixed loop's own trace, replayed without
    the profiler, runs 7,953 µs a step where its rounds took 10,720: the trace's gaps (1.08 µs) say
    4.3 µs a recorded op, its ops cost 2.4 (traced less unprofiled, over the ops), so the replay takes
    too much off both loops, the more where the fix leaves the CPU the step's bound."""
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    measured = _saving_error(_findings_of(model_l_db), MODEL_L_ROUNDS, rule, before, after, model_l_db)
    assert measured == pytest.approx(error, abs=1.5)
    assert _pair_pace(MODEL_L_ROUNDS, before, after) < fix_rounds.STEADY_HOST
    assert (abs(measured) < 25) == (before != "llama_infer_eager_attn")
    if before == "llama_infer_eager_attn":
        con = connect_for_queries(model_l_db)
        try:
            own = TraceReplay(con, after).saving("no-profiler").fixed_us
        finally:
            con.close()
        assert own == pytest.approx(7953.1, abs=1) and _pre_rounds(MODEL_L_ROUNDS)[after] == pytest.approx(10720.2, abs=0.1)


@pytest.mark.parametrize("db_name, folder, rule, before, after, error",
                         [("model_c_db", MODEL_C_ROUNDS, *pair) for pair in MODEL_C_PAIRS]
                         + [("model_d_db", MODEL_D_ROUNDS, *pair) for pair in MODEL_D_PAIRS]
                         + [("model_e_db", MODEL_E_ROUNDS, *pair) for pair in MODEL_E_PAIRS]
                         + [("model_f_db", MODEL_F_ROUNDS, *pair) for pair in MODEL_F_PAIRS]
                         + [("model_g_db", MODEL_G_ROUNDS, *pair) for pair in MODEL_G_PAIRS]
                         + [("model_h_db", MODEL_H_ROUNDS, *pair) for pair in MODEL_H_PAIRS]
                         + [("model_i_db", MODEL_I_ROUNDS, *pair) for pair in MODEL_I_PAIRS])
def test_on_later_calls_and_leases_findings_saving_holds_against_the_captured_fix(request, db_name, folder, rule,
                                                                                  before, after, error):
    db = request.getfixturevalue(db_name)
    assert _saving_error(_findings_of(db), folder, rule, before, after, db) == pytest.approx(error, abs=1.5)


# A ninth lease (tests/data/h100/model_pairs_j), asked for as an H200 and served by an H100, captured
# with the code at 867ff22, nothing fitted on it: the Llama trained, whose four pairs no lease had
# captured before (the "before" loops' traces kept: their findings predict; the "after" loops timed).
# The host ran the CPU-bound loops' rounds 1.23-1.33x apart; the GPU-bound fp32 loop held its pace.
MODEL_J_ROUNDS = TEST_DATA / "h100" / "model_pairs_j"
MODEL_J_PAIRS = [("host_sync", "llama_train_item", "llama_train_no_item", -55),
                 ("simt_gemm", "llama_train_fp32", "llama_train_tf32", 13),
                 (SDPA_SWITCH, "llama_train_eager_attn", "llama_train_sdpa", 66),
                 ("unfused_optimizer", "llama_train_adamw_foreach", "llama_train_adamw_fused", 13)]


@pytest.fixture(scope="module")
def model_j_db(tmp_path_factory):
    return _pairs_loaded(tmp_path_factory, MODEL_J_ROUNDS, MODEL_J_PAIRS, afters=False)


@pytest.mark.parametrize("rule, before, after, error", MODEL_J_PAIRS)
def test_on_a_new_model_each_pair_is_within_a_quarter_of_its_fix_where_the_host_held_its_pace(
        model_j_db, rule, before, after, error):
    measured = _saving_error(_findings_of(model_j_db), MODEL_J_ROUNDS, rule, before, after, model_j_db)
    assert measured == pytest.approx(error, abs=1.5)
    held = _pair_pace(MODEL_J_ROUNDS, before, after) < fix_rounds.STEADY_HOST
    assert abs(measured) < 25 or not held, (before, measured)


def test_on_the_ninth_lease_the_misses_are_loops_whose_rounds_ran_far_apart():
    """.item()'s removal saved 5.8 ms a step by the rounds' medians, where round by round it saved
    from -1.0 to 15.6 ms; only the fp32 loop, GPU-bound, held one pace."""
    paces = {before: _pair_pace(MODEL_J_ROUNDS, before, after) for _, before, after, _ in MODEL_J_PAIRS}
    assert [before for before, pace in paces.items() if pace < fix_rounds.STEADY_HOST] == ["llama_train_fp32"]
    assert paces["llama_train_item"] == pytest.approx(1.33, abs=0.01)
    assert paces["llama_train_eager_attn"] == pytest.approx(1.32, abs=0.01)


# The Llama's two misses captured again on a tenth lease (tests/data/h100/model_pairs_k, an H100, the
# code at a4d8b0d): the same traces' predictions, another host's measurements.
MODEL_K_ROUNDS = TEST_DATA / "h100" / "model_pairs_k"
MODEL_K_PAIRS = [pair for pair in MODEL_J_PAIRS if pair[1] in ("llama_train_item", "llama_train_eager_attn")]


@pytest.fixture(scope="module")
def model_k_db(tmp_path_factory):
    return _pairs_loaded(tmp_path_factory, MODEL_K_ROUNDS, MODEL_K_PAIRS, afters=False)


@pytest.mark.parametrize("rule, before, after, error", MODEL_K_PAIRS)
def test_captured_again_a_pairs_prediction_holds_where_its_measurement_moves(model_j_db, model_k_db, rule,
                                                                            before, after, error):
    """Each trace predicts within 15% of the other lease's (.item() 2,612 and 2,787 µs; SDPA 7,224
    and 8,139), where the unprofiled rounds' medians moved: .item()'s saving from 5,792 µs to -1,060
    (the fixed loop slower, its rounds 1.32x apart), SDPA's from 4,357 to 2,630. SDPA's is
    over-predicted on both leases (+66%, +210%): a miss the host's noise does not explain alone."""
    first = _predicted_saving(_findings_of(model_j_db), rule, before, model_j_db)
    again = _predicted_saving(_findings_of(model_k_db), rule, before, model_k_db)
    assert again == pytest.approx(first, rel=0.15)
    measured = [_pre_rounds(folder)[before] - _pre_rounds(folder)[after] for folder in (MODEL_J_ROUNDS, MODEL_K_ROUNDS)]
    if before == "llama_train_item":
        assert measured[0] > first > 0 > measured[1]
    else:
        assert first > 1.25 * max(measured) and again > 1.25 * max(measured)


def test_launches_a_full_queue_held_wait_for_the_gpu(model_d_db):
    """gpt2_train_fp32 on the third lease: once 1,022 kernels were queued, each launch returned 2-13
    µs after a kernel ended. Held launches are waits on the GPU in the replay: it still gives the
    trace back, and TF32's saving comes within 25% of the captured 28.7 ms; with the held launches'
    time kept as the CPU's own, the replayed CPU would bound the TF32 step and the saving would
    come out 40% short."""
    import numpy as np

    from tracekit.replay.graph import read_graph
    from tracekit.replay.savings import TraceReplay
    from tracekit.replay.whatif import whatif
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(model_d_db)
    try:
        graph = read_graph(con, "gpt2_train_fp32")
        held = graph.call_held
        per_step = held.sum() / len(graph.steps)
        assert 80 <= per_step <= 200
        assert set(np.unique(graph.call_name[held])) <= {"cudaLaunchKernel", "cuLaunchKernel", "cudaMemsetAsync",
                                                          "cudaLaunchKernelExC"}
        assert whatif(con, "gpt2_train_fp32", []).fit_pct == pytest.approx(0, abs=0.1)
        measured = 28_652
        with_queue = TraceReplay(con, "gpt2_train_fp32").without_profiler(["tensor-cores"], 3.1)["tensor-cores"]
        assert with_queue.saving_us == pytest.approx(measured, rel=0.25)
        replayer = TraceReplay(con, "gpt2_train_fp32")
        replayer.graph.call_wait[held] = -1  # the held launches' time as the CPU's own
        without_queue = replayer.without_profiler(["tensor-cores"], 3.1)["tensor-cores"]
        assert without_queue.saving_us < 0.75 * measured
    finally:
        con.close()


def test_a_gemm_with_an_odd_dimension_runs_on_tensor_cores_at_the_older_kernels_pace(model_d_db):
    """GPT-2's output layer (a vocabulary of 50,257) cannot use cuBLAS's aligned kernels: the model
    runs its fp32 GEMMs at 13.5% of the H100's bf16 peak, about 2.4 ms each (its TF32 capture: 2.43
    ms), where its roofline is 0.64 ms; the aligned GEMMs of the blocks at about 60-82% of theirs."""
    import numpy as np

    from tracekit.replay.graph import read_graph
    from tracekit.replay.tensor_core_model import tensor_core_ns
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(model_d_db)
    try:
        graph = read_graph(con, "gpt2_train_fp32")
    finally:
        con.close()
    simt = (graph.item_math_unit == "simt") & (graph.item_roofline >= 0)
    odd, even = simt & ~graph.item_aligned, simt & graph.item_aligned
    assert odd.sum() == 3 * len(graph.steps) and even.sum() > 10 * odd.sum()
    on_tensor_cores = tensor_core_ns(graph.item_roofline, graph.item_flops, graph.item_aligned, graph.item_bf16_peak_ns)
    assert np.median(on_tensor_cores[odd]) / 1000 == pytest.approx(2_400, rel=0.1)
    assert np.median(graph.item_roofline[odd]) / 1000 == pytest.approx(640, rel=0.05)
    shares = graph.item_roofline[even] / on_tensor_cores[even]
    assert 0.55 <= shares.min() and shares.max() <= 0.85


def test_fp32_attention_fuses_at_the_pace_of_its_simt_gemms(model_e_db):
    """GPT-2's eager attention in fp32: SDPA in its place runs the memory-efficient kernel (flash and
    cuDNN take no fp32), 3.6 ms a step, about the time of the chains' SIMT GEMMs (3.4 ms), not their
    Tensor Core roofline (0.9 ms); replayed at that roofline, the chains' fusing alone would save
    more than the whole switch saved (4.4 ms, which took a host sync and the mask's ops too). The
    replay takes a backward's GEMMs at their own time and a forward's at 0.7x of it."""
    import numpy as np

    from tracekit.replay import attention_fix
    from tracekit.replay.graph import read_graph
    from tracekit.replay.profiler_cost import cost_per_op_us
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(model_e_db)
    try:
        graph = read_graph(con, "gpt2_train_fp32_eager_attn")
        steps = len(graph.steps)
        group, fp32 = attention_fix._attention_groups(con, graph, attention_fix._CHAIN_CALLS, {})
        _, fused_ns, *_ = attention_fix._fused(graph, attention_fix._CHAIN_CALLS, {}, con)
        fused_kernels_us = con.execute(
            "SELECT sum(k.dur_us) / count(DISTINCT k.step) FROM kernels k JOIN steady_steps USING (trace, step) "
            "WHERE k.trace = 'gpt2_train_fp32_sdpa' AND k.name LIKE 'fmha_cutlass%_f32_%'").fetchone()[0]
        cost = cost_per_op_us(con, "gpt2_train_fp32_eager_attn")
        own_pace = TraceReplay(con, "gpt2_train_fp32_eager_attn").without_profiler(["fuse-attention-chains"], cost)
        replayer = TraceReplay(con, "gpt2_train_fp32_eager_attn")
        replayer.graph.item_math_unit[replayer.graph.item_math_unit == "simt"] = "tensor_core"
        at_roofline = replayer.without_profiler(["fuse-attention-chains"], cost)
    finally:
        con.close()
    assert fp32.all() and len(fp32) == 2 * 6 * steps  # 6 layers, forward and backward
    members = group >= 0
    gemms = members & (graph.item_math_unit == "simt") & (graph.item_roofline >= 0)
    forward = gemms & (group % 2 == 0)
    assert 0.3 < graph.item_dur[forward].sum() / graph.item_dur[gemms].sum() < 0.4  # 2 of a chain's 6 GEMMs
    # each group's fused time is a whole number of ns: the forward's 0.7x rounds down once a group
    assert fused_ns.sum() == pytest.approx(attention_fix.FUSED_FP32_FORWARD * graph.item_dur[forward].sum()
                                           + graph.item_dur[gemms & ~forward].sum(), abs=len(fused_ns))
    assert fused_ns.sum() / steps / 1000 == pytest.approx(fused_kernels_us, rel=0.2)
    assert graph.item_roofline[gemms].sum() < 0.3 * graph.item_dur[gemms].sum()
    assert np.median(graph.item_dur[gemms]) > 80_000
    unprofiled = _pre_rounds(MODEL_E_ROUNDS)
    measured = unprofiled["gpt2_train_fp32_eager_attn"] - unprofiled["gpt2_train_fp32_sdpa"]
    assert measured == pytest.approx(4_407, abs=1)  # the whole switch, unprofiled
    assert 0.6 * measured < own_pace["fuse-attention-chains"].saving_us < measured
    assert at_roofline["fuse-attention-chains"].saving_us > 1.25 * measured


AMP_ROUNDS = TEST_DATA / "h100" / "amp_pairs"
# AMP's fp16 recipe on a fourteenth lease (an H100), captured for GradScaler's read: findings'
# saving against the pre rounds' medians, in %. AdamW(fused=False) ran its for-loop implementation
# (train_scaler_foreach), which fuse-optimizer replays fused with GradScaler's read gone; GPT-2 in
# fp16 misses by the profiler's cost per op the trace's gaps put at 4.3 µs, where the loop's own
# time says about 2.9 (its bf16 control, no scaler, within 7%).
AMP_PAIRS = [("host_sync", "train_scaler_foreach", "train_scaler_fused", 10),
             ("host_sync", "gpt2_train_fp16_scaler_foreach", "gpt2_train_fp16_scaler_fused", -32),
             ("unfused_optimizer", "gpt2_train_adamw_foreach", "gpt2_train_adamw_fused", -7),
             ("host_sync", "infer_item", "infer_no_item", -1)]


@pytest.fixture(scope="module")
def amp_found(tmp_path_factory):
    import tracekit

    befores = sorted({f"{before}.json.gz" for _, before, _, _ in AMP_PAIRS} | {"train_bool_index.json.gz"})
    return tracekit.findings(db=cli_loaded(tmp_path_factory, AMP_ROUNDS.name, *[AMP_ROUNDS / name for name in befores]))


@pytest.mark.parametrize("rule, before, after, error", AMP_PAIRS)
def test_gradscalers_read_and_the_for_loop_optimizer_replay_to_their_captured_fix(amp_found, rule, before, after, error):
    assert _saving_error(amp_found, AMP_ROUNDS, rule, before, after) == pytest.approx(error, abs=1.5)


def test_under_amp_the_read_and_the_optimizer_are_one_fix(amp_found):
    """GradScaler's read is host_sync's, fixed by the fused optimizer that unfused_optimizer
    advises: the same whatif, the same saving; the for-loop step is named as such."""
    for trace in ("train_scaler_foreach", "gpt2_train_fp16_scaler_foreach"):
        sync = amp_found[(amp_found["trace"] == trace) & (amp_found["rule"] == "host_sync")].iloc[0]
        optimizer = amp_found[(amp_found["trace"] == trace) & (amp_found["rule"] == "unfused_optimizer")].iloc[0]
        assert sync["title"].startswith("GradScaler's inf/NaN check before each AdamW step")
        assert sync["whatif"] == optimizer["whatif"] == "fuse-optimizer"
        assert sync["saving_us_per_step"] == optimizer["saving_us_per_step"]
    loop = amp_found[(amp_found["trace"] == "train_scaler_foreach") & (amp_found["rule"] == "unfused_optimizer")].iloc[0]
    assert loop["title"].startswith("AdamW steps a parameter at a time (its for-loop implementation): 560 kernels")
    assert "is what foreach=False runs, and fused=False with foreach unset" in loop["fix"]


def test_a_boolean_index_reads_its_size_in_the_forward_and_the_backward(amp_found):
    row = amp_found[(amp_found["trace"] == "train_bool_index") & (amp_found["rule"] == "host_sync")].iloc[0]
    assert row["title"].startswith("2 device-to-host copies of 4 B or less per step and cudaStreamSynchronize from "
                                   "aten::nonzero (in aten::index; autograd::engine::evaluate_function: IndexBackward0)")
    assert row["whatif"] == "drop-sync:aten::nonzero"


def _rms_norm_pairs(folder, **errors):
    """A lease's RMSNorm pairs (LOOP_rmsnorm_eager → LOOP_rmsnorm_fused, the norms' chains fused
    alone), each with its error in percent."""
    return [(folder, f"{loop}_rmsnorm_eager", f"{loop}_rmsnorm_fused", "fuse-elementwise:rsqrt", error)
            for loop, error in errors.items()]


# Elementwise chains op by op against the fused op (capture/model_pairs.py): GPT-2's gelu_new against
# F.gelu(approximate="tanh"), transformers' LlamaRMSNorm against F.rms_norm, on two H100 leases
# (tests/data/h100/model_pairs_m, model_pairs_n: the CPU-bound three again, nine rounds each). A
# Llama pair's prediction is the norms' chains fused alone (fuse-elementwise:rsqrt): F.rms_norm
# leaves the rotary embeddings' chains as they were. Error in percent against the rounds before the
# trace.
ELEMENTWISE_PAIRS = [("model_pairs_m", "gpt2_train_gelu_new", "gpt2_train_gelu_tanh", None, -12.4),
                     ("model_pairs_m", "gpt2_infer_gelu_new", "gpt2_infer_gelu_tanh", None, 1.5),
                     *_rms_norm_pairs("model_pairs_m", llama_train=2.0, llama_infer=4.5),
                     ("model_pairs_n", "gpt2_train_gelu_new", "gpt2_train_gelu_tanh", None, -0.5),
                     *_rms_norm_pairs("model_pairs_n", llama_train=-33.3, llama_infer=3.7),
                     # out of the sample the chains' ends were read off: T5's T5LayerNorm against
                     # F.rms_norm, a LayerNorm written out against nn.LayerNorm (model_pairs_o)
                     *_rms_norm_pairs("model_pairs_o", t5_train=-49.7, t5_infer=14.8),
                     ("model_pairs_o", "gpt2_train_layernorm_eager", "gpt2_train_layernorm_fused", None, 8.7),
                     ("model_pairs_o", "gpt2_infer_layernorm_eager", "gpt2_infer_layernorm_fused", None, 6.8),
                     # out of the sample of the norm's second dispatch: Qwen2's Qwen2RMSNorm against
                     # F.rms_norm, and the Llama's and T5's norms again, on a host whose pace moved
                     # (model_pairs_p: a pair's rounds 1.20-1.68x apart; T5's forward alone under 1.25x)
                     *_rms_norm_pairs("model_pairs_p", qwen2_train=-18.3, qwen2_infer=80.8, llama_train=41.5, llama_infer=87.2, t5_infer=-18.8),
                     # Qwen2's pairs and the Llama's forward once more (model_pairs_q), nine rounds a
                     # loop, on a host that drifted too (a pair's rounds 1.29-1.75x apart)
                     *_rms_norm_pairs("model_pairs_q", qwen2_train=205.1, qwen2_infer=-3.7, llama_infer=37.7),
                     # Qwen2's and the Llama's pairs a third time (model_pairs_r), on a host that
                     # drifted as well (a pair's rounds 1.26-1.38x apart)
                     *_rms_norm_pairs("model_pairs_r", qwen2_train=1.9, qwen2_infer=3.2, llama_train=-1.2, llama_infer=5.9),
                     # T5 trained, Qwen2's pairs and the Llama's forward on a seventh (model_pairs_s),
                     # whose rounds drifted the most (1.30-1.83x apart)
                     *_rms_norm_pairs("model_pairs_s", t5_train=-11.4, qwen2_train=-42.2, qwen2_infer=-34.5, llama_infer=6.9),
                     # Qwen2's pairs on batches the GPU bounds (model_pairs_t): a saving in GPU time,
                     # each loop's rounds within 1.05x on the same drifting kind of host
                     *_rms_norm_pairs("model_pairs_t", qwen2_train_big=10.8, qwen2_infer_big=10.2)]

# The miss on a host that held its pace, and why: not the chains (each norm found whole, 32 a
# step trained) nor the fix's model but the profiler's cost the trace's gaps show (3.98 µs an op):
# at 2.8, where the eager replay meets its rounds, the eager loop with the fix replays within 0.1%
# of the fused loop's rounds (-1%).
ELEMENTWISE_MISSES = {("model_pairs_o", "t5_train_rmsnorm_eager")}


@pytest.fixture(scope="module")
def elementwise_pairs(tmp_path_factory):
    """{(folder, before): µs a step findings' fix, or the pair's, saves without the profiler}."""
    import tracekit
    from tracekit.replay.graph import SHARED_TRACES
    from tracekit.replay.profiler_cost import cost_per_op_us
    from tracekit.replay.savings import TraceReplay
    from tracekit.store.database import connect_for_queries

    predicted = {}
    for folder in sorted({pair[0] for pair in ELEMENTWISE_PAIRS}):
        pairs = [pair for pair in ELEMENTWISE_PAIRS if pair[0] == folder]
        db = cli_loaded(tmp_path_factory, folder, *[TEST_DATA / "h100" / folder / f"{before}.json.gz" for _, before, *_ in pairs])
        # findings' own saving is read only for the pairs without a fix of their own (GPT-2's): a
        # lease of RMSNorm pairs alone (model_pairs_p to _t) needs no findings run (1-2 s each)
        found = tracekit.findings(db=db, rule="unfused_elementwise").set_index("trace") \
            if any(fix is None for *_, fix, _ in pairs) else None
        con = connect_for_queries(db)
        # The fused chains are read for the lease's replayed traces at once, as findings reads them
        # for the traces it replays (Graph.shared_reads): the query's cost is mostly planning it.
        shared = {SHARED_TRACES: sorted(before for _, before, _, fix, _ in pairs if fix is not None)}
        try:
            for _, before, _, fix, _ in pairs:
                if fix is None:
                    predicted[folder, before] = found.loc[before, "saving_us_per_step"]
                    continue
                replayer = TraceReplay(con, before)
                replayer.share_reads(shared)
                predicted[folder, before] = replayer.without_profiler([fix], cost_per_op_us(con, before))[fix].saving_us
        finally:
            con.close()
    return predicted


@pytest.mark.parametrize("folder, before, after, fix, error", ELEMENTWISE_PAIRS)
def test_fusing_an_elementwise_chain_saves_what_the_fused_op_did(elementwise_pairs, folder, before, after, fix, error):
    """Twenty of twenty-nine within 25%. The misses: T5 trained on lease o (ELEMENTWISE_MISSES),
    and pairs timed on hosts whose rounds ran 1.25x apart or more: the second lease's Llama trained
    (1.47x), and on the fourth, fifth and seventh (model_pairs_p, _q and _s, out of sample for the
    second dispatch below) Qwen2's forward, Qwen2 trained and the Llama's. Those leases and the
    sixth (_r, four hits within 6%) settle none of their pairs, hits (Qwen2 trained -18% on p, +2%
    on r, T5's forward -19%, Qwen2's forward -4% on q, T5 trained -11% on s) or misses (Qwen2
    trained +205% on q, -42% on s): their savings round by round spread wider than any prediction
    misses (the Llama's forward -650 to 1,794 µs on p, Qwen2 trained 768 to 8,501 on q, -348 to
    8,726 on r, -658 to 12,240 on s). Qwen2's pairs on batches the GPU bounds (_t), on the same
    kind of host, held their pace (1.05x) and settle it out of sample: +11% trained, +10% forward. A norm's fused op dispatches twice
    (the composite and its kernel's op): with that, the Llama's and T5's forwards came from +31%,
    +19% and +27% to +4.5%, +3.7% and +15%. The LayerNorm written out, a chain of ten ops with two
    row reductions no pair had shown, comes within 10% trained and in inference."""
    rounds = TEST_DATA / "h100" / folder
    measured = _pre_rounds(rounds)[before] - _pre_rounds(rounds)[after]
    predicted = elementwise_pairs[folder, before]
    assert 100 * (predicted - measured) / measured == pytest.approx(error, abs=1.5)
    steady = _pair_pace(rounds, before, after) < fix_rounds.STEADY_HOST
    assert abs(error) < 25 or not steady or (folder, before) in ELEMENTWISE_MISSES
