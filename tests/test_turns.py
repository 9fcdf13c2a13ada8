"""The files of one load publish in the order given (tracekit.ingest.turns), in a database and in
a lake: a file that fails or is skipped early lets no later file publish before an earlier one
that is still being read, so the names a load gives do not depend on timing."""

import threading

from tracekit.ingest.turns import Turns


def test_a_file_that_fails_early_lets_no_later_file_pass_an_earlier_one():
    turns, published = Turns(), []
    turns.done(1)  # the second file failed at once; the first is still being read
    third = threading.Thread(target=lambda: (turns.wait(2), published.append(2)))
    third.start()
    third.join(0.3)
    assert third.is_alive() and published == []
    published.append(0)
    turns.done(0)
    third.join(5)
    assert published == [0, 2]


def test_a_turn_said_done_twice_moves_nothing_on():
    turns = Turns()
    turns.done(0)
    turns.done(0)  # a database's load says it after publishing and again when the file ends
    waiting = threading.Thread(target=turns.wait, args=(2,))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()
    turns.done(1)
    waiting.join(5)
    assert not waiting.is_alive()


def test_names_follow_the_order_given_when_an_earlier_file_is_slow(tmp_path, monkeypatch):
    """Three files named `trace` into a lake, two at a time: the first slow to convert, the second
    bad. The third waits for the first, so the first is `trace` and the third `trace-2`."""
    import gzip
    import time

    from conftest import SAMPLE_TRACES
    from tracekit.lake import batch, load_many

    paths = []
    for folder, source in (("a", "naive"), ("b", None), ("c", "sdpa_flash")):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "trace.json"
        path.write_bytes(gzip.decompress((SAMPLE_TRACES / f"{source}.json.gz").read_bytes()) if source else b"{")
        paths.append(path)
    convert = batch.convert_file

    def slow_first(path, *args, **kwargs):
        if path.parent.name == "a":
            time.sleep(1.0)
        return convert(path, *args, **kwargs)

    monkeypatch.setattr(batch, "convert_file", slow_first)
    loaded = load_many(paths, tmp_path / "lake", workers=2)
    assert [getattr(outcome, "trace", None) for _, outcome in loaded.outcomes] == ["trace", None, "trace-2"]
    assert [outcome.events for _, outcome in loaded.outcomes if hasattr(outcome, "events")] == [517, 242]
