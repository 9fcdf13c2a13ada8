"""Fix rounds: the fix pairs of capture/fix_pairs.py captured again, each loop's truth timed in the
same process as its trace, before and after it, in interleaved rounds: the unprofiled step time a
predicted saving is checked against, free of the spread between processes (tests/data/h200/fixes
timed its truths in other processes, where CPU-bound loops vary 9-78%).

    python -m tracekit.capture.fix_rounds --out DIR --only NAME,... [--rounds ROUNDS] [--pairs model_pairs]

One process per pair kind (the loops of --only): it builds each loop (fix_pairs.PAIRS), times each
without the profiler in ROUNDS interleaved rounds (phase `pre`, before any profiler has run in the
process: loops.step_time_us, CUDA events around 30 free-running steps), profiles each as fix_pairs
does (loops.profile_scheduled: a schedule, record_shapes, no per-step sync) into DIR/<name>.json.gz
and times it right after (phase `truth`), then ROUNDS more rounds (phase `post`). The order of the
loops is reversed every other round, so drift hits before and after alike. Appends the timings to
DIR/timings.csv: loop,pair,role,phase,round,step_us. `--pairs model_pairs` takes the pairs of
capture/model_pairs.py (GPT-2, Llama, ResNet) instead. A loop that cannot be built, or fails, is
left out and the others go on.
"""

import csv
import importlib
import sys
import traceback

from tracekit.capture import loops


def timed_rounds(steps, device, phase, rounds):
    """(loop, phase, round, step_us) of each loop in `steps`, `rounds` interleaved rounds."""
    rows = []
    for number in range(rounds):
        names = list(steps) if number % 2 == 0 else list(steps)[::-1]
        for name in names:
            rows.append((name, phase, number, round(loops.step_time_us(steps[name], device), 1)))
    return rows


def capture_rounds(pairs, names, device, out, rounds, record, keep_going=True):
    """The timings of `names`: `pre` rounds, each loop profiled then timed (`truth`), `post` rounds,
    each phase's rows handed to `record` as it ends (a process stopped mid-way keeps them). Without
    `keep_going` a loop that fails stops the capture (a rank of a job: the other ranks would wait
    in a collective it never joins)."""
    steps = {}
    for name in names:
        try:
            steps[name] = pairs[name][2](device)
            loops.step_time_us(steps[name], device, count=1)  # one that fails does so before the rounds
        except loops.Skip as why:
            if not keep_going:
                raise
            print(f"{name}: skipped on {device}: {why}", flush=True)
            steps.pop(name, None)
        except Exception:  # one loop's failure leaves the others to run
            if not keep_going:
                raise
            traceback.print_exc()
            print(f"{name}: failed, left out", flush=True)
            steps.pop(name, None)
    record(timed_rounds(steps, device, "pre", rounds))
    for name, step in steps.items():
        raw = out / f"{name}.json"
        try:
            loops.profile_scheduled(step, device, raw)
        except Exception:  # its timings stand; the others' traces still come
            if not keep_going:
                raise
            traceback.print_exc()
            continue
        record([(name, "truth", 0, round(loops.step_time_us(step, device), 1))])
        loops.keep_gzipped(raw, out / f"{name}.json.gz")
    record(timed_rounds(steps, device, "post", rounds))


def main(argv=None):
    parser = loops.loop_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pairs", default="fix_pairs", choices=("fix_pairs", "model_pairs"),
                        help="the module whose PAIRS to take")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pairs = importlib.import_module(f"tracekit.capture.{args.pairs}").PAIRS
    names = args.only.split(",") if args.only else list(pairs)
    capture_rounds(pairs, names, args.device, args.out, args.rounds, timings_recorder(args.out / "timings.csv", pairs))
    return 0


def timings_recorder(path, pairs):
    """A `record` for capture_rounds: each row appended to the timings file `path` (its header
    first) with its loop's pair and role from `pairs`, and printed."""
    def record(rows):
        new = not path.exists()
        with path.open("a", newline="") as sink:
            writer = csv.writer(sink)
            if new:
                writer.writerow(["loop", "pair", "role", "phase", "round", "step_us"])
            for name, phase, number, step_us in rows:
                pair, role, _ = pairs[name]
                writer.writerow([name, pair, role, phase, number, step_us])
                print(name, phase, number, step_us, flush=True)
    return record


if __name__ == "__main__":
    sys.exit(main())
