"""The README's and docs' example outputs, run again: each fenced block marked `<!-- example -->`
holds commands (`$ ...` lines), each followed by what it prints. This runs every marked block's
commands in order, one page at a time, each page in a scratch folder of its own that holds
`sample_traces` and `tests` (links to the repository's) and a `tracekit.duckdb` of the sample traces
(the README's first command), with COLUMNS unset and output piped, and compares (or, with --write,
replaces) each output.

    python tests/readme_examples.py [--write] [FILE ...]     (default: README.md and docs/*.md)

A marker may carry options, each `name="value"`:
- `vary="REGEX"` (repeatable): text the regex matches may differ (a load's seconds, a PID);
- `needs="MODULE"`: the block is passed over where MODULE is not installed (`hta`);
- `file="NAME"`: the block is not run but written to NAME in the scratch folder, for the blocks
  after it (a `.sql` file the page shows, then runs).
An output line that is `...` stands for any lines, none included (the page shows a long output's
head and tail). A fenced block with `$ ` commands that is not checked says why in a comment before
it, `<!-- unchecked: why, and what made it -->`; `unchecked_blocks` finds those without one.

Exit status 1 and a diff when a block differs: the page no longer says what tracekit prints.
"""

import argparse
import difflib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r'^<!-- example((?:\s+[a-z]+="[^"]*")*)\s*-->$')
OPTION = re.compile(r'([a-z]+)="([^"]*)"')
UNCHECKED = re.compile(r"^<!-- unchecked: .+ -->$")
ELLIPSIS = "..."
SHOWN_FOLDER = "/tmp/readme"  # the scratch folder's path as the pages show it


def pages():
    """The pages whose examples are checked: the README, then docs/ in name order."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _fence_end(lines, start):
    return next(j for j in range(start + 1, len(lines)) if lines[j].startswith("```"))


def marked_blocks(lines):
    """(first line, end line, options) of each marked fenced block's content, as indices into
    `lines`; options maps a name to its values."""
    found = []
    for i, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if marker and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            options = {}
            for name, value in OPTION.findall(marker.group(1)):
                options.setdefault(name, []).append(value)
            found.append((i + 2, _fence_end(lines, i + 1), options))
    return found


def blocks(lines):
    """(first line, end line) of each marked fenced block's content."""
    return [(start, end) for start, end, _ in marked_blocks(lines)]


def unchecked_blocks(lines):
    """Line numbers (1-based) of fenced blocks that show `$ ` commands but are neither marked as an
    example nor say why not."""
    missing, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = _fence_end(lines, i)
            before = lines[i - 1].strip() if i else ""
            shows_commands = any(line.startswith("$ ") for line in lines[i + 1:end])
            if shows_commands and not (MARKER.match(before) or UNCHECKED.match(before)):
                missing.append(i + 1)
            i = end
        i += 1
    return missing


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
    """What `command` prints (standard output, then standard error) run in `folder`: a plain
    `tracekit ...` command, or one piped to `head -N` or `tail -N` alone, in this process (as a
    shell would run it, without starting Python again, which costs more than most commands),
    anything else by bash."""
    command_part, cut = _piped_to_head_or_tail(command)
    plain = plain_tracekit(command_part)
    text = _run_in_process(*plain, folder, cut) if plain else None
    if text is None:
        text = _run_in_bash(command, folder)
    # the scratch folder, and the repository its links lead to, as one folder wherever it runs
    text = text.replace(str(folder), SHOWN_FOLDER).replace(str(REPO), SHOWN_FOLDER)
    return text.rstrip("\n").split("\n") if text.strip() else []


_HEAD_OR_TAIL = re.compile(r"^(.*?)\s*\|\s*(head|tail) -(\d+)$")


def _piped_to_head_or_tail(command):
    """(the command before `| head -N` or `| tail -N`, a function that keeps the lines that keeps
    of a text), or (command, None) where it ends otherwise."""
    piped = _HEAD_OR_TAIL.match(command)
    if not piped:
        return command, None
    before, which, count = piped.group(1), piped.group(2), int(piped.group(3))
    if which == "head":
        return before, lambda text: "".join(text.splitlines(keepends=True)[:count])
    return before, lambda text: "".join(text.splitlines(keepends=True)[-count:] if count else [])


_ASSIGNMENT = re.compile(r"^([A-Z_][A-Z0-9_]*)=([\w.,:/-]*)$")


def plain_tracekit(command):
    """(environment, arguments) of a command that is `tracekit` and its words, after optional
    `NAME=value` settings, with nothing else a shell would act on (pipes, redirects, `$`,
    globs, ...); None for any other command."""
    if _shell_acts_on(command):
        return None
    words = shlex.split(command)
    env = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, value = _ASSIGNMENT.match(words[0]).groups()
        env[name] = value
        words.pop(0)
    return (env, words[1:]) if words and words[0] == "tracekit" else None


def _shell_acts_on(command):
    """Whether bash would do more with `command` than split it into words: expand, glob, pipe,
    redirect, run another command after it."""
    quote = None
    for char in command:
        if quote == "'":
            quote = None if char == "'" else quote
        elif quote == '"':
            if char in '$`\\!':
                return True
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char in "|&;<>()$`*?[]{}~!#\\\n":
            return True
    return quote is not None


def _run_in_process(env, args, folder, cut=None):
    """What the tracekit CLI prints for `args` run in `folder` with `env` set and COLUMNS and
    LINES unset, by click's test runner (its standard streams are not a terminal, as a pipe's),
    its standard output passed through `cut` (a pipe's head or tail: standard error is not piped);
    None where it raised an error of its own (bash runs the command then, to show the traceback)."""
    from click.testing import CliRunner
    from tracekit.cli import cli

    here = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(cli, args, env={"COLUMNS": None, "LINES": None, **env}, prog_name="tracekit")
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return None
    return (cut(result.stdout) if cut else result.stdout) + result.stderr


def _run_in_bash(command, folder):
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # this Python's tracekit
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))  # of this checkout
    done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True)
    return done.stdout + done.stderr


def _segments(shown):
    segments = [[]]
    for line in shown:
        if line == ELLIPSIS:
            segments.append([])
        else:
            segments[-1].append(line)
    return segments


def fits(shown, printed):
    """Whether `printed` is what `shown` shows, where a `...` line of `shown` stands for any lines."""
    if ELLIPSIS not in shown:
        return shown == printed
    head, *middle, tail = _segments(shown)
    end = len(printed) - len(tail)
    if end < len(head) or printed[:len(head)] != head or printed[end:] != tail:
        return False
    at = len(head)
    for segment in middle:  # the leftmost place of each segment in turn leaves the most room after it
        at = next((i + len(segment) for i in range(at, end - len(segment) + 1)
                   if printed[i:i + len(segment)] == segment), None)
        if at is None:
            return False
    return True


def elided(shown, printed):
    """`printed` shown as `shown` shows it: with its head and tail where `shown` has a `...`
    (the lines between them kept as written)."""
    if ELLIPSIS not in shown:
        return printed
    head, *middle, tail = _segments(shown)
    lines = printed[:len(head)] + [ELLIPSIS]
    for segment in middle:
        lines += segment + [ELLIPSIS]
    return lines + (printed[len(printed) - len(tail):] if tail else [])


def _masked(lines, patterns):
    return [line if line == ELLIPSIS else re.sub("|".join(patterns), "\x00", line) if patterns else line
            for line in lines]


def _check_block(content, options, folder, label):
    """(differences, the block's lines as they print now) of one marked block."""
    if "file" in options:
        (folder / options["file"][0]).write_text("\n".join(content) + "\n", encoding="utf-8")
        return [], content
    if any(importlib.util.find_spec(module) is None for module in options.get("needs", [])):
        return [], content
    differences, fresh = [], []
    for command, shown, blanks in commands(content):
        printed = run(command, folder)
        patterns = options.get("vary", [])
        if not fits(_masked(shown, patterns), _masked(printed, patterns)):
            # a line that differs only where it may vary keeps the page's text
            kept = dict(zip(_masked(shown, patterns), shown))
            now = elided(shown, [kept.get(masked, line) for masked, line in zip(_masked(printed, patterns), printed)])
            now = printed if now == shown else now
            differences += difflib.unified_diff(shown, now, f"{label}: $ {command}", "now", lineterm="")
            shown = now
        fresh += [f"$ {command}", *shown, *[""] * blanks]
    return differences, fresh


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
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return folder


def check(path, write=False, samples_db=None):
    """The differences (unified diff lines) between `path`'s marked blocks and what their commands
    print now; with `write`, the file is rewritten with what they print."""
    lines = path.read_text(encoding="utf-8").split("\n")
    label = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
    differences, rewritten, last = [], [], 0
    with tempfile.TemporaryDirectory() as root:
        folder = scratch_folder(root, samples_db)
        for start, end, options in marked_blocks(lines):
            found, fresh = _check_block(lines[start:end], options, folder, label)
            differences += found
            rewritten += lines[last:start] + fresh
            last = end
    if write and differences:
        path.write_text("\n".join(rewritten + lines[last:]), encoding="utf-8")
    return differences


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace each output with what the command prints now")
    parser.add_argument("files", nargs="*", type=Path, default=pages())
    args = parser.parse_args()
    files = [path.resolve() for path in args.files]
    with tempfile.TemporaryDirectory() as root:  # the sample traces loaded once, for every page
        samples_db = Path(root) / "samples.duckdb"
        subprocess.run([sys.executable, "-m", "tracekit", "load", str(REPO / "sample_traces"), "--db", str(samples_db)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        differences = [line for path in files for line in check(path, args.write, samples_db)]
    unmarked = [f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{line}: a block of commands "
                "neither marked <!-- example --> nor saying why not (<!-- unchecked: ... -->)"
                for path in files for line in unchecked_blocks(path.read_text(encoding="utf-8").split("\n"))]
    print("\n".join(differences + unmarked) if differences or unmarked
          else f"every example prints what its page shows ({len(files)} pages)")
    return 1 if (differences and not args.write) or unmarked else 0


if __name__ == "__main__":
    sys.exit(main())
