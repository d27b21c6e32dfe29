"""A class data sharing archive for the driver's JVM: made once per Java and
Spark install, mapped by every session after.

A Spark session's start loads thousands of classes out of 280 jars, and the
first job thousands more. Mapped from an archive they load in a fraction of
the time; measured on 2 cores (``local[2]``): session start 12-13 s -> 8 s,
first job 4.3 -> 2.4 s. It is most of what a run of ``nsq_to_parquet``
waits before it reads a message.

Java 17 writes such an archive when a JVM started with
``-XX:ArchiveClassesAtExit`` exits, and maps it at a later start with
``-XX:SharedArchiveFile``, as long as Java and the class path are the same
(the jars' paths included: the JVM silently ignores an archive made from
another virtualenv's PySpark); the archive's name is a digest of both (the
java executable, where Spark's jars are and what they are), so a new Java,
a new PySpark or another virtualenv makes a new one. When there is none yet, a
process of its own makes it in the background (a session, a small job, a
clean exit: about 40 s of one core, once), and the session that asked
starts as it always did. An archive is renamed into place only after its
JVM exited cleanly: a JVM that maps a truncated archive crashes. Java's own
lines about the archive are silenced; an archive that no longer fits is
ignored by the JVM, which then loads its classes from the jars.

The archive lives in ``$XDG_CACHE_HOME/nsqpy`` (``~/.cache/nsqpy``), with a
file beside it naming the jars it was made from; a builder that has made
its archive removes those whose jars are gone (a deleted virtualenv), so
the cache holds one archive per Spark install that still exists.
``NSQPY_SPARK_CLASS_CACHE=0`` turns it off; a ``spark.driver.extraJavaOptions``
of the user's own replaces it.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ENABLE_ENV = "NSQPY_SPARK_CLASS_CACHE"
QUIET = "-Xlog:cds*=off"  # the JVM's notes about the archive go to standard output otherwise
_STALE_LOCK = 600.0  # seconds: a builder that held its lock this long died without removing it


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nsqpy")


def _java() -> str | None:
    """The java that Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_path() -> str | None:
    """Where the archive for this Java and this Spark lives (None: no java found)."""
    java = _java()
    if java is None:
        return None
    jars = _jars()
    digest = hashlib.sha256()
    java_stat = os.stat(java)
    digest.update(f"{java} {java_stat.st_size} {java_stat.st_mtime_ns}\n{jars}\n".encode())
    for name in sorted(os.listdir(jars)):
        digest.update(f"{name} {os.path.getsize(os.path.join(jars, name))}\n".encode())
    return os.path.join(cache_dir(), f"spark-driver-{digest.hexdigest()[:16]}.jsa")


def _jars() -> str:
    """The directory of the Spark install's jars: the driver's class path."""
    from pyspark.find_spark_home import _find_spark_home

    return os.path.abspath(os.path.join(_find_spark_home(), "jars"))


def _made_from(archive: str) -> str:
    """The file beside ``archive`` that names the jars it was made from."""
    return archive.removesuffix(".jsa") + ".jars"


def prune(directory: str) -> list[str]:
    """Remove the archives in ``directory`` whose jars are gone, or whose
    jars are unknown (made before archives named them); -> those removed."""
    removed = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("spark-driver-") and name.endswith(".jsa")):
            continue
        archive = os.path.join(directory, name)
        try:
            with open(_made_from(archive)) as named:
                if os.path.isdir(named.read().strip()):
                    continue
        except FileNotFoundError:
            pass
        for leftover in (archive, _made_from(archive)):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
        removed.append(archive)
    return removed


def driver_java_options() -> str:
    """The driver JVM's options that map the archive; "" when there is none
    yet (one is then being made) or the cache is off."""
    if os.environ.get(ENABLE_ENV, "1") == "0":
        return ""
    try:
        path = archive_path()
    except OSError:
        return ""
    if path is None:
        return ""
    if os.path.exists(path):
        return f"-XX:SharedArchiveFile={path} {QUIET}"
    _start_builder(path)
    return ""


def _start_builder(path: str) -> None:
    """``python -m nsqpy.spark.classcache <path>`` in the background, unless
    another process is making it now."""
    lock = path + ".lock"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(lock) and time.time() - os.path.getmtime(lock) > _STALE_LOCK:
            os.unlink(lock)
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:  # being made by another process, or no cache directory: start without
        return
    subprocess.Popen([sys.executable, "-m", __name__, path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True,
                     env={**os.environ, ENABLE_ENV: "0"})


def build(path: str) -> int:
    """Make the archive at ``path``: a session that runs what an archive job
    runs (a batch and a streaming write of Parquet), then a clean exit."""
    from pyspark import SparkContext

    from .session import build_session

    partial = f"{path}.{os.getpid()}.partial"
    try:
        with tempfile.TemporaryDirectory(prefix="nsqpy-classcache-") as work:
            spark = build_session("local[2]", "nsqpy class cache", {
                "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} {QUIET}"})
            rows = spark.range(1000).selectExpr("cast(id as string) as body", "current_date() as date",
                                                "hour(current_timestamp()) as hour")
            rows.write.partitionBy("date", "hour").parquet(os.path.join(work, "batch"))
            stream = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
                      .writeStream.format("parquet").option("path", os.path.join(work, "stream"))
                      .option("checkpointLocation", os.path.join(work, "checkpoint")).start())
            deadline = time.monotonic() + 120
            while not stream.recentProgress and time.monotonic() < deadline:
                time.sleep(0.5)
            stream.stop()
            spark.stop()
            jvm = SparkContext._gateway.proc
            jvm.stdin.close()  # the gateway JVM exits, and writes the archive as it does
            status = jvm.wait(600)
        if status == 0 and os.path.exists(partial):
            with open(_made_from(path), "w") as named:  # first: a pruning builder keeps an archive that has it
                named.write(_jars() + "\n")
            os.replace(partial, path)
            prune(os.path.dirname(path))
            return 0
        return 1
    finally:
        for leftover in (partial, path + ".lock"):
            if os.path.exists(leftover):
                os.unlink(leftover)


if __name__ == "__main__":
    # started from a thread that blocks SIGINT (nsq_to_parquet's Spark start): a builder can be interrupted
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    sys.exit(build(sys.argv[1]))
