"""Error messages in the Python API's words: `lenient=True`, not `--lenient`.

The library's messages speak to the command line's user, who is most of its users; a call of
tracekit's Python API rewords each error it raises, so a notebook is told the argument to
pass, never a flag it has no way to give.
"""

import functools
import re

from tracekit.errors import TracekitError

# (pattern, replacement), in order: the longer phrases before the flags they contain.
_CLI_TO_API = [
    (r"--allow-files \(allow_files=True in Python\)", "allow_files=True"),
    (r"`?tracekit load TRACE\.\.\. --db ([^\s`)]+)`?", r'tracekit.load(TRACE..., db="\1")'),
    (r"`?tracekit load TRACE\.\.\. --lake ([^\s`)]+)`?", r'tracekit.load(TRACE..., lake="\1")'),
    (r"give --lake a", "give lake= a"),
    (r"`?tracekit load TRACE\.\.\.`?", "tracekit.load(TRACE...)"),
    (r"`tracekit load --replace`", "tracekit.load(..., replace=True)"),
    (r"tracekit query --list shows them", "the named queries are"),
    (r"\(--db NEW\.duckdb\)", '(db="NEW.duckdb")'),
    (r"use another --db", "use another db="),
    (r"--engine spark", 'engine="spark"'),
    (r"--lenient", "lenient=True"),
    (r"--replace", "replace=True"),
    (r"--allow-files", "allow_files=True"),
    (r"--wait SECONDS", "wait=SECONDS"),
    (r"-p (\w+) VALUE", r"params={'\1': VALUE}"),
    (r"-p (\w+)", r"params['\1']"),
    (r"give another -o, or --force", "give another output=, or force=True"),
    (r"give another -o", "give another output="),
    (r"give a file with -o FILE", "give output="),
]
_COMPILED = [(re.compile(pattern), replacement) for pattern, replacement in _CLI_TO_API]


def in_api_words(message):
    """`message` with each command-line flag replaced by the API argument that does the same."""
    for pattern, replacement in _COMPILED:
        message = pattern.sub(replacement, message)
    return message


def speaks_python(function):
    """Rewords the TracekitErrors `function` raises (in place, so their type and traceback stay)."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TracekitError as exc:
            _reword(exc)
            raise
    return call


def _reword(exc):
    exc.args = tuple(in_api_words(a) if isinstance(a, str) else a for a in exc.args)
    if isinstance(getattr(exc, "problem", None), str):
        exc.problem = in_api_words(exc.problem)
    for _, error in getattr(exc, "failures", ()):  # a LoadError's errors, one per file
        _reword(error)
