"""The `tracekit` command's entry: Ctrl-C while the command starts is one line too, and the
process ends without tearing down what its imports built.

Python turns SIGINT into a KeyboardInterrupt wherever it lands; in the tenths of a second the
command spends importing click and its own modules, that was a traceback. Until the command runs
(tracekit.cli.main, which says `interrupted` itself), SIGINT ends the process at once, saying
so; a library's import (`import tracekit`) never touches the signal.
"""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):
    os.write(2, b"interrupted\n")
    os._exit(130)  # nothing was read or written yet: nothing to undo


def main():
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    from tracekit.cli import main as run_command

    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = run_command()
    except SystemExit as done:
        code = done.code
    _leave(code)


def _leave(code):
    """Ends the process as Python's exit would, less the teardown of every module and object the
    imports made (DuckDB's, click's: 0.02 s of every command), which the OS takes back whole: the
    threads still running are waited for, the output flushed, the exit handlers run (Spark's JVM, a
    warehouse folder), then the process exits with `code` as sys.exit gives it."""
    import atexit
    import threading

    if code is not None and not isinstance(code, int):  # as sys.exit says a message: on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    try:
        threading._shutdown()  # as the interpreter does first: joins the threads that are not daemons
        atexit._run_exitfuncs()
    except KeyboardInterrupt:  # Ctrl-C while a thread or an exit handler (Spark's JVM) ends
        os.write(2, b"interrupted\n")
        code = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader has gone, or the stream was closed
            pass
    os._exit((code or 0) & 0xFF)
