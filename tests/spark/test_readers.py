"""The archive as readers other than Spark see it: only committed batches, each once."""

import shutil

import pyarrow.lib
import pytest

from .conftest import archive_available_now, archived_bodies, bodies_other_readers_see, publish, source_options

pytestmark = pytest.mark.spark


def test_files_no_batch_committed_are_removed_when_the_job_starts(spark, spark_nsqd, topic, tmp_path):
    """What a driver killed mid-batch leaves: an empty file, one cut before
    its footer, and a whole one with rows the restart writes again. pyarrow
    cannot read the directory until the next run starts, which removes them
    (and keeps the checkpoint, ``_checkpoint`` inside the output directory as
    nsq_to_parquet has it)."""
    first = [f"{topic}-a{i:04d}".encode() for i in range(500)]
    publish(spark_nsqd, topic, first)
    out, checkpoint = tmp_path / "out", tmp_path / "out" / "_checkpoint"
    archive_available_now(spark, source_options(spark_nsqd, topic), out, checkpoint)
    committed = sorted(p for p in out.rglob("part-*.parquet"))
    folder = committed[0].parent
    (folder / "part-99999-killed-empty.c000.snappy.parquet").write_bytes(b"")
    (folder / "part-99998-killed-cut.c000.snappy.parquet").write_bytes(committed[0].read_bytes()[:100])
    shutil.copy(committed[0], folder / "part-99997-killed-whole.c000.snappy.parquet")
    with pytest.raises(pyarrow.lib.ArrowInvalid):
        bodies_other_readers_see(out)

    more = [f"{topic}-b{i:04d}".encode() for i in range(300)]
    publish(spark_nsqd, topic, more)
    archive_available_now(spark, source_options(spark_nsqd, topic), out, checkpoint)
    assert not list(out.rglob("part-9999*"))
    assert bodies_other_readers_see(out) == sorted(archived_bodies(spark, out)) == sorted(first + more)
