"""Where things are in a lake (see tracekit.lake): partition folders, trace ids, the tables and
their columns, and the lake's _tracekit.json."""

import functools
import json
import os
import re
import stat
from pathlib import Path

from tracekit.version import __version__
from tracekit.errors import TracekitError
from tracekit.ingest.loader import LAKE_MARKER

# The version of the layout itself; a reader refuses a lake of another.
LAKE_FORMAT = 1
META_FILE = LAKE_MARKER
STAGING = "_staging"
CONTENT = "_content"
LOCK_FILE = "_lock"
PARTITION = "trace="
PART_PREFIX = "part-"
SHARED_PART = "part-0.parquet"

_PLAIN = re.compile(r"[A-Za-z0-9._-]")
# A partition's file: part-<generation>-<writer>.parquet. A --replace publishes the trace's next
# generation beside the one readers may still be reading; readers take the newest that trace_files
# holds. A lake written before generations names its files part-<writer>.parquet: generation 0.
_PART_FILE = re.compile(r"part-(?:([0-9]+)-)?([0-9a-f]{32})\.parquet")


class LakeError(TracekitError):
    """A lake cannot be read or written."""


# The partition value that Hive's layout, and so DuckDB's and Spark's readers, read as NULL.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def encode_name(name):
    """The folder name of trace `name`'s partitions: `trace=` and the name with each ASCII
    character other than letters, digits, `.`, `_`, `-` as %XX. Non-ASCII characters stay as they
    are: Spark decodes %XX one byte to one character, so a UTF-8 byte written as %XX would not
    come back."""
    if name == HIVE_NULL:  # read as it is, DuckDB and Spark take it for a NULL partition value
        return PARTITION + "".join(f"%{ord(c):02X}" if c == "_" else c for c in name)
    return PARTITION + "".join(c if _PLAIN.match(c) or ord(c) > 127 else f"%{ord(c):02X}" for c in name)


def decode_name(folder_name):
    """The trace name of a partition folder (encode_name's inverse)."""
    text = folder_name[len(PARTITION):]
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def trace_id_for(sha256):
    """A trace's id in a lake: the first 63 bits of its content's SHA-256 (hex), a positive BIGINT."""
    return int(sha256[:16], 16) >> 1


def partition(lake, table, name):
    return Path(lake) / table / encode_name(name)


def published_names(lake):
    """The names of the traces in the lake: those with a trace_files partition, sorted."""
    entries = own_entries(Path(lake) / "trace_files")
    return sorted(decode_name(entry) for entry in entries if entry.startswith(PARTITION))


def part_name(generation, writer):
    """The name of a partition file of `writer` (its staging folder's id) at `generation`."""
    return f"{PART_PREFIX}{generation}-{writer}.parquet"


def part_generation(file_name):
    """The generation of a partition file's name; None for a name that is no partition file (a
    dot-file DuckDB was killed writing, say: never read)."""
    match = _PART_FILE.fullmatch(file_name)
    return None if match is None else int(match.group(1) or 0)


def part_writer(file_name):
    """The id of the writer (its staging folder's name) that wrote a partition file; None for a
    name that is no partition file."""
    match = _PART_FILE.fullmatch(file_name)
    return None if match is None else match.group(2)


def part_files(folder):
    """The partition files of `folder`, oldest generation first ([] when it has none)."""
    named = [(part_generation(entry), entry) for entry in own_entries(folder)]
    return [entry for generation, entry in sorted((g, e) for g, e in named if g is not None)]


def part_file(folder):
    """The newest partition file of a partition folder (None when it has none)."""
    files = part_files(folder)
    return Path(folder) / files[-1] if files else None


def own_folder(path):
    """Whether the folder `path`, one the lake keeps (_staging, a table's, a partition's...), exists;
    raises LakeError when a link or a file stands there: tracekit never follows a link inside a
    lake, so nothing it removes or writes can be outside it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise LakeError(f"{path}: is a symbolic link where the lake keeps a folder of its own; tracekit does not "
                        "follow links inside a lake (put the folder itself there)")
    if not stat.S_ISDIR(mode):
        raise LakeError(f"{path}: is a file where the lake keeps a folder; the lake is damaged "
                        "(was it copied in part?)")
    return True


def own_entries(folder):
    """The entries of a folder the lake keeps ([] when it is missing), checked by own_folder."""
    if not own_folder(folder):
        return []
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []  # removed this very moment (a trace another writer took out)


def whole_traces(lake):
    """(name, part file name) of each published trace, at its newest generation: what a reader
    takes. Raises LakeError for a trace a partition file of which is missing (a damaged lake),
    unless the trace was taken out of the lake while it was being looked at."""
    lake = Path(lake)
    tables = per_trace_tables()
    for table in tables:
        own_folder(lake / table)
    require_trace_files(lake)
    whole = []
    for name in published_names(lake):
        current = part_file(partition(lake, "trace_files", name))
        if current is None:
            if partition(lake, "trace_files", name).exists():
                raise LakeError(f"{lake}: trace {name!r} is damaged: its trace_files partition holds no file; "
                                "load its file again with --replace")
            continue
        missing = [table for table in tables[1:] if current.name not in own_entries(partition(lake, table, name))]
        if not missing:
            for table in tables:  # no reader follows a link out of the lake (DuckDB's sandbox refuses; Spark would not)
                if os.path.islink(partition(lake, table, name) / current.name):
                    raise LakeError(f"{lake}: trace {name!r} is damaged: its {table} file {current.name} is a symbolic "
                                    "link; tracekit does not follow links inside a lake (load its file again with --replace)")
            whole.append((name, current.name))
        elif current.exists():
            raise LakeError(f"{lake}: trace {name!r} is damaged: its {missing[0]} partition lacks {current.name}; "
                            "load its file again with --replace")
    return whole


def require_trace_files(lake):
    """Raises LakeError when the lake's trace_files folder is missing while another table holds
    traces' partitions: a lake copied in part, or its trace_files moved away. Read as it is, the
    lake would hold no trace, and a writer would take every partition for a dead writer's."""
    lake = Path(lake)
    if own_folder(lake / "trace_files"):
        return
    for table in per_trace_tables()[1:]:
        held = sum(entry.startswith(PARTITION) for entry in own_entries(lake / table))
        if held:
            raise LakeError(f"{lake}: is damaged: its trace_files folder is missing while {table} holds the "
                            f"partitions of {held} trace{'s' if held > 1 else ''} (was it copied in part?); "
                            "put trace_files back, or load the traces into a new lake")


@functools.lru_cache(maxsize=None)
def table_columns():
    """{table: [(column, type), ...]} of every physical table of tables.sql and of the knowledge
    tables, in their order, as a database of this tracekit has them (schema_info left out)."""
    import duckdb

    from tracekit.store.database import split_statements, sql_resource
    from tracekit.store.knowledge import create_statements

    con = duckdb.connect(":memory:")
    try:
        for statement in [*split_statements(sql_resource("tables.sql")), *create_statements()]:
            con.execute(statement)
        rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                           "WHERE table_schema = 'main' AND table_name <> 'schema_info' "
                           "ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    columns = {}
    for table, column, kind in rows:
        columns.setdefault(table, []).append((column, kind))
    return columns


def per_trace_tables():
    """The tables whose rows belong to one trace (they have a trace_id), trace_files first."""
    tables = [t for t, cols in table_columns().items() if any(c == "trace_id" for c, _ in cols)]
    return ["trace_files"] + sorted(t for t in tables if t != "trace_files")


def shared_tables():
    """The tables every trace shares: the kernel rules and the GPU knowledge."""
    return sorted(t for t in table_columns() if t not in per_trace_tables())


def meta():
    """What a lake written by this tracekit says of itself."""
    from tracekit.store.database import SCHEMA_VERSION

    return {"lake_format": LAKE_FORMAT, "tracekit_version": __version__, "schema_version": SCHEMA_VERSION}


def read_meta(lake):
    """The lake's _tracekit.json, checked: raises LakeError for a folder that is no lake, or a
    lake of another layout or schema."""
    path = Path(lake) / META_FILE
    if not Path(lake).is_dir():
        raise LakeError(f"{lake}: no such lake; create it with `tracekit load TRACE... --lake {lake}`")
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LakeError(f"{lake}: not a tracekit lake (it has no {META_FILE}); "
                        f"create one with `tracekit load TRACE... --lake NEW_FOLDER`") from None
    except (OSError, ValueError) as exc:
        raise LakeError(f"{lake}: its {META_FILE} cannot be read ({exc})") from None
    check_meta(stored, lake)
    return stored


def check_meta(stored, lake):
    ours = meta()
    for key, what in (("lake_format", "lake format"), ("schema_version", "schema")):
        theirs = str(stored.get(key)) if isinstance(stored, dict) else "unknown"
        if theirs == str(ours[key]):
            continue
        if theirs.isdigit() and int(theirs) > int(ours[key]):
            raise LakeError(f"{lake}: made by a newer tracekit ({what} {theirs}); upgrade tracekit to read it")
        raise LakeError(f"{lake}: made by an older tracekit ({what} {theirs}; this one uses {ours[key]}): "
                        "load its traces again into a new lake (tracekit load TRACE... --lake NEW_FOLDER)")


def refuse_foreign_folder(lake):
    """Refuses to make a lake in a folder that holds files of someone else's."""
    folder = Path(lake)
    if folder.exists() and not folder.is_dir():
        raise LakeError(f"{lake}: is a file, not a folder; give --lake a folder (it is created if missing)")
    if (folder / META_FILE).exists() or not folder.exists():
        return
    # What another writer making the lake this very moment may have made so far.
    ours = {STAGING, LOCK_FILE, CONTENT, *table_columns()}
    others = sorted(entry for entry in os.listdir(folder) if entry not in ours and not entry.startswith(META_FILE))
    if others:
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        raise LakeError(f"{lake}: a folder that is not a tracekit lake: it holds {shown}; "
                        "give --lake a new or empty folder")
