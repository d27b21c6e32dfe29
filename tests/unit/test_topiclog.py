"""The retained topic log on its own: offsets, reads of every range across
segment boundaries, restarts, torn and corrupt files, retention."""

import logging
import os
import struct
import time

import pytest

from nsqpy.protocol import logchunk
from nsqpy.topiclog import OffsetOutOfRange, TopicLog

LOG = logging.getLogger("test_topiclog")


def open_log(path, segment_bytes=1000, sync_every=2500):
    return TopicLog(str(path / "t.log"), segment_bytes=segment_bytes, sync_every=sync_every, logger=LOG)


def mpub_body(bodies):
    return struct.pack(">i", len(bodies)) + b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def fill(topic_log, count, flush_every=7):
    """``count`` records over many chunks and segments; -> their bodies."""
    bodies = []
    for i in range(count):
        body = b"body%d" % i
        topic_log.append([b"%016d" % i], [body], time.time_ns())
        bodies.append(body)
        if i % flush_every == 0:
            topic_log.flush()
    return bodies


def read_all(topic_log, start, end=None, max_bytes=16 << 20):
    chunks, next_offset = topic_log.records(start, end, max_bytes)
    offsets = [chunk.first_offset + i for chunk in chunks for i in range(len(chunk.ids))]
    return offsets, [body for chunk in chunks for body in chunk.bodies], next_offset


def test_every_range_reads_exactly_its_records_across_segments(tmp_path):
    topic_log = open_log(tmp_path)
    bodies = fill(topic_log, 90)
    tail = [b"a", b"", b"ccc"]
    assert topic_log.append_mpub(mpub_body(tail), 3, time.time_ns(), [b"x" * 16, b"y" * 16, b"z" * 16]) == 90
    bodies += tail
    assert len(topic_log.segments) > 3  # the ranges below cross segment boundaries
    for reopened in (False, True):
        if reopened:
            topic_log.close()
            topic_log = open_log(tmp_path)
        assert (topic_log.earliest, topic_log.latest) == (0, 93)
        for start in range(93):
            for end in [*range(start + 1, 94), None]:
                offsets, got, next_offset = read_all(topic_log, start, end)
                stop = 93 if end is None else end
                assert offsets == list(range(start, stop)) and got == bodies[start:stop] and next_offset == stop
    topic_log.close()


def test_a_byte_limit_still_reads_everything_in_steps(tmp_path):
    topic_log = open_log(tmp_path)
    bodies = fill(topic_log, 100, flush_every=5)
    for max_bytes in (1, 100, 333, 5000):
        offset, got = 0, []
        while offset < 100:
            offsets, part, offset = read_all(topic_log, offset, None, max_bytes)
            assert part  # at least one record per read
            got += part
        assert got == bodies
    topic_log.close()


def test_reads_out_of_range_are_refused(tmp_path):
    topic_log = open_log(tmp_path)
    fill(topic_log, 10)
    with pytest.raises(OffsetOutOfRange):
        topic_log.plan(11)
    assert read_all(topic_log, 10) == ([], [], 10)  # the end: nothing yet
    topic_log.close()


def test_a_torn_tail_is_cut_at_the_last_whole_chunk(tmp_path, caplog):
    topic_log = open_log(tmp_path, segment_bytes=1 << 20)
    bodies = fill(topic_log, 20)
    path = topic_log.segments[-1].path
    topic_log.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # the last chunk half written, as kill -9 mid-write leaves it
        f.truncate(size - 10)
    with caplog.at_level(logging.WARNING):
        topic_log = open_log(tmp_path, segment_bytes=1 << 20)
    assert "cut" in caplog.text
    latest = topic_log.latest
    assert 0 < latest < 20
    assert read_all(topic_log, 0)[1] == bodies[:latest]
    topic_log.append([b"n" * 16], [b"next"], time.time_ns())  # the next offset follows, nothing in between
    assert read_all(topic_log, latest)[:2] == ([latest], [b"next"])
    topic_log.close()


def test_a_corrupt_sealed_segment_is_skipped_with_one_line(tmp_path, caplog):
    topic_log = open_log(tmp_path)
    bodies = fill(topic_log, 60)
    second = topic_log.segments[1]
    topic_log.close()
    os.remove(second.index_path)
    with open(second.path, "r+b") as f:  # a flipped byte in the middle of a body
        f.seek(second.size // 2)
        byte = f.read(1)
        f.seek(second.size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.WARNING):
        topic_log = open_log(tmp_path)
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 1
    offsets, got, _ = read_all(topic_log, 0)
    kept = [offset for offset in range(60) if offset in offsets]
    assert got == [bodies[offset] for offset in kept]
    assert second.base <= offsets[len([o for o in offsets if o < second.base])] and len(kept) < 60
    assert topic_log.latest == 60
    topic_log.close()


def test_retention_by_time_removes_whole_old_segments_and_keeps_offsets(tmp_path):
    topic_log = open_log(tmp_path)
    fill(topic_log, 50)
    topic_log.flush()
    segments = len(topic_log.segments)
    assert topic_log.retain(time.time_ns(), 3600, 0) == 0  # all younger than an hour
    assert topic_log.retain(time.time_ns() + 2 * 10**9, 1, 0) == segments  # all older than a second
    assert (topic_log.earliest, topic_log.latest, len(topic_log.segments)) == (50, 50, 1)
    topic_log.close()
    topic_log = open_log(tmp_path)  # the next offset survives a restart with no record left
    assert (topic_log.earliest, topic_log.latest) == (50, 50)
    topic_log.append([b"n" * 16], [b"next"], time.time_ns())
    assert read_all(topic_log, 50)[:2] == ([50], [b"next"])
    topic_log.close()


def test_a_log_deleted_whole_leaves_its_next_offset_to_the_topics_next_log(tmp_path):
    topic_log = open_log(tmp_path)
    fill(topic_log, 30)
    topic_log.append([b"p" * 16], [b"pending"], time.time_ns())  # given offset 30, never written
    topic_log.delete()
    assert sorted(os.listdir(tmp_path)) == ["t.log.next"]
    topic_log = open_log(tmp_path)
    assert (topic_log.earliest, topic_log.latest) == (31, 31)
    topic_log.append([b"n" * 16], [b"next"], time.time_ns())
    assert read_all(topic_log, 31)[:2] == ([31], [b"next"])
    topic_log.close()
    assert (open_log(tmp_path).latest) == 32  # its segment's name holds it from now on


def test_retention_by_bytes_removes_the_oldest_segments_only(tmp_path):
    topic_log = open_log(tmp_path)
    bodies = fill(topic_log, 80)
    topic_log.flush()
    limit = topic_log.bytes // 2
    assert topic_log.retain(time.time_ns(), 0, limit) > 0
    assert topic_log.bytes <= limit
    earliest = topic_log.earliest
    assert earliest == topic_log.segments[0].base > 0
    assert read_all(topic_log, earliest)[1] == bodies[earliest:]
    topic_log.close()


def test_a_read_planned_before_its_segments_are_removed_still_reads_whole(tmp_path):
    topic_log = open_log(tmp_path)
    bodies = fill(topic_log, 50)
    plan = topic_log.plan(0)
    topic_log.retain(time.time_ns() + 2 * 10**9, 1, 0)
    assert not any(name.endswith(".seg") and int(name[:-4]) == 0 for name in os.listdir(tmp_path / "t.log"))
    data = b"".join(piece if isinstance(piece, bytes) else os.pread(piece[0], piece[2], piece[1])
                    for piece in plan.pieces)
    plan.close()
    got, pos = [], 0
    while pos < len(data):
        got += logchunk.decode(data, pos).bodies
        pos += logchunk.read_header(data, pos).size
    assert got == bodies


def test_the_first_offset_at_a_time(tmp_path):
    topic_log = open_log(tmp_path)
    stamps = []
    for i in range(30):
        stamps.append(1_000_000_000_000 + i * 1000)
        topic_log.append([b"%016d" % i], [b"%d" % i], stamps[-1])
        if i % 4 == 0:
            topic_log.flush()
    assert topic_log.offset_at(0) == 0
    assert topic_log.offset_at(stamps[17]) == 17
    assert topic_log.offset_at(stamps[17] - 1) == 17
    assert topic_log.offset_at(stamps[-1] + 1) == 30
    topic_log.close()


def test_durable_appends_are_on_disk_before_append_returns(tmp_path):
    topic_log = open_log(tmp_path, sync_every=1)
    topic_log.append([b"a" * 16], [b"one"], time.time_ns())
    # no flush, no close: another reader of the directory sees the record
    other = open_log(tmp_path, sync_every=1)
    assert read_all(other, 0)[1] == [b"one"]
    other.close()
    topic_log.close()


def test_a_deferred_publish_is_a_chunk_of_its_own_that_keeps_its_delay(tmp_path):
    topic_log = open_log(tmp_path)
    topic_log.append([b"a" * 16], [b"before"], time.time_ns())
    topic_log.append([b"d" * 16], [b"later"], time.time_ns(), defer_ms=2500)
    topic_log.append([b"b" * 16], [b"after"], time.time_ns())
    topic_log.flush()
    chunks, _ = topic_log.records(0, None, 1 << 20)
    assert [(list(chunk.bodies), logchunk.delay_ms(chunk.flags), bool(chunk.flags & logchunk.DEFERRED))
            for chunk in chunks] == [([b"before"], 0, False), ([b"later"], 2500, True), ([b"after"], 0, False)]
    assert logchunk.delay_ms(logchunk.deferred_flags(10 ** 12)) == logchunk.MAX_DELAY_MS  # clamped, still a u32
    topic_log.close()
