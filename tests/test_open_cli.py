"""`tracekit open` end to end: prints the Perfetto URL, serves the file once, then exits."""

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import SAMPLE_TRACES, invoke_cli


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_open_serves_the_trace_to_perfetto_and_exits(tmp_path):
    port = free_port()
    trace = SAMPLE_TRACES / "sdpa_flash.json.gz"
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "open", str(trace), "--no-browser",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url_line = proc.stdout.readline().strip()
        assert url_line == f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/sdpa_flash.json.gz"
        # Anyone else's fetch (no Origin: curl, another program) is refused and does not stop it.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/sdpa_flash.json.gz", timeout=10)
        assert refused.value.code == 403
        assert proc.poll() is None
        request = urllib.request.Request(f"http://127.0.0.1:{port}/sdpa_flash.json.gz",
                                         headers={"Origin": "https://ui.perfetto.dev"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
            assert response.read() == trace.read_bytes()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()


def test_open_says_clearly_when_the_port_is_taken():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "tracekit", "open", str(SAMPLE_TRACES / "naive.json.gz"),
                              "--no-browser", "--port", str(port)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert f"port {port} on 127.0.0.1 is in use" in out.stderr


def test_open_a_missing_file():
    out = subprocess.run([sys.executable, "-m", "tracekit", "open", "/nonexistent/t.json.gz", "--no-browser"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "/nonexistent/t.json.gz: no such file" in out.stderr


UI = {"Origin": "https://ui.perfetto.dev"}


def open_and_fetch(args, after_the_check=lambda: None):
    """Runs `tracekit open ARGS`, calls `after_the_check()` once it has printed its URL (the file
    checked and opened by then), fetches the trace as the UI would; (lines printed, bytes served)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "open", *map(str, args), "--no-browser",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        after_the_check()
        with urllib.request.urlopen(urllib.request.Request(url.split("url=")[1], headers=UI), timeout=10) as response:
            served = response.read()
        # Read on through the same buffer: communicate() would skip what readline() took in with the URL.
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    return [url, *out.splitlines()], served


def test_open_serves_the_file_it_checked_not_the_one_a_symlink_points_to_later(tmp_path):
    trace, secret, link = tmp_path / "flash.json.gz", tmp_path / "secret.txt", tmp_path / "link.json.gz"
    shutil.copy(SAMPLE_TRACES / "sdpa_flash.json.gz", trace)
    secret.write_text("not yours to serve\n")
    os.symlink(trace, link)

    def point_the_link_at_the_secret():
        os.symlink(secret, tmp_path / "staged")
        os.replace(tmp_path / "staged", link)

    lines, served = open_and_fetch([link], point_the_link_at_the_secret)
    assert served == trace.read_bytes()
    assert lines[-1].startswith(f"Served {link} (")


def test_open_trace_serves_the_trace_as_loaded_and_says_in_one_line_when_its_file_changed(tmp_path):
    copy, db = tmp_path / "sdpa_flash.json.gz", tmp_path / "t.duckdb"
    shutil.copy(SAMPLE_TRACES / "sdpa_flash.json.gz", copy)
    assert invoke_cli("load", copy, "--db", db).exit_code == 0
    loaded = json.loads(gzip.decompress(copy.read_bytes()))["traceEvents"]
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", copy)  # another trace at the loaded path
    lines, served = open_and_fetch(["--trace", "sdpa_flash", "--db", db])
    assert lines[0].endswith("/sdpa_flash.json.gz")
    assert lines[1] == f"{copy} has changed since it was loaded: serving trace 'sdpa_flash' rebuilt from {db}"
    rebuilt = json.loads(gzip.decompress(served))["traceEvents"]
    assert sorted(e["name"] for e in rebuilt if e["ph"] == "X") == sorted(e["name"] for e in loaded if e["ph"] == "X")
    assert lines[-1].startswith("Served trace 'sdpa_flash' rebuilt from the database (")
