"""Files in the archive that no committed batch lists, removed before the job starts.

Spark's file sink writes a batch's Parquet files straight into the output
directory, then commits the batch by listing them in ``_spark_metadata``.
Spark's own reader trusts that log; pyarrow, pandas, DuckDB and polars
list the directory instead. A driver killed mid-batch leaves files the log
never listed (possibly empty or without a footer), and its restart writes
that batch again under new names: other readers would fail on the broken
files or count the rows twice. So before the archive query starts, every
data file the log does not list is removed (with Spark's ``.crc`` beside
it). Names starting with ``_`` or ``.`` (the log, the checkpoint) are
skipped: every reader ignores them.
"""

import json
import logging
import os
import urllib.parse

log = logging.getLogger("nsqpy.spark")

METADATA_DIR = "_spark_metadata"


def committed_files(output_dir: str) -> set[str] | None:
    """Absolute paths of every file the sink's log lists as added (and not
    deleted since); None when there is no log (nothing was ever committed
    here, or another tool owns the directory)."""
    metadata = os.path.join(output_dir, METADATA_DIR)
    try:
        names = os.listdir(metadata)
    except FileNotFoundError:
        return None
    added, deleted = set(), set()
    for name in names:
        if name.startswith(".") or not name.split(".")[0].isdigit():
            continue  # Spark's .crc and temporary files
        with open(os.path.join(metadata, name), encoding="utf-8") as entries:
            for line in entries:
                if not line.startswith("{"):
                    continue  # the version line, "v1"
                entry = json.loads(line)
                path = os.path.abspath(urllib.parse.unquote(urllib.parse.urlparse(entry["path"]).path))
                (deleted if entry.get("action") == "delete" else added).add(path)
    return added - deleted


def _data_files(output_dir: str, spare: str):
    for folder, subfolders, files in os.walk(output_dir):
        subfolders[:] = [name for name in subfolders
                         if not name.startswith(("_", ".")) and os.path.join(folder, name) != spare]
        for name in files:
            if not name.startswith(("_", ".")):
                yield os.path.join(folder, name)


def remove_uncommitted(output_dir: str, checkpoint_dir: str) -> list[str]:
    """Remove the data files no committed batch lists; returns their paths.
    The checkpoint is spared wherever it is."""
    output_dir = os.path.abspath(output_dir)
    committed = committed_files(output_dir)
    if committed is None:
        return []
    spare = os.path.abspath(checkpoint_dir)
    removed = [path for path in _data_files(output_dir, spare) if path not in committed]
    for path in removed:
        folder, name = os.path.split(path)
        for leftover in (path, os.path.join(folder, f".{name}.crc")):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
    if removed:
        log.warning("nsq_to_parquet: removed %d files no committed batch lists (left by a run that was killed "
                    "mid-batch; the batch is written again)", len(removed))
    return removed
