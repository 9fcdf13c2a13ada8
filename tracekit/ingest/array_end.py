"""Where a trace's event array ends, and what follows it, found without parsing the events.

The array's closing `]` follows its last event's `}` (or its own `[`), and what comes after it
is exactly the rest of the top-level object, `, "key": value ... }`, then nothing but
whitespace. A `}]` inside an event (a list of objects in its args) is followed by more of that
event, which rules it out within a few bytes; only the end of the file confirms the true end.

While the array streams to DuckDB, `EndWatch` holds back a block that may hold the array's end
until what follows rules it out, so keys of any size (up to MAX_TAIL_BYTES) may follow the array.
"""

import heapq
import json
import re
from itertools import islice

from tracekit.errors import TraceFileError
from tracekit.ingest.byte_scan import brackets_after_brace

# What may follow the event array: the keys after it (traceName, deviceProperties, a blob) and
# whitespace. Past this, a possible end is given up and the rest streams on.
MAX_TAIL_BYTES = 64 << 20
# A possible end is first checked against this much of what follows it: a `}]` inside an event
# is ruled out well within it, so only a real end costs a look at everything held.
QUICK_LOOK_BYTES = 4096

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# What a text cut inside a literal or number ends with: `tru`, `-`, `1.`, `2e`...
LITERAL_PREFIX = re.compile(r"t(r(ue?)?)?|f(a(l(se?)?)?)?|n(u(ll?)?)?|-?[0-9]*\.?[0-9]*([eE][-+]?)?")
# A `]` after an event's `}`, less those ruled out at a glance by what follows: a `}` that closes
# something more (`}]},`: a list in an event's args), a `,` not followed by a key, anything but
# `,` or `}`. The search runs over every byte of the array, so it is all one regex.
_RULED_OUT_AFTER = rb'[ \t\n\r]*(\}[ \t\n\r]*[,\]\}]|,[ \t\n\r]*[^" \t\n\r]|[^,} \t\n\r])'
_CLOSING_AFTER_EVENT = re.compile(rb'\}[ \t\n\r]*\](?!' + _RULED_OUT_AFTER + rb')')
_RULED_OUT = re.compile(_RULED_OUT_AFTER)
# The array's own `]`, after the last event's `}` or the array's `[`, less the same glance's rule-outs:
# each `[]` and `}]` of the events in the file's last megabytes would otherwise be read on as the
# end of the trace, one Python call each (a 9.7 MB trace's reading thread: 0.11-0.16 s with them,
# 0.085-0.105 without).
# Two searches, each starting with its literal, which Python's regex engine finds at memory speed:
# one starting with the class `[}\[]` tries a match at every brace (a 5 MB tail: 36 ms against 7).
_CLOSINGS = tuple(re.compile(opening + r"[ \t\n\r]*(\])(?!" + _RULED_OUT_AFTER.decode() + ")")
                  for opening in (r"\}", r"\["))
_SPACE = b" \t\n\r"


class Verdict:
    """What the text after a `]` says about it being the array's end."""

    NO = "no"  # it is not: what follows cannot end the top-level object
    MORE = "more"  # so far it may be: the text ends first
    END = "end"  # it is: the top-level object ends, then only whitespace
    JUNK = "junk"  # the top-level object ends, then something that is not whitespace
    TWO_ARRAYS = "two traceEvents"  # a second traceEvents key follows


def runs_out(text, exc):
    """Whether a JSONDecodeError on `text` is the text ending inside a value (not bad JSON)."""
    rest = text[exc.pos:].strip()
    return exc.msg.startswith("Unterminated string") or not rest or bool(LITERAL_PREFIX.fullmatch(rest))


def _value(text, pos, partial):
    """(value, end) of the JSON value at `pos`; (Verdict.MORE or NO, None) when there is none."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        return (Verdict.MORE if partial and runs_out(text, exc) else Verdict.NO), None
    if partial and end == len(text):
        return Verdict.MORE, None  # a number at the end of the text may go on
    return value, end


def object_tail(text, pos, partial=False):
    """Reads `text[pos:]` as what follows the array in `{"traceEvents": [...] ...}`.

    Returns (verdict, the keys found, where the junk starts for JUNK). `partial`: the text may
    go on, so running out of it is MORE rather than NO. Works in place, without slicing.
    """
    keys = {}
    end_of_text = Verdict.MORE if partial else Verdict.NO
    while True:
        pos = _WHITESPACE.match(text, pos).end()
        if pos == len(text):
            return end_of_text, keys, None
        if text[pos] == "}":
            junk = _WHITESPACE.match(text, pos + 1).end()
            if junk == len(text):
                return Verdict.END, keys, None
            # `,` `]` `}` continue JSON: the `}` closed something inside an event, not the trace.
            return (Verdict.NO if text[junk] in ",]}" else Verdict.JUNK), keys, junk
        if text[pos] != ",":
            return Verdict.NO, keys, None
        pos = _WHITESPACE.match(text, pos + 1).end()
        if pos == len(text) or text[pos] != '"':
            return (end_of_text if pos == len(text) else Verdict.NO), keys, None
        key, pos = _value(text, pos, partial)
        if pos is None:
            return key, keys, None
        if key == "traceEvents":
            return Verdict.TWO_ARRAYS, keys, None
        pos = _WHITESPACE.match(text, pos).end()
        if pos == len(text) or text[pos] != ":":
            return (end_of_text if pos == len(text) else Verdict.NO), keys, None
        value, pos = _value(text, _WHITESPACE.match(text, pos + 1).end(), partial)
        if pos is None:
            return value, keys, None
        keys[key] = value


def _decode(data):
    # surrogateescape: a byte that is not UTF-8 stays one character, so offsets map back exactly.
    return data.decode("utf-8", errors="surrogateescape")


def _byte_offset(text, pos, size):
    """The byte offset of `text[pos]` in the `size` bytes `text` was decoded from."""
    if len(text) == size:
        return pos  # every character one byte: ASCII, as traces nearly always are, or a byte not UTF-8
    return len(text[:pos].encode("utf-8", errors="surrogateescape"))


def _closings(text):
    """The `]` that may close the event array, in order (those _CLOSINGS find)."""
    return heapq.merge(*(closing.finditer(text) for closing in _CLOSINGS), key=lambda match: match.end(1))


class ArrayEnd:
    """Where the event array ends in the held-back bytes: `body` the bytes up to and including
    its `]` (None when not found), `keys` those after it, `junk` the bytes after the trace."""

    def __init__(self, body=None, keys=None, junk=0, two_arrays=False):
        self.body, self.keys, self.junk, self.two_arrays = body, keys or {}, junk, two_arrays


def split_array_end(held, is_array):
    """Finds the event array's closing `]` in `held`, the end of the file.

    The closing bracket is the earliest `]` after which the rest of the file is exactly the end
    of the top-level object; a later `]` may belong to a key after the array. Failing that, the
    earliest after which the object ends and junk follows.
    """
    if is_array:
        return _split_bare_array(held)
    text = _decode(held)
    junk = None
    for match in _closings(text):
        verdict, keys, junk_at = object_tail(text, match.end(1))
        if verdict == Verdict.TWO_ARRAYS:
            return ArrayEnd(two_arrays=True)
        cut = match.end(1)
        if verdict == Verdict.END:
            return ArrayEnd(held[:_byte_offset(text, cut, len(held))], keys)
        if verdict == Verdict.JUNK and junk is None:
            junk = ArrayEnd(held[:_byte_offset(text, cut, len(held))], keys,
                            len(held) - _byte_offset(text, junk_at, len(held)))
    return junk or ArrayEnd()


def _split_bare_array(held):
    """split_array_end for a file that is the event array itself (Chrome's array form)."""
    body = held.rstrip(_SPACE)
    if body.endswith(b"]"):
        return ArrayEnd(body)
    if body.endswith((b"}", b"},")):
        return ArrayEnd(body.rstrip(b",") + b"]")  # the format lets a writer leave the `]` off
    # Junk: a `]` after an event, then something that cannot go on an event (nor a string).
    text = _decode(held)
    match = _BARE_CLOSING.search(text)
    if match is None:
        return ArrayEnd()
    junk_at = _WHITESPACE.match(text, match.end()).end()
    return ArrayEnd(held[:_byte_offset(text, match.end(), len(held))],
                    junk=len(held) - _byte_offset(text, junk_at, len(held)))


_BARE_CLOSING = re.compile(r'\}[ \t\n\r]*\](?=[ \t\n\r]*[^ \t\n\r,\]}"])')


class EndWatch:
    """Says whether the oldest held block of the event array may go to DuckDB: not while it may
    hold the array's end, which only what follows (up to the end of the file) can settle."""

    def __init__(self, path):
        self.path = path
        self.gave_up = False  # a possible end was given up: over MAX_TAIL_BYTES followed it
        self.recheck_at = None  # held bytes at which a block kept back is looked at again
        self.first = True  # the first block starts with the array's `[`

    def may_flush(self, blocks, held_bytes):
        """`blocks`: the held blocks, oldest first, `held_bytes` their size."""
        if held_bytes > MAX_TAIL_BYTES:
            self.gave_up = self.gave_up or self.recheck_at is not None
            self.recheck_at = None
            return self._flushing()  # a tail this big is not one we keep: the rest streams on
        if self.recheck_at is not None and held_bytes < self.recheck_at:
            return False
        if self._may_end_in(blocks):
            self.recheck_at = held_bytes * 2  # doubling: the looks cost as much as one read
            return False
        self.recheck_at = None
        return self._flushing()

    @staticmethod
    def gave_up_problem():
        return (f"the traceEvents array does not end properly: over {MAX_TAIL_BYTES >> 20} MB follow its last"
                " event without ending the trace (tracekit reads keys after the array up to that size)")

    def _flushing(self):
        self.first = False
        return True

    def _may_end_in(self, blocks):
        head = blocks[0]
        starts = [(0, at) for at in _closings_after_event(head)]
        if self.first:
            after_opening = head.lstrip(_SPACE)[1:]
            if after_opening.lstrip(_SPACE).startswith(b"]"):
                starts.insert(0, (0, head.index(b"]")))
            elif not after_opening.strip(_SPACE):
                # the block ends at the array's `[`: an empty array's `]` is in the next blocks
                later = _closing_in_later_blocks(blocks)
                if later is _MAYBE:
                    return True
                starts += later
        if head.rstrip(_SPACE).endswith(b"}"):
            later = _closing_in_later_blocks(blocks)
            if later is _MAYBE:
                return True  # all held after the `}` is whitespace: what comes next decides
            starts += later
        return any(self._may_end_at(blocks, index, at) for index, at in starts)

    def _may_end_at(self, blocks, index, at):
        """Whether the `]` at blocks[index][at] may close the array, from what follows it."""
        quick = bytearray(blocks[index][at + 1:at + 1 + QUICK_LOOK_BYTES])
        for block in islice(blocks, index + 1, None):
            if len(quick) >= QUICK_LOOK_BYTES:
                break
            quick += block[:QUICK_LOOK_BYTES - len(quick)]
        verdict = object_tail(_decode(bytes(quick)), 0, partial=True)[0]
        if verdict in (Verdict.MORE, Verdict.END) and len(quick) == QUICK_LOOK_BYTES:
            # The look ran out before what follows settled it: look at all that is held.
            held = bytes(blocks[index][at + 1:]) + b"".join(islice(blocks, index + 1, None))
            verdict = object_tail(_decode(held), 0, partial=True)[0]
        if verdict == Verdict.TWO_ARRAYS:
            raise TraceFileError(self.path, TWO_ARRAYS_PROBLEM)
        return verdict != Verdict.NO


def _closings_after_event(block):
    """The offsets of the `]` in `block` that _CLOSING_AFTER_EVENT finds, in order."""
    candidates = brackets_after_brace(block)
    if candidates is None:
        return [m.end() - 1 for m in _CLOSING_AFTER_EVENT.finditer(block)]
    return [at for at in candidates if _RULED_OUT.match(block, at + 1) is None]


def _closing_in_later_blocks(blocks):
    """For a first block that ends with `}` or the array's `[` (and whitespace): [(block index,
    offset)] of the `]` when it is the next byte that is not whitespace, [] when another byte is,
    _MAYBE when all held after it is whitespace."""
    for index, block in enumerate(islice(blocks, 1, None), start=1):
        stripped = block.lstrip(_SPACE)
        if stripped:
            return [(index, len(block) - len(stripped))] if stripped.startswith(b"]") else []
    return _MAYBE


_MAYBE = object()
TWO_ARRAYS_PROBLEM = ("two traceEvents keys: JSON readers disagree on which array counts (most keep the last)"
                      "; keep one of them")
