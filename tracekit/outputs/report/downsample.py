"""Fewer blocks for a timeline lane of too many GPU events, so a big trace makes a page of
bounded size and the lane still looks as it would drawn in full.

A lane of at most `budget` events is drawn as it is, one block per event. A longer one goes
through two passes, the second only when the first is not enough:
1. merge neighbours of one class less than a pixel apart when one of them is under a pixel wide
   (drawn apart they would be one smear of colour anyway);
2. cut the lane into columns of whole pixels, at most `budget` of them, each drawn as one block
   in the colour of the class that kept the GPU busiest in it; join neighbouring columns of one
   class.
A block knows how many events it stands for, so a caption can say what was merged. Both passes
work on arrays: a lane of a million events takes well under a second.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class Block:
    start: float    # µs from the lane's first event
    end: float
    cls: str        # the kernel class (memcpy, memset) of its events, or the busiest one's
    events: int     # how many GPU events it stands for
    busy_us: float  # their summed durations
    name: str = None      # the event's name when it stands for one event
    detail: str = ""      # the event's own extra text (a memcpy's bytes), when one event
    mixed: bool = False   # a column of several classes (pass 2), coloured by the busiest


@dataclass
class _Runs:
    """Contiguous runs of events as arrays: where each starts in the input, its extent and sums."""

    first: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray
    events: np.ndarray
    busy: np.ndarray


def _runs(new_run, start, end, cls, dur):
    first = np.flatnonzero(new_run)
    return _Runs(first, np.minimum.reduceat(start, first), np.maximum.reduceat(end, first), cls[first],
                 np.diff(np.append(first, len(start))), np.add.reduceat(dur, first))


def _merge_neighbours(start, end, cls, dur, px):
    """Pass 1: runs of same-class neighbours less than a pixel apart, one of each pair narrower
    than a pixel."""
    reach = np.maximum.accumulate(end)
    narrow = dur < px
    joins = np.zeros(len(start), dtype=bool)
    joins[1:] = (cls[1:] == cls[:-1]) & (start[1:] - reach[:-1] < px) & (narrow[1:] | narrow[:-1])
    return _runs(~joins, start, end, cls, dur)


def _columns(runs, px, budget):
    """Pass 2: the runs gathered into at most `budget` columns of whole pixels, each a Block of
    its busiest class."""
    origin = runs.start[0]
    width = max(np.ceil((runs.end.max() - origin) / px / budget), 1.0) * px
    column = np.minimum((runs.start - origin) // width, budget - 1).astype(np.int64)
    names, cls_code = np.unique(runs.cls.astype(str), return_inverse=True)
    pair, pair_of = np.unique(column * len(names) + cls_code, return_inverse=True)
    pair_busy = np.bincount(pair_of, weights=runs.busy)
    pair_col = pair // len(names)
    order = np.lexsort((-pair_busy, pair_col))           # each column's busiest class first
    top = order[np.r_[True, pair_col[order][1:] != pair_col[order][:-1]]]
    classes_in = np.bincount(pair_col)
    cols = _runs(np.r_[True, column[1:] != column[:-1]], runs.start, runs.end, runs.cls, runs.busy)
    events = np.add.reduceat(runs.events, cols.first)
    blocks = [Block(float(s), float(e), str(names[pair[k] % len(names)]), int(n), float(b),
                    mixed=bool(classes_in[c] > 1))
              for s, e, n, b, k, c in zip(cols.start, cols.end, events, cols.busy, top, column[cols.first])]
    return _join(blocks, width)


def _join(blocks, width):
    """Neighbouring columns of one class as one block; a column never reaches into the next."""
    joined = []
    for block in blocks:
        prev = joined[-1] if joined else None
        if prev and prev.cls == block.cls and block.start - prev.end < width:
            joined[-1] = Block(prev.start, max(prev.end, block.end), prev.cls, prev.events + block.events,
                               prev.busy_us + block.busy_us, mixed=prev.mixed or block.mixed)
            continue
        if prev and prev.end > block.start:
            prev.end = block.start
        joined.append(block)
    return joined


def downsample(start, dur, cls, names, details, px, budget):
    """The blocks to draw for one lane's events (sequences sorted by start, µs) at `px` µs per
    pixel: one per event when they are at most `budget`, else merged until they are."""
    start, dur = np.asarray(start, dtype=float), np.asarray(dur, dtype=float)
    cls, end = np.asarray(cls, dtype=object), start + dur
    if len(start) <= budget:
        return [Block(float(s), float(e), str(c), 1, float(d), n, x)
                for s, e, c, d, n, x in zip(start, end, cls, dur, names, details)]
    runs = _merge_neighbours(start, end, cls, dur, px)
    if len(runs.first) > budget:
        return _columns(runs, px, budget)
    return [Block(float(s), float(e), str(c), int(n), float(b), names[i] if n == 1 else None,
                  details[i] if n == 1 else "")
            for i, s, e, c, n, b in zip(runs.first, runs.start, runs.end, runs.cls, runs.events, runs.busy)]
