"""Keeping paths of tracekit's own making out of what a user reads.

A load reads a trace through FIFOs in a temp folder of its own (tracekit.ingest.scratch), a lake's
writer writes into a staging folder (LAKE/_staging/<uuid>/), and DuckDB's errors name the file it
was at: such a path means nothing to the user, who gave a trace file, and with loads running side
by side it may even be another file's. Errors show the user's file (or the lake) in its place.
"""

import os
import re
import tempfile

# The folders tracekit makes in the temp folder are named `tracekit-...` (scratch_prefix, diff's).
_TEMP_FOLDER = "tracekit-"
# A lake writer's staging folder: tracekit.lake.layout.STAGING and a uuid4's hex.
_STAGING = re.compile(r"(?:^|/)_staging/[0-9a-f]{32}(?:/|$)")
_QUOTED = re.compile(r'"([^"]*)"|\'([^\']*)\'')
# A path written without quotes ends at white space, a quote or a closing bracket.
_BARE_END = r"[^\s\"'()\[\]{},;]*"


def is_internal(path):
    """Whether `path` lies in a temp folder of tracekit's or a lake's staging folder."""
    text = str(path)
    return any(text.startswith(root) for root in _temp_roots()) or _STAGING.search(text) is not None


def hide_internal_paths(text, shown):
    """`text` with each internal path (is_internal) in it replaced by `shown`, quoted as it was."""
    def quoted(match):
        inner = match.group(1) if match.group(1) is not None else match.group(2)
        return match.group(0).replace(inner, str(shown)) if inner and is_internal(inner) else match.group(0)

    text = _QUOTED.sub(quoted, str(text))
    for root in _temp_roots():
        text = re.sub(re.escape(root) + _BARE_END, lambda _: str(shown), text)
    return re.sub(r"(?:[^\s\"'()\[\]{},;]*/)?_staging/[0-9a-f]{32}" + _BARE_END, lambda _: str(shown), text)


def _temp_roots():
    # Both spellings: a temp folder behind a symlink (/tmp -> /private/tmp) is named either way.
    folder = tempfile.gettempdir()
    return sorted({os.path.join(folder, _TEMP_FOLDER), os.path.join(os.path.realpath(folder), _TEMP_FOLDER)},
                  key=len, reverse=True)
