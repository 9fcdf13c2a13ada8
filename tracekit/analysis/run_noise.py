"""The noise of a comparison of runs: a bootstrap over each run's steps, and a run-to-run term.

The steps of one run share what that process met (where the allocator put things, the caches,
the clocks, what else the machine ran), so resampling them measures only the noise within the
run. Two runs of the same code differ by more: resampling the 7 steps of one CPU run a side
called 7 of the 10 pairs of 5 runs of one variant "beyond noise" (tests/data/cpu/repeats). The
model: a run's mean is the variant's level times exp(e), e drawn once per run with sd `sd` (the
run-to-run sd, on a log scale, as timing noise multiplies), and each step varies around its run's
mean.

A draw of one side: each run's steps resampled with replacement, the mean of its runs' means,
times exp(sd * T / sqrt(runs)), T a Student t of the degrees of freedom that sd was measured
with. sd is measured from the runs when a side has several (pooled over both sides), else it is
the default for the device, measured the same way on repeated captures (run_noise_floors.csv,
written by benchmarks/run_to_run.py).
"""

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

BOOTSTRAP_SAMPLES = 2000
# Below 5 steps a side, a percentile bootstrap's 95% interval holds the true difference of two
# means 85% of the time or less (two normal samples, simulated: 88% at 5 steps a side, 85% at 4,
# 80% at 3, 67% at 2; benchmarks/run_to_run.py --coverage), so it calls noise a change too often.
MIN_STEADY_STEPS = 5
FLOORS_FILE = Path(__file__).with_name("run_noise_floors.csv")


@dataclass(frozen=True)
class RunToRun:
    """The run-to-run sd of one metric (log scale), the degrees of freedom it was measured with,
    and where it comes from: 'measured' (these runs) or 'default' (run_noise_floors.csv)."""
    sd: float
    df: int
    source: str


@lru_cache(maxsize=None)
def default_floors():
    """{(device, metric): RunToRun} from run_noise_floors.csv; device is 'gpu' or 'cpu'."""
    with FLOORS_FILE.open(encoding="utf-8") as f:
        return {(row["device"], row["metric"]): RunToRun(float(row["run_sd"]), int(row["df"]), "default")
                for row in csv.DictReader(f)}


def measured_sd(sides):
    """(sd, df) of the run-to-run term: the spread of the log of the runs' means about their own
    side's average (each side's runs are one variant), pooled over the sides, less what the steps'
    own spread puts into a run's mean (the bootstrap within runs carries that part). `sides` is a
    list of sides, each a list of runs, each a list of a metric's step values. df = sum of (runs - 1)."""
    squares, df, within = 0.0, 0, []
    for runs in sides:
        if len(runs) < 2:
            continue
        means = [sum(run) / len(run) for run in runs]
        average = sum(means) / len(means)
        if all(m > 0 for m in means):
            levels = [math.log(m) for m in means]
            within += [_var(run) / len(run) / m ** 2 for run, m in zip(runs, means)]
        elif average > 0:  # a run with none of it (a count of 0): no log, so relative to the average
            levels = [m / average for m in means]
            within += [_var(run) / len(run) / average ** 2 for run in runs]
        else:
            levels = [0.0] * len(runs)
        centre = sum(levels) / len(levels)
        squares += sum((level - centre) ** 2 for level in levels)
        df += len(runs) - 1
    if df == 0:
        return 0.0, 0
    within_part = sum(within) / len(within) if within else 0.0
    return math.sqrt(max(0.0, squares / df - within_part)), df


def run_to_run(metric, sides, devices):
    """The RunToRun of each side: measured when a side has several runs, else each side's device default."""
    sd, df = measured_sd(sides)
    if df:
        measured = RunToRun(sd, df, "measured")
        return [measured for _ in sides]
    return [default_floors().get((device, metric), RunToRun(0.0, 0, "default")) for device in devices]


def interval(sides, noises, seed=0):
    """(low, high): the 95% interval of B's level less A's, `sides` = (runs of A, runs of B) with
    each run a list of step values, `noises` their RunToRun."""
    import numpy as np

    rng = np.random.default_rng(seed)  # the same interval for the same traces, run after run
    draws = []
    for runs, noise in zip(sides, noises):
        side = np.mean([rng.choice(run, size=(BOOTSTRAP_SAMPLES, len(run))).mean(axis=1) for run in runs], axis=0)
        if noise.sd > 0 and noise.df > 0:
            # Clipped far past any percentile read (a t of 1 df has Cauchy tails): no draw overflows
            # to inf, whose differences would be NaN.
            shift = np.clip(noise.sd * rng.standard_t(noise.df, BOOTSTRAP_SAMPLES) / math.sqrt(len(runs)), -300, 300)
            side = side * np.exp(shift)
        draws.append(side)
    low, high = np.percentile(draws[1] - draws[0], [2.5, 97.5])
    return float(low), float(high)


def untrusted_because(runs, steps, devices):
    """Why the intervals cannot be fully trusted, one line each (none: they can). `runs` is
    (names of A, names of B), `steps` the steady steps of each run, `devices` each side's device."""
    reasons = [f"{name} has {n} steady step(s), fewer than {MIN_STEADY_STEPS}: a bootstrap over so few steps "
               "gives too narrow an interval"
               for names, counts in zip(runs, steps) for name, n in zip(names, counts) if n < MIN_STEADY_STEPS]
    if all(len(names) == 1 for names in runs):
        kinds = " and ".join(sorted({d.upper() for d in devices}))
        reasons.append(f"one run a side: the run-to-run variation is not measured; the default for {kinds} runs "
                       f"stands in for it ({FLOORS_FILE.name}); give several runs a side to measure it")
    return reasons


def _var(values):
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)
