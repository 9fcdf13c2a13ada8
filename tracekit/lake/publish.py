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
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from tracekit.ingest.load_publish import free_name
from tracekit.lake.layout import (CONTENT, LOCK_FILE, META_FILE, PARTITION, STAGING, LakeError, decode_name,
                                  encode_name, meta,
                                  own_entries, own_folder, part_file, part_files, part_generation, part_name,
                                  part_writer, partition, per_trace_tables, published_names, refuse_foreign_folder, require_trace_files,
                                  shared_tables)

# flock excludes another open file; NFS emulates it with POSIX locks, which do not exclude the
# threads of one process from each other: this does.
_IN_PROCESS = threading.Lock()
# How long the generation a --replace superseded stays on disk: a reader that opened the lake
# before the replace reads that generation's files, and must find them. A query runs in seconds;
# a shell session longer (past this, a reader of the old generation is told to open the lake again).
SUPERSEDED_KEPT_S = 15 * 60


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
        # O_NOFOLLOW: a link standing for the lock file would have it created or written elsewhere.
        return os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644), "r+b")
    except OSError as exc:
        if os.path.islink(path):
            raise LakeError(f"{path}: is a symbolic link where the lake keeps its lock file; tracekit does not "
                            "follow links inside a lake (remove it)") from None
        raise LakeError(f"{path.parent}: cannot write to the lake ({exc.strerror})") from None


class Staging:
    """A writer's own folder in the lake, alive while it holds the flock on its `lock` file."""

    def __init__(self, lake):
        self.lake = Path(lake)
        self.writer = uuid.uuid4().hex
        self.folder = self.lake / STAGING / self.writer
        self.part = f"{self.writer}.parquet"
        with lake_lock(lake):  # a cleaner never sees it between its mkdir and its flock
            _own_mkdir(self.lake / STAGING)
            self.folder.mkdir()
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


def _own_mkdir(folder):
    """Makes a folder of the lake's own unless it is there (checked: own_folder); returns it."""
    if not own_folder(folder):
        try:
            folder.mkdir()
        except FileExistsError:
            own_folder(folder)  # another writer made it this moment, or a link stands there
    return folder


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
        for table in shared_tables():
            _own_mkdir(folder / table)
        shared_writer(folder)
        scratch = folder / f"{META_FILE}.{uuid.uuid4().hex}"
        scratch.write_text(json.dumps(meta(), indent=1) + "\n", encoding="utf-8")
        os.replace(scratch, folder / META_FILE)


def remove_leftovers(lake):
    """Removes what dead writers left: staging folders nobody holds, partitions of traces that
    trace_files does not list, half-written files, and the generations replaced long enough ago
    that no reader still reads them. Returns how many staging folders and partitions it removed."""
    lake = Path(lake)
    with lake_lock(lake):
        dead = _dead_staging(lake)
        orphans = _orphans(lake, dead_writers=dead)
        _half_written_shared(lake)
        _superseded(lake)
        return len(dead), orphans


def _dead_staging(lake):
    """Removes the staging folders nobody holds; returns their writers' ids (the folders' names)."""
    removed = set()
    for entry in own_entries(lake / STAGING):
        path = lake / STAGING / entry
        if not path.is_symlink() and path.is_dir():
            try:
                # O_NOFOLLOW: a link standing for the lock would have a file made or touched outside the lake
                with os.fdopen(os.open(path / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644),
                               "r+b") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its writer is at work
            except OSError:
                pass  # no room for a lock file, or a link where it goes: it cannot be anyone's
        _remove(path)
        removed.add(entry)
    return removed


def _remove(path):
    """Removes a file, a folder (never what a link inside it points to) or a link (not its target)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)  # rmtree never follows the links it meets inside
    else:
        Path(path).unlink(missing_ok=True)


def _orphans(lake, names=None, dead_writers=frozenset()):
    """Partitions (of `names`, or of any trace) whose trace has no trace_files partition, but those
    of a trace taken out less than SUPERSEDED_KEPT_S ago (readers that opened before may read them).
    Of any trace: only those a dead writer left (its files named by a writer of `dead_writers`, a
    staging folder nobody held), or that hold no file: partitions of whole traces whose trace_files
    partition went (a lake copied in part, a folder removed by hand) are not leftovers to remove,
    but data kept for whoever mends the lake, and a reload of the trace replaces them."""
    require_trace_files(lake)  # without it every partition would look like a dead writer's
    published = set(own_entries(lake / "trace_files"))
    kept = {entry for entry in own_entries(_replaced_notes(lake)) if not _old_enough(_replaced_notes(lake) / entry)}
    removed = 0
    for table in per_trace_tables()[1:]:
        folder = lake / table
        wanted = own_entries(folder) if names is None else [encode_name(n) for n in names]
        for entry in wanted:
            if (entry.startswith(PARTITION) and entry not in published and entry not in kept
                    and os.path.lexists(folder / entry)
                    and (names is not None or _left_by(folder / entry, dead_writers))):
                _remove(folder / entry)
                removed += 1
    return removed


def _left_by(partition_folder, writers):
    """Whether every partition file of `partition_folder` is one a writer of `writers` wrote (a
    link, or a folder with no partition file, is nobody's data)."""
    if os.path.islink(partition_folder) or not os.path.isdir(partition_folder):
        return True
    return all(part_writer(name) in writers for name in part_files(partition_folder))


def _old_enough(note):
    """Whether the replace or removal `note` records is SUPERSEDED_KEPT_S old (a missing note is)."""
    try:
        return time.time() - os.lstat(note).st_mtime > SUPERSEDED_KEPT_S
    except FileNotFoundError:
        return True


def _half_written_shared(lake):
    """Files a writer killed while it made the lake left beside a shared table's file."""
    for table in shared_tables():
        for entry in own_entries(lake / table):
            if entry.startswith("."):
                _remove(lake / table / entry)


def _replaced_notes(lake):
    return lake / CONTENT / "replaced"


def _note_replace(lake, name):
    """Notes, before a replace of trace `name` moves its files in, where the next cleanup must
    look (for a dead replacer's files, and for the generation the replace supersedes); noted
    again once it is done, so the old generation is kept SUPERSEDED_KEPT_S from then."""
    notes = _own_mkdir(_own_mkdir(lake / CONTENT) / "replaced")
    note = notes / encode_name(name)
    if os.path.islink(note) or (os.path.lexists(note) and not note.is_file()):
        _remove(note)  # a link (never followed) or a folder where a note goes: not a note of ours
    # O_NOFOLLOW: a link put there since would have a file made or touched outside the lake
    handle = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.utime(handle)
    finally:
        os.close(handle)


def _superseded(lake):
    """For each trace replaced or taken out: removes the files of generations newer than its
    trace_files' (a dead replacer's), and, SUPERSEDED_KEPT_S after, every file but its current
    one (a trace taken out has none: its partitions go, as orphans)."""
    notes = _replaced_notes(lake)
    for entry in own_entries(notes):
        old_enough = _old_enough(notes / entry)
        current = part_file(lake / "trace_files" / entry)
        newest = part_generation(current.name) if current is not None else None
        for table in per_trace_tables() if newest is not None else []:
            folder = lake / table / entry
            for file_name in part_files(folder):
                if file_name != current.name and (part_generation(file_name) > newest or old_enough):
                    _remove(folder / file_name)
        if old_enough:
            _remove(notes / entry)
            if newest is None:
                _orphans(lake, [decode_name(entry)])


def _dead_generations(lake, name):
    """Removes what dead writers left under trace `name` (its partitions when it has no trace_files
    partition, else the files of generations newer than trace_files' newest); returns the newest
    generation of a file left under the name (0 when none), which the next publication passes."""
    current = part_file(partition(lake, "trace_files", name))
    if current is None:
        _orphans(lake, [name])
    else:
        newest = part_generation(current.name)
        for table in per_trace_tables()[1:]:
            folder = partition(lake, table, name)
            for file_name in part_files(folder):
                if part_generation(file_name) > newest:
                    _remove(folder / file_name)
    # A trace taken out moments ago leaves files a reader may still read: the next one passes them.
    return max((part_generation(f) for table in per_trace_tables() for f in part_files(partition(lake, table, name))),
               default=0)


def publish(staging, name, sha256, replace, read_trace_file):
    """Moves trace `name`'s staged partitions into the lake, unless the lake holds its content
    already, by a database's rules: under `name`, or when other content holds it under the first
    free of name-2, name-3, ...; with `replace`, in place of the traces loaded from the same file
    and of the one with the same content (under the name of the former, else the latter's), as the
    next generation of that trace: readers see the old trace or the new one, whatever stops when.
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
        if old:
            _note_replace(lake, final)
        generation = _dead_generations(lake, final) + 1
        try:
            _move_in(staging, name, final, generation)
        except BaseException:
            _dead_generations(lake, final)  # what it moved in, unless trace_files went in too
            raise
        # The trace is in the lake: what follows tidies and notes hints, and a failure of it
        # (a full disk) must not make the load say otherwise.
        _after_publication(lake, staging, final, old, sha256, staged, sha_of)
    return final, None


def _after_publication(lake, staging, final, old, sha256, staged, sha_of):
    try:
        if old:
            _note_replace(lake, final)
        for other in old[1:]:
            _unpublish(lake, staging, other, sha_of)
        _set_owner(lake, lake / CONTENT / sha256, final)
        if staged[1] is not None and staged[2] is not None:
            _set_owner(lake, file_index(lake, staged[2]) / staged[1], final)
    except (OSError, LakeError):
        pass  # hints (checked against trace_files before use) and leftovers the next load removes


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
    own_folder(lake / CONTENT)
    try:
        name = (lake / CONTENT / sha256).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError, IsADirectoryError):
        return None
    return name if sha_of(name) == sha256 else None


def _set_owner(lake, entry, name):
    """Writes the index entry `entry` (a file below LAKE/_content) to say `name`, in one rename;
    the folders on its way are the lake's own (checked, or made)."""
    folder = lake
    for part in entry.relative_to(lake).parts[:-1]:
        folder = _own_mkdir(folder / part)
    scratch = folder / f".{entry.name}.{uuid.uuid4().hex}"
    scratch.write_text(name, encoding="utf-8")
    os.replace(scratch, entry)


def _unpublish(lake, staging, name, sha_of):
    """Takes trace `name` out of the lake: its trace_files partition, in one rename, so it is gone
    at once; its other partitions stay SUPERSEDED_KEPT_S for the readers that opened before (noted
    as a replace's superseded generation is), then a load removes them."""
    old_sha = sha_of(name)
    gone = staging.folder / "replaced"
    gone.mkdir(exist_ok=True)
    _note_replace(lake, name)
    os.rename(partition(lake, "trace_files", name), gone / encode_name(name))
    if old_sha is not None and (lake / CONTENT / old_sha).exists():
        (lake / CONTENT / old_sha).unlink()


def _move_in(staging, name, final, generation):
    """Puts trace `name`'s staged files in place as trace `final` at `generation`, trace_files
    last: from that rename on, readers take the trace (its files hold no name: the folder gives
    it). A new trace's partition folders are renamed in whole; a replaced trace's files go beside
    the generation readers may be reading."""
    staged, encoded = encode_name(name), encode_name(final)
    part = part_name(generation, staging.writer)
    for table in [*per_trace_tables()[1:], "trace_files"]:
        source = staging.folder / table / staged
        os.rename(source / staging.part, source / part)
        target = _own_mkdir(staging.lake / table) / encoded
        if own_folder(target):
            _rename_in(source / part, target / part)
        else:
            _rename_in(source, target)


def _rename_in(source, target):
    """One file or partition folder into place (os.rename: atomic, and refused over a folder that
    holds files), its data and the new entry on disk first and after."""
    _fsync(source if source.is_file() else next(source.iterdir()))
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
