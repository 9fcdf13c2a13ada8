"""The same capture, repeated in separate processes: what differs between the traces is run-to-run
noise (process start, allocator, caches, clocks, other work on the machine), the variation that a
bootstrap over one run's steps cannot see. `tracekit diff` takes its default run-to-run floor from
such repeats (tracekit/analysis/run_noise_floors.csv, written by benchmarks/run_to_run.py).

    python -m tracekit.capture.repeat_runs --runs 5 --out DIR -- CAPTURE_OPTIONS...

runs `python -m tracekit capture CAPTURE_OPTIONS --out TMP/runN` once per run, each in a fresh
process, and keeps DIR/run<N>.json.gz (the one trace each capture wrote), DIR/manifest.json (this
command, and each capture's manifest in run order with the load average before it; `tracekit load
DIR` passes over it, as over a capture's) and DIR/capture.log (their output). CAPTURE_OPTIONS must
select one variant and one shape, so that every run writes one trace.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def capture_once(options, folder):
    """One capture in a process of its own; returns (its trace file, its manifest, its output)."""
    command = [sys.executable, "-m", "tracekit", "capture", *options, "--out", str(folder)]
    done = subprocess.run(command, capture_output=True, text=True)
    output = "".join(line for line in (done.stdout + done.stderr).splitlines(keepends=True)
                     if not line.startswith("USDT:"))  # Kineto's probes, one per profiler start and stop
    if done.returncode != 0:
        raise SystemExit(f"capture failed ({done.returncode}):\n{output}")
    manifest = json.loads((folder / "manifest.json").read_text())
    files = [v["file"] for v in manifest["variants"] if v["status"] == "ran"]
    if len(files) != 1:
        raise SystemExit(f"each run must write one trace, this one wrote {len(files)}: choose one variant and shape")
    return folder / files[0], manifest, output


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="captures, each in a new process [5]")
    parser.add_argument("--out", type=Path, required=True, help="folder for run<N>.json.gz and manifest.json")
    parser.add_argument("capture_options", nargs=argparse.REMAINDER,
                        help="after --: the options of `tracekit capture` (not --out)")
    args = parser.parse_args(argv)
    options = [o for o in args.capture_options if o != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    manifests, log = [], []
    with tempfile.TemporaryDirectory(prefix="tracekit-repeat-") as scratch:
        for run in range(1, args.runs + 1):
            # What else the machine ran: on a shared CPU, the noise follows the load.
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            trace, manifest, output = capture_once(options, Path(scratch) / f"run{run}")
            shutil.copyfile(trace, args.out / f"run{run}.json.gz")
            manifests.append(dict(manifest, run=run, load_average_before=load))
            log.append(f"+ run{run} (load average {load}): tracekit capture {' '.join(options)}\n{output}")
            print(log[-1], end="", flush=True)
    command = " ".join(["python -m tracekit.capture.repeat_runs", *(argv if argv is not None else sys.argv[1:])])
    (args.out / "manifest.json").write_text(json.dumps({"command": command, "runs": manifests}, indent=2) + "\n")
    (args.out / "capture.log").write_text("".join(log))


if __name__ == "__main__":
    main()
