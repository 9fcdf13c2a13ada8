"""The layouts build_trace.py writes a trace in: the same JSON values, only whitespace and separators differ.

  kineto    Kineto's own text (`  {` ... `  }` per event, an indent of two), as rendered from the templates
  lines     `json.dumps(event)` on a line of its own inside the traceEvents array, the other keys on the
            first and the last line: what tools that write one event per line produce
  minified  exactly `json.dumps(trace, separators=(",", ":"))`: the whole trace on one line
  indent4   exactly `json.dumps(trace, indent=4)`: the trace pretty-printed by another tool
  ndjson    the events alone, `json.dumps(event)` per line: DuckDB's newline-delimited input, for the floor

Every layout but kineto is serialized from the parsed events, so a number is spelled as Python spells
it (Kineto's `"dur": 1.120` becomes `1.12`) and non-ASCII text is escaped; `json.load` of any layout
gives the same value. The built traces' timestamps (about 5.4e12 us) keep their nanoseconds too: below
2^43 us a double resolves every 0.001 us, so Python's shortest round-trip spelling is Kineto's digits.
Epoch-microsecond timestamps (1.8e15 us) would not survive the round trip: they would lose their
nanoseconds in every layout but kineto.
"""

import gzip
import json
from pathlib import Path

LAYOUTS = ("kineto", "lines", "minified", "indent4", "ndjson")
# The file name a layout gets beside the Kineto-layout `NAME.json`.
SUFFIXES = {"kineto": ".json", "lines": ".lines.json", "minified": ".minified.json",
            "indent4": ".indent4.json", "ndjson": ".ndjson"}
# Stands for the event array while the header and closing keys are serialized around it.
_SENTINEL = "\x00tracekit: the events go here\x00"
_INDENT4_EVENT = "\n" + " " * 8  # indent4's events sit two levels deep


def layout_path(base, layout):
    """`base` (a Kineto-layout .json path) for another layout, e.g. bench.json -> bench.lines.json."""
    base = str(base)
    stem = base[:-len(".json")] if base.endswith(".json") else base
    return stem + SUFFIXES[layout]


def _indent4(event):
    return json.dumps(event, indent=4).replace("\n", _INDENT4_EVENT)


def _frame(header, trailer, layout):
    """(opening, separator between events, closing, event -> text) of `layout`, from Kineto's header
    (up to and including `"traceEvents": [`) and trailer (from the array's last whitespace on)."""
    if layout == "ndjson":
        return "", "\n", "\n", json.dumps
    head, tail = json.loads(header + "]}"), json.loads('{"traceEvents": [' + trailer)
    head.pop("traceEvents")
    tail.pop("traceEvents")
    trace = {**head, "traceEvents": [_SENTINEL], **tail}
    marker = json.dumps(_SENTINEL)
    if layout == "minified":
        text, sep, dump = json.dumps(trace, separators=(",", ":")), ",", json.JSONEncoder(separators=(",", ":")).encode
    elif layout == "indent4":
        # json.dumps' own indent puts the one placeholder item where the first event goes.
        text, sep, dump = json.dumps(trace, indent=4), "," + _INDENT4_EVENT, _indent4
    elif layout == "lines":
        text, sep, dump = json.dumps(trace).replace(f"[{marker}]", f"[\n{marker}\n]"), ",\n", json.dumps
    else:
        raise ValueError(f"unknown layout {layout!r}; one of {', '.join(LAYOUTS)}")
    opening, closing = text.split(marker)
    return opening, sep, closing, dump


class _Output:
    """One output file (.json or .json.gz) in one layout."""

    def __init__(self, path, layout, header, trailer, first_sep, level):
        self.path, self.layout, self.trailer, self.first_sep = Path(path), layout, trailer, first_sep
        # Written under a temporary name, renamed when complete: a half-written trace must not pass
        # for a built one. A gzip header names the final file, so rebuilt .gz files are identical.
        self.partial = self.path.with_name(".part-" + self.path.name)
        self.raw = open(self.partial, "wb")
        self.handle = (gzip.GzipFile(self.path.name, "wb", level, self.raw, mtime=0)
                       if self.path.name.endswith(".gz") else self.raw)
        self.bytes, self.first = 0, True
        if layout == "kineto":
            self.write(header)
        else:
            opening, self.sep, self.closing, self.dump = _frame(header, trailer, layout)
            self.write(opening)

    def kineto_text(self, text, sep):
        """Kineto-layout events, each led by `sep`; the trace's first event keeps its own lead."""
        if self.first:
            text, self.first = self.first_sep + text[len(sep):], False
        self.write(text)

    def events(self, events):
        text = self.sep.join(map(self.dump, events))
        self.write(text if self.first else self.sep + text)
        self.first = False

    def write(self, text):
        data = text.encode("utf-8")
        self.bytes += len(data)
        self.handle.write(data)

    def close(self, complete):
        try:
            if complete:
                self.write(self.trailer if self.layout == "kineto" else self.closing)
            self.handle.close()
        except BaseException:
            complete = False
            raise
        finally:
            self.raw.close()
            if complete:
                self.partial.rename(self.path)
            else:
                self.partial.unlink(missing_ok=True)


class TraceWriter:
    """Writes one trace to several outputs in one pass, each in its layout.

    `header`, `trailer`, `first_sep` and `sep` are the Kineto text around and between events; the
    events come as Kineto-layout text (each event led by `sep`), parsed once when any output needs them.
    """

    def __init__(self, outputs, header, trailer, first_sep, sep, level=6):
        self.sep = sep
        self.outputs = []
        try:
            for path, layout in outputs:
                self.outputs.append(_Output(path, layout, header, trailer, first_sep, level))
        except BaseException:
            self.close(complete=False)
            raise

    def events_text(self, text):
        if not text:
            return
        parsed = None
        for out in self.outputs:
            if out.layout == "kineto":
                out.kineto_text(text, self.sep)
                continue
            if parsed is None:
                if not text.startswith(self.sep):
                    raise ValueError(f"events text does not start with the separator {self.sep!r}: {text[:80]!r}")
                parsed = json.loads("[" + text[len(self.sep):] + "]")
            out.events(parsed)

    def close(self, complete=True):
        """Ends every output (with its closing text when `complete`); returns {path: JSON bytes written}."""
        for out in self.outputs:
            out.close(complete)
        return {str(out.path): out.bytes for out in self.outputs}
