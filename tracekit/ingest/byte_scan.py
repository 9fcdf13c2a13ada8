"""Scans over every byte of a big trace's text, at memory speed.

Python looks at a block byte by byte at about 1 GB/s (bytes.count of one byte, a regex's search
for its first character), and two such passes over every block of the event array (the quotes'
parity for the whitespace squeezer, the watch for the array's end) took 1.7 of the reading thread's
3.5 s on a 1 GB trace (cProfile), CPU that DuckDB's parse, on the same two cores, waits for. numpy
compares a block against a byte 3x as fast: the thread's 2.6-2.9 CPU-s became 1.9-2.0. Its import costs about 60 ms, so a process
turns to numpy only once it has scanned NUMPY_AFTER_BYTES in Python: a small trace never imports it.
"""

# Python's scans repay numpy's import (60 ms against 0.65 ms saved per MB) from about 100 MB.
NUMPY_AFTER_BYTES = 64 << 20
# Spans shorter than this are Python's: numpy's fixed cost per call would outweigh the scan.
MIN_NUMPY_SPAN = 256 << 10
WHITESPACE = b" \t\n\r"
_CLOSE_BRACKET, _CLOSE_BRACE = ord("]"), ord("}")

_scanned_in_python = 0
_numpy = None


def _numpy_for(span):
    """numpy, where a scan of `span` bytes should use it; None for Python's."""
    global _scanned_in_python, _numpy
    if span < MIN_NUMPY_SPAN:
        return None
    if _numpy is None:
        _scanned_in_python += span  # a race between loading threads only moves the switch a little
        if _scanned_in_python < NUMPY_AFTER_BYTES:
            return None
        import numpy

        _numpy = numpy
    return _numpy


def count_byte(block, byte, start, end):
    """How many times the byte `byte` (an int) occurs in block[start:end]."""
    np = _numpy_for(end - start)
    if np is None:
        return block.count(bytes((byte,)), start, end)
    return int(np.count_nonzero(np.frombuffer(block, np.uint8, count=end - start, offset=start) == byte))


# More `]` than this after whitespace in one block (a file indented by another tool puts one before
# every `]`): each would be walked back in Python, so the caller's own regex scans the block instead.
MAX_SPACED_CLOSINGS = 4096


def brackets_after_brace(block):
    """The offsets of the `]` in `block` whose nearest byte before them that is not JSON whitespace
    is a `}` in `block`, in order; None where Python's own scan (the caller's regex) is the faster."""
    np = _numpy_for(len(block))
    if np is None:
        return None
    data = np.frombuffer(block, np.uint8)
    at = np.flatnonzero(data[1:] == _CLOSE_BRACKET) + 1
    before = data[at - 1]
    spaced = at[(before == 32) | (before == 10) | (before == 13) | (before == 9)]
    if len(spaced) > MAX_SPACED_CLOSINGS:
        return None
    found = at[before == _CLOSE_BRACE].tolist()
    found += [int(p) for p in spaced if _byte_before_spaces(block, int(p)) == _CLOSE_BRACE]
    return sorted(found)


def _byte_before_spaces(block, end):
    """The byte nearest before block[end] that is not whitespace (None: only whitespace before it).
    Windows grow, so a long run (up to the squeezer's 64 KB) costs a few slices."""
    width = 64
    while True:
        start = max(0, end - width)
        kept = block[start:end].rstrip(WHITESPACE)
        if kept:
            return kept[-1]
        if start == 0:
            return None
        end, width = start, width * 4
