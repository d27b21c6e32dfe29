"""A deferred publish come due keeps its record on the channel's deferred disk
queue while it is delivered, and its attempts are marked there: after kill -9
it comes back with them, as a message of the channel's own disk queue does.
A channel with its real disk queues, driven by a stand-in loop and client."""
import types

from nsqpy.diskqueue import DiskQueue
from nsqpy.nsqd.channel import Channel
from nsqpy.nsqd.message import Message
from nsqpy.nsqd.queue import MessageQueue


class Loop:
    def __init__(self):
        self.now = 1000.0
        self.ready = []

    def time(self):
        return self.now

    def call_soon(self, callback, *args):
        self.ready.append((callback, args))

    def run(self):
        while self.ready:
            callback, args = self.ready.pop(0)
            callback(*args)


class Subscriber:
    sample_rate = 0

    def __init__(self):
        self.ready, self.msg_timeout = 10, 60.0
        self.in_flight_count = self.finish_count = self.requeue_count = 0
        self.received = []

    def window(self):
        return self.ready - self.in_flight_count

    def samples(self, message):
        return True

    def deliver(self, messages):
        for message in messages:
            message.attempts += 1
            self.in_flight_count += 1
            self.received.append(message)

    def close(self):
        pass


def disk(path, name):
    return DiskQueue(name, str(path), max_bytes_per_file=1 << 20, min_msg_size=1, max_msg_size=1 << 16,
                     sync_every=1)


def channel(path, loop):
    return Channel(types.SimpleNamespace(name="t"), "ch", MessageQueue(0, disk(path, "ch")), loop,
                   deferred_disk=disk(path, "ch.deferred"))


def test_attempts_of_a_due_deferred_message_survive_kill_9(tmp_path):
    loop = Loop()
    ch = channel(tmp_path, loop)
    client = Subscriber()
    ch.add_client(client)
    ch.put_deferred(Message(b"%016d" % 1, b"late", 0), 1.0)
    loop.now += 2
    ch.process_timeouts(loop.now)
    loop.run()
    for _ in range(2):  # delivered, requeued at once, delivered again
        assert len(client.received) >= 1
        ch.requeue(client, client.received[-1].id, 0)
        loop.run()
    message = client.received[-1]
    assert message.attempts == 3
    # kill -9 (sync_every=1: every mark is fsynced), restart
    loop2 = Loop()
    ch2 = channel(tmp_path, loop2)
    again = ch2.deferred[0][2]
    assert again.attempts == 3  # marked before each delivery, fsynced with sync_every=1


def test_same_for_a_message_on_the_channel_disk(tmp_path):
    """The control: a message read from the channel's own disk gets its attempts back."""
    loop = Loop()
    ch = channel(tmp_path, loop)
    client = Subscriber()
    ch.add_client(client)
    ch.put(Message(b"%016d" % 2, b"now", 0))
    loop.run()
    for _ in range(2):
        ch.requeue(client, client.received[-1].id, 0)
        loop.run()
    assert client.received[-1].attempts == 3
    ch2 = channel(tmp_path, Loop())
    again = ch2.queue.pop()
    assert again.attempts == 3
