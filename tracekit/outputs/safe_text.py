"""Text from a trace, shown as text and nothing more: in a terminal, in markdown, in a spreadsheet.

Kernel names, op names and file names are whatever the traced program or its user wrote: an ESC
in them would drive the terminal (colours, titles, a cleared screen), markup in them would become
a page's HTML or an image fetched from anywhere, and a cell starting with `=` would be a
spreadsheet's formula (OWASP's CSV injection). Each output shows such text escaped instead.
"""

import re
from html import escape

# C0 controls, DEL, C1 controls, the Unicode line and paragraph separators (a new line in many
# viewers), and the bidirectional controls that make text display in another order than it reads.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_LINE_BREAK = re.compile("\r\n|\r|\n|\u2028|\u2029")
# What CommonMark and GitHub read as markup within a line: emphasis, code, links and images
# (brackets), raw HTML and autolinks (<), entities (&), strikethrough (~), table cells (|). A `>`
# is markup only at a line's start, where none of this text goes.
_MARKUP = re.compile(r"[\\`*\[\]<&~|]")
# An underscore inside a word never starts emphasis: `scaled_dot_product` stays as it is.
_EDGE_UNDERSCORES = re.compile(r"(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])")
# Spreadsheets run a cell starting with these as a formula (OWASP); tab and CR hide one.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def printable(text):
    """`text` with every control character escaped as Python writes it (`\\x1b`, `\\n`, `\\u2028`):
    safe to print on a terminal, and still on one line."""
    return _CONTROL.sub(_escaped, str(text))


def _escaped(match):
    char = match.group()
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def html_text(text):
    """`text` for an HTML page's text or attribute: markup escaped, controls escaped as printable's
    (a bidirectional control would show a name in another order than it has)."""
    return escape(printable(text), quote=True)


def markdown_text(text):
    """`text` as markdown that renders as exactly this text, on one line (a table's cell, a
    bullet): markup characters backslash-escaped, line breaks as spaces, controls escaped."""
    text = printable(_LINE_BREAK.sub(" ", str(text)).replace("\t", " "))
    text = _MARKUP.sub(lambda m: "\\" + m.group(), text)
    return _EDGE_UNDERSCORES.sub(lambda m: m.group().replace("_", "\\_"), text)


def markdown_code(text):
    """`text` as a markdown code span: fenced by more backticks than any run of them in it, so no
    backtick of its own ends the span (inside one, nothing is markup)."""
    text = printable(_LINE_BREAK.sub(" ", str(text)))
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    # A space each side keeps a backtick at an edge from joining the fence (CommonMark strips them).
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def spreadsheet_safe(value):
    """A text cell a spreadsheet would run as a formula, with a leading `'` (it shows the text);
    numbers, and text that is a plain number (`-1.5`), are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value
