import gzip
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_TRACES = ROOT / "sample_traces"


def read_trace(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _has_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# The modules that take longest, first in the collection. xdist's loadfile hands modules out by
# their number of tests, most first (its --loadscope-reorder, on by default), so under `-n 2` this
# order only breaks its ties; telling it to keep this order instead was measured neither faster
# nor slower (a slow hour: 12 min 26 s against 12 min 48 s; a module runs on one worker either way).
LONGEST_FIRST = ("test_spark.py", "test_docs_examples.py", "test_spark_sandbox.py", "test_lake_safety.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: the rest keep their order
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


TEST_DATA = ROOT / "tests" / "data"


def invoke_cli(*args, stdin=None, env=None):
    """Runs the tracekit CLI in-process with each argument as text, `stdin` as its standard input,
    COLUMNS unset (tables print whole, wherever the tests run) unless `env` sets it."""
    from click.testing import CliRunner
    from tracekit.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin, env={"COLUMNS": None, **(env or {})})


def read_until_closed(fd):
    """Everything a pseudo-terminal's leader `fd` gives until the process on its other end is gone."""
    import os

    output = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break  # the terminal closed with the process
        if not chunk:
            break
        output += chunk
    os.close(fd)
    return output


def db_dicts(db, sql, params=()):
    """The rows of `sql` (with `params`) on database file `db` as dicts by column name, opened for
    queries (its views current) for just this call."""
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(db)
    try:
        cursor = con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        con.close()


def named_traces_db(tmp_path_factory, folder, traces):
    """A database file with each of `traces` ({name: file}) loaded and renamed `name`."""
    return named_traces_db_at(tmp_path_factory.mktemp(folder) / f"{folder}.duckdb", traces)


def named_traces_db_at(path, traces):
    """named_traces_db's database at `path`."""
    from tracekit.ingest.loader import load_file
    from tracekit.store.database import connect

    con = connect(path)
    for name, file in traces.items():
        assert load_file(con, file).status == "loaded"
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [name, str(file.resolve())])
    con.close()
    return path


def cli_loaded(tmp_path_factory, name, *files):
    """A database file, in a fresh temporary folder, with `files` loaded by `tracekit load`."""
    db = tmp_path_factory.mktemp(name) / f"{name}.duckdb"
    result = invoke_cli("load", *files, "--db", db)
    assert result.exit_code == 0, result.output
    return db


def load_named(db, files):
    """Database file `db` with each of `files` ({trace name: trace file}) loaded under its name."""
    from tracekit.ingest.loader import load_file
    from tracekit.store.database import connect

    con = connect(db)
    try:
        for name, file in files.items():
            assert load_file(con, file).status == "loaded"
            con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [name, str(file.resolve())])
    finally:
        con.close()
    return db


def db_rows(db, sql, params=()):
    """The rows of `sql` (with `params`) on database file `db`, opened read-only for just this call."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()
CPU_TRACE = TEST_DATA / "cpu" / "naive_cpu.json.gz"


def built_once(tmp_path_factory, name, build):
    """A copy, this worker's own, of the database file `build(path)` makes, built once for the test
    run: pytest-xdist's workers share the run's base folder, so a worker that asks for it second
    waits for the first one's build and copies the file (a few MB) rather than load its traces again."""
    import fcntl
    import os
    import shutil

    base = tmp_path_factory.getbasetemp()
    shared_folder = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = shared_folder / f"built-{name}" / f"{name}.duckdb"
    with open(shared_folder / f"built-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, a failed build's too
        if not shared.exists():
            shared.parent.mkdir(exist_ok=True)
            building = shared.with_name(f"{name}.building.duckdb")
            for left in (building, Path(f"{building}.wal")):  # a build that failed in another worker
                left.unlink(missing_ok=True)
            build(building)
            assert not Path(f"{building}.wal").exists(), "the build left its database open"
            building.rename(shared)
    own = tmp_path_factory.mktemp(name) / f"{name}.duckdb"
    shutil.copyfile(shared, own)
    return own


def _load_each(db, files):
    from tracekit.store.database import connect
    from tracekit.ingest.loader import load_file

    con = connect(db)
    try:
        for trace in files:
            assert load_file(con, trace).status == "loaded", trace
    finally:
        con.close()


def _cli_load(db, *paths):
    result = invoke_cli("load", *paths, "--db", db)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory):
    """A database holding the eight sample traces, loaded once for the session."""
    return built_once(tmp_path_factory, "samples", lambda db: _load_each(db, sorted(SAMPLE_TRACES.glob("*.json.gz"))))


@pytest.fixture(scope="session")
def foreign_db(tmp_path_factory):
    """A database of the foreign traces (tests/data/foreign), loaded once for the session."""
    return built_once(tmp_path_factory, "foreign",
                      lambda db: _load_each(db, sorted((TEST_DATA / "foreign").glob("*.json.gz"))))


@pytest.fixture(scope="session")
def loops_db(tmp_path_factory):
    """A database of the H200 loops (tests/data/h200/loops), loaded once for the session."""
    return built_once(tmp_path_factory, "loops", lambda db: _cli_load(db, TEST_DATA / "h200" / "loops"))


@pytest.fixture(scope="session")
def launch_bound_db(tmp_path_factory):
    """A database of launch-bound training on the H200 (tests/data/h200/train_fp32) and the gloo
    job on the CPU (tests/data/cpu/gloo_job): steps the CPU bounds."""
    return built_once(tmp_path_factory, "launch_bound",
                      lambda db: _cli_load(db, TEST_DATA / "h200" / "train_fp32", TEST_DATA / "cpu" / "gloo_job"))


@pytest.fixture(scope="session")
def side_streams_db(tmp_path_factory):
    """tests/data/h200/side_streams: the main stream waiting for a side stream's GEMM, and the loop without it."""
    return built_once(tmp_path_factory, "side", lambda db: _cli_load(db, TEST_DATA / "h200" / "side_streams"))


@pytest.fixture
def sample_con(sample_db):
    from tracekit.store.database import connect

    con = connect(sample_db, read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """The bad-input corpus (tests/make_bad_corpus.py), built once for the session."""
    import make_bad_corpus

    folder = tmp_path_factory.mktemp("corpus")
    make_bad_corpus.build(folder)
    return folder


@pytest.fixture
def fresh_db(tmp_path):
    """An empty database path in a test's own folder."""
    return tmp_path / "t.duckdb"


@pytest.fixture
def isolated_cwd(tmp_path, monkeypatch):
    """A working directory with no tracekit.duckdb, and a private cache for the samples database."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACEKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path


# The NCCL kernel name of NCCL before 2.19: HTA 0.5's straggler analysis looks only for it.
OLD_NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


@pytest.fixture(scope="session")
def rank_job(tmp_path_factory):
    """A 3-rank job built by tests/make_rank_traces.py from real traces (rank 1 is 3 ms late in
    step 3), loaded with one `tracekit load` of its folder: (Job, folder, database)."""
    import make_rank_traces

    folder = tmp_path_factory.mktemp("job")
    job, _ = make_rank_traces.build(folder / "traces", make_rank_traces.Job(
        ranks=3, straggler=1, step=3, delay_us=3000.0, kernel_name=OLD_NCCL_KERNEL))
    db = folder / "job.duckdb"
    result = invoke_cli("load", folder / "traces", "--db", db)
    assert result.exit_code == 0, result.output
    return job, folder / "traces", db


# One Spark for every Spark test module: its JVM takes 15-20 s to start. Settings for a small lake:
# one shuffle partition (each is a task); adaptive query execution off (it re-plans every stage of
# a query at run time, which on a few thousand rows costs more than any plan it finds: the summary
# query took half the time without it); Spark's code generation off, as compiling each query's
# generated Java costs more than it saves on a few thousand rows (a query runs about twice as fast
# interpreted here); no web UI. The JVM (local mode: driver and executors in one) runs a few
# minutes of short queries, so it compiles with C1 alone (C2's optimizing compiles of Spark's own
# code never pay back in that time) and collects its 1 GB heap with the serial collector (no
# collector threads competing for the two cores): the module's JVM spends about a quarter less CPU
# and starts in half the time. Neither changes a result. C1 alone reserves 48 MB for compiled
# code, which Spark's queries filled in about a minute: the JVM then stops compiling ("CodeCache is
# full. Compiler has been disabled"), runs what is left of the module interpreted, and can fail a
# query ("Out of space in CodeCache for adapters"); 240 MB holds all of it. SPARK_SECRET sits in the Python workers'
# environment, for the sandbox tests to show a query cannot reach it.
SPARK_SECRET = "tracekit-spark-secret-52c1"
SPARK_TEST_SETTINGS = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                       "spark.sql.files.openCostInBytes": "0",
                       "spark.sql.codegen.wholeStage": "false",
                       "spark.sql.codegen.factoryMode": "NO_CODEGEN", "spark.ui.enabled": "false",
                       "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                                                        "-XX:ReservedCodeCacheSize=240m",
                       "spark.executorEnv.TK_SECRET": SPARK_SECRET}


@pytest.fixture(scope="session")
def spark_session():
    """The Spark session the Spark tests share; a SparkLake finds it running and leaves it so."""
    pytest.importorskip("pyspark")
    from tracekit.spark.session import start_session

    session = start_session("local[2]", SPARK_TEST_SETTINGS)
    yield session
    session.stop()
