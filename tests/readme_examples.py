"""The README's example outputs, run again: each fenced block marked `<!-- example -->` holds
commands (`$ ...` lines), each followed by what it prints. This runs every marked block's
commands in order, in one scratch folder that holds `sample_traces` and `tests` (links to the
repository's) and a `tracekit.duckdb` of the sample traces (the README's first command), with
COLUMNS unset and output piped, and compares (or, with --write, replaces) each output.

    python tests/readme_examples.py [--write] [FILE ...]     (default: README.md)

Exit status 1 and a diff when a block differs: the README no longer says what tracekit prints.
"""

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "<!-- example -->"
SHOWN_FOLDER = "/tmp/readme"  # the scratch folder's path as the README shows it


def blocks(lines):
    """(first line, end line) of each marked fenced block's content, as indices into `lines`."""
    found = []
    for i, line in enumerate(lines):
        if line.strip() == MARKER and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            found.append((i + 2, end))
    return found


def commands(content):
    """[(command, output lines, blank lines after)] of a block's lines."""
    parsed = []
    for line in content:
        if line.startswith("$ "):
            parsed.append([line[2:], []])
        elif parsed:
            parsed[-1][1].append(line)
    result = []
    for command, output in parsed:
        blanks = len(output) - len("\n".join(output).rstrip("\n").split("\n")) if any(output) else len(output)
        result.append((command, output[:len(output) - blanks], blanks))
    return result


def run(command, folder):
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # this Python's tracekit
    done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True)
    # the scratch folder, and the repository its links lead to, as one folder wherever it runs
    text = (done.stdout + done.stderr).replace(str(folder), SHOWN_FOLDER).replace(str(REPO), SHOWN_FOLDER)
    return text.rstrip("\n").split("\n") if text.strip() else []


def scratch_folder(root, samples_db=None):
    """The folder the examples run in; `samples_db`: a database of sample_traces loaded already
    (the tests'), copied rather than loaded again."""
    folder = Path(root) / "readme"
    folder.mkdir()
    for name in ("sample_traces", "tests"):
        (folder / name).symlink_to(REPO / name)
    if samples_db:
        shutil.copyfile(samples_db, folder / "tracekit.duckdb")
    else:
        subprocess.run([sys.executable, "-m", "tracekit", "load", "sample_traces"], cwd=folder, check=True,
                       capture_output=True)
    return folder


def check(path, write=False, samples_db=None):
    """The differences (unified diff lines) between `path`'s marked blocks and what their commands
    print now; with `write`, the file is rewritten with what they print."""
    lines = path.read_text(encoding="utf-8").split("\n")
    differences, rewritten, last = [], [], 0
    with tempfile.TemporaryDirectory() as root:
        folder = scratch_folder(root, samples_db)
        for start, end in blocks(lines):
            fresh = []
            for command, shown, blanks in commands(lines[start:end]):
                printed = run(command, folder)
                if printed != shown:
                    differences += difflib.unified_diff(shown, printed, f"{path.name}: $ {command}", "now", lineterm="")
                fresh += [f"$ {command}", *printed, *[""] * blanks]
            rewritten += lines[last:start] + fresh
            last = end
    if write and differences:
        path.write_text("\n".join(rewritten + lines[last:]), encoding="utf-8")
    return differences


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace each output with what the command prints now")
    parser.add_argument("files", nargs="*", type=Path, default=[REPO / "README.md"])
    args = parser.parse_args()
    differences = [line for path in args.files for line in check(path, args.write)]
    print("\n".join(differences) if differences else "every example prints what the README shows")
    return 1 if differences and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
