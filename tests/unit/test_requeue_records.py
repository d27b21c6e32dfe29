"""A message nsqd puts back in a queue whose memory is full (a requeue, a
timeout, a deferred publish come due) leaves exactly one record of itself on
disk, wherever a crash cuts the step short: two would mean two deliveries,
and with attempts kept, two dead letters."""

import pytest

from nsqpy.diskqueue import DiskQueue
from nsqpy.nsqd.message import Message
from nsqpy.nsqd.queue import MessageQueue


class Killed(BaseException):
    """kill -9 while a meta file is replaced."""


def disk(tmp_path, name: str) -> DiskQueue:
    return DiskQueue(name, str(tmp_path), max_bytes_per_file=1 << 20, min_msg_size=1, max_msg_size=1 << 16,
                     sync_every=1)


def records(queue: DiskQueue) -> list[bytes]:
    found = []
    while (taken := queue.get()) is not None:
        found.append(taken)
    return found


def kill_at_meta(monkeypatch) -> None:
    def killed(path, data):
        raise Killed()
    monkeypatch.setattr("nsqpy.diskqueue.queue.write_atomically", killed)


def test_a_requeue_to_a_full_memory_leaves_one_record_after_a_crash(tmp_path, monkeypatch):
    queue = MessageQueue(0, disk(tmp_path, "ch"))
    for n in range(3):
        queue.put(Message(b"%016d" % n, b"body %d" % n, 1))
    held, requeued = queue.pop(), queue.pop()
    requeued.attempts = 1
    kill_at_meta(monkeypatch)
    with pytest.raises(Killed):
        queue.put(requeued)
    monkeypatch.undo()
    bodies = [Message.decode(r).body for r in records(disk(tmp_path, "ch"))]
    assert sorted(bodies) == [b"body 0", b"body 1", b"body 2"]
    assert held.body == b"body 0"


def test_a_deferred_publish_come_due_keeps_its_one_record(tmp_path, monkeypatch):
    """Its record stays on the deferred disk until it is delivered: no move
    between two disks, which a crash could split into two records."""
    deferred = disk(tmp_path, "ch.deferred")
    deferred.put(b"\0" * 8 + Message(b"%016d" % 7, b"late", 1).encode())
    data, token = deferred.get_with_token()
    message = Message.decode(data[8:])
    message.disk_token = (deferred, token)
    queue = MessageQueue(0, disk(tmp_path, "ch"))
    kill_at_meta(monkeypatch)
    queue.put(message)  # come due: nothing written, so nothing to kill
    monkeypatch.undo()
    assert queue.pop() is message
    assert records(disk(tmp_path, "ch")) == []
    assert [r[8:] for r in records(disk(tmp_path, "ch.deferred"))] == [message.encode()]
