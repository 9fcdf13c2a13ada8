"""Serve one trace file to the Perfetto UI (ui.perfetto.dev) and open it there.

The UI runs in the browser and fetches the trace itself, so we only have to hand
it a URL it is allowed to read: its content security policy permits
http://127.0.0.1:9001, and the browser needs a CORS header naming the UI's origin.
The server answers for that one file and nothing else, and stops once the UI has
fetched it: the UI keeps the trace in memory, so nothing needs us afterwards.
It sends the bytes of the handle that was checked (served_trace), never what the
path holds by the time the UI asks.
"""

import errno
import os
import socketserver
import threading
import time
import urllib.parse
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.outputs.served_trace import ServedTrace, open_trace_file

HOST = "127.0.0.1"  # loopback only: a trace can hold code paths and shapes worth keeping private
DEFAULT_PORT = 9001
UI_ORIGIN = "https://ui.perfetto.dev"
_CHUNK_BYTES = 1 << 20
_POLL_S = 0.2  # how often the waiting thread wakes, so Ctrl-C lands promptly on every platform


def perfetto_url(path, port=DEFAULT_PORT):
    """The ui.perfetto.dev deep link that makes the UI fetch the file named as `path` from our server."""
    return f"{UI_ORIGIN}/#!/?url={_file_url(path, port)}"


def _file_url(path, port):
    return f"http://{HOST}:{port}/{urllib.parse.quote(Path(path).name, safe='')}"


def _content_type(name):
    # .gz stays octet-stream with no Content-Encoding: the UI un-gzips the bytes
    # itself, and a browser that saw Content-Encoding would inflate them first.
    return "application/json" if Path(name).suffix == ".json" else "application/octet-stream"


def _size_text(size):
    for unit in ("bytes", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024


class _Handler(BaseHTTPRequestHandler):
    """Answers GET/HEAD for the one trace file, OPTIONS preflights, 404 for the rest; 403 for
    a request that is not the Perfetto UI's, to us by our loopback name."""

    timeout = 60  # drop idle connections (browsers open speculative ones that never speak)

    def end_headers(self):
        # On every response, 404s included, so the UI can show what went wrong.
        self.send_header("Access-Control-Allow-Origin", UI_ORIGIN)
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def _refused(self):
        """Sends 403 and returns True unless the request is addressed to us by a loopback name
        (a web page that rebinds its own DNS name to 127.0.0.1 sends its name as the Host) and comes
        from the Perfetto UI's origin (a browser sends the page's Origin on every cross-site fetch)."""
        port = self.server.server_port
        hosts = {f"{HOST}:{port}", f"localhost:{port}"} | ({HOST, "localhost"} if port == 80 else set())
        host = (self.headers.get("Host") or "").strip().lower()
        origin = self.headers.get("Origin")
        if host in hosts and origin == UI_ORIGIN:
            return False
        # The reason names which header failed, never echoes what was sent.
        why = "its Host is not a loopback name with this port" if host not in hosts else f"its Origin is not {UI_ORIGIN}"
        self.server.refused += 1
        self.send_error(403, f"Forbidden: only the Perfetto UI may fetch this trace ({why})")
        return True

    def do_OPTIONS(self):
        if self._refused():
            return
        self.send_response(204)
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        requested = self.headers.get("Access-Control-Request-Headers")
        if requested:
            self.send_header("Access-Control-Allow-Headers", requested)
        # Chrome asks before a public site may reach a loopback address.
        if self.headers.get("Access-Control-Request-Private-Network") == "true":
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self._send_trace(body=False)

    def do_GET(self):
        self._send_trace(body=True)

    def _send_trace(self, body):
        server = self.server
        if self._refused():
            return  # never counts as the UI's fetch, so the server keeps waiting for it
        # Compare the decoded path with the file's name instead of mapping it onto
        # the file system, so `..` and friends can never reach another file.
        trace = server.trace
        route = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if route != "/" + trace.name:
            self.send_error(404, "Not found: this server serves one trace file")
            return
        self.send_response(200)
        self.send_header("Content-Type", _content_type(trace.name))
        self.send_header("Content-Length", str(trace.size))
        self.end_headers()
        if not body:
            return
        sent = 0
        try:
            while sent < trace.size:
                chunk = trace.read_at(sent, min(_CHUNK_BYTES, trace.size - sent))
                if not chunk:
                    return  # the file was cut short in place: an incomplete answer, not a load
                self.wfile.write(chunk)
                sent += len(chunk)
            self.wfile.flush()
        except OSError:
            return  # the browser went away mid-file: not a load, keep serving
        server.fetched.set()

    def log_message(self, format, *args):
        if self.server.log:
            self.server.log(f"{self.address_string()} {format % args}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled connection must not keep the process alive
    # On Windows SO_REUSEADDR lets a second server bind a port that is in use.
    allow_reuse_address = os.name != "nt"

    def __init__(self, trace, port, log):
        self.trace = trace
        self.log = log
        self.fetched = threading.Event()
        self.refused = 0  # requests turned away: not the UI's, or not addressed to us
        super().__init__((HOST, port), _Handler)

    def server_bind(self):
        # HTTPServer.server_bind resolves our FQDN, which can stall for seconds
        # on machines with slow DNS; we never use the name.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        if self.log:
            self.log(f"{client_address[0]} request failed")


class TraceServer:
    """Serves a trace on http://127.0.0.1:`port`/ until the Perfetto UI has fetched it: `trace` a
    path (opened and checked here, once) or a ServedTrace, which the server then owns.

    The socket is bound on construction (port=0 picks a free port, see `.port`);
    use as a context manager or call `close()`.
    """

    def __init__(self, trace, port=DEFAULT_PORT, log=None):
        self.trace = trace if isinstance(trace, ServedTrace) else open_trace_file(trace)
        try:
            self._server = _Server(self.trace, port, log)
        except OSError as exc:
            self.trace.close()
            if exc.errno == errno.EADDRINUSE:
                raise TracekitError(
                    f"port {port} on {HOST} is in use (another `tracekit open` or "
                    "Perfetto's trace_processor?); stop it and retry: the Perfetto UI fetches local traces from port 9001 only") from None
            raise TracekitError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
        self.host, self.port = self._server.server_address[:2]
        self.file_url = _file_url(self.trace.name, self.port)
        self.url = perfetto_url(self.trace.name, self.port)
        self._thread = None
        self._closed = False
        self._lock = threading.Lock()  # close() may come from another thread

    def serve_until_fetched(self, timeout=None):
        """Serve until one complete GET of the file; True if so, False on timeout or close().

        The server is closed on return and on any exception, KeyboardInterrupt included.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._closed:
                return False
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            args=(_POLL_S,), daemon=True)
            self._thread.start()
        try:
            while not self._server.fetched.wait(_POLL_S):
                if self._closed or (deadline is not None and time.monotonic() >= deadline):
                    return False
            return True
        finally:
            self.close()

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # shutdown() waits for serve_forever to notice, so only call it if it runs.
            if self._thread is not None:
                self._server.shutdown()
                self._thread.join()
            self._server.server_close()
            self.trace.close()

    def refused_note(self):
        """', refused 2 requests that were not the UI's' (or nothing when none was)."""
        count = self._server.refused
        if not count:
            return ""
        return f"; refused {count} request{'s' if count != 1 else ''} that {'were' if count != 1 else 'was'} not the UI's"

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def open_in_perfetto(trace, *, port=DEFAULT_PORT, browser=True, echo=print, timeout=None):
    """Serve `trace` (a path, or a ServedTrace), point ui.perfetto.dev at it, block until it has
    loaded; return the URL.

    Ctrl-C stops serving cleanly (the URL is still returned). Either way the last line
    says what was served. Raises TracekitError if the UI has not fetched the file within
    `timeout` seconds.
    """
    with TraceServer(trace, port=port) as server:
        served = server.trace
        echo(server.url)
        if served.note:
            echo(served.note)
        echo(f"Serving {served.name} to ui.perfetto.dev; stops after the UI has "
             "loaded it (Ctrl-C to stop)")
        if browser and not webbrowser.open(server.url):
            echo("Could not start a browser; open the URL above yourself.")
        try:
            fetched = server.serve_until_fetched(timeout=timeout)
        except KeyboardInterrupt:
            echo(f"Stopped before the UI loaded the trace: served nothing{server.refused_note()}.")
            return server.url
    if not fetched:
        raise TracekitError(f"the Perfetto UI did not fetch {served.name} within "
                            f"{timeout:g} s; open {server.url} in a browser and try again")
    echo(f"Served {served.shown} ({_size_text(served.size)}) to ui.perfetto.dev "
         f"and stopped{server.refused_note()}.")
    return server.url
