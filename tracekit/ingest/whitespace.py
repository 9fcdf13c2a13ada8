"""Long runs of JSON whitespace cut short as a trace's text is read, outside strings only.

JSON allows any amount of whitespace between tokens, and a trace may hold gigabytes of it (a
writer that pads, a file blanked in place). Every reader after this one has a limit it would
cross: DuckDB's JSON reader refuses a run longer than its buffer (twice maximum_object_size)
after an array's `[` or before a `,` or `]`; an event padded past 16 MB leaves the fast read;
the header and the keys after the event array are read within 64 MB windows; and a piece of
the event array holds every byte of a run in memory until it can be cut. So each run outside a
string keeps its first 2 * STRIDE bytes (64 KB) and the rest is dropped here: the JSON means the
same, and nothing after this sees a longer run.

On ordinary text this costs two passes at memory speed per block (counting quotes, looking for
a backslash): runs are found by sampling the text every STRIDE bytes, and only where two
samples in a row are whitespace is the text between them looked at. Whether a run is inside a
string is the parity of the quotes before it, those escaped by a backslash left out.
"""

from bisect import bisect_left

from tracekit.ingest.byte_scan import count_byte

WHITESPACE = b" \t\r\n"  # JSON's whitespace; \v and \f are not
_IS_WHITESPACE = frozenset(WHITESPACE)
# Samples this far apart catch every run longer than two of them (2 * STRIDE bytes).
STRIDE = 32 << 10
_QUOTE, _BACKSLASH = b'"', b"\\"


class WhitespaceSqueezer:
    """Turns the text of a JSON file, block by block, into the same JSON with every run of
    whitespace outside strings cut to its first `max_run` bytes (2 * `stride`).

    Blocks come in file order and may split a run, a string or an escape anywhere; nothing is
    held back, so each block's text comes out at once.
    """

    def __init__(self, stride=None):
        self.stride = stride or STRIDE
        self.max_run = 2 * self.stride
        self.in_string = False  # at the start of the next block
        self.escaped = False  # the next block's first byte is escaped (the last ended in an odd run of `\`)
        self.run_kept = 0  # bytes kept of the run outside strings that ended the last block (0: none)
        self.dropped = 0  # bytes of whitespace dropped so far

    def squeeze(self, block):
        """The text of `block` with its share of long runs dropped (`block` itself when none is)."""
        n = len(block)
        if not n:
            return block
        drops = []
        pos = 0
        if self.run_kept:
            # The run the last block ended in goes on here: only its first max_run bytes are kept.
            pos = _run_end(block, 0, self.stride)
            keep = min(pos, self.max_run - self.run_kept)
            if keep < pos:
                drops.append((keep, pos))
            if pos == n:
                self.run_kept += keep
                return self._without(block, drops)
        self.run_kept = 0
        strings = _StringState(block, self.in_string, self.escaped)
        end, inside = None, False
        for start, end in _long_runs(block, pos, self.stride):
            inside = strings.inside(start)
            if not inside:
                drops.append((start + self.max_run, end))
        if end == n:
            self.run_kept = 0 if inside else self.max_run
        elif n > pos and block[-1] in _IS_WHITESPACE:
            # A short run ends the block (shorter than max_run, or the samples would have found it).
            tail = block[max(pos, n - self.max_run):]
            start = n - (len(tail) - len(tail.rstrip(WHITESPACE)))
            self.run_kept = 0 if strings.inside(start) else n - start
        self.in_string = strings.inside(n)
        self.escaped = strings.escapes_next()
        return self._without(block, drops)

    def _without(self, block, drops):
        if not drops:
            return block
        self.dropped += sum(end - start for start, end in drops)
        parts, at = [], 0
        for start, end in drops:
            parts.append(block[at:start])
            at = end
        parts.append(block[at:])
        return b"".join(parts)


def _all_whitespace(block, start, end):
    # Spaces alone, the usual long run, are counted without a copy.
    if block.count(b" ", start, end) == end - start:
        return True
    return not block[start:end].translate(None, WHITESPACE)


def _run_end(block, at, stride):
    """Where the run of whitespace at `block[at:]` ends: its first byte that is not whitespace,
    or the block's end. Steps grow, so a block of nothing but whitespace costs a few passes."""
    n, step = len(block), stride
    while at < n:
        end = min(n, at + step)
        if not _all_whitespace(block, at, end):
            segment = block[at:end]
            return at + len(segment) - len(segment.lstrip(WHITESPACE))
        at, step = end, min(step * 2, 1 << 22)
    return n


def _long_runs(block, pos, stride):
    """(start, end) of each run of whitespace in `block[pos:]` longer than 2 * `stride` bytes,
    in order. Such a run covers two samples `stride` apart and all between; shorter ones may be
    found too (runs of more than `stride` bytes)."""
    n = len(block)
    floor = pos  # no run found from here on starts before this
    at = -(-pos // stride) * stride
    while at + stride < n:
        if (block[at] in _IS_WHITESPACE and block[at + stride] in _IS_WHITESPACE
                and _all_whitespace(block, at, at + stride + 1)):
            # The run started after the last byte that is not whitespace before `at`, which lies
            # within one stride (or else the samples before would have found it).
            before = block[max(floor, at - stride):at]
            start = at - (len(before) - len(before.rstrip(WHITESPACE)))
            end = _run_end(block, at + stride, stride)
            if end - start > 2 * stride:
                yield start, end
            floor = end
            at = (end // stride + 1) * stride
        else:
            at += stride


class _StringState:
    """Whether positions of one block (asked in increasing order) are inside a JSON string:
    the state at the block's start flipped by each quote before them that no backslash escapes."""

    def __init__(self, block, in_string, escaped):
        self.block = block
        self.first = 1 if escaped else 0  # an escaped first byte is no quote and starts no escape
        self.escaped_quotes = _escaped_quotes(block, self.first)
        self.at, self.state = 0, in_string

    def inside(self, pos):
        quotes = count_byte(self.block, _QUOTE[0], self.at, pos)
        quotes -= bisect_left(self.escaped_quotes, pos) - bisect_left(self.escaped_quotes, self.at)
        self.at, self.state = pos, self.state ^ bool(quotes & 1)
        return self.state

    def escapes_next(self):
        """Whether the block ends in a backslash that escapes the next block's first byte."""
        if not self.block.endswith(_BACKSLASH):
            return False
        return _backslashes_before(self.block, len(self.block), self.first) % 2 == 1


def _escaped_quotes(block, first):
    """The offsets of the quotes in `block` that a backslash escapes: those after an odd run of
    backslashes (the byte at `first` - 1, if any, already escaped by the block before)."""
    found = [0] if first and block[:1] == _QUOTE else []
    if _BACKSLASH not in block:
        return found
    at = block.find(b'\\"', first)
    while at >= 0:
        if _backslashes_before(block, at + 1, first) % 2 == 1:
            found.append(at + 1)
        at = block.find(b'\\"', at + 2)
    return found


def _backslashes_before(block, end, first):
    """How many backslashes run up to `block[end]` (exclusive), counting none before `first`.
    Each run is measured once, so the cost stays linear in its length."""
    width = 16
    while True:
        start = max(first, end - width)
        segment = block[start:end]
        run = len(segment) - len(segment.rstrip(_BACKSLASH))
        if run < len(segment) or start == first:
            return run
        width *= 4
