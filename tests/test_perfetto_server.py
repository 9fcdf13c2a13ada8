"""`tracekit open`'s server, over real loopback sockets.

Every network call and thread join has a timeout, so a broken server fails
these tests instead of hanging them.
"""

import _thread
import gzip
import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import urllib.request
import webbrowser
from pathlib import Path

import pytest

from conftest import SAMPLE_TRACES
from tracekit.errors import TraceFileError, TracekitError
from tracekit.ingest.loader import load_file
from tracekit.outputs.perfetto_server import TraceServer, open_in_perfetto, perfetto_url
from tracekit.outputs.served_trace import open_loaded_trace
from tracekit.store.database import connect

NAIVE = SAMPLE_TRACES / "naive.json.gz"
WAIT_S = 10
UI = {"Origin": "https://ui.perfetto.dev"}  # what the browser sends with the UI's fetch


def request(port, method, path, headers=UI):
    """A raw request, so paths like /../x reach the server unnormalised (http.client sends
    Host 127.0.0.1:port unless `headers` names another)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


class Running:
    """A TraceServer on a free port, serving in a thread until fetched."""

    def __init__(self, path):
        self.server = TraceServer(path, port=0)
        self.result = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.result = self.server.serve_until_fetched(timeout=WAIT_S)

    def stopped(self):
        self.thread.join(WAIT_S)
        return not self.thread.is_alive()


@pytest.fixture
def running():
    started = []

    def start(path=NAIVE):
        started.append(Running(path))
        return started[-1]

    yield start
    for run in started:
        run.server.close()
        run.thread.join(WAIT_S)


def test_url_format_for_default_port():
    assert perfetto_url(NAIVE) == "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/naive.json.gz"


def test_url_uses_the_bound_port(running):
    run = running()
    assert run.server.port != 0
    assert run.server.file_url == f"http://127.0.0.1:{run.server.port}/naive.json.gz"
    assert run.server.url == f"https://ui.perfetto.dev/#!/?url={run.server.file_url}"


def test_binds_loopback_only(running):
    run = running()
    assert run.server.host == "127.0.0.1"
    assert run.server._server.socket.getsockname()[0] == "127.0.0.1"


def test_serves_the_file_byte_for_byte_with_cors(running):
    run = running()
    with urllib.request.urlopen(urllib.request.Request(run.server.file_url, headers=UI), timeout=WAIT_S) as response:
        body = response.read()
        headers = response.headers
    assert body == NAIVE.read_bytes()
    assert headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Encoding"] is None
    assert int(headers["Content-Length"]) == NAIVE.stat().st_size


def test_json_is_served_as_json_and_names_are_quoted(running, tmp_path):
    trace = tmp_path / "my trace.json"
    trace.write_text('{"traceEvents": []}')
    run = running(trace)
    assert run.server.file_url.endswith("/my%20trace.json")
    status, headers, body = request(run.server.port, "GET", "/my%20trace.json")
    assert (status, headers["Content-Type"], body) == (200, "application/json", trace.read_bytes())


def test_stops_after_one_complete_fetch(running):
    run = running()
    request(run.server.port, "GET", "/naive.json.gz")
    assert run.stopped()
    assert run.result is True
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", run.server.port), timeout=WAIT_S)


@pytest.mark.parametrize("path", ["/other", "/../etc/passwd", "/", "/%2e%2e/naive.json.gz",
                                  "/naive.json"])
def test_other_paths_are_404_and_keep_serving(running, path):
    run = running()
    status, headers, _ = request(run.server.port, "GET", path)
    assert status == 404
    assert headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
    assert run.thread.is_alive()
    request(run.server.port, "GET", "/naive.json.gz")
    assert run.stopped()


def test_options_preflight(running):
    run = running()
    status, headers, body = request(run.server.port, "OPTIONS", "/naive.json.gz", {
        "Origin": "https://ui.perfetto.dev",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "range",
        "Access-Control-Request-Private-Network": "true",
    })
    assert status == 204 and body == b""
    assert headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
    assert "GET" in headers["Access-Control-Allow-Methods"]
    assert headers["Access-Control-Allow-Headers"] == "range"
    assert headers["Access-Control-Allow-Private-Network"] == "true"
    assert run.thread.is_alive()  # a preflight is not a load


def _host(run, name):
    return {**UI, "Host": f"{name}:{run.server.port}"}


NOT_THE_UI = {
    "no-origin": ("GET", {}),                                           # curl, a script
    "other-site": ("GET", {"Origin": "https://evil.example"}),          # another site's page
    "http-ui": ("GET", {"Origin": "http://ui.perfetto.dev"}),           # not the UI's https origin
    "lookalike": ("GET", {"Origin": "https://ui.perfetto.dev.evil.example"}),
    "null": ("GET", {"Origin": "null"}),                                # a sandboxed frame, a file:// page
    "head-no-origin": ("HEAD", {}),
    "preflight-other-site": ("OPTIONS", {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}),
}


@pytest.mark.parametrize("case", sorted(NOT_THE_UI))
def test_a_request_not_from_the_perfetto_ui_is_403_and_never_stops_the_server(running, case):
    method, headers = NOT_THE_UI[case]
    run = running()
    status, response_headers, body = request(run.server.port, method, "/naive.json.gz", headers)
    assert status == 403
    assert NAIVE.read_bytes()[:64] not in body
    assert run.thread.is_alive()  # it waits on for the UI's own fetch
    assert request(run.server.port, "GET", "/naive.json.gz")[0] == 200
    assert run.stopped() and run.result is True


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1.nip.io:{port}", "127.0.0.1:{other}",
                                  "localhost", "", "127.0.0.1:{port}.evil.example"])
def test_a_host_other_than_loopback_and_our_port_is_403_dns_rebinding(running, host):
    # A page on evil.example whose DNS name now points at 127.0.0.1 reaches us with its own Host;
    # it cannot forge the Origin, but a rebinding page needs no CORS to read its own origin.
    run = running()
    name = host.format(port=run.server.port, other=run.server.port + 1)
    status, _, body = request(run.server.port, "GET", "/naive.json.gz", {**UI, "Host": name})
    assert status == 403 and body[:2] != b"\x1f\x8b"
    assert run.thread.is_alive()
    assert request(run.server.port, "GET", "/naive.json.gz")[0] == 200
    assert run.stopped()


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LOCALHOST"])
def test_loopback_names_with_our_port_are_served(running, name):
    run = running()
    status, _, body = request(run.server.port, "GET", "/naive.json.gz", _host(run, name))
    assert (status, body) == (200, NAIVE.read_bytes())
    assert run.stopped() and run.result is True


def test_head_does_not_count_as_a_fetch(running):
    run = running()
    status, headers, body = request(run.server.port, "HEAD", "/naive.json.gz")
    assert (status, body) == (200, b"")
    assert int(headers["Content-Length"]) == NAIVE.stat().st_size
    assert run.thread.is_alive()


def test_port_in_use_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(TracekitError, match=rf"port {port} on 127\.0\.0\.1 is in use"):
            TraceServer(NAIVE, port=port)


def test_missing_file_is_a_trace_file_error(tmp_path):
    with pytest.raises(TraceFileError, match="no such file"):
        TraceServer(tmp_path / "nope.json.gz", port=0)


def test_a_bare_array_is_a_trace_whatever_whitespace_follows_its_bracket(tmp_path):
    # 5 MB of whitespace after `[`: the first event is past the first block the check reads.
    events = json.loads(gzip.decompress(NAIVE.read_bytes()))["traceEvents"]
    path = tmp_path / "spaced_array.json"
    path.write_text("[" + " \n" * (5 << 19) + json.dumps(events)[1:])
    with TraceServer(path, port=0) as server:
        assert server.trace.shown == str(path)


def test_serve_until_fetched_times_out():
    with TraceServer(NAIVE, port=0) as server:
        assert server.serve_until_fetched(timeout=0.3) is False


def test_open_in_perfetto_opens_browser_and_returns_after_the_fetch(monkeypatch):
    fetched = []

    def fake_browser(url):
        # Play the UI: fetch the file named in the deep link, from another thread.
        file_url = url.split("url=", 1)[1]
        fetch = lambda: fetched.append(urllib.request.urlopen(urllib.request.Request(file_url, headers=UI),
                                                              timeout=WAIT_S).read())
        threading.Thread(target=fetch, daemon=True).start()
        return True

    monkeypatch.setattr(webbrowser, "open", fake_browser)
    lines = []
    url = open_in_perfetto(NAIVE, port=0, echo=lines.append, timeout=WAIT_S)
    assert lines[0] == url and url.startswith("https://ui.perfetto.dev/#!/?url=http://127.0.0.1:")
    assert "Serving naive.json.gz to ui.perfetto.dev" in lines[1]
    for _ in range(50):
        if fetched:
            break
        threading.Event().wait(0.1)
    assert fetched == [NAIVE.read_bytes()]


def test_open_in_perfetto_stops_cleanly_on_ctrl_c(monkeypatch):
    monkeypatch.setattr(webbrowser, "open", lambda url: pytest.fail("browser=False opened one"))
    lines = []
    # Ctrl-C once it serves (its first line says where), not at a fixed time: on a busy machine
    # an interrupt at 0.3 s could land before the server was up.
    timer = threading.Timer(0.3, _thread.interrupt_main)

    def echo(line):
        lines.append(line)
        if len(lines) == 1:
            timer.start()

    try:
        url = open_in_perfetto(NAIVE, port=0, browser=False, echo=echo, timeout=WAIT_S)
    finally:
        timer.cancel()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert lines[-1].startswith("Stopped")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)


def test_open_in_perfetto_times_out_with_a_clear_error():
    with pytest.raises(TracekitError, match="did not fetch naive.json.gz within 0.3 s"):
        open_in_perfetto(NAIVE, port=0, browser=False, echo=lambda line: None, timeout=0.3)


FLASH = SAMPLE_TRACES / "sdpa_flash.json.gz"


def _fetch(server):
    with urllib.request.urlopen(urllib.request.Request(server.file_url, headers=UI), timeout=WAIT_S) as response:
        return response.read()


def _swap(path, replacement):
    """Puts `replacement` (a file, or for a symlink `path`, a target) at `path` in one rename, as an
    editor saving or a process swapping a link would."""
    staged = path.with_name(path.name + ".new")
    if path.is_symlink():
        os.symlink(replacement, staged)
    else:
        shutil.copy(replacement, staged)
    os.replace(staged, path)


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_what_is_served_is_what_was_checked_whatever_the_path_names_afterwards(running, tmp_path, kind):
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours to serve\n")
    trace = tmp_path / "naive.json.gz"
    shutil.copy(NAIVE, trace)
    path = trace
    if kind == "symlink":
        path = tmp_path / "link.json.gz"
        os.symlink(trace, path)
    run = running(path)  # opened and checked
    _swap(path, secret)
    assert _fetch(run.server) == NAIVE.read_bytes()
    assert run.stopped() and run.result is True


def test_a_trace_loaded_with_lenient_is_served_as_it_was_kept_not_as_its_cut_file(running, tmp_path):
    """A truncated file loaded with --lenient: the UI gets the events the load kept, rebuilt from the
    database, not the file that `open FILE` refuses."""
    text = gzip.decompress(NAIVE.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) // 2])
    db = tmp_path / "t.duckdb"
    con = connect(db)
    try:
        result = load_file(con, cut, lenient=True)
        kept = con.execute("SELECT count(*) FROM events WHERE trace = 'cut' AND ph <> 'M'").fetchone()[0]
    finally:
        con.close()
    assert result.status == "loaded" and result.dropped == {"cut off by truncation": 1}
    with pytest.raises(TraceFileError, match="never ends .*tracekit load --lenient .*open --trace NAME serves"):
        open_in_perfetto(cut, browser=False, echo=lambda line: None, timeout=1)
    run = running(open_loaded_trace("cut", db))
    assert run.server.trace.note == f"{cut} was loaded with --lenient (1 event dropped): serving trace 'cut' rebuilt from {db}"
    assert len(_event_names(_fetch(run.server))) == kept > 0


@pytest.fixture
def loaded_flash(tmp_path):
    """A database holding a copy of the sdpa_flash sample, loaded from tmp_path/sdpa_flash.json.gz."""
    copy = tmp_path / "sdpa_flash.json.gz"
    shutil.copy(FLASH, copy)
    db = tmp_path / "t.duckdb"
    con = connect(db)
    try:
        assert load_file(con, copy).status == "loaded"
    finally:
        con.close()
    return copy, db


def _event_names(data):
    return sorted(str(e.get("name")) for e in json.loads(gzip.decompress(data))["traceEvents"] if e["ph"] != "M")


def test_a_loaded_trace_whose_file_is_unchanged_is_served_from_it(running, loaded_flash):
    copy, db = loaded_flash
    run = running(open_loaded_trace("sdpa_flash", db))
    assert run.server.trace.note is None and run.server.trace.shown == str(copy)
    _swap(copy, NAIVE)  # after the check: what was checked is what goes
    assert _fetch(run.server) == FLASH.read_bytes()


@pytest.mark.parametrize("change, why", [
    ("rewritten", "{} has changed since it was loaded"),
    ("gone", "{}: no such file"),
])
def test_a_loaded_trace_whose_file_changed_or_is_gone_is_rebuilt_from_the_database(running, loaded_flash, change,
                                                                                   why):
    copy, db = loaded_flash
    if change == "rewritten":
        copy.write_bytes(NAIVE.read_bytes())  # in place: same path, same inode, another trace
    else:
        copy.unlink()
    run = running(open_loaded_trace("sdpa_flash", db))
    assert run.server.trace.note == f"{why.format(copy)}: serving trace 'sdpa_flash' rebuilt from {db}"
    assert run.server.file_url.endswith("/sdpa_flash.json.gz")
    assert _event_names(_fetch(run.server)) == _event_names(FLASH.read_bytes())
    # The rebuild was written in a folder of this process's, removed at once: only the handle holds it.
    assert not list(Path(tempfile.gettempdir()).glob(f"tracekit-pid{os.getpid()}-open-*"))
