"""tracekit's temp folders (the FIFOs a load reads through): named after the process that made them,
so that the folders a killed process (kill -9) left behind are found and removed by the next load.

A folder is `tracekit-pid<PID>-<random>` in the system's temp folder ($TMPDIR). It is stale when no
process <PID> runs: /tmp is taken to be shared by processes of one PID namespace (one machine or
one container), as it is unless a container mounts the host's /tmp. DuckDB names the files it
spills beside a database (`DB.tmp/duckdb_temp_<PID>_...`) the same way, and removes a killed
process's only when it spills again: the next load removes them.
"""

import os
import re
import shutil
import tempfile
from pathlib import Path

_STALE_NAME = re.compile(r"tracekit-pid(\d+)-")
_DUCKDB_SPILL = re.compile(r"duckdb_temp_(\d+)_")


def scratch_prefix(purpose=""):
    """The prefix of a temp folder this process makes: `tempfile.mkdtemp(prefix=scratch_prefix())`."""
    return f"tracekit-pid{os.getpid()}-{purpose}"


def remove_stale_scratch(folder=None):
    """Removes the temp folders of tracekit processes that no longer run; returns their paths."""
    folder = folder or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed  # no temp folder to look in: nothing can be stale there
    for entry in entries:
        owner = _STALE_NAME.match(entry.name)
        if owner is None or int(owner.group(1)) == os.getpid() or _running(int(owner.group(1))):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue  # another user's folder (or not a folder): not ours to remove
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def remove_stale_spill(temp_directory):
    """Removes the files DuckDB processes that no longer run spilled into `temp_directory` (a
    database's `DB.tmp`), and the folder if that empties it; returns the files' paths."""
    folder = Path(temp_directory)
    if folder.name == ".tmp" or not folder.is_dir():
        return []  # an in-memory database's default, under the working directory: not a database's own
    removed = []
    for entry in os.scandir(folder):
        owner = _DUCKDB_SPILL.match(entry.name)
        if owner is not None and int(owner.group(1)) != os.getpid() and not _running(int(owner.group(1))):
            try:
                os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass
    if removed:
        try:
            folder.rmdir()  # DuckDB makes it again when it spills
        except OSError:
            pass  # a running process's spill files are in it
    return removed


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True
