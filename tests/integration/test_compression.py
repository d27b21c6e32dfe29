"""snappy and deflate negotiated through IDENTIFY, against a real nsqd."""

import asyncio
import json
import zlib

import pytest

from nsqpy.client import Config, Consumer, Producer
from nsqpy.protocol import commands as cmd
from nsqpy.protocol.frames import FrameReader
from tests.support.wire import WireConn, http_json

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


@pytest.mark.parametrize("options", [{"snappy": True}, {"deflate": True, "deflate_level": 3}])
def test_our_client_publishes_and_consumes_compressed(nsqd, topic, options):
    bodies = [b"compressible %d " % i * 20 for i in range(300)]
    received = []
    config = Config(max_in_flight=100, **options)

    async def main():
        async with Producer(nsqd.tcp_address, config) as producer:
            await producer.multi_publish(topic, bodies[:200])
            await asyncio.gather(*(producer.publish(topic, b) for b in bodies[200:]))

        async def handler(message):
            received.append(message.body)

        consumer = Consumer(topic, "ch", handler, config=config)
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        async with asyncio.timeout(30):
            while len(received) < len(bodies):
                await asyncio.sleep(0.02)
        _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
        await consumer.stop()
        return stats["topics"][0]["channels"][0]["clients"][0]

    client = asyncio.run(main())
    assert sorted(received) == sorted(bodies)
    assert (client["snappy"], client["deflate"]) == (options.get("snappy", False), options.get("deflate", False))


def test_deflate_on_the_wire_is_raw_deflate_with_sync_flushes(nsqd):
    with WireConn(nsqd.tcp_hostport) as c:
        c.send(cmd.identify({"feature_negotiation": True, "deflate": True, "deflate_level": 9}))
        plain = FrameReader()
        while not (answer := plain.feed(c.sock.recv(65536), limit=1)):
            pass
        granted = json.loads(answer[0][1])
        assert (granted["deflate"], granted["deflate_level"]) == (True, 6)  # capped at --max-deflate-level
        inflate = zlib.decompressobj(-15)
        frames = FrameReader()
        got = frames.feed(inflate.decompress(plain.take_rest()))  # the OK may have come in the same read
        while not got:
            got = frames.feed(inflate.decompress(c.sock.recv(100)))
        assert got == [(0, b"OK")]
        deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
        c.send(deflate.compress(cmd.pub("wire", b"x")) + deflate.flush(zlib.Z_SYNC_FLUSH))
        got = []
        while not got:
            got = frames.feed(inflate.decompress(c.sock.recv(100)))
        assert got == [(0, b"OK")]


def test_both_at_once_is_refused(nsqd):
    with WireConn(nsqd.tcp_hostport) as c:
        c.send(cmd.identify({"feature_negotiation": True, "deflate": True, "snappy": True}))
        error = c.error()
        assert (error.code, error.description) == ("E_IDENTIFY_FAILED",
                                                   "cannot enable both deflate and snappy compression")
        c.expect_closed()


def test_negotiation_can_be_turned_off(start_nsqd, topic):
    daemon = start_nsqd("--snappy=false", "--deflate=false")
    with WireConn(daemon.tcp_hostport) as c:
        granted = c.identify(feature_negotiation=True, snappy=True)
        assert granted["snappy"] is False and granted["deflate"] is False
        c.publish(topic, b"plain")  # no upgrade happened: plain commands work
    # and our client, asking for snappy, simply gets an uncompressed connection
    async def main():
        async with Producer(daemon.tcp_address, Config(snappy=True)) as producer:
            await producer.publish(topic, b"still plain")

    asyncio.run(main())
