"""A topic's and a channel's MessageQueue: MPUB batches kept whole, overflow
to disk, and the oldest message first across memory and disk."""

import pytest

from nsqpy.diskqueue import DiskQueue
from nsqpy.nsqd.batch import Batch
from nsqpy.nsqd.guid import EPOCH, GuidFactory
from nsqpy.nsqd.message import Message
from nsqpy.nsqd.queue import MessageQueue
from nsqpy.protocol.commands import check_mpub_body, encode_mpub_body, parse_mpub_body
from nsqpy.protocol.errors import ProtocolError


def batch_of(bodies: list[bytes], timestamp: int = 1, node_id: int = 5) -> Batch:
    body = encode_mpub_body(bodies)
    count = check_mpub_body(body, 1 << 20, 1 << 30)
    return Batch(body, count, timestamp, GuidFactory(node_id).reserve(count))


def disk(tmp_path) -> DiskQueue:
    return DiskQueue("q", str(tmp_path), max_bytes_per_file=1 << 20, min_msg_size=1, max_msg_size=1 << 16,
                     sync_every=2500)


def drain(queue: MessageQueue) -> list[Message]:
    messages = []
    while (message := queue.pop()) is not None:
        messages.append(message)
    return messages


def test_a_batch_gives_the_bodies_and_the_ids_an_mpub_would():
    bodies = [b"a", b"bb" * 300, b"c" * 70000]
    batch = batch_of(bodies, node_id=5)
    ts, first = batch.ids.ts, batch.ids.sequence
    taken = batch.take_all()
    assert [m.body for m in taken] == bodies == parse_mpub_body(encode_mpub_body(bodies), 1 << 20, 1 << 30)
    assert [m.id for m in taken] == [b"%016x" % (((ts - EPOCH) << 22) | (5 << 12) | sequence)
                                     for sequence in range(first, first + 3)]
    assert {(m.timestamp, m.attempts) for m in taken} == {(1, 0)}
    assert batch.remaining == 0


def test_a_copy_reads_the_same_messages_on_its_own():
    batch = batch_of([b"1", b"2", b"3"])
    batch.take()
    copy = batch.copy()
    assert [m.body for m in copy.take_all()] == [b"2", b"3"]
    assert [m.body for m in batch.take_all()] == [b"2", b"3"]


def test_ids_cross_into_the_next_time_unit_like_nsqs():
    factory = GuidFactory(7)
    factory.last_ts, factory.sequence = 1 << 45, 4093  # ahead of the clock: this unit goes on
    ids = factory.reserve(5)
    made = [ids.next() for _ in range(5)]
    assert [int(i, 16) & 0xFFF for i in made] == [4094, 4095, 0, 1, 2]
    assert (int(made[2], 16) >> 22) - (int(made[1], 16) >> 22) == 1
    assert factory.new_ids(1)[0] > made[-1]


def test_the_queue_counts_a_batch_by_its_messages():
    queue = MessageQueue(10, None)
    queue.put_batch(batch_of([b"1", b"2", b"3"]))
    queue.put(Message(b"x" * 16, b"4", 2))
    assert (len(queue), queue.memory_depth, len(queue.memory)) == (4, 4, 2)
    assert queue.pop().body == b"1"
    assert len(queue) == 3
    assert [m.body for m in drain(queue)] == [b"2", b"3", b"4"]
    assert (len(queue), len(queue.memory)) == (0, 0)


def test_a_batch_without_room_in_memory_goes_to_disk_in_order(tmp_path):
    queue = MessageQueue(4, disk(tmp_path))
    queue.put_batch(batch_of([b"1", b"2", b"3"]))
    queue.put_batch(batch_of([b"4", b"5", b"6"], timestamp=2))  # one fits in memory, two go to disk
    assert (queue.memory_depth, queue.backend_depth, len(queue)) == (4, 2, 6)
    assert [m.body for m in drain(queue)] == [b"1", b"2", b"3", b"4", b"5", b"6"]


def test_a_memory_only_queue_drops_what_does_not_fit():
    queue = MessageQueue(2, None)
    queue.put_batch(batch_of([b"1", b"2", b"3"]))
    assert (len(queue), queue.dropped) == (2, 1)


def test_the_oldest_message_goes_first_whichever_side_holds_it(tmp_path):
    queue = MessageQueue(2, disk(tmp_path))
    for timestamp in (1, 2, 3, 4):  # memory fills, then disk takes 3 and 4
        queue.put(Message(b"%016d" % timestamp, b"%d" % timestamp, timestamp))
    assert [m.timestamp for m in (queue.pop(), queue.pop())] == [1, 2]
    queue.put(Message(b"%016d" % 5, b"5", 5))  # memory has room again: newer than the disk's
    queue.put(Message(b"%016d" % 0, b"0", 0))  # a requeue keeps its old timestamp
    assert [m.timestamp for m in drain(queue)] == [3, 4, 5, 0]
    assert len(queue) == 0


def test_one_publish_split_between_the_sides_goes_out_in_id_order(tmp_path):
    """Its messages share one timestamp: an overflow leaves its first ones in
    memory, a replay resumed after a clean stop its later ones."""
    ids = [b"%016x" % i for i in range(6)]
    (tmp_path / "overflow").mkdir()
    (tmp_path / "resumed").mkdir()
    overflow = MessageQueue(3, disk(tmp_path / "overflow"))
    overflow.put_many([Message(i, i, 7) for i in ids])
    assert [m.id for m in drain(overflow)] == ids
    resumed = MessageQueue(3, disk(tmp_path / "resumed"))
    resumed.disk.put_many([Message(i, i, 7).encode() for i in ids[:3]])  # what memory held at the stop
    resumed.put_many([Message(i, i, 7) for i in ids[3:]])
    assert [m.id for m in drain(resumed)] == ids


def test_the_disk_side_keeps_its_order_against_a_requeue(tmp_path):
    queue = MessageQueue(1, disk(tmp_path))
    queue.put(Message(b"%016d" % 1, b"1", 10))
    queue.put(Message(b"%016d" % 2, b"2", 20))  # to disk
    first = queue.pop()
    queue.put(first)  # back in memory, older than the disk's next
    assert [m.timestamp for m in drain(queue)] == [10, 20]


def test_persist_leaves_the_disk_head_where_it_is(tmp_path):
    queue = MessageQueue(1, disk(tmp_path))
    queue.put(Message(b"%016d" % 1, b"later", 20))
    queue.put(Message(b"%016d" % 2, b"on disk", 10))  # older, but memory was full
    taken = queue.pop()
    assert taken.body == b"on disk"
    queue.ack(taken)
    queue.put(Message(b"%016d" % 3, b"newest", 30))  # to disk: memory is full
    queue.pop()  # reads the disk's next to compare, takes memory's older one
    assert queue.backend_depth == 1
    assert queue.persist([]) == 0
    queue.close()
    reopened = MessageQueue(10, disk(tmp_path))
    assert [m.body for m in drain(reopened)] == [b"newest"]


def test_check_mpub_body_refuses_what_parse_refused():
    good = encode_mpub_body([b"ok"])
    assert check_mpub_body(good, 10, 100) == 1
    with pytest.raises(ProtocolError, match="MPUB invalid message count 0"):
        check_mpub_body(b"\0\0\0\0", 10, 100)
    with pytest.raises(ProtocolError, match=r"MPUB invalid message\(0\) body size -1"):
        check_mpub_body(b"\0\0\0\x01\xff\xff\xff\xff", 10, 100)
    with pytest.raises(ProtocolError, match="MPUB message too big 11 > 10"):
        check_mpub_body(encode_mpub_body([b"x" * 11]), 10, 100)
    with pytest.raises(ProtocolError, match="MPUB body has 1 bytes after message"):
        check_mpub_body(good + b"!", 10, 100)
    assert check_mpub_body(good + b"!", 10, 100, exact=False) == 1


def test_persist_writes_a_large_backlog_in_order_without_making_it_all_at_once(tmp_path):
    queue = MessageQueue(100_000, disk(tmp_path))
    in_flight = [Message(b"%016d" % i, b"f%d" % i, 1) for i in range(3)]
    bodies = [b"m%d" % i for i in range(25_000)]  # more than one PERSIST_CHUNK
    for start in range(0, len(bodies), 200):
        queue.put_batch(batch_of(bodies[start:start + 200], timestamp=2))
    queue.put(Message(b"x" * 16, b"last", 3))
    assert queue.persist(in_flight) == 3 + 25_000 + 1
    assert (queue.memory_depth, len(queue.memory)) == (0, 0)
    queue.close()
    reopened = MessageQueue(0, disk(tmp_path))
    assert [m.body for m in drain(reopened)] == [b"f0", b"f1", b"f2", *bodies, b"last"]


def test_messages_requeued_again_and_again_do_not_starve_the_disk(tmp_path):
    queue = MessageQueue(2, disk(tmp_path))
    for i in range(2):
        queue.put(Message(b"p%015d" % i, b"poison", 1))
    for i in range(3):
        queue.put(Message(b"g%015d" % i, b"good", 2))  # memory is full: to disk
    delivered = []
    for _ in range(20):
        message = queue.pop()
        if message.body == b"poison":
            message.attempts += 1
            queue.put(message)  # requeued at once, publish time and all
        else:
            delivered.append(message)
            queue.ack(message)
    assert len(delivered) == 3
