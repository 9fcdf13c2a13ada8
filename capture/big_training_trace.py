"""A real training trace of about 140 MB: the size issue [18] measures load speed on.

    python -m tracekit.capture.big_training_trace --out DIR [--active N]

loops.py's train_gpt2 (GPT-2 from its config, 6 layers, random weights, AdamW), profiled as every
loop of loops.py is (record_shapes, no per-step sync) but for N active steps (55 by default: about
2.5 MB of JSON a step). Writes DIR/train_gpt2_long.json.gz and DIR/truth.json (its step time without
the profiler, kernels a step). Kept as tests/data/h100/long; benchmarks/run.py --real measures its load.
"""

import json
import sys

from tracekit.capture import loops

NAME = "train_gpt2_long"


def main(argv=None):
    parser = loops.loop_parser(__doc__.splitlines()[0])
    parser.add_argument("--active", type=int, default=55)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    step = loops.gpt2_steps(args.device, True)
    raw = args.out / f"{NAME}.json"
    loops.profile_scheduled(step, args.device, raw, active=args.active)
    truth = {"loop": NAME, "device": args.device, "json_bytes": raw.stat().st_size,
             "step_us": round(loops.step_time_us(step, args.device), 1),
             "kernels_per_step": loops.kernels_per_step(step, args.device),
             "schedule": {"wait": loops.WAIT, "warmup": loops.WARMUP, "active": args.active}}
    loops.keep_gzipped(raw, args.out / f"{NAME}.json.gz")
    (args.out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
