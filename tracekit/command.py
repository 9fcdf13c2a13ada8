"""The `tracekit` command's entry: Ctrl-C while the command starts is one line too.

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
    sys.exit(run_command())
