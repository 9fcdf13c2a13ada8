"""Which of a list of name patterns could match any of a trace's names, told without running them.

DuckDB binds and optimizes every arm of a CASE of regular expressions each time a statement is
planned, 45-60 µs an arm however few names there are, and the loader's two such statements (the
kernel classes' 57 patterns, the work models' 79) are planned once per trace. An arm whose pattern
cannot match any of the trace's names can be left out: each pattern is read once for sets of
literal texts, a match holding a text of each set (`flash_?(attn|attention)`: "flash", and "attn"
or "attention"), and a pattern with a set none of whose texts is in the names cannot match them.

The texts are read with Python's own regular-expression parser. The patterns run in DuckDB
(RE2); they are written in the syntax both share, and where Python cannot read one, or reads no
text that every match needs, the pattern is kept. A text found in the names keeps its pattern
even where the pattern would not match there: the test is one-sided, so a name of any length
costs a substring search, never a regular expression's backtracking.
"""

import functools
import re

try:  # Python 3.11's name for it; sre_parse before
    from re import _constants as _sre, _parser as _sre_parser
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parser

# More distinct names than this and every pattern is kept: reading them all into Python to rule
# patterns out would cost more than binding the patterns.
MAX_NAMES_TO_SIFT = 5000
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT)}
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", None)


@functools.lru_cache(maxsize=None)
def needed_texts(pattern, ignore_case):
    """Sets of texts, each set holding at least one text that every match of `pattern` contains
    (lower-cased where case may not count: see _caseless); None where no such set can be told."""
    try:
        parsed = _sre_parser.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    # a letter beyond ASCII may match an ASCII one without case (RE2 folds ſ to s)
    needed = [texts for texts in _needed(parsed) if all(text.isascii() for text in texts)]
    if not needed:
        return None
    fold = str.lower if _caseless(pattern, ignore_case) else str
    return tuple(frozenset(fold(text) for text in texts) for texts in needed)


def _caseless(pattern, ignore_case):
    """Whether the pattern may match without regard to case: searched so, or with a flag of its own."""
    return ignore_case or "(?" in pattern


def _needed(items):
    """[set of texts, ...] for the sequence `items`: every match contains a text of each set."""
    needed, run = [], []
    for op, value in items:
        if op is _sre.LITERAL:
            run.append(chr(value))
            continue
        if run:
            needed.append({"".join(run)})
            run = []
        if op is _sre.SUBPATTERN:
            needed += _needed(value[-1])
        elif op is _sre.BRANCH:
            # a match takes one branch: it holds a text of that branch's most telling set
            branches = [_needed(branch) for branch in value[1]]
            if all(branches):
                needed.append(set().union(*(max(branch, key=_selectivity) for branch in branches)))
        elif op in _REPEATS and value[0] >= 1:
            needed += _needed(value[2])
        elif op is _ATOMIC:
            needed += _needed(value)
    if run:
        needed.append({"".join(run)})
    return needed


def _selectivity(texts):
    """Longer texts rule more names out, and fewer alternatives do."""
    return min(map(len, texts)), -len(texts)


def could_match(patterns, names, ignore_case):
    """The numbers (from 1, in order) of the `patterns` that could match one of `names` (each
    name on its own, which a pattern's literal newline alone could cross): all of them where a
    name is not plain ASCII (case-folding beyond ASCII is RE2's to judge)."""
    numbers = range(1, len(patterns) + 1)
    text = "\n".join(names)
    if not text.isascii():
        return set(numbers)
    lowered = text.lower()

    def found(pattern):
        needed = needed_texts(pattern, ignore_case)
        within = lowered if _caseless(pattern, ignore_case) else text
        return needed is None or all(any(t in within for t in texts) for texts in needed)

    return {number for number, pattern in zip(numbers, patterns) if found(pattern)}
