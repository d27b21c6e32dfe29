"""The source's ack, offset and write-ahead-log rules, without Spark or nsqd."""

import pyarrow as pa
import pytest

from nsqpy.protocol.dedupkey import split_key, with_key
from nsqpy.spark.ledger import Batch, Ledger, offset, position
from nsqpy.spark.options import OptionError, SinkOptions, SourceOptions
from nsqpy.spark.wal import WriteAheadLog


def test_offsets_are_one_key_and_round_trip():
    assert offset(42) == {"messages": 42}
    assert position(offset(42)) == 42
    with pytest.raises(ValueError, match="not an nsq source offset"):
        position({"partition": 1})


def test_a_batch_is_released_only_once_committed():
    ledger = Ledger()
    ledger.add(Batch(0, 3, ["a", "b", "c"]))
    ledger.add(Batch(3, 5, ["d", "e"]))
    assert ledger.release_through(2) == []  # inside the first batch: nothing is whole yet
    assert ledger.release_through(3) == ["a", "b", "c"]
    assert len(ledger) == 1
    assert ledger.release_through(3) == []  # a second commit of the same end finds nothing
    assert ledger.release_through(100) == ["d", "e"]
    assert len(ledger) == 0


def test_asking_again_from_a_start_serves_the_same_batch():
    ledger = Ledger()
    ledger.add(Batch(10, 12, ["x", "y"], rows="rows"))
    again = ledger.starting_at(10)
    assert (again.end, again.messages, again.rows) == (12, ["x", "y"], "rows")
    assert ledger.starting_at(12) is None


def test_the_ledger_refuses_empty_and_overlapping_batches():
    ledger = Ledger()
    with pytest.raises(ValueError):
        ledger.add(Batch(4, 4, []))
    ledger.add(Batch(0, 4, list("abcd")))
    with pytest.raises(ValueError, match="overlaps"):
        ledger.add(Batch(3, 6, list("xyz")))


def _rows(ids):
    return pa.RecordBatch.from_arrays([pa.array(ids), pa.array([i.encode() for i in ids], pa.binary())],
                                      names=["id", "body"])


def test_the_log_replays_exact_ranges_and_only_those(tmp_path):
    wal = WriteAheadLog(str(tmp_path / "wal"))
    assert wal.entries() == []
    wal.write(0, 2, _rows(["a", "b"]))
    wal.write(2, 5, _rows(["c", "d", "e"]))
    assert wal.entries() == [(0, 2), (2, 5)]
    replay = wal.read_between(2, 5)
    assert [b.column("id").to_pylist() for b in replay] == [["c", "d", "e"]]
    assert sum(b.num_rows for b in wal.read_between(0, 5)) == 5
    assert wal.read_between(0, 3) is None  # not a whole logged range
    assert wal.read_between(5, 7) is None
    assert wal.ids_through(2) == {"a", "b"}
    assert wal.ids_through(5) == {"a", "b", "c", "d", "e"}


def test_the_log_forgets_committed_batches_and_ignores_strangers(tmp_path):
    wal = WriteAheadLog(str(tmp_path))
    (tmp_path / "notes.txt").write_text("not a batch")
    (tmp_path / "1-x.arrow").write_text("not a batch either")
    wal.write(0, 2, _rows(["a", "b"]))
    wal.write(2, 3, _rows(["c"]))
    wal.remove(keep=lambda start, end: end > 2)
    assert wal.entries() == [(2, 3)]
    assert not list(tmp_path.glob("*.tmp"))


def test_dedup_key_round_trip_and_plain_bodies():
    body = with_key(7, 3, 12, b"payload\nwith lines")
    assert split_key(body) == ("7:3:12", b"payload\nwith lines")
    assert split_key(b"plain body") == (None, b"plain body")
    assert split_key(b"1:2\nnot a key") == (None, b"1:2\nnot a key")


def test_source_options_are_checked_with_one_clear_message():
    options = SourceOptions.parse({"topic": "t", "channel": "c", "nsqd_tcp_addresses": "a:1, b:2",
                                   "max_messages_per_batch": "100", "msg_timeout": "120", "snappy": "true"})
    assert options.nsqd_tcp_addresses == ("a:1", "b:2")
    assert options.config.msg_timeout == 120 and options.config.snappy
    # room for the batch being written and the next one filling; held messages are never given up
    assert options.config.max_in_flight == 200 and options.config.max_attempts == 0
    with pytest.raises(OptionError, match="option max_attempts"):
        SourceOptions.parse({"topic": "t", "channel": "c", "nsqd_tcp_addresses": "a:1", "max_attempts": "5"})
    with pytest.raises(OptionError, match="option channel: missing"):  # a retained topic is read without one
        SourceOptions.parse({"topic": "t", "nsqd_tcp_addresses": "a:1"}).require_channel()
    with pytest.raises(OptionError, match="lookupd_http_addresses"):
        SourceOptions.parse({"topic": "t", "channel": "c"})
    with pytest.raises(OptionError, match="invalid topic name"):
        SourceOptions.parse({"topic": "no spaces", "channel": "c", "nsqd_tcp_addresses": "a:1"})
    with pytest.raises(OptionError, match="max_messages_per_batch: expected int"):
        SourceOptions.parse({"topic": "t", "channel": "c", "nsqd_tcp_addresses": "a:1",
                             "max_messages_per_batch": "lots"})
    with pytest.raises(OptionError, match="msg_timeout"):
        SourceOptions.parse({"topic": "t", "channel": "c", "nsqd_tcp_addresses": "a:1", "msg_timeout": "0.5"})


def test_sink_options_need_an_nsqd():
    options = SinkOptions.parse({"topic": "t", "nsqd_tcp_addresses": "a:1", "dedup_key": "yes"})
    assert options.dedup_key and options.mpub_max_messages == 500
    with pytest.raises(OptionError, match="nsqd_tcp_addresses"):
        SinkOptions.parse({"topic": "t"})


def test_a_failed_query_is_told_in_one_line():
    from nsqpy.spark.archive import failure_reason

    wrapped = ("[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
               "latestOffset: Traceback (most recent call last):\n  File \"source.py\", line 90, in read\n"
               "nsqpy.client.errors.ConnectionClosedError: cannot connect to nsqd at 127.0.0.1:1: refused\n"
               "\tat org.apache.spark.sql.execution.datasources.v2.python...\n")
    assert failure_reason(Exception(wrapped)) == \
        "ConnectionClosedError: cannot connect to nsqd at 127.0.0.1:1: refused"
    assert failure_reason(Exception("Query terminated\nsecond line")) == "Query terminated"


def test_archived_rows_are_counted_from_the_offsets():
    """Progress reports are data; a report Spark no longer keeps loses nothing."""
    from types import SimpleNamespace

    from nsqpy.spark.archive import Progress

    def report(batch, start, end):
        return {"batchId": batch, "numInputRows": end - (start or 0),
                "sources": [{"startOffset": "null" if start is None else f'{{"messages": {start}}}',
                             "endOffset": f'{{"messages": {end}}}'}]}

    progress = Progress()
    progress.update(SimpleNamespace(recentProgress=[report(0, None, 300), report(1, 300, 600)]))
    assert (progress.batches, progress.rows) == (2, 600)
    # batches 2 and 3 fell out of Spark's history; the offsets still count their rows
    progress.update(SimpleNamespace(recentProgress=[report(4, 1200, 1500)]))
    assert (progress.batches, progress.rows) == (3, 1500)


def test_enough_connections_per_node_for_the_in_flight_budget():
    from nsqpy.spark.widening import MAX_CONNECTIONS_PER_NODE, consumers_needed
    assert consumers_needed(20000, 2500) == 8  # two batches of 10,000 at nsqd's default cap
    assert consumers_needed(20001, 2500) == 9
    assert consumers_needed(1000, 2500) == 1
    assert consumers_needed(200000, 2500) == 80  # two of nsq_to_parquet's batches of 100,000
    assert consumers_needed(10**9, 2500) == MAX_CONNECTIONS_PER_NODE


def test_the_log_works_through_a_filesystem_uri_and_ignores_partial_files(tmp_path):
    wal = WriteAheadLog(f"file://{tmp_path}/wal")
    wal.write(0, 2, _rows(["a", "b"]))
    (tmp_path / "wal" / f"{2:020d}-{4:020d}.arrow.123.tmp").write_bytes(b"cut short")
    assert wal.entries() == [(0, 2)]
    assert WriteAheadLog(str(tmp_path / "wal")).ids_through(2) == {"a", "b"}
    wal.remove(keep=lambda start, end: False)
    assert wal.entries() == []


def test_chunks_split_filter_and_make_the_sources_record_batch():
    from types import SimpleNamespace

    from nsqpy.spark.chunks import Chunk, count, to_record_batch, without
    from nsqpy.spark.source import source_schema

    conn = SimpleNamespace(address="127.0.0.1:4150")
    arrivals = [(1_700_000_000_123_456_789 + i, i + 1, b"%016x" % i, b"body%d" % i) for i in range(5)]
    chunk = Chunk.of(conn, arrivals)
    first, rest = chunk.split(2)
    assert (first.ids, rest.ids) == ([b"%016x" % i for i in range(2)], [b"%016x" % i for i in range(2, 5)])
    kept, copies = without([first, rest], {"%016x" % 1, "%016x" % 3})
    assert (count(kept), count(copies)) == (3, 2)
    rows = to_record_batch(kept, "events", source_schema(False), False).to_pylist()
    assert [row["body"] for row in rows] == [b"body0", b"body2", b"body4"]
    assert [row["attempts"] for row in rows] == [1, 3, 5]
    assert {row["topic"] for row in rows} == {"events"} and {row["nsqd_address"] for row in rows} == {conn.address}
    assert rows[0]["id"] == "0000000000000000" and rows[0]["timestamp"].microsecond == 123456
    assert to_record_batch([], "events", source_schema(False), False).num_rows == 0
