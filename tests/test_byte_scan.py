"""The reading thread's scans of every byte (ingest/byte_scan.py): numpy's give Python's answers,
and a small trace's load never imports numpy."""

import gzip
import random
import re
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_DATA
from tracekit.ingest import array_end, byte_scan
from tracekit.ingest.whitespace import WhitespaceSqueezer

# Bytes that make and break the array's possible ends: `}`, `]`, whitespace, `,` and what may follow.
_PIECES = [b"}", b"]", b" ", b"\n", b"\r", b"\t", b",", b'"', b"a", b"{", b"[", b"   ", b"\\"]


@pytest.fixture
def numpy_scans(monkeypatch):
    """Every scan through numpy, however short and however few bytes came before."""
    monkeypatch.setattr(byte_scan, "NUMPY_AFTER_BYTES", 0)
    monkeypatch.setattr(byte_scan, "MIN_NUMPY_SPAN", 0)


def _texts():
    rng = random.Random(7)
    drawn = [b"".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 80))) for _ in range(5000)]
    real = gzip.decompress((TEST_DATA / "h200" / "loops" / "train_naive.json.gz").read_bytes())
    # a real trace in Kineto's layout, and the same cut into blocks as the reader cuts it
    return drawn + [real] + [real[at:at + 65536] for at in range(0, len(real), 65536)]


def test_numpy_finds_the_same_possible_ends_of_the_array(numpy_scans):
    texts = _texts()
    found = 0
    for text in texts:
        expected = [m.end() - 1 for m in array_end._CLOSING_AFTER_EVENT.finditer(text)]
        assert array_end._closings_after_event(text) == expected, text[:80]
        found += len(expected)
    assert found > 100  # the drawn texts do hold such ends (233)


def _split_by_one_search(held):
    """split_array_end's answer the way it was first written: one search starting with the class
    `[}\\[]`, each offset found by encoding the text before it."""
    text = held.decode("utf-8", errors="surrogateescape")
    closing = re.compile(r"[}\[][ \t\n\r]*(\])(?!" + array_end._RULED_OUT_AFTER.decode() + ")")
    offset = lambda pos: len(text[:pos].encode("utf-8", errors="surrogateescape"))  # noqa: E731
    junk = None
    for match in closing.finditer(text):
        verdict, keys, junk_at = array_end.object_tail(text, match.end(1))
        if verdict == array_end.Verdict.TWO_ARRAYS:
            return "two arrays"
        if verdict == array_end.Verdict.END:
            return held[:offset(match.end(1))], keys, 0
        if verdict == array_end.Verdict.JUNK and junk is None:
            junk = held[:offset(match.end(1))], keys, len(held) - offset(junk_at)
    return junk


def test_the_array_end_found_by_two_literal_searches_is_the_one_search_s():
    # Tails in every shape the drawn pieces make, as the end of a trace's object, with the bytes a
    # trace may hold that are more than one byte (µ, a name in another script, a byte not UTF-8).
    rng = random.Random(5)
    tails = [b'"k": [{}], "x": 1}', b"}", b'"traceEvents": []}', b'"deviceProperties": [{"a": [1]}]}\n',
             b"} junk", b'"n": "\xc2\xb5s"} \xff']
    found = one_byte_each = 0
    for text in _texts()[:2000]:
        middle = text.replace(b"a", rng.choice([b"a", "µ".encode(), "名".encode(), b"\xff"]))
        held = rng.choice([b'[{"name": "\xe5\x90\x8d"}', b'[{"name": "n"}']) + middle + b"]," + rng.choice(tails)
        end = array_end.split_array_end(held, False)
        answer = "two arrays" if end.two_arrays else (None if end.body is None else (end.body, end.keys, end.junk))
        assert answer == _split_by_one_search(held), held[:80]
        found += answer is not None
        one_byte_each += len(held.decode("utf-8", errors="surrogateescape")) == len(held)
    assert found > 1000 and one_byte_each > 300


def test_numpy_counts_the_same_quotes(numpy_scans):
    rng = random.Random(3)
    for text in _texts()[::10]:
        start = rng.randint(0, len(text))
        end = rng.randint(start, len(text))
        assert byte_scan.count_byte(text, ord('"'), start, end) == text.count(b'"', start, end)


def test_a_block_indented_before_every_bracket_is_left_to_the_regex(numpy_scans, monkeypatch):
    monkeypatch.setattr(byte_scan, "MAX_SPACED_CLOSINGS", 3)
    text = b'{"a": [\n 1\n ], "b": [\n 2\n ], "c": {\n "d": [\n 3\n ]\n }\n ]\n}'
    assert byte_scan.brackets_after_brace(text) is None
    assert array_end._closings_after_event(text) == [len(text) - 3]


def test_the_squeezer_gives_the_same_text_with_numpys_counts(monkeypatch):
    rng = random.Random(11)
    texts = [b"".join(rng.choice(_PIECES + [b" " * 40, b"\n" * 70]) for _ in range(rng.randint(0, 400)))
             for _ in range(300)]

    def squeezed(text):
        squeezer = WhitespaceSqueezer(stride=8)
        return b"".join(squeezer.squeeze(text[at:at + 97]) for at in range(0, len(text), 97)), squeezer.dropped

    in_python = [squeezed(text) for text in texts]
    monkeypatch.setattr(byte_scan, "NUMPY_AFTER_BYTES", 0)
    monkeypatch.setattr(byte_scan, "MIN_NUMPY_SPAN", 0)
    assert [squeezed(text) for text in texts] == in_python
    assert sum(dropped for _, dropped in in_python) > 0


def test_a_small_traces_load_does_not_import_numpy(tmp_path):
    code = ("import sys; from tracekit.ingest.loader import load_file; from tracekit.store.database import connect;"
            f"con = connect({str(tmp_path / 'small.duckdb')!r});"
            f"load_file(con, {str(TEST_DATA / 'h200' / 'loops' / 'infer_inplace.json.gz')!r}); con.close();"
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
