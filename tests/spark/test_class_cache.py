"""The driver JVM's class data sharing archive (``nsqpy.spark.classcache``):
made by a process of its own, renamed into place only once complete, named
after the Java and Spark it fits, and mapped by a later session's JVM."""

import os
import subprocess
import sys

import pytest

from nsqpy.spark import classcache
from tests.support.wire import wait_until

# a JVM that writes a 150 MB archive, then one that maps it: a minute or two on a busy 2-core machine
pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

MAPPED_CLASSES = """
import sys
from nsqpy.spark.classcache import driver_java_options
from nsqpy.spark.session import build_session, end_session
spark = build_session("local[1]", "class cache", {
    "spark.driver.extraJavaOptions": driver_java_options() + " -Xlog:class+load=info:file=" + sys.argv[1]})
spark.range(10).count()
end_session(spark)
"""


def test_an_archive_is_made_in_the_background_then_mapped_by_the_next_session(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = classcache.archive_path()
    assert path.startswith(str(tmp_path / "cache" / "nsqpy")) and not os.path.exists(path)
    # an archive of a virtualenv deleted since: the builder removes it once its own is in place
    stale = tmp_path / "cache" / "nsqpy" / "spark-driver-0123456789abcdef.jsa"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an archive")
    stale.with_suffix(".jars").write_text(str(tmp_path / "deleted-venv" / "pyspark" / "jars") + "\n")

    try:
        assert classcache.driver_java_options() == ""  # none yet: a builder starts, the session starts as before
        assert os.path.exists(path + ".lock")
        assert classcache.driver_java_options() == ""  # one builder at a time
        def builders() -> list[str]:
            listed = subprocess.run(["ps", "-ewwo", "args"], capture_output=True, text=True).stdout
            return [line for line in listed.splitlines() if line.endswith(f"nsqpy.spark.classcache {path}")]

        # a busy machine may list the detached builder a moment after its start returned
        wait_until(lambda: builders(), timeout=30)
        assert len(builders()) == 1, builders()
        wait_until(lambda: not os.path.exists(path + ".lock"), timeout=300)
    finally:  # the builder outlives a failed test otherwise (its JVM exits with it)
        subprocess.run(["pkill", "-f", f"nsqpy.spark.classcache {path}"])
    made_from = path.removesuffix(".jsa") + ".jars"
    assert sorted(os.listdir(os.path.dirname(path))) == sorted(map(os.path.basename, (path, made_from)))
    with open(made_from) as named:
        assert os.path.isdir(named.read().strip())
    assert classcache.driver_java_options() == f"-XX:SharedArchiveFile={path} {classcache.QUIET}"

    loaded = tmp_path / "class-load.log"
    run = subprocess.run([sys.executable, "-c", MAPPED_CLASSES, str(loaded)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    spark_classes = [line for line in loaded.read_text().splitlines() if " org.apache.spark." in line]
    from_archive = [line for line in spark_classes if "shared objects file (top)" in line]
    assert len(from_archive) > len(spark_classes) / 2, spark_classes[:20]
    assert "cds" not in run.stdout + run.stderr  # the JVM's notes about the archive stay silent


def test_the_archive_is_named_after_the_java_and_the_spark_it_fits(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = classcache.archive_path()
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert classcache.archive_path() not in (first, None)


def test_the_same_spark_in_another_place_gets_an_archive_of_its_own(tmp_path, monkeypatch):
    """The JVM maps an archive only for the class path it was made with,
    paths included, and ignores it silently otherwise: a second virtualenv
    with the same PySpark needs its own."""
    from pyspark.find_spark_home import _find_spark_home

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = classcache.archive_path()
    jars = os.path.join(_find_spark_home(), "jars")
    copy = tmp_path / "other-venv" / "pyspark" / "jars"
    copy.mkdir(parents=True)
    for name in os.listdir(jars):  # the same names and sizes, sparse
        with open(copy / name, "wb") as sparse:
            sparse.truncate(os.path.getsize(os.path.join(jars, name)))
    monkeypatch.setenv("SPARK_HOME", str(copy.parent))
    assert _find_spark_home() == str(copy.parent)
    assert classcache.archive_path() not in (first, None)


def test_pruning_keeps_only_the_archives_whose_jars_exist(tmp_path):
    kept, gone, unknown = (tmp_path / f"spark-driver-{name}.jsa" for name in ("a", "b", "c"))
    for archive in (kept, gone, unknown):
        archive.write_bytes(b"an archive")
    kept.with_suffix(".jars").write_text(f"{tmp_path}\n")
    gone.with_suffix(".jars").write_text(f"{tmp_path / 'deleted-venv'}\n")
    (tmp_path / "notes.txt").write_text("not an archive")
    # unknown: made before archives named their jars
    assert classcache.prune(str(tmp_path)) == [str(gone), str(unknown)]
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "spark-driver-a.jars", "spark-driver-a.jsa"]


def test_turned_off_it_adds_nothing_and_makes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(classcache.ENABLE_ENV, "0")
    assert classcache.driver_java_options() == ""
    assert not (tmp_path / "nsqpy").exists()
