"""The Producer's keyed publishes: a publish whose answer is lost (it
reached nsqd, the connection dropped before the OK came back) is sent
again with its key and queued once; NSQ's own nsqd refuses a key out loud."""

import asyncio

import pytest

from nsqpy.client import ConnectionClosedError, Producer, ProtocolError, SyncProducer
from nsqpy.localcluster import nsqd_process
from tests.integration.test_keyed_publish import create_channel, received, topic_config
from tests.support.gonsqd import GO_NSQD
from tests.support.proxy import Proxy

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")


def test_a_keyed_publish_whose_answer_is_lost_is_queued_once(nsqd, topic):
    create_channel(nsqd, topic)

    async def main(address: str, proxy: Proxy):
        async with Producer(address) as producer:
            await producer.publish(topic, b"warm-up", key="warm-up")
            proxy.lose_answers(3)
            for index in range(10):
                await producer.publish(topic, b"single %d" % index, key=f"single-{index}")
            proxy.lose_answers(2)
            await producer.multi_publish(topic, [b"batch %d" % i for i in range(5)], keys=[f"b{i}" for i in range(5)])
            proxy.lose_answers(1)
            await producer.deferred_publish(topic, 0.01, b"deferred", key="deferred")
            proxy.lose_answers(1)
            with pytest.raises(ConnectionClosedError):  # without a key, a lost answer is the caller's to judge
                await producer.publish(topic, b"unkeyed")

    with Proxy(*nsqd.tcp_hostport) as proxy:
        asyncio.run(asyncio.wait_for(main(proxy.address, proxy), 60))
    bodies = received(nsqd, topic)
    expected = [b"warm-up", *(b"single %d" % i for i in range(10)), *(b"batch %d" % i for i in range(5)),
                b"deferred", b"unkeyed"]  # unkeyed: its answer was lost, the message is queued all the same
    assert sorted(bodies) == sorted(expected)


def test_the_blocking_producer_takes_keys(nsqd, topic):
    create_channel(nsqd, topic)
    with SyncProducer(nsqd.tcp_address) as producer:
        for _ in range(2):
            producer.publish(topic, b"one", key=b"1")
            producer.multi_publish(topic, [b"two", b"three"], keys=["2", "3"])
            producer.deferred_publish(topic, 0.01, b"four", key="4")
    assert sorted(received(nsqd, topic)) == [b"four", b"one", b"three", b"two"]


@pytest.mark.parametrize("key", ["", "has space", "k" * 129, "é"])
def test_a_bad_key_is_a_value_error_before_anything_is_sent(nsqd, topic, key):
    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            with pytest.raises(ValueError, match="publish key"):
                await producer.publish(topic, b"x", key=key)
            with pytest.raises(ValueError, match="2 keys for 1 bodies"):
                await producer.multi_publish(topic, [b"x"], keys=["a", "b"])

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.skipif(not GO_NSQD.exists(), reason=f"NSQ's nsqd is not at {GO_NSQD} (../shared/reference)")
def test_a_key_sent_to_nsqs_own_nsqd_is_an_error(tmp_path, topic):
    async def main(address: str):
        async with Producer(address) as producer:
            with pytest.raises(ProtocolError, match="does not take keyed publishes") as raised:
                await producer.publish(topic, b"x", key="k")
            assert raised.value.code == "E_INVALID"

    with nsqd_process(str(tmp_path), executable=str(GO_NSQD)) as go_nsqd:
        asyncio.run(asyncio.wait_for(main(go_nsqd.tcp_address), 30))


@pytest.mark.parametrize("kind", ["plain, two channels", "retained"])
def test_keyed_publishes_through_a_kill_9_of_nsqd_in_durable_mode_are_each_queued_once(start_nsqd, tmp_path, topic,
                                                                                        kind):
    """nsqd (durable mode) killed -9 while a Producer publishes keyed
    messages one after another, and started again on the same port: the
    publish caught by the kill is sent again with its key once nsqd is back,
    and each message is queued once, in every channel. The kill mostly lands
    in a message's fsync: its key was written before it (synchold.py); were
    it written after, the caught publish would be queued twice (it was, in
    9 of 12 runs on a busy 2-core machine)."""
    data = tmp_path / "data"
    durable = ("--mem-queue-size=0", "--sync-every=1")
    first = start_nsqd(*durable, data_path=data)
    channels = ["c", "d"] if kind.startswith("plain") else ["c"]
    for channel in channels:
        create_channel(first, topic, channel)
    if kind == "retained":
        assert topic_config(first, topic, retention="1h")[0] == 200
    address = first.tcp_address
    restarted = []
    published = 0

    async def main():
        nonlocal published
        async with Producer(address, timeout=60) as producer:
            async def publish_until_told():
                nonlocal published
                while not restarted or published < 300:
                    await producer.publish(topic, b"m%d" % published, key=f"k{published}")
                    published += 1

            publishing = asyncio.create_task(publish_until_told())
            while published < 100:
                await asyncio.sleep(0.01)
            first.kill()
            await asyncio.sleep(1)
            assert not publishing.done()  # waiting for nsqd, not failed
            restarted.append(start_nsqd(*durable, f"--tcp-address={address}", data_path=data))
            await asyncio.wait_for(publishing, 60)

    asyncio.run(main())
    for channel in channels:
        assert sorted(received(restarted[0], topic, channel)) == sorted(b"m%d" % index for index in range(published))
