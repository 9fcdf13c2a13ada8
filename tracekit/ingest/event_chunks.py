"""Cut a trace's event array into many small arrays that DuckDB reads in parallel.

DuckDB reads one JSON array on one thread, but several files at once on all of them. So the
array streamed out of the trace file is cut, at event boundaries, into arrays of a few MB
each, and every piece goes to DuckDB through its own FIFO: nothing is rewritten, nothing is
written to disk, and only the pieces in flight are held in memory.

An event boundary is the separator that follows the first event (Kineto writes `},\\n  {`,
`json.dumps` of a list `}, {`, one event per line `},\\n{`). A separator that contains a newline
and the events' indent cannot occur inside an event or a string; one without (a single
minified line) might, and a cut there leaves two invalid pieces, which DuckDB refuses: the
loader then reads the file again as one array. No cut is ever silently wrong.
"""

import json
import os
import queue
import re
import tempfile
import threading

from tracekit.ingest.scratch import scratch_prefix

# A trace is cut into at least this many pieces (both cores parse one), of MIN_PIECE_BYTES to
# MAX_PIECE_BYTES each. Measured on 1 GB: 64 MB pieces read 0.7 s faster than 16 MB ones but
# hold 0.3 GB more and take as long in all; smaller pieces cost a folder of 30 MB traces 20%.
PIECES_PER_TRACE = 2
MIN_PIECE_BYTES, MAX_PIECE_BYTES = 1 << 20, 16 << 20
# The separator is read off the first two events, looked for in this much of the array's start.
SEPARATOR_LOOKAHEAD = 1 << 20
# Pieces handed to writers but not yet read by DuckDB: bounds the memory a load holds.
PIECES_IN_FLIGHT = 8
# One statement reads at most this many FIFOs; a longer trace takes more than one.
MAX_FIFOS = 512
_DECODER = json.JSONDecoder()
_SEPARATOR = re.compile(r"\s*,\s*")


def piece_bytes(trace_bytes):
    """How big the pieces of a trace of `trace_bytes` bytes should be."""
    return max(MIN_PIECE_BYTES, min(MAX_PIECE_BYTES, trace_bytes // PIECES_PER_TRACE))


def event_separator(first_bytes):
    """The bytes between the first two events of an array that starts `first_bytes`, with the
    closing and opening braces around them (b'},\\n  {'); None if they are not both in view."""
    text = first_bytes.decode("utf-8", errors="surrogateescape")
    start = re.match(r"\s*\[\s*", text)
    if start is None or not text.startswith("{", start.end()):
        return None
    try:
        _, end = _DECODER.raw_decode(text, start.end())
    except json.JSONDecodeError:
        return None
    between = _SEPARATOR.match(text, end)
    if between is None or not text.startswith("{", between.end()):
        return None
    return ("}" + text[end:between.end()] + "{").encode("utf-8", errors="surrogateescape")


class ChunkCutter:
    """A sink for the event array: hands `emit` complete arrays of about `chunk_bytes` each, as
    lists of buffers (the blocks written, uncopied) whose concatenation is the array."""

    def __init__(self, emit, chunk_bytes):
        self.emit, self.chunk_bytes = emit, chunk_bytes
        self.parts, self.size = [], 0
        self.separator = None
        self.head = bytearray()  # the array's start, held until the separator is known
        self.pieces = 0

    def write(self, data):
        if self.head is not None:
            self.head += data
            if len(self.head) < SEPARATOR_LOOKAHEAD:
                return
            data = self._start()
        view, pos = memoryview(data), 0
        while self.separator is not None and self.size + len(data) - pos >= self.chunk_bytes:
            # The first boundary past the piece's size ends it: its `}` stays, its `,` goes.
            cut = data.find(self.separator, pos + max(0, self.chunk_bytes - self.size - len(self.separator)))
            if cut < 0:
                break
            self.parts.append(view[pos:cut + 1])
            self._emit(b"]")
            self.parts, self.size = [b"["], 1
            pos = cut + 2
        self.parts.append(view[pos:])
        self.size += len(data) - pos

    def _start(self):
        head, self.head = bytes(self.head), None
        self.separator = event_separator(head)
        return head

    def finish(self):
        """Hands over the last piece (it ends with the array's own `]`)."""
        if self.head is not None:
            self.write(self._start())
        self._emit(b"")

    def _emit(self, closing):
        self.parts.append(closing)
        self.emit(self.parts)
        self.pieces += 1


class FifoFeed:
    """Pieces of an event array, served to DuckDB through FIFOs, one batch of FIFOs at a time.

    `produce(emit)` runs in a thread and calls `emit(piece)` for each piece in order; `read(paths)`
    runs DuckDB over one batch of FIFO paths. A batch has room for the pieces the file is expected
    to hold; FIFOs left when the pieces run out serve an empty array, and pieces left when the
    FIFOs run out go to the next batch. Every FIFO has its writer from the start, blocked until
    DuckDB opens it, so DuckDB may open them in any order; pieces in memory stay bounded.
    """

    def __init__(self, produce, expected_pieces):
        self.produce = produce
        self.batch_size = max(2, min(MAX_FIFOS, expected_pieces + 2))
        self.pieces = queue.Queue(maxsize=2)
        self.in_flight = threading.Semaphore(PIECES_IN_FLIGHT)
        self.cancelled = threading.Event()
        self.error = self.result = None
        self.exhausted = False
        self.folder = tempfile.mkdtemp(prefix=scratch_prefix())
        self.fifos, self.writers = [], []

    def run(self, read):
        """Calls `read(fifo_paths)` for each batch until every piece has been read; returns what
        `produce` returned, or raises what it raised."""
        producer = threading.Thread(target=self._run_producer, daemon=True)
        producer.start()
        try:
            while not self.exhausted:
                slots = self._new_batch()
                pump = threading.Thread(target=self._pump, args=(slots,), daemon=True)
                pump.start()
                read([path for path, _ in slots])
                pump.join()
        except BaseException:
            self.cancel()
            raise
        finally:
            producer.join(timeout=10)
            self._cleanup()
        if self.error is not None:
            raise self.error
        return self.result

    def _run_producer(self):
        try:
            self.result = self.produce(self._put)
        except _Cancelled:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised again in the reading thread
            self.error = exc
        finally:
            try:
                self._put(None)
            except _Cancelled:
                pass

    def check(self):
        """Raises in the producer once the reader has given up (for a producer with nothing to put)."""
        if self.cancelled.is_set():
            raise _Cancelled()

    def _put(self, piece):
        while not self.cancelled.is_set():
            try:
                self.pieces.put(piece, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Cancelled()

    def _next_piece(self):
        while not self.cancelled.is_set():
            try:
                return self.pieces.get(timeout=0.1)
            except queue.Empty:
                continue
        return None

    def _new_batch(self):
        slots = []
        for _ in range(self.batch_size):
            path = os.path.join(self.folder, f"events-{len(self.fifos):05d}.json")
            os.mkfifo(path)
            self.fifos.append(path)
            slot = queue.Queue(maxsize=1)
            writer = threading.Thread(target=self._write, args=(path, slot), daemon=True)
            writer.start()
            self.writers.append(writer)
            slots.append((path, slot))
        return slots

    def _pump(self, slots):
        """Hands each FIFO's writer its piece, in order: an empty array once pieces run out."""
        for index, (_, slot) in enumerate(slots):
            piece = None if self.exhausted else self._take()
            if piece is None:
                self.exhausted = True
                piece = _EMPTY
            elif index == len(slots) - 1 and not self._more():
                self.exhausted = True
            slot.put(piece)

    def _take(self):
        piece = self._peeked if self._peeked is not None else self._next_piece()
        self._peeked = None
        if piece is not None:
            self.in_flight.acquire()
        return piece

    _peeked = None

    def _more(self):
        """Whether another piece follows (waits for the producer to say)."""
        self._peeked = self._next_piece()
        return self._peeked is not None

    def _write(self, path, slot):
        try:
            with open(path, "wb") as sink:
                piece = None
                while piece is None and not self.cancelled.is_set():
                    try:
                        piece = slot.get(timeout=0.1)
                    except queue.Empty:
                        continue
                if piece is not None:
                    sink.writelines(piece)
                    if piece is not _EMPTY:
                        self.in_flight.release()
        except OSError:
            pass  # DuckDB stopped reading: its own error says why

    def cancel(self):
        """Stops the producer and unblocks every writer still waiting for DuckDB."""
        self.cancelled.set()
        for path in self.fifos:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            os.close(fd)
        for writer in self.writers:
            writer.join(timeout=1)

    def _cleanup(self):
        for path in self.fifos:
            try:
                os.unlink(path)
            except OSError:
                pass
        try:
            os.rmdir(self.folder)
        except OSError:
            pass


_EMPTY = [b"[]"]


class _Cancelled(Exception):
    """The reader gave up: the producer stops where it is."""
