"""Making a trace visible in a lake, all of it at once, with writers that never talk to each other.

A writer stages a trace's partitions in a folder of its own (LAKE/_staging/<uuid>/, flock'ed by
it while it lives), then, holding the lake's lock, renames them into place, trace_files last:
readers take only the traces that trace_files lists, so they see a trace whole or not at all.
Everything a dead writer left (its staging folder, partitions with no trace_files partition) is
removed by the next writer, under the same lock, which is what tells leftovers from work in progress.
"""

import fcntl
import json
import os
import re
import shutil
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

from tracekit.ingest.load_publish import free_name
from tracekit.lake.layout import (CONTENT, LOCK_FILE, META_FILE, PARTITION, STAGING, LakeError, encode_name, meta,
                                  part_file, partition, per_trace_tables, published_names, refuse_foreign_folder)

# flock excludes another open file; NFS emulates it with POSIX locks, which do not exclude the
# threads of one process from each other: this does.
_IN_PROCESS = threading.Lock()


@contextmanager
def lake_lock(lake):
    """The lake's lock, held while partitions are renamed in or out (milliseconds)."""
    with _IN_PROCESS:
        handle = _open_lock(Path(lake) / LOCK_FILE)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            handle.close()


def _open_lock(path):
    try:
        return open(path, "a+b")
    except OSError as exc:
        raise LakeError(f"{path.parent}: cannot write to the lake ({exc.strerror})") from None


class Staging:
    """A writer's own folder in the lake, alive while it holds the flock on its `lock` file."""

    def __init__(self, lake):
        self.lake = Path(lake)
        self.folder = self.lake / STAGING / uuid.uuid4().hex
        self.part = f"part-{self.folder.name}.parquet"
        with lake_lock(lake):  # a cleaner never sees it between its mkdir and its flock
            self.folder.mkdir(parents=True)
            self._lock = open(self.folder / "lock", "a+b")
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def file(self, table, name):
        """Where this writer writes trace `name`'s rows of `table` (its folder is made)."""
        folder = self.folder / table / encode_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        return folder / self.part

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)
        self._lock.close()


def ensure_lake(lake, shared_writer):
    """Makes `lake` a lake if it is not one yet (its _tracekit.json and the shared tables, written
    by `shared_writer(table, path)`); refuses a folder of someone else's."""
    folder = Path(lake)
    refuse_foreign_folder(folder)
    if (folder / META_FILE).exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    with lake_lock(folder):
        if (folder / META_FILE).exists():
            return
        shared_writer(folder)
        scratch = folder / f"{META_FILE}.{uuid.uuid4().hex}"
        scratch.write_text(json.dumps(meta(), indent=1) + "\n", encoding="utf-8")
        os.replace(scratch, folder / META_FILE)


def remove_leftovers(lake):
    """Removes what dead writers left: staging folders nobody holds, and partitions of traces that
    trace_files does not list. Returns how many of each it removed."""
    with lake_lock(lake):
        return _dead_staging(Path(lake)), _orphans(Path(lake))


def _dead_staging(lake):
    removed = 0
    try:
        entries = list(os.scandir(lake / STAGING))
    except FileNotFoundError:
        return 0
    for entry in entries:
        try:
            with open(Path(entry.path) / "lock", "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # its writer is at work
        except OSError:
            pass  # not a folder, or one with no room for a lock file: it cannot be anyone's
        _remove(entry.path)
        removed += 1
    return removed


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        Path(path).unlink(missing_ok=True)


def _orphans(lake, names=None):
    """Partitions (of `names`, or of any trace) whose trace has no trace_files partition."""
    published = set(os.listdir(lake / "trace_files")) if (lake / "trace_files").is_dir() else set()
    removed = 0
    for table in per_trace_tables()[1:]:
        folder = lake / table
        if not folder.is_dir():
            continue
        wanted = os.listdir(folder) if names is None else [encode_name(n) for n in names]
        for entry in wanted:
            if entry.startswith(PARTITION) and entry not in published and (folder / entry).exists():
                shutil.rmtree(folder / entry, ignore_errors=True)
                removed += 1
    return removed


def publish(staging, name, sha256, replace, read_trace_file):
    """Moves trace `name`'s staged partitions into the lake, unless the lake holds its content
    already, by a database's rules: under `name`, or when other content holds it under the first
    free of name-2, name-3, ...; with `replace`, in place of the traces loaded from the same file
    and of the one with the same content (under the name of the former, else the latter's).
    The name is picked under the lake's lock, so writers that never talk to each other never pick
    one name twice. Returns (the name it published under, None), or (None, the name of the trace
    that holds this content) for a skip. `read_trace_file(part)` reads (sha256, file_sha256,
    file_bytes, path) of a trace_files partition's file."""
    lake = staging.lake
    staged = read_trace_file(staging.file("trace_files", name))
    sha_of = lambda other: _published(lake, other, read_trace_file)[0]  # noqa: E731
    with lake_lock(lake):
        taken = _name_and_suffixed(lake, name)
        # The content index, and the name itself (an index entry a dead writer never wrote).
        owner = _content_owner(lake, sha256, sha_of) or (name if name in taken and sha_of(name) == sha256 else None)
        if owner is not None and not replace:
            return None, owner
        # Only a replace reads every name-N's source: each is a file read, under the lock.
        same_source = replace and staged[3] is not None
        old = [other for other in taken if same_source and _published(lake, other, read_trace_file)[3] == staged[3]]
        old += [owner] if owner is not None and owner not in old else []
        final = old[0] if old else free_name(name, taken)
        for other in old:
            _unpublish(lake, staging, other, sha_of)
        _orphans(lake, [final])
        try:
            _move_in(staging, name, final)
        except BaseException:
            _orphans(lake, [final])  # what it moved in, unless trace_files went in too
            raise
        _set_owner(lake / CONTENT / sha256, final)
        if staged[1] is not None and staged[2] is not None:
            _set_owner(file_index(lake, staged[2]) / staged[1], final)
    return final, None


def _name_and_suffixed(lake, name):
    """The published names `name` and name-N: those a file of this name may have been given."""
    suffixed = re.compile(re.escape(name) + r"-[0-9]+")
    return [other for other in published_names(lake) if other == name or suffixed.fullmatch(other)]


def file_index(lake, file_bytes=None):
    """Where the lake notes which trace was loaded from a file of `file_bytes` bytes (a file per
    SHA-256 of such a file, holding the trace's name; with no size, the index itself): a hint,
    checked against that trace's trace_files, that finds a file loaded before without reading
    every trace."""
    index = Path(lake) / CONTENT / "files"
    return index if file_bytes is None else index / str(file_bytes)


def _published(lake, name, read_trace_file):
    """(sha256, file_sha256, file_bytes, path) of published trace `name`; Nones when it is gone."""
    part = part_file(partition(lake, "trace_files", name))
    return read_trace_file(part) if part is not None else (None, None, None, None)


def _content_owner(lake, sha256, sha_of):
    """The published trace whose content is `sha256`, by the _content index, checked against its
    trace_files (the index is a hint: a writer may have died before or after writing it)."""
    try:
        name = (lake / CONTENT / sha256).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return name if sha_of(name) == sha256 else None


def _set_owner(entry, name):
    entry.parent.mkdir(parents=True, exist_ok=True)
    scratch = entry.parent / f".{entry.name}.{uuid.uuid4().hex}"
    scratch.write_text(name, encoding="utf-8")
    os.replace(scratch, entry)


def _unpublish(lake, staging, name, sha_of):
    """Takes trace `name` out of the lake: its trace_files partition first (in one rename, so it
    is gone at once), then the rest, which no reader reads from then on."""
    old_sha = sha_of(name)
    gone = staging.folder / "replaced"
    gone.mkdir(exist_ok=True)
    os.rename(partition(lake, "trace_files", name), gone / encode_name(name))
    _orphans(lake, [name])
    if old_sha is not None and (lake / CONTENT / old_sha).exists():
        (lake / CONTENT / old_sha).unlink()


def _move_in(staging, name, final):
    """Renames trace `name`'s staged partitions into place as trace `final`, trace_files last: from
    that rename on, the trace is in the lake (its files hold no name: the folder gives it)."""
    staged, encoded = encode_name(name), encode_name(final)
    for table in [*per_trace_tables()[1:], "trace_files"]:
        source = staging.folder / table / staged
        target_folder = staging.lake / table
        target_folder.mkdir(exist_ok=True)
        _rename_partition(source, target_folder / encoded)


def _rename_partition(source, target):
    """One partition folder into place (os.rename: atomic, and refused over a folder that holds
    files), its file and the new entry on disk first and after."""
    _fsync(part_file(source))
    os.rename(source, target)
    _fsync(target.parent)


def _fsync(path):
    """Puts a file (or a folder's entries) on disk: a rename is atomic, but without this a power
    cut could leave a published name pointing at data never written."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

