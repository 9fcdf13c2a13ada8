"""Read a Chrome/Kineto trace file as a header plus a byte stream of its event array.

DuckDB parses a JSON *array* of events an order of magnitude faster (and in a
tenth of the memory) than one huge object holding it, so we never hand it the
whole file: the keys before `traceEvents` are parsed here, the array itself is
streamed to DuckDB untouched (but for long runs of whitespace, cut short as the
text is read: whitespace.py), and the keys after it are recovered from a tail
held back while streaming. Python never builds objects for the events.
"""

import codecs
import gzip
import hashlib
import json
import re
from collections import deque
from dataclasses import dataclass, field

from tracekit.ingest.array_end import TWO_ARRAYS_PROBLEM, EndWatch, runs_out, split_array_end
from tracekit.errors import NotATrace, TraceFileError
# expected_size is event_read's, from here as before.
from tracekit.ingest.raw_file import _GZIP_FILE, _ZLIB_ERRORS, expected_size, gunzipped, open_raw  # noqa: F401
from tracekit.ingest.whitespace import WhitespaceSqueezer

# The blocks a trace is read in, and how many bytes of them are held back at least, until what
# follows says whether they hold the array's end (array_end.EndWatch, which holds more while they
# may: keys after the array up to its MAX_TAIL_BYTES). Small, so that the pieces the events are cut
# into reach DuckDB while the file is still being read: 4 MB blocks and 4 MB held kept a 10 MB
# trace's pieces until its end, and its read took 0.107 s where 1 and 2 MB take 0.087 (the 135 MB
# and 1 GB traces' reads the same within 3%).
CHUNK_BYTES = 1 << 20
TAIL_BYTES = 2 << 20
# --lenient cuts a truncated array after its last complete event, whose end must be in what is held
# back (a cut further than that into an event leaves none): it holds back twice as much, as it did
# before the blocks were made small.
LENIENT_HOLD = 2
# Kineto writes a few KB of header; anything past this before the array is not a trace we know.
MAX_HEADER_BYTES = 64 << 20
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_BOM = "\ufeff"
# Python's JSON reader recurses once per level of nesting (the events themselves go to DuckDB).
TOO_DEEP = "is nested deeper than tracekit reads (about 1,000 levels of objects and lists)"
_NO_EVENTS = "a JSON object without a traceEvents array: not a Chrome/Kineto trace"


@dataclass
class TraceStream:
    """What is known about a trace once its event array has been streamed."""

    path: str
    header: dict = field(default_factory=dict)
    sha256: str = ""
    bytes_read: int = 0
    compressed: bool = False
    array_closed: bool = True  # False: the array never ended and was closed here
    dropped_tail_bytes: int = 0  # bytes after the last complete event (--lenient on a truncated trace)
    cut_events: int = 0  # events cut in half by the truncation (0 or 1)
    junk_bytes: int = 0  # bytes after the end of the trace (--lenient leaves them out)
    file_sha256: str = ""  # of the file's own bytes (set by the loader)


class GzipCutShort(TraceFileError):
    """A gzip file that ends before its compressed stream does (a copy or a write cut short)."""


def _read(stream, path):
    size = CHUNK_BYTES
    try:
        # read1: one read of the file at most, so a gzip cut short gives up every byte it holds
        # before EOFError (read() would drop the ones decompressed in its last call).
        return stream.read1(size) if isinstance(stream, (gzip.GzipFile, _GZIP_FILE)) else stream.read(size)
    except EOFError:
        raise GzipCutShort(path, "corrupt gzip: it ends before the compressed data does (cut short?"
                                 " --lenient loads the events it holds)") from None
    except (OSError, *_ZLIB_ERRORS) as exc:
        # gzip raises BadGzipFile (an OSError), zlib.error on bad data.
        raise TraceFileError(path, f"corrupt gzip: {exc}") from None


class _TraceText:
    """A trace's text, block by block, as every reader here takes it: each block hashed as read,
    then its long runs of whitespace outside strings cut short (whitespace.py). `on_block()` is
    called after each block read, those that were all whitespace too: it may stop the read."""

    def __init__(self, stream, path, on_block=None):
        self.stream, self.path, self.on_block = stream, path, on_block
        self.digest = hashlib.sha256()  # of the text as it is, every byte of whitespace included
        self.squeezer = WhitespaceSqueezer()

    def read(self):
        """The next block of text; b"" at the end of the file."""
        while block := _read(self.stream, self.path):
            self.digest.update(block)
            if self.on_block is not None:
                self.on_block()
            text = self.squeezer.squeeze(block)
            if text:
                return text
        return b""


class _HeaderReader:
    """Parses the top-level keys up to `"traceEvents": [` from a growing text buffer."""

    def __init__(self, text, path):
        self.source, self.path = text, path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.raw = bytearray()
        self.text = ""
        self.eof = False
        self.bad_byte = None  # offset of the first byte that is not UTF-8, once read

    def _more(self, at_least=1):
        """Reads on, `at_least` bytes unless the file ends first; False when nothing was left."""
        read = 0
        while read < at_least and not self.eof:
            chunk = self.source.read()
            if not chunk:
                self.eof = True
                break
            if len(self.raw) + len(chunk) > MAX_HEADER_BYTES:
                raise TraceFileError(self.path, "no traceEvents array in the first 64 MB: not a Chrome/Kineto trace")
            self.raw += chunk
            read += len(chunk)
            try:
                self.text += self.decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                # Only the header has to be text here; a bad byte in the events is DuckDB's to report.
                self.text += chunk[:exc.start].decode("utf-8", errors="ignore")
                self.bad_byte = len(self.raw) - len(chunk) + exc.start
                self.eof = True
        return read > 0

    def _skip_ws(self, pos):
        while True:
            pos = _WHITESPACE.match(self.text, pos).end()
            if pos < len(self.text) or not self._more():
                return pos

    def _value(self, pos):
        """Decodes one JSON value at `pos`, reading more until it is complete."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, pos)
            except json.JSONDecodeError as exc:
                # A value that runs past the text read is decoded again from its start: reading as
                # much again as is held each time keeps a value of tens of MB from costing the
                # square of its blocks.
                if not self._more(at_least=len(self.raw)):
                    raise self._invalid(exc) from None
                continue
            except RecursionError:
                raise TraceFileError(self.path, f"a key of its header {TOO_DEEP}") from None
            # A number at the end of the buffer may go on in the next chunk.
            if end < len(self.text) or not self._more():
                return value, end

    def _invalid(self, exc):
        """The error for JSON that failed to decode with nothing left to read."""
        if runs_out(self.text, exc):
            return self._truncated()
        return TraceFileError(self.path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")

    def _truncated(self):
        """The error for a header that runs into the end of the file (or of its UTF-8 text)."""
        if self.bad_byte is not None:
            if not self.text.strip():
                return TraceFileError(self.path, "not UTF-8 text: not a JSON trace")
            return TraceFileError(self.path, f"not UTF-8 text at byte {self.bad_byte}, inside the header")
        return TraceFileError(self.path, "truncated: the file ends inside its header, before the traceEvents array")

    def _expect(self, pos, wanted, problem):
        """Raises unless the text at `pos` is one of `wanted`; the end of the file means truncated."""
        if pos >= len(self.text):
            raise self._truncated()
        if self.text[pos] not in wanted:
            line = self.text.count("\n", 0, pos) + 1
            column = pos - self.text.rfind("\n", 0, pos)
            raise TraceFileError(self.path, f"not valid JSON ({problem} at line {line} column {column})")

    def read(self):
        """Returns (header dict, bytes of the stream already read past the array's `[`, is_array)."""
        pos = self._skip_ws(0)
        if self.text.startswith(_BOM):
            pos = self._skip_ws(len(_BOM))  # a UTF-8 byte order mark, which some editors write
        if pos >= len(self.text):
            raise self._truncated() if self.bad_byte is not None else TraceFileError(self.path, "empty file")
        first = self.text[pos]
        if first == "[":
            self.array_at = pos
            return {}, self._raw_from(pos), True
        if first != "{":
            raise TraceFileError(self.path, "not JSON: a trace starts with { or [")
        header = {}
        pos += 1
        while True:
            pos = self._skip_ws(pos)
            if pos < len(self.text) and self.text[pos] == "}":
                raise NotATrace(self.path, _NO_EVENTS)
            self._expect(pos, '"', "expected a key in double quotes")
            key, pos = self._value(pos)
            pos = self._skip_ws(pos)
            self._expect(pos, ":", "expected ':' after a key")
            pos = self._skip_ws(pos + 1)
            if key == "traceEvents":
                self._expect(pos, "[{\"-0123456789tfn", "expected a value")
                if self.text[pos] != "[":
                    raise TraceFileError(self.path, "traceEvents is not a JSON array")
                return header, self._raw_from(pos), False
            header[key], pos = self._value(pos)
            pos = self._skip_ws(pos)
            self._expect(pos, ",}", "expected ',' or '}' between keys")
            if self.text[pos] == "}":
                raise NotATrace(self.path, _NO_EVENTS)
            pos += 1

    def after_array_start(self):
        """For a bare array: its first character after the `[` that is not whitespace ("" at the
        end of the file), reading on when the `[` ended the blocks read so far."""
        pos = self._skip_ws(self.array_at + 1)
        return self.text[pos:pos + 1]

    def _raw_from(self, char_pos):
        """The raw bytes from text position `char_pos` on (the array's `[`)."""
        byte_pos = len(self.text[:char_pos].encode("utf-8"))
        return bytes(self.raw[byte_pos:])


def read_header(path, handle=None):
    """The top-level keys before a trace's event array ({} for a bare array); raises TraceFileError
    for a file that is no Chrome/Kineto trace, reading only as far as the array's start. `handle`:
    the file already open (read from its start, and left open)."""
    if handle is None:
        stream, _, handle = open_raw(path)
        with handle:
            return _read_header(stream, path)
    handle.seek(0)
    return _read_header(gunzipped(handle, path)[0], path)


def _read_header(stream, path):
    reader = _HeaderReader(_TraceText(stream, path), path)
    header, _, is_array = reader.read()
    if is_array and reader.after_array_start() not in ("{", "]"):
        raise TraceFileError(path, "not a trace: a JSON array of events holds objects, [{...}, ...]")
    return header


def check_first_event(path, handle):
    """Raises TraceFileError when the first element of a bare event array (a file `[{...}, ...]`)
    is no trace event: every Chrome trace event has a phase, `ph`. A JSON array of other objects
    (`tracekit query -f json`'s rows) is not a trace. What the first MB cannot tell is let be."""
    handle.seek(0)
    text = gunzipped(handle, path)[0].read(_FIRST_EVENT_BYTES).decode("utf-8", errors="replace")
    start = text.find("[") + 1
    while start < len(text) and text[start].isspace():
        start += 1
    try:
        first, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return
    if not (isinstance(first, dict) and "ph" in first):
        raise TraceFileError(path, "not a trace: its array's first object has no ph (every Chrome trace event has "
                                   f"a phase), keys {', '.join(list(first)[:5]) if isinstance(first, dict) else '-'}")


_FIRST_EVENT_BYTES = 1 << 20


_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


class EventLines:
    """A sink that passes on the event array it is given as one event per line (NDJSON).

    For --lenient on a trace with broken JSON: DuckDB skips a line it cannot parse only in
    newline-delimited input, and with one event per line the events lost can be counted.
    Newlines are JSON whitespace outside strings (and invalid inside them), so turning them into
    spaces changes no valid event; the `}, {` between events becomes `}\n{`. Each write is cut
    at its last `}`, so no such boundary is split between two writes.
    """

    def __init__(self, sink):
        self.sink, self.carry, self.started = sink, b"", False

    def write(self, data):
        data = self.carry + bytes(data).replace(b"\n", b" ").replace(b"\r", b" ")
        if not self.started and data.strip():
            data = data.lstrip()
            data = data[1:] if data.startswith(b"[") else data
            self.started = True
        cut = data.rfind(b"}")
        if cut < 0:
            self.carry = data
            return
        self.carry = data[cut:]
        self.sink.write(_EVENT_BOUNDARY.sub(b"}\n{", data[:cut]))

    def finish(self):
        """Writes what is held back, less the array's closing `]`."""
        rest = self.carry.rstrip()
        self.sink.write(_EVENT_BOUNDARY.sub(b"}\n{", rest[:-1] if rest.endswith(b"]") else rest) + b"\n")


def _decode_event(held, brace):
    """The end offset (in `held`) of the JSON object starting at `held[brace]`, or None if it is cut."""
    text = held[brace:].decode("utf-8", errors="surrogateescape")
    try:
        _, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        return None
    return brace + len(text[:end].encode("utf-8", errors="surrogateescape"))


def _complete_events_prefix(held, has_array_start):
    """For --lenient: (`held` cut after its last complete event with the array closed, events cut off).

    The last event is the one after the last `}, {`: kept when it decodes, cut off when it does
    not. (A `}, {` inside an event's args can make the cut land inside that event; the JSON is
    then broken and the loader's one-event-per-line read drops it.) `has_array_start`: `held`
    still begins with the array's `[`, so a trace cut inside its first event keeps no events.
    """
    brace = _last_event_start(held, has_array_start)
    if brace is None:
        return (b"[]", 0) if has_array_start else (None, 0)
    end = _decode_event(held, brace)
    if end is None:
        return held[:brace].rstrip().rstrip(b",") + b"]", 1
    return held[:end] + b"]", 0  # the array or the keys after it are what is broken


# The end of an event array and of the object around it, and the last character of the array's last element.
_LAST_ELEMENT = re.compile(rb"(\S)\s*\]\s*\}$")


def _last_event_start(held, has_array_start):
    """The offset of the `{` that opens the last event: after the last `}, {`, else the first
    element's where `held` still begins with the array's `[`; None where neither is in `held`."""
    last = None
    for last in _EVENT_BOUNDARY.finditer(held):
        pass
    if last is not None:
        return held.index(b"{", last.start() + 1)
    first = re.match(rb"\[\s*\{", held) if has_array_start else None
    return None if first is None else first.end() - 1


# After an element of the array: the comma before the next one, or the array's end.
_AFTER_ELEMENT = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
# The first character of a JSON value: an element that begins with none is a damaged byte.
_VALUE_START = re.compile(r'[{\["\-0-9tfn]')


def _last_event_damaged(held, has_array_start):
    """Whether the array, read element by element from its `[` (only while `held` still begins
    with it), holds events up to one whose JSON breaks off, that bytes beginning no element follow,
    or an element no JSON value begins with (a flipped byte): damage, where the last element of
    `[1, 2, 3]`, or the `2` of `[{...}, 2]`, is no event at all. (Element by element, as a `}, {`
    inside an event's args begins no element.)"""
    start = re.match(rb"[ \t\n\r]*\[[ \t\n\r]*", held) if has_array_start else None
    if start is None:
        return False
    text, pos = held.decode("utf-8", errors="surrogateescape"), start.end()  # the `[` and blanks: one byte a character
    while text.startswith("{", pos):
        try:
            _, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            return True
        after = _AFTER_ELEMENT.match(text, pos)
        if after is None:
            return True
        if after.group(1) == "]":
            return False
        pos = after.end()
    # an element that is a value but no object (`2`) is no event; one that no value begins with is damage
    return pos < len(text) and _VALUE_START.match(text, pos) is None


def _lenient_cut(path, held, lenient, flushed):
    """(body, events cut off) for an event array that never ends: a --lenient cut, or the error."""
    last_element = _LAST_ELEMENT.search(bytes(held[-4096:]).rstrip())
    if last_element is not None and last_element.group(1) not in (b"}", b"[") \
            and not _last_event_damaged(bytes(held), not flushed):
        # the array's end is found as a `]` after an event's `}`: `[1, 2, 3]` has none. No cut mends
        # it: what follows the last event is no event, not a truncation
        raise TraceFileError(path, "the traceEvents array holds something that is not an event (a JSON object): "
                                   f"it ends in {bytes(held[-32:]).decode('utf-8', 'replace').strip()}")
    if lenient:
        body, cut_events = _complete_events_prefix(bytes(held), not flushed)
        if body is None:
            raise TraceFileError(path, f"truncated, and no complete event in its last {len(held) / (1 << 20):.1f} MB"
                                       " to keep")
        return body, cut_events
    if held.rstrip().endswith(b"}"):
        raise TraceFileError(path, "the traceEvents array does not end properly (truncated after an event, or"
                                   " broken JSON after the array? --lenient loads the events before)")
    raise TraceFileError(path, "truncated: the traceEvents array never ends (a profiler killed mid-write?"
                               " --lenient loads the events before the cut)")


def stream_events(path, sink, *, lenient=False, progress=None, handle=None):
    """Writes the trace's event array, as one JSON array, to `sink` (a binary file object).

    Returns a TraceStream with the header keys, the content's sha256 and whether the
    array had to be closed by us (`array_closed` False means a truncated trace read
    leniently). Raises TraceFileError for anything that is not a readable trace.
    `progress(bytes of the file read)` is called after every block read; what it raises
    ends the read (a stop: gigabytes of whitespace give the sink nothing to refuse).
    `handle`: `path` already open, read from its start and left open (the bytes checked are
    those the caller goes on to use).
    """
    if handle is None:
        stream, compressed, raw_handle = open_raw(path, salvage=lenient)
    else:
        handle.seek(0)
        (stream, compressed), raw_handle = gunzipped(handle, path, salvage=lenient), handle
    info = TraceStream(path=str(path), compressed=compressed)
    try:
        text = _TraceText(stream, path, None if progress is None else lambda: progress(raw_handle.tell()))
        header, pending, is_array = _HeaderReader(text, path).read()
        info.header = header
        watch = EndWatch(path)
        # The blocks read, as read: each goes to the sink untouched once held_back bytes follow it and
        # it cannot hold the array's end.
        blocks, held_bytes, flushed = deque([pending]), len(pending), False
        held_back = TAIL_BYTES * (LENIENT_HOLD if lenient else 1)
        while True:
            while len(blocks) > 1 and held_bytes - len(blocks[0]) >= held_back and _may_flush(watch, blocks,
                                                                                            held_bytes, path):
                block = blocks.popleft()
                held_bytes -= len(block)
                sink.write(block)
                flushed = True
            chunk = _next_chunk(text, lenient)
            if not chunk:
                break
            blocks.append(chunk)
            held_bytes += len(chunk)
        try:
            body, tail = _array_end(path, b"".join(blocks), is_array, lenient, flushed, watch, info)
        except RecursionError:
            raise TraceFileError(path, f"a key after its traceEvents array {TOO_DEEP}") from None
        sink.write(body)
        info.header.update(tail)
        info.sha256 = text.digest.hexdigest()
        info.bytes_read = raw_handle.tell()
        return info
    finally:
        if handle is None:
            raw_handle.close()


def _may_flush(watch, blocks, held_bytes, path):
    try:
        return watch.may_flush(blocks, held_bytes)
    except RecursionError:
        raise TraceFileError(path, f"a key after its traceEvents array {TOO_DEEP}") from None


def _next_chunk(text, lenient):
    try:
        return text.read()
    except GzipCutShort:
        if not lenient:
            raise
        return b""  # what it held has been read: cut the events as for any truncation


def _array_end(path, held, is_array, lenient, flushed, watch, info):
    """(the rest of the event array, closed, the keys after it) from the held-back end of the file;
    notes in `info` what --lenient left out."""
    end = split_array_end(held, is_array)
    if end.two_arrays:
        raise TraceFileError(path, TWO_ARRAYS_PROBLEM)
    if end.body is not None and end.junk:
        if not lenient:
            closing = "bracket" if is_array else "brace"
            raise TraceFileError(path, f"junk after the trace: {end.junk} bytes after its closing {closing}"
                                       " (--lenient loads the trace without them)")
        info.junk_bytes = end.junk
    if end.body is not None:
        return end.body, end.keys
    if watch.gave_up:
        raise TraceFileError(path, watch.gave_up_problem())
    body, info.cut_events = _lenient_cut(path, held, lenient, flushed)
    info.array_closed = False
    info.dropped_tail_bytes = len(held) - (len(body) - 1)
    return body, {}
