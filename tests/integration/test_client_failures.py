"""The client's failure paths, as go-nsq's: refused SUB, a frozen nsqd, background task errors."""

import asyncio
import logging
import os
import signal
import time

import pytest

from nsqpy.client import Config, ConnectionClosedError, Consumer, NSQError, Producer, ProtocolError
from tests.integration.test_client import FAST, Collector, eventually, run
from tests.support.wire import http_json, wait_until

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


def record_loop_errors(loop_errors: list):
    """Collect what asyncio would print as 'Task exception was never retrieved' and the like."""
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))


def test_nsqds_refusals_are_nsq_errors():
    assert issubclass(ProtocolError, NSQError)
    from nsqpy.protocol.errors import ProtocolError as WireError
    assert issubclass(ProtocolError, WireError)


def test_a_refused_sub_is_retried_until_the_channel_has_room(start_nsqd, topic):
    daemon = start_nsqd("--max-channel-consumers=1")
    first, second = Collector(), Collector()
    loop_errors = []

    async def main():
        record_loop_errors(loop_errors)
        config = Config(max_in_flight=5, lookupd_poll_interval=1)
        holder = Consumer(topic, "ch", first, config=config)
        await holder.connect_to_nsqd(daemon.tcp_address)
        waiting = Consumer(topic, "ch", second, config=config)
        await waiting.connect_to_nsqd(daemon.tcp_address)  # E_SUB_FAILED: no error, a retry later
        assert not waiting.connections
        await asyncio.sleep(1.5)
        assert not waiting.connections  # still refused while the slot is taken
        await holder.stop()
        await eventually(lambda: waiting.connections, timeout=20)
        async with Producer(daemon.tcp_address) as producer:
            await producer.publish(topic, b"for the second")
        await second.wait_for(1)
        await waiting.stop()

    run(main())
    assert second.bodies == [b"for the second"]
    assert loop_errors == []


def test_refused_subs_found_through_lookupd_log_one_line_each(start_lookupd, start_nsqd, topic, caplog):
    lookupd = start_lookupd()
    daemon = start_nsqd("--max-channel-consumers=1", f"--lookupd-tcp-address={lookupd.tcp_address}")
    loop_errors = []

    def refusals():
        return [r for r in caplog.records if "E_SUB_FAILED" in r.getMessage()]

    async def main():
        record_loop_errors(loop_errors)
        async with Producer(daemon.tcp_address) as producer:
            await producer.publish(topic, b"x")
        await asyncio.to_thread(wait_until, lambda: http_json(
            "GET", f"{lookupd.http_url}/lookup?topic={topic}")[0] == 200)
        holder = Consumer(topic, "ch", Collector(), config=Config(**FAST))
        await holder.connect_to_nsqlookupd(lookupd.http_address)
        await eventually(lambda: holder.connections)
        refused = Consumer(topic, "ch", Collector(), config=Config(**FAST))
        await refused.connect_to_nsqlookupd(lookupd.http_address)
        await eventually(lambda: len(refusals()) >= 2, timeout=30)  # two polls, each refused
        await refused.stop()
        await holder.stop()

    with caplog.at_level(logging.WARNING, logger="nsqpy.client"):
        run(main())
    assert loop_errors == []
    assert refusals() and all(r.exc_info is None and "\n" not in r.getMessage() for r in refusals())


@pytest.fixture
def frozen_nsqd(start_nsqd):
    daemon = start_nsqd()
    yield daemon
    os.kill(daemon.process.pid, signal.SIGCONT)


def test_a_frozen_nsqd_fails_a_publish_after_read_timeout(frozen_nsqd, topic):
    config = Config(heartbeat_interval=1, read_timeout=2)

    async def main():
        async with Producer(frozen_nsqd.tcp_address, config, timeout=30) as producer:
            await producer.publish(topic, b"before")
            await asyncio.sleep(2.5)  # idle, yet alive: heartbeats keep the connection
            await producer.publish(topic, b"still connected")
            os.kill(frozen_nsqd.process.pid, signal.SIGSTOP)
            started = time.monotonic()
            with pytest.raises(ConnectionClosedError, match="i/o timeout"):
                await producer.publish(topic, b"frozen")
            return time.monotonic() - started

    waited = run(main())
    assert waited < 20  # read_timeout (2 s), not the call's 30 s


def test_a_consumer_drops_a_frozen_nsqd_and_reconnects_when_it_thaws(frozen_nsqd, topic):
    handler = Collector()
    config = Config(heartbeat_interval=1, read_timeout=2, max_in_flight=5, lookupd_poll_interval=1)

    async def main():
        consumer = Consumer(topic, "ch", handler, config=config)
        await consumer.connect_to_nsqd(frozen_nsqd.tcp_address)
        os.kill(frozen_nsqd.process.pid, signal.SIGSTOP)
        await eventually(lambda: not consumer.connections, timeout=20)  # read_timeout is 2 s
        os.kill(frozen_nsqd.process.pid, signal.SIGCONT)
        await eventually(lambda: consumer.connections, timeout=30)
        async with Producer(frozen_nsqd.tcp_address) as producer:
            await producer.publish(topic, b"after the thaw")
        await handler.wait_for(1)
        await consumer.stop()

    run(main(), timeout=90)
    assert handler.bodies == [b"after the thaw"]


def test_closing_a_producer_with_publishes_pending_leaves_no_unretrieved_future(nsqd, topic):
    loop_errors = []

    async def main():
        record_loop_errors(loop_errors)
        producer = Producer(nsqd.tcp_address)
        await producer.publish(topic, b"connect")
        calls = [asyncio.ensure_future(producer.multi_publish(topic, [b"m"] * 10)) for _ in range(2000)]
        await asyncio.sleep(0)
        await producer.close()
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        import gc
        gc.collect()
        await asyncio.sleep(0.1)

    run(main())
    assert loop_errors == []


def test_a_stop_under_full_flow_loses_no_fin(nsqd, topic):
    """nsqd keeps pushing while the consumer stops: closing then resets the
    socket unless nsqd has read the last FINs first. Nothing finished may
    come back."""
    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            for start in range(0, 20_000, 500):
                await producer.multi_publish(topic, [b"%d" % i for i in range(start, start + 500)])
        finished = []
        for _ in range(5):
            handler = Collector()
            consumer = Consumer(topic, "ch", handler, config=Config(max_in_flight=2500))
            await consumer.connect_to_nsqd(nsqd.tcp_address)
            await handler.wait_for(500)
            await consumer.stop()
            finished += handler.bodies
        rest = Collector()
        consumer = Consumer(topic, "ch", rest, config=Config(max_in_flight=2500))
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        await rest.wait_for(20_000 - len(finished), timeout=90)
        await consumer.stop()
        return finished, rest.bodies

    finished, rest = run(main(), timeout=180)
    assert not set(finished) & set(rest)  # nothing FINished was delivered again
    assert len(set(finished) | set(rest)) == 20_000


def test_a_refused_publish_is_raised_and_not_logged_too(start_nsqd, topic, caplog):
    nsqd = start_nsqd("--max-msg-size=10")

    async def main():
        producer = Producer(nsqd.tcp_address)
        try:
            await producer.publish(topic, b"fits")
            with pytest.raises(ProtocolError) as refused:
                await producer.publish(topic, b"x" * 100)
            assert refused.value.code == "E_BAD_MESSAGE"
        finally:
            await producer.close()

    with caplog.at_level(logging.WARNING, logger="nsqpy.client"):
        run(main())
    assert not [record for record in caplog.records if "E_BAD_MESSAGE" in record.getMessage()]  # one report: the raise
