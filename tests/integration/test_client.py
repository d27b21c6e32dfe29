"""The nsqpy client against real nsqd (and nsqlookupd) processes."""

import asyncio
import threading
import time

import pytest

from nsqpy.client import Config, ConfigError, ConnectionClosedError, Consumer, Producer, ProtocolError, SyncProducer
from tests.support.wire import WireConn, http_json, wait_until

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

FAST = dict(lookupd_poll_interval=1, rdy_redistribute_interval=0.1, low_rdy_idle_timeout=1, low_rdy_timeout=1)


def run(coroutine, timeout=60):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def eventually(predicate, timeout: float = 30, interval: float = 0.02) -> None:
    """Wait until ``predicate()`` is true; TimeoutError after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(interval)


def channel_stats(daemon, topic, channel="ch"):
    _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}&channel={channel}")
    return data["topics"][0]["channels"][0] if data["topics"] else None


class Collector:
    """An async handler that records bodies and can be told to fail."""

    def __init__(self, fail_first: int = 0, delay: float = 0.0):
        self.bodies: list[bytes] = []
        self.attempts: dict[bytes, list[int]] = {}
        self.fail_first = fail_first
        self.delay = delay
        self.calls = 0
        self.changed = asyncio.Event()

    async def __call__(self, message):
        self.calls += 1
        self.attempts.setdefault(message.body, []).append(message.attempts)
        if self.delay:
            await asyncio.sleep(self.delay)
        self.changed.set()
        if self.calls <= self.fail_first:
            raise RuntimeError("handler failure (test)")
        self.bodies.append(message.body)

    async def wait_for(self, count: int, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while len(self.bodies) < count:
                self.changed.clear()
                await self.changed.wait()


def test_publish_paths_and_consume(nsqd, topic):
    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.ping()
            await producer.publish(topic, b"one")
            await producer.multi_publish(topic, [b"two", b"three"])
            await producer.deferred_publish(topic, 0.5, b"later")
            # many concurrent callers on one connection, answers matched in order
            await asyncio.gather(*(producer.publish(topic, b"c%d" % i) for i in range(300)))
        handler = Collector()
        consumer = Consumer(topic, "ch", handler, config=Config(max_in_flight=50))
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        await handler.wait_for(304)
        stats = consumer.stats()
        await consumer.stop()
        return handler, stats

    handler, stats = run(main())
    assert sorted(handler.bodies) == sorted([b"one", b"two", b"three", b"later"] + [b"c%d" % i for i in range(300)])
    assert stats.messages_received == stats.messages_finished == 304
    assert stats.connections == 1 and list(stats.ready_counts.values()) == [50]


@pytest.mark.parametrize("addresses", [1, 2], ids=["one-nsqd", "every-nsqd"])
def test_publishes_keep_their_call_order_while_the_connection_is_made(start_nsqd, topic, addresses):
    """One publish a loop turn from the first: those that came while the
    connection was made wait for it in line, and one that comes as they
    wake up must not overtake them (to_nsq's order depends on it), with
    one nsqd and with a copy to every nsqd."""
    nodes = [start_nsqd() for _ in range(addresses)]
    for node in nodes:
        http_json("POST", f"{node.http_url}/channel/create?topic={topic}&channel=ch")

    async def main():
        producer = Producer([node.tcp_address for node in nodes], replicas=addresses, dedup_key=False)
        async with producer:
            sent = []
            for i in range(300):
                sent.append(asyncio.ensure_future(producer.multi_publish(topic, [b"%03d" % i])))
                await asyncio.sleep(0)
            await asyncio.gather(*sent)

    run(main())
    for node in nodes:
        with WireConn(node.tcp_hostport) as conn:
            conn.subscribe(topic, "ch", rdy=300)
            bodies = [conn.message(timeout=15).body for _ in range(300)]
        assert bodies == [b"%03d" % i for i in range(300)]


def test_finish_all_answers_a_held_batch_in_one_write(nsqd, topic):
    """A batch processor holds messages (auto-response off) and FINs them together;
    a message already answered is handed back instead of being FINed twice."""
    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish(topic, [b"m%d" % i for i in range(500)])
        held = []

        async def hold(message):
            message.disable_auto_response()
            held.append(message)

        consumer = Consumer(topic, "ch", hold, config=Config(max_in_flight=1000))
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        await eventually(lambda: len(held) >= 500)
        held[0].finish()
        assert consumer.finish_all(held) == [held[0]]
        await asyncio.sleep(0.2)
        stats = consumer.stats()
        await consumer.stop()
        return stats

    stats = run(main())
    assert stats.messages_finished == 500
    channel = channel_stats(nsqd, topic)
    assert (channel["in_flight_count"], channel["depth"], channel["requeue_count"]) == (0, 0, 0)


def test_publish_errors_are_raised_with_nsqs_code_and_pending_calls_fail(nsqd, topic):
    async def main():
        producer = Producer(nsqd.tcp_address)
        with pytest.raises(ProtocolError) as error:
            await producer.publish(topic, b"x" * (1024 * 1024 + 1))  # past nsqd's --max-msg-size
        assert error.value.code == "E_BAD_MESSAGE"
        await producer.publish(topic, b"reconnected")  # a new connection is made
        await producer.close()
        with pytest.raises(ConnectionClosedError):
            await Producer("127.0.0.1:1").publish(topic, b"nobody there")

    run(main())


def test_sync_producer_and_sync_handlers_with_concurrency(nsqd, topic):
    with SyncProducer(nsqd.tcp_address) as producer:
        producer.multi_publish(topic, [b"%d" % i for i in range(40)])
        producer.publish(topic, b"40")
    seen = []
    running, most_at_once = [0], [0]
    lock = threading.Lock()

    def handler(message):  # a plain function: runs in the consumer's thread pool
        with lock:
            running[0] += 1
            most_at_once[0] = max(most_at_once[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        seen.append(message.body)

    async def main():
        consumer = Consumer(topic, "ch", handler, config=Config(max_in_flight=8), concurrency=8)
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        started = time.monotonic()
        while len(seen) < 41 and time.monotonic() - started < 30:
            await asyncio.sleep(0.05)
        await consumer.stop()

    run(main())
    assert sorted(seen) == sorted(b"%d" % i for i in range(41))
    # handlers ran concurrently: counted, not timed (a busy machine makes any run slow)
    assert most_at_once[0] > 1


def test_backoff_is_entered_and_left(nsqd, topic):
    # a 1.5 s window at RDY 0: sampled many times over, even on a busy machine
    config = Config(max_in_flight=10, backoff_multiplier=0.75, max_backoff_duration=2, default_requeue_delay=0)
    handler = Collector(fail_first=2)
    observed = []

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish(topic, [b"%d" % i for i in range(20)])
        consumer = Consumer(topic, "ch", handler, config=config)
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        def state():
            return consumer.stats().backoff_level, channel_stats(nsqd, topic)["clients"][0]["ready_count"]

        async with asyncio.timeout(30):
            while len(handler.bodies) < 20:
                observed.append(state())
                await asyncio.sleep(0.05)
            while (final := state()) != (0, 10):  # until nsqd has the full RDY again
                await asyncio.sleep(0.05)
        await consumer.stop()
        return final

    final = run(main())
    assert (1, 0) in observed or (2, 0) in observed  # backing off: RDY 0 as nsqd sees it
    assert final == (0, 10)  # backoff left: full RDY again
    assert sorted(handler.bodies) == sorted(b"%d" % i for i in range(20))


def test_max_attempts_gives_up_with_a_hook(nsqd, topic):
    given_up = []

    async def always_fails(message):
        raise RuntimeError("poison (test)")

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.publish(topic, b"poison")
        config = Config(max_attempts=3, default_requeue_delay=0, max_backoff_duration=0)
        consumer = Consumer(topic, "ch", always_fails, config=config, on_give_up=given_up.append)
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        await eventually(lambda: given_up)
        await asyncio.sleep(0.2)
        await consumer.stop()

    run(main())
    assert [(m.body, m.attempts) for m in given_up] == [(b"poison", 4)]
    stats = channel_stats(nsqd, topic)
    assert (stats["requeue_count"], stats["depth"], stats["in_flight_count"]) == (3, 0, 0)


def test_touch_keeps_a_slow_message_alive(nsqd, topic):
    async def slow(message):
        started = time.monotonic()
        while time.monotonic() - started < 3.0:  # 3 s of work with a 2 s msg_timeout
            await asyncio.sleep(0.4)
            message.touch()

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.publish(topic, b"slow")
        consumer = Consumer(topic, "ch", slow, config=Config(msg_timeout=2))
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        await eventually(lambda: consumer.stats().messages_finished >= 1)
        stats = consumer.stats()
        await consumer.stop()
        return stats

    stats = run(main())
    assert stats.messages_received == 1
    assert channel_stats(nsqd, topic)["timeout_count"] == 0


def test_graceful_stop_finishes_in_flight_messages(nsqd, topic):
    handler = Collector(delay=0.5)

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish(topic, [b"a", b"b", b"c", b"d", b"e"])
        consumer = Consumer(topic, "ch", handler, config=Config(max_in_flight=5), concurrency=5)
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        async with asyncio.timeout(30):
            while handler.calls < 5:
                await asyncio.sleep(0.01)
        await consumer.stop()  # all five are inside the handler now

    run(main())
    assert sorted(handler.bodies) == [b"a", b"b", b"c", b"d", b"e"]
    stats = channel_stats(nsqd, topic)
    assert (stats["depth"], stats["in_flight_count"], stats["requeue_count"], stats["timeout_count"]) == (0, 0, 0, 0)
    assert stats["message_count"] == 5  # nothing redelivered


def test_rdy_rotates_when_connections_outnumber_max_in_flight(start_nsqd, topic):
    daemons = [start_nsqd() for _ in range(3)]
    handler = Collector()

    async def main():
        for i, daemon in enumerate(daemons):
            async with Producer(daemon.tcp_address) as producer:
                await producer.multi_publish(topic, [b"n%d-%d" % (i, j) for j in range(3)])
        consumer = Consumer(topic, "ch", handler, config=Config(max_in_flight=1, **FAST))
        await consumer.connect_to_nsqds([d.tcp_address for d in daemons])
        assert sum(consumer.stats().ready_counts.values()) <= 1
        await handler.wait_for(9, timeout=45)
        await consumer.stop()

    run(main(), timeout=60)
    assert sorted(handler.bodies) == sorted(b"n%d-%d" % (i, j) for i in range(3) for j in range(3))


def test_the_default_consumer_reads_every_nsqd_that_has_messages(start_nsqd, topic):
    """go-nsq's defaults (max_in_flight 1, RDY moved every 5 s from a holder
    idle for 10 s or holding it for 30 s) over 3 nsqd, two of them with more
    messages than the slow handler gets through: the RDY goes to the node
    that has waited longest, so the second busy node is read within two
    holders' time (about 40 s), not whenever a random pick lands on it."""
    busy, empty, other = start_nsqd(), start_nsqd(), start_nsqd()
    read: dict[str, float] = {}

    async def handler(message):
        read.setdefault(message.connection.address, time.monotonic())
        await asyncio.sleep(0.05)  # 20 messages a second: neither busy node empties during the test

    async def main():
        for daemon in (busy, other):
            async with Producer(daemon.tcp_address) as producer:
                await producer.multi_publish(topic, [b"m%d" % i for i in range(2000)])
        consumer = Consumer(topic, "ch", handler)
        assert consumer.config == Config()
        started = time.monotonic()
        for daemon in (busy, empty, other):  # one at a time: the first to connect holds the RDY first
            await consumer.connect_to_nsqd(daemon.tcp_address)
        try:
            await eventually(lambda: len(read) == 2, timeout=75)
        finally:
            await consumer.stop(timeout=5)
        return {address: at - started for address, at in read.items()}

    waited = run(main(), timeout=100)
    assert set(waited) == {busy.tcp_address, other.tcp_address}
    assert max(waited.values()) < 60, waited


def test_reconnects_after_nsqd_restarts(start_nsqd, tmp_path, topic):
    first = start_nsqd()
    address = first.tcp_address
    handler = Collector()

    async def main():
        consumer = Consumer(topic, "ch", handler, config=Config(max_in_flight=5))
        await consumer.connect_to_nsqd(address)
        async with Producer(address) as producer:
            await producer.publish(topic, b"before")
        await handler.wait_for(1)
        await asyncio.to_thread(first.stop)
        restarted = await asyncio.to_thread(start_nsqd, f"--tcp-address={address}")
        await eventually(lambda: consumer.connections)
        async with Producer(address) as producer:
            await producer.publish(topic, b"after")
        await handler.wait_for(2)
        await consumer.stop()
        return restarted

    run(main())
    assert handler.bodies == [b"before", b"after"]


def test_lookupd_discovers_a_new_nsqd_within_a_poll_interval(start_lookupd, start_nsqd, topic):
    lookupd = start_lookupd()
    first = start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}")
    handler = Collector()

    async def main():
        async with Producer(first.tcp_address) as producer:
            await producer.publish(topic, b"from first")
        wait_until(lambda: http_json("GET", f"{lookupd.http_url}/lookup?topic={topic}")[0] == 200)
        consumer = Consumer(topic, "ch", handler, config=Config(**FAST, max_in_flight=5))
        await consumer.connect_to_nsqlookupd(lookupd.http_address)
        await handler.wait_for(1)
        second = await asyncio.to_thread(start_nsqd, f"--lookupd-tcp-address={lookupd.tcp_address}")
        async with Producer(second.tcp_address) as producer:
            await producer.publish(topic, b"from second")
        await handler.wait_for(2, timeout=20)  # the poll interval is 1 s (not the default 60 s)
        connected = len(consumer.connections)
        await consumer.stop()
        return connected

    assert run(main()) == 2
    assert sorted(handler.bodies) == [b"from first", b"from second"]


@pytest.mark.parametrize("options,fragment", [
    ({"max_in_flight": -1}, "max_in_flight must be in"),
    ({"max_attempts": 70000}, "max_attempts must be in"),
    ({"backoff_strategy": "linear"}, "backoff_strategy must be"),
    ({"heartbeat_interval": 90}, "heartbeat_interval must be -1 or in [1, read_timeout)"),
    ({"sample_rate": 100}, "sample_rate must be in [0, 99]"),
    ({"output_buffer_size": 10}, "output_buffer_size must be -1 or >= 64"),
])
def test_config_validation_names_the_option_and_range(options, fragment):
    with pytest.raises(ConfigError) as error:
        Config(**options)
    assert fragment in str(error.value)


def test_consumer_rejects_bad_names():
    with pytest.raises(ValueError):
        Consumer("bad*topic", "ch", lambda m: None)


def test_a_consumer_started_before_its_topic_exists_finds_it_soon(start_lookupd, start_nsqd, topic):
    lookupd = start_lookupd()
    daemon = start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}")
    handler = Collector()

    async def main():
        consumer = Consumer(topic, "ch", handler)  # default 60 s poll interval
        await consumer.connect_to_nsqlookupd(lookupd.http_address)
        async with Producer(daemon.tcp_address) as producer:
            await producer.publish(topic, b"first")
        await handler.wait_for(1, timeout=25)  # retried from 0.5 s, doubling: far sooner than the 60 s
        await consumer.stop()

    run(main())
    assert handler.bodies == [b"first"]
