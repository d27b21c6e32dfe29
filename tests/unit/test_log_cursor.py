"""A channel's queue as a cursor over its topic's log (durable mode): what it
hands out, what it keeps through a crash (a new object on the same files,
without close), and what it leaves to its side queue."""

import logging
import time

from nsqpy.diskqueue import DiskQueue
from nsqpy.protocol.logchunk import CorruptChunk
from nsqpy.protocol.message import encode_message, message_fields
from nsqpy.topiclog import TopicLog
from nsqpy.topiclog.cursor import LOG, CursorQueue, saved_position

LOG_ = logging.getLogger("test")


class Files:
    """A topic log and a channel's side queue in ``path``, opened again at will (a restart)."""

    def __init__(self, path):
        self.path = path
        self.topic_log = self.open_log()

    def open_log(self) -> TopicLog:
        return TopicLog(str(self.path / "t.log"), segment_bytes=1 << 20, sync_every=1, logger=LOG_)

    def cursor(self, start: int = 0, live_from: int = 0) -> CursorQueue:
        side = DiskQueue("t:c", str(self.path), max_bytes_per_file=1 << 20, min_msg_size=26, max_msg_size=1 << 16,
                         sync_every=1)
        cursor = CursorQueue("t:c", self.topic_log, "c", side, start=start, live_from=live_from, sync_every=1000)
        cursor.extend(self.topic_log.latest)
        return cursor

    def publish(self, *bodies: bytes, defer_ms: int = 0) -> int:
        ids = [b"%016d" % (self.topic_log.latest + i) for i in range(len(bodies))]
        first = self.topic_log.append(ids, list(bodies), time.time_ns(), defer_ms)
        self.topic_log.flush()
        return first


def body(taken) -> bytes:
    return message_fields(taken[0])[3]


def drain(cursor) -> list[bytes]:
    bodies = []
    while (taken := cursor.get_with_token()) is not None:
        bodies.append(body(taken))
        cursor.ack(taken[1])
    return bodies


def test_it_hands_out_the_log_up_to_its_end_in_order(tmp_path):
    files = Files(tmp_path)
    files.publish(b"a", b"b")
    cursor = files.cursor()
    files.publish(b"c")  # not the cursor's until the topic says so
    assert cursor.depth == 2
    assert drain(cursor) == [b"a", b"b"]
    cursor.extend(files.topic_log.latest)
    assert drain(cursor) == [b"c"] and cursor.depth == 0


def test_acknowledgements_and_attempts_flushed_survive_a_crash_and_nothing_finished_comes_back(tmp_path):
    files = Files(tmp_path)
    files.publish(*[b"m%d" % i for i in range(6)])
    cursor = files.cursor()
    taken = [cursor.get_with_token() for _ in range(6)]
    cursor.set_marks([(token, 1) for _, token in taken])
    cursor.set_marks([(taken[1][1], 3)])
    for index in (0, 2, 4, 5):  # 1 and 3 held; acknowledged out of order behind them
        cursor.ack(taken[index][1])
    cursor.flush()
    files.topic_log = files.open_log()  # kill -9: no sync, no close
    again = files.cursor()
    first, second = again.get_with_token(), again.get_with_token()
    assert (body(first), again.mark_of(first[1])) == (b"m1", 3)
    assert (body(second), again.mark_of(second[1])) == (b"m3", 1)
    assert again.get_with_token() is None and again.depth == 0


def test_a_requeued_record_stays_in_the_log_and_comes_back_after_a_crash(tmp_path):
    files = Files(tmp_path)
    files.publish(b"a", b"b")
    cursor = files.cursor()
    data, token = cursor.get_with_token()
    cursor.set_marks([(token, 1)])
    cursor.rewrite(token, encode_message(0, 1, b"%016d" % 0, b"a"))
    assert token[2] == LOG and cursor.depth == 2
    assert sorted(drain(cursor)) == [b"a", b"b"]
    files.publish(b"c")
    cursor.extend(files.topic_log.latest)
    data, token = cursor.get_with_token()
    cursor.rewrite(token, data)
    cursor.flush()
    again = Files(tmp_path).cursor()
    assert drain(again) == [b"c"]


def test_deferred_publishes_are_skipped_from_live_from_and_deferred_before_it(tmp_path):
    files = Files(tmp_path)
    files.publish(b"early-deferred", defer_ms=60_000)
    files.publish(b"early-due", defer_ms=1)
    live_from = files.publish(b"plain")
    files.publish(b"late-deferred", defer_ms=60_000)
    cursor = files.cursor(start=0, live_from=live_from)
    deferred = []
    cursor.defer = lambda record, delay: deferred.append((message_fields(record)[3], delay > 50))
    time.sleep(0.01)
    assert drain(cursor) == [b"early-due", b"plain"]
    assert deferred == [(b"early-deferred", True)]


def test_empty_moves_to_the_end_and_a_rewind_reads_again(tmp_path):
    files = Files(tmp_path)
    files.publish(b"a", b"b", b"c")
    cursor = files.cursor()
    held = cursor.get_with_token()
    cursor.empty()
    cursor.ack(held[1])  # from before the empty: nothing to do
    assert cursor.depth == 0 and cursor.get_with_token() is None
    cursor.rewind(1, files.topic_log.latest)
    assert drain(cursor) == [b"b", b"c"]
    assert saved_position(files.topic_log.directory, "c") == (1, 3)  # the meta says where a restart reads
    cursor.sync()
    assert saved_position(files.topic_log.directory, "c") == (3, 3)


def test_the_side_queue_holds_what_is_not_a_log_record_and_answers_for_it(tmp_path):
    files = Files(tmp_path)
    files.publish(b"logged")
    cursor = files.cursor()
    cursor.put(encode_message(1, 0, b"%016d" % 99, b"from-the-side"))
    taken = [cursor.get_with_token(), cursor.get_with_token()]
    assert sorted(body(each) for each in taken) == [b"from-the-side", b"logged"]
    side_token = next(token for data, token in taken if token[2] != LOG)
    cursor.set_marks([(side_token, 2)])
    assert cursor.mark_of(side_token) == 2
    for _, token in taken:
        cursor.ack(token)
    cursor.sync()
    assert cursor.depth == 0 and cursor.side.depth == 0


def test_retention_keeps_what_the_cursor_has_not_had_acknowledged(tmp_path):
    files = Files(tmp_path)
    files.publish(b"a", b"b", b"c")
    cursor = files.cursor()
    first = cursor.get_with_token()
    cursor.get_with_token()
    assert cursor.durable_position == 0
    cursor.ack(first[1])
    assert cursor.durable_position == 1 and cursor.owes


def test_a_position_past_a_log_cut_short_reads_from_its_end(tmp_path):
    files = Files(tmp_path)
    files.publish(b"a", b"b")
    cursor = files.cursor()
    drain(cursor)
    cursor.sync()
    (tmp_path / "t.log" / "c.cursor").write_bytes(b"9 0 9 -1\n")  # as if the log lost its tail
    again = Files(tmp_path).cursor()
    assert again.read_offset == 2 and again.depth == 0


def test_records_finished_before_a_restart_stay_finished_through_a_compaction_and_a_second_crash(
        tmp_path, monkeypatch):
    monkeypatch.setattr("nsqpy.diskqueue.journal.COMPACT_SLACK", 0)  # compact at every sync
    files = Files(tmp_path)
    files.publish(b"a", b"b", b"c")
    cursor = files.cursor()
    a, b = cursor.get_with_token(), cursor.get_with_token()
    cursor.ack(b[1])  # behind a, still held
    cursor.flush()
    again = Files(tmp_path).cursor()  # kill -9
    held = [again.get_with_token(), again.get_with_token()]
    assert [body(each) for each in held] == [b"a", b"c"]
    again.sync()  # compacts the journal
    third = Files(tmp_path).cursor()  # kill -9 again
    assert drain(third) == [b"a", b"c"]


def test_a_long_stretch_finished_before_a_restart_does_not_hide_what_follows(tmp_path, monkeypatch):
    monkeypatch.setattr("nsqpy.topiclog.cursor.READ_BYTES", 64)  # a chunk per read
    files = Files(tmp_path)
    for index in range(30):
        files.publish(b"m%02d" % index)
    cursor = files.cursor()
    taken = [cursor.get_with_token() for _ in range(30)]
    for _, token in taken[1:29]:  # m00 and m29 held, the rest finished behind m00
        cursor.ack(token)
    cursor.flush()
    again = Files(tmp_path).cursor()
    first, last = again.get_with_token(), again.get_with_token()
    assert (body(first), body(last)) == (b"m00", b"m29")
    assert again.get_with_token() is None and again.depth == 0


def test_a_deferred_publish_a_rewind_deferred_is_not_deferred_again_after_a_crash(tmp_path):
    files = Files(tmp_path)
    files.publish(b"held")
    files.publish(b"later", defer_ms=60_000)
    files.publish(b"due", defer_ms=1)
    files.publish(b"after")
    cursor = files.cursor(start=0, live_from=files.topic_log.latest)
    deferred = []
    cursor.defer = lambda record, delay: deferred.append(message_fields(record)[3])
    time.sleep(0.01)
    taken = [cursor.get_with_token() for _ in range(3)]
    assert [body(each) for each in taken] == [b"held", b"due", b"after"] and deferred == [b"later"]
    cursor.ack(taken[1][1])  # "due" finished behind "held"
    cursor.flush()
    again = Files(tmp_path).cursor()
    again.defer = lambda record, delay: deferred.append(message_fields(record)[3])
    assert drain(again) == [b"held", b"after"] and deferred == [b"later"]


def test_a_deferred_publish_alone_in_a_rewound_log_is_deferred_once_through_a_crash(tmp_path):
    files = Files(tmp_path)
    files.publish(b"later", defer_ms=60_000)
    cursor = files.cursor()
    cursor.sync_every = 1
    cursor.empty()
    cursor.rewind(0, files.topic_log.latest)
    deferred = []
    cursor.defer = lambda record, delay: deferred.append(message_fields(record)[3])
    assert cursor.get_with_token() is None and deferred == [b"later"]
    again = Files(tmp_path).cursor()  # kill -9
    again.defer = lambda record, delay: deferred.append(message_fields(record)[3])
    assert again.get_with_token() is None and deferred == [b"later"]


def test_a_deferred_queue_that_refuses_leaves_the_record_to_the_next_look(tmp_path):
    files = Files(tmp_path)
    files.publish(b"a")
    files.publish(b"later", defer_ms=60_000)
    files.publish(b"b")
    cursor = files.cursor(start=0, live_from=files.topic_log.latest)
    deferred, refusals = [], [OSError(28, "No space left on device")]

    def defer(record, delay):
        if refusals:
            raise refusals.pop()
        deferred.append(message_fields(record)[3])
    cursor.defer = defer
    assert cursor.get_with_token() is not None and deferred == []  # a; then the refusal, logged
    assert body(cursor.get_with_token()) == b"b" and deferred == [b"later"]  # the next look defers it


def test_a_corrupt_stretch_skipped_after_a_restart_leaves_the_depth_right(tmp_path, monkeypatch):
    files = Files(tmp_path)
    for index in range(4):
        files.publish(b"m%d" % index)
    cursor = files.cursor()
    taken = [cursor.get_with_token() for _ in range(4)]
    for _, token in taken[1:3]:  # m0 and m3 held, m1 and m2 finished behind m0
        cursor.ack(token)
    cursor.flush()
    again = Files(tmp_path)
    readable = again.topic_log.records
    monkeypatch.setattr(again.topic_log, "records", lambda start, end=None, max_bytes=0: (
        (_ for _ in ()).throw(CorruptChunk("bad checksum")) if start < 2 else readable(start, end, max_bytes)))
    monkeypatch.setattr(again.topic_log, "segment_end", lambda offset: 2)
    restarted = again.cursor()
    assert drain(restarted) == [b"m3"] and restarted.depth == 0
    again.publish(b"m4")
    restarted.extend(again.topic_log.latest)
    assert restarted.depth == 1 and drain(restarted) == [b"m4"]
