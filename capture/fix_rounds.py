"""Fix rounds: the fix pairs of capture/fix_pairs.py captured again, each loop's truth timed in the
same process as its trace, before and after it, in interleaved rounds: the unprofiled step time a
predicted saving is checked against, free of the spread between processes (tests/data/h200/fixes
timed its truths in other processes, where CPU-bound loops vary 9-78%).

    python -m tracekit.capture.fix_rounds --out DIR --only NAME,... [--rounds ROUNDS]

One process per pair kind (the loops of --only): it builds each loop (fix_pairs.PAIRS), times each
without the profiler in ROUNDS interleaved rounds (phase `pre`, before any profiler has run in the
process: loops.step_time_us, CUDA events around 30 free-running steps), profiles each as fix_pairs
does (loops.profile_scheduled: a schedule, record_shapes, no per-step sync) into DIR/<name>.json.gz
and times it right after (phase `truth`), then ROUNDS more rounds (phase `post`). The order of the
loops is reversed every other round, so drift hits before and after alike. Appends the timings to
DIR/timings.csv: loop,pair,role,phase,round,step_us.
"""

import csv
import sys

from tracekit.capture import fix_pairs, loops


def timed_rounds(steps, device, phase, rounds):
    """(loop, phase, round, step_us) of each loop in `steps`, `rounds` interleaved rounds."""
    rows = []
    for number in range(rounds):
        names = list(steps) if number % 2 == 0 else list(steps)[::-1]
        for name in names:
            rows.append((name, phase, number, round(loops.step_time_us(steps[name], device), 1)))
    return rows


def capture_rounds(names, device, out, rounds):
    """The timings of `names`: `pre` rounds, each loop profiled then timed (`truth`), `post` rounds."""
    steps = {}
    for name in names:
        try:
            steps[name] = fix_pairs.PAIRS[name][2](device)
        except fix_pairs.Skip as why:
            print(f"{name}: skipped on {device}: {why}", flush=True)
    rows = timed_rounds(steps, device, "pre", rounds)
    for name, step in steps.items():
        raw = out / f"{name}.json"
        loops.profile_scheduled(step, device, raw)
        rows.append((name, "truth", 0, round(loops.step_time_us(step, device), 1)))
        loops.keep_gzipped(raw, out / f"{name}.json.gz")
    rows += timed_rounds(steps, device, "post", rounds)
    return rows


def main(argv=None):
    parser = loops.loop_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(fix_pairs.PAIRS)
    rows = capture_rounds(names, args.device, args.out, args.rounds)
    path = args.out / "timings.csv"
    new = not path.exists()
    with path.open("a", newline="") as sink:
        writer = csv.writer(sink)
        if new:
            writer.writerow(["loop", "pair", "role", "phase", "round", "step_us"])
        for name, phase, number, step_us in rows:
            pair, role, _ = fix_pairs.PAIRS[name]
            writer.writerow([name, pair, role, phase, number, step_us])
            print(name, phase, number, step_us, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
