"""Channel and Topic without sockets or sleeps: a manual loop and clock, consumers as the channel sees them."""

import itertools
import types

import pytest

from nsqpy.nsqd.channel import Channel
from nsqpy.nsqd.message import Message
from nsqpy.nsqd.queue import MessageQueue
from nsqpy.nsqd.topic import Topic
from nsqpy.protocol.commands import encode_mpub_body
from nsqpy.protocol.errors import ProtocolError


class Loop:
    """What the channel and topic take from the event loop: call_soon and the clock."""

    def __init__(self):
        self.now = 1000.0
        self.ready = []

    def time(self) -> float:
        return self.now

    def call_soon(self, callback, *args) -> None:
        self.ready.append((callback, args))

    def run(self) -> None:
        while self.ready:
            callback, args = self.ready.pop(0)
            callback(*args)


class Subscriber:
    """A subscribed consumer connection, as the channel sees one."""

    def __init__(self, ready: int = 10, msg_timeout: float = 60.0):
        self.ready = ready
        self.msg_timeout = msg_timeout
        self.in_flight_count = self.finish_count = self.requeue_count = 0
        self.received = []
        self.attempts = []  # each delivery's attempts (a redelivery is the same Message object)

    def window(self) -> int:
        return self.ready - self.in_flight_count

    sample_rate = 0  # IDENTIFY's: every message

    def samples(self, message) -> bool:
        return True

    def deliver(self, messages) -> None:
        for message in messages:
            message.attempts += 1
            self.in_flight_count += 1
            self.received.append(message)
            self.attempts.append(message.attempts)

    def close(self) -> None:
        pass


_ids = itertools.count()


@pytest.fixture
def loop():
    return Loop()


def new_channel(loop, name="ch", timed: set | None = None) -> Channel:
    return Channel(types.SimpleNamespace(name="t"), name, MessageQueue(1000, None), loop, timed=timed)


def published(topic: Topic, *bodies: bytes) -> None:
    topic.publish(list(bodies), 0)


def bodies(subscriber: Subscriber) -> list[bytes]:
    return [m.body for m in subscriber.received]


def _put(channel, loop, body: bytes) -> bytes:
    message = Message(b"%016d" % next(_ids), body, 0)
    channel.put(message)
    loop.run()
    return message.id


class SmallNsqd:
    """The daemon services a Topic asks for, with memory-only queues."""

    def __init__(self, loop):
        self.loop = loop
        self.timed_channels: set = set()
        self.replication = None
        self.options = types.SimpleNamespace(node_id=1, max_attempts=0, message_ttl=0.0, expire_action="drop",
                                             max_depth=0, full_policy="reject", retention=0.0,
                                             retention_bytes=0)

    def new_queue(self, name, ephemeral):
        return MessageQueue(1000, None)

    def new_latency_window(self):
        return None

    def new_deferred_disk(self, name, ephemeral):
        return None

    def read_log(self, topic, channel):
        pass  # no topic here keeps a log

    def notify_changed(self, *args, **kwargs):
        pass


def test_only_the_client_holding_a_message_may_answer_it(loop):
    channel = new_channel(loop)
    owner, other = Subscriber(), Subscriber()
    channel.add_client(owner)
    channel.add_client(other)
    published_id = _put(channel, loop, b"x")
    holder, stranger = (owner, other) if owner.received else (other, owner)
    with pytest.raises(ProtocolError) as error:
        channel.finish(stranger, published_id)
    assert (error.value.code, error.value.description) == (
        "E_FIN_FAILED", f"FIN {published_id.decode()} failed client does not own message")
    with pytest.raises(ProtocolError, match="REQ 0000000000000bad failed ID not in flight"):
        channel.requeue(holder, b"0000000000000bad", 0)
    channel.finish(holder, published_id)
    assert (channel.in_flight_count, holder.in_flight_count, holder.finish_count) == (0, 0, 1)


def test_an_unanswered_message_times_out_and_comes_back(loop):
    channel = new_channel(loop)
    client = Subscriber(msg_timeout=5)
    channel.add_client(client)
    message_id = _put(channel, loop, b"slow")
    loop.now += 4.9
    assert not channel.process_timeouts(loop.now)
    loop.now += 0.2
    assert channel.process_timeouts(loop.now)
    loop.run()
    assert client.attempts == [1, 2] and client.received[1].id == message_id
    assert channel.timeout_count == 1 and client.in_flight_count == 1


def test_only_channels_holding_timers_are_in_the_scan_set(loop):
    timed: set = set()
    channel = new_channel(loop, timed=timed)
    client = Subscriber()
    channel.add_client(client)
    message_id = _put(channel, loop, b"in flight")
    assert timed == {channel}
    channel.requeue(client, message_id, 2.0)  # now deferred
    channel.process_timeouts(loop.now)
    assert timed == {channel}
    loop.now += 2.1
    channel.process_timeouts(loop.now)  # due: delivered again
    loop.run()
    channel.finish(client, message_id)
    channel.process_timeouts(loop.now)  # nothing in flight or deferred: leaves the set
    assert timed == set()
    _put(channel, loop, b"again")
    channel.delete()
    assert timed == set()


def test_a_clamped_touch_times_out_before_later_messages(loop):
    channel = new_channel(loop)
    client = Subscriber(msg_timeout=1.5)
    channel.add_client(client)
    a = _put(channel, loop, b"A")
    loop.now += 0.9
    _put(channel, loop, b"B")
    loop.now += 0.1
    channel.touch(client, a, max_msg_timeout=2.0)
    loop.now += 1.1  # 2.1 s after A: past its clamped deadline, before B's (2.4)
    channel.process_timeouts(loop.now)
    loop.run()
    assert bodies(client) == [b"A", b"B", b"A"]


def test_req_with_a_delay_defers_then_delivers(loop):
    channel = new_channel(loop)
    client = Subscriber()
    channel.add_client(client)
    message_id = _put(channel, loop, b"later")
    channel.requeue(client, message_id, 2.0)
    assert (channel.deferred_count, channel.in_flight_count, channel.requeue_count) == (1, 0, 1)
    loop.now += 1.9
    channel.process_timeouts(loop.now)
    loop.run()
    assert len(client.received) == 1
    loop.now += 0.2
    channel.process_timeouts(loop.now)
    loop.run()
    assert len(client.received) == 2 and channel.deferred_count == 0


def test_a_client_that_leaves_gives_its_messages_back_at_once(loop):
    channel = new_channel(loop)
    leaving, staying = Subscriber(ready=1), Subscriber(ready=0)
    channel.add_client(leaving)
    channel.add_client(staying)
    _put(channel, loop, b"m")
    assert bodies(leaving) == [b"m"]
    staying.ready = 1
    channel.remove_client(leaving)
    loop.run()
    assert bodies(staying) == [b"m"] and staying.attempts == [2]
    assert channel.in_flight_count == 1 and leaving.in_flight_count == 0


def test_empty_and_close_take_everything_in_flight(loop):
    channel = new_channel(loop)
    client = Subscriber()
    channel.add_client(client)
    _put(channel, loop, b"1")
    _put(channel, loop, b"2")
    channel.empty()
    assert (channel.in_flight_count, client.in_flight_count, len(channel.queue)) == (0, 0, 0)


def test_a_topic_holds_its_backlog_for_the_first_channel_only(loop):
    topic = Topic("orders", SmallNsqd(loop))
    published(topic, b"early1", b"early2")
    assert topic.depth == 2
    first = topic.get_channel("first")
    loop.run()
    assert (topic.depth, first.depth) == (0, 2)
    second = topic.get_channel("second")
    published(topic, b"late")
    loop.run()
    assert (first.depth, second.depth) == (3, 1)


def test_a_paused_topic_keeps_messages_until_unpaused(loop):
    topic = Topic("orders", SmallNsqd(loop))
    channel = topic.get_channel("ch")
    topic.pause()
    published(topic, b"held")
    loop.run()
    assert (topic.depth, channel.depth) == (1, 0)
    topic.unpause()
    loop.run()
    assert (topic.depth, channel.depth) == (0, 1)


def test_every_channel_gets_an_mpub_even_when_one_has_no_room_for_it(loop):
    nsqd = SmallNsqd(loop)
    nsqd.new_queue = lambda name, ephemeral: MessageQueue(2, None)  # memory only: overflow is dropped
    topic = Topic("orders", nsqd)
    first, second = topic.get_channel("first"), topic.get_channel("second")
    topic.publish_mpub(encode_mpub_body([b"1", b"2", b"3"]), 3, 0)
    assert [(c.depth, c.queue.dropped) for c in (first, second)] == [(2, 1), (2, 1)]
    assert [m.body for m in (second.queue.pop(), second.queue.pop())] == [b"1", b"2"]
