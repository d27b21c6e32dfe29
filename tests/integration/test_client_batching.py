"""The client's batched paths against a real nsqd: FINs of a read written as
one run yet in order with TOUCH and REQ, whole batches of mixed sizes, and
the publish deadline kept by one timer on the answer."""

import asyncio
import logging
import os
import signal
import time

import pytest

from nsqpy.client import Config, ConnectionClosedError, Consumer, Producer
from tests.support.wire import http_json

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


def run(coroutine, timeout=90):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def channel_stats(daemon, topic, channel="ch"):
    """Once the consumer has stopped: a message it did not FIN is back in
    ``depth`` (nsqd requeues what a closing client held)."""
    _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}&channel={channel}")
    return data["topics"][0]["channels"][0]


async def consume(daemon, topic, count, handler, **config):
    """Run a consumer until ``handler`` has seen ``count`` calls; the calls' messages."""
    seen, done = [], asyncio.Event()

    async def counting(message):
        seen.append(message)
        if len(seen) >= count:
            done.set()
        await handler(message)

    consumer = Consumer(topic, "ch", counting, config=Config(**config))
    await consumer.connect_to_nsqd(daemon.tcp_address)
    async with asyncio.timeout(60):
        await done.wait()
    await consumer.stop()
    return seen


def test_touch_then_finish_in_one_go_reaches_nsqd_in_that_order(nsqd, topic, caplog):
    """A TOUCH queued behind earlier FINs and before its own message's FIN
    must leave in that order: the other way round nsqd answers E_TOUCH_FAILED."""
    caplog.set_level(logging.WARNING, logger="nsqpy.client")

    async def touch(message):
        message.touch()

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            for start in range(0, 2000, 500):
                await producer.multi_publish(topic, [b"%d" % n for n in range(start, start + 500)])
        return await consume(nsqd, topic, 2000, touch, max_in_flight=500)

    assert len(run(main())) == 2000
    stats = channel_stats(nsqd, topic)
    assert (stats["depth"], stats["in_flight_count"], stats["requeue_count"], stats["timeout_count"]) == (0, 0, 0, 0)
    assert not [r.getMessage() for r in caplog.records if r.name == "nsqpy.client"]


def test_requeues_between_fins_are_each_answered_once(nsqd, topic, caplog):
    caplog.set_level(logging.WARNING, logger="nsqpy.client")

    async def every_other_once(message):
        if message.attempts == 1 and int(message.body) % 2:
            message.requeue(0, backoff=False)

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish(topic, [b"%d" % n for n in range(600)])
        return await consume(nsqd, topic, 900, every_other_once, max_in_flight=200)

    seen = run(main())
    assert sorted(int(m.body) for m in seen if m.attempts == 2) == list(range(1, 600, 2))
    stats = channel_stats(nsqd, topic)
    assert (stats["depth"], stats["in_flight_count"], stats["requeue_count"], stats["timeout_count"]) == (0, 0, 300, 0)
    assert not [r.getMessage() for r in caplog.records if r.name == "nsqpy.client"]


def test_finish_all_writes_a_batch_that_nsqd_takes_whole(nsqd, topic):
    held = []

    async def hold(message):
        message.disable_auto_response()
        held.append(message)

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish(topic, [b"m"] * 300)
        consumer = Consumer(topic, "ch", hold, config=Config(max_in_flight=300))
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        async with asyncio.timeout(30):
            while len(held) < 300:
                await asyncio.sleep(0.01)
        assert consumer.finish_all(held) == []
        assert consumer.finish_all(held[:10]) == held[:10]  # answered already
        await consumer.flushed()
        await consumer.stop()

    run(main())
    stats = channel_stats(nsqd, topic)
    assert (stats["depth"], stats["in_flight_count"], stats["timeout_count"]) == (0, 0, 0)


def test_batches_of_mixed_sizes_arrive_whole_and_in_order(nsqd, topic):
    sizes = [0, 1, 199, 4095, 4096, 4097, 70_000, 300_000, 5]
    batches = [[bytes([batch, n % 256]) * (size // 2) + b"." * (size % 2) for n, size in enumerate(sizes)]
               for batch in range(1, 4)]
    batches = [[body or b"-" for body in batch] for batch in batches]  # nsqd refuses empty bodies

    async def nothing(message):
        pass

    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            for batch in batches:
                await producer.multi_publish(topic, batch)
        return await consume(nsqd, topic, len(sizes) * 3, nothing)

    assert [m.body for m in run(main())] == [body for batch in batches for body in batch]


def test_a_single_node_publish_fails_at_its_timeout_then_reconnects(start_nsqd, topic):
    daemon = start_nsqd()

    async def main():
        async with Producer(daemon.tcp_address, timeout=1) as producer:
            await producer.publish(topic, b"before")
            os.kill(daemon.process.pid, signal.SIGSTOP)
            started = time.monotonic()
            try:
                with pytest.raises(ConnectionClosedError, match="did not answer in 1s"):
                    await producer.multi_publish(topic, [b"frozen"] * 10)
                waited = time.monotonic() - started
            finally:
                os.kill(daemon.process.pid, signal.SIGCONT)
            await producer.publish(topic, b"after")
            return waited

    waited = run(main())
    assert 0.9 < waited < 10  # the call's 1 s timeout, not the run's 90 s
    _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
    assert data["topics"][0]["message_count"] in (2, 12)  # the frozen batch may have been read before the stop
