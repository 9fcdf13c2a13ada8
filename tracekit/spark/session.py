"""Starting Apache Spark for tracekit's queries: a SparkSession (`local[*]`, or any master URL) set
up so that DuckDB's answers are Spark's too, started without Spark's log on the terminal.

Only `--engine spark` imports this module; pyspark is the optional extra `tracekit[spark]`.
"""

import atexit
import logging
import os
import re
import sys
import tempfile
import warnings
from contextlib import contextmanager

from tracekit.errors import TracekitError

INSTALL_HINT = "pip install 'tracekit[spark]'"
DEFAULT_MASTER = "local[*]"

# What Spark must do as DuckDB does for tracekit's SQL to give the same rows:
SETTINGS = {
    # DuckDB gives NULL for an array index past the end (`block[3]` of a 2-D block) and for a CAST
    # it cannot make; Spark's ANSI mode (its default since 4.0) raises instead.
    "spark.sql.ansi.enabled": "false",
    # The lake's times are DuckDB TIMESTAMPs (no zone): read and shown as written.
    "spark.sql.session.timeZone": "UTC",
    # The lake's partition values are trace names, text even when a name looks like a number.
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # A query sees the lake's tables and views alone, as on DuckDB: no `parquet.`/any/path`` reads.
    "spark.sql.runSQLOnFiles": "false",
    # SQL text is read as written: Spark would put ${env:NAME}, ${system:...} and ${sparkconf:...} in
    # its place (string literals too) before parsing, so a query could read the environment.
    "spark.sql.variable.substitute": "false",
    # Nothing to serve: a query's rows are all tracekit shows.
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def require_pyspark():
    """Raises TracekitError, saying how to install them, unless pyspark and sqlglot import."""
    for module in ("pyspark", "sqlglot"):
        try:
            __import__(module)
        except ImportError:
            raise TracekitError(f"--engine spark needs {module}, which is not installed: {INSTALL_HINT}") from None


def start_session(master=None, settings=None):
    """A SparkSession on `master` (local[*] by default) with SETTINGS and `settings` (more Spark
    settings, e.g. spark.sql.shuffle.partitions); a session already active in this process (a
    notebook's) is returned as it is, its settings untouched: own_session sets tracekit's on a
    session of its own.

    The JVM's own output (its log, its warnings) goes to a temporary file, not the terminal; if
    Spark does not start, the error says what its last line said."""
    require_pyspark()
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    if master.startswith("local"):
        # The workers that run tracekit's UDF are this Python (with pyspark), not the first python3
        # on the PATH; on a cluster, its own setting says which Python runs there.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("tracekit")
    # tracekit keeps no Spark tables: without this Spark leaves a spark-warehouse folder wherever it
    # ran. Spark makes this one, empty, when a session first makes a view; it goes when Python exits.
    warehouse_dir = os.path.join(tempfile.gettempdir(), f"tracekit-spark-warehouse-{os.getpid()}")
    atexit.register(_remove_empty_folder, warehouse_dir)
    active = SparkSession.getActiveSession()
    if active is not None:
        # the builder's settings would be set on it (getOrCreate does): its time zone, ANSI mode...
        return active
    warehouse = {"spark.sql.warehouse.dir": warehouse_dir}
    for key, value in {**SETTINGS, **warehouse, **(settings or {})}.items():
        builder = builder.config(key, value)
    with tempfile.TemporaryFile() as log, _quiet_jvm(log):
        try:
            session = builder.getOrCreate()
        except Exception as exc:  # pyspark raises its own, py4j's or a RuntimeError: all mean "no Spark"
            raise TracekitError(f"Spark did not start on {master}: "
                                f"{_reason(log) or _first_line(exc)}") from None
    session.sparkContext.setLogLevel("ERROR")
    _silence_python_error_log()
    return session


def own_session(base, settings=None):
    """A session of `base`'s Spark with temporary views of its own (two lakes, or a lake and a
    notebook's tables, never mix) and the SQL settings SETTINGS and `settings` set."""
    session = base.newSession()
    for key, value in {**SETTINGS, **(settings or {})}.items():
        if key.startswith("spark.sql."):
            session.conf.set(key, value)
    return session


def _remove_empty_folder(path):
    try:
        os.rmdir(path)
    except OSError:  # never made, or someone put something in it: theirs to keep
        pass


@contextmanager
def _quiet_jvm(log):
    """Points this process's stderr at `log` while the JVM starts, so the JVM inherits it; pandas'
    version warning that pyspark gives on import is muted too."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log.fileno(), 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _silence_python_error_log():
    # pyspark logs each failed query as JSON to stderr before it raises; tracekit says it in one line.
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


_EXCEPTION = re.compile(r"(?:[\w$]+\.)*\w*(?:Exception|Error): (.+)")


def _reason(log):
    """Why the JVM stopped, from its output: the message of the last exception it printed, else
    its last line (the launch script's complaint, when Java itself did not start)."""
    log.seek(0)
    lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines()
             if line.strip() and not line.strip().startswith(("at ", "..."))]
    for line in reversed(lines):
        found = _EXCEPTION.search(line)
        if found:
            return found.group(1).strip()
    return lines[-1] if lines else ""


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def spark_error_text(exc):
    """The first line of a Spark error, without its SQLSTATE tail and plan (for an error pyspark
    does not know, the Java exception's own message; for a Python UDF's, the UDF's own message,
    not pyspark's "An exception was thrown from the Python worker")."""
    from pyspark.errors import PythonException

    if isinstance(exc, PythonException):
        raised = [found.group(1) for found in map(_EXCEPTION.match, str(exc).splitlines()) if found]
        if raised:
            return raised[-1].strip()
    java = getattr(exc, "java_exception", None)
    first = _first_line(java.toString() if java is not None else exc)
    for tail in (" SQLSTATE:", "; line "):
        if tail in first:
            first = first[:first.index(tail)]
    return first.strip()
