"""nsqpy's client with third-party peers: our Producer feeds a pynsq Reader,
a gnsq Producer feeds our Consumer (through our nsqd)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsqpy.client import Config, Consumer, Producer

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

PEERS = Path(__file__).parent / "peers"


def peer(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(PEERS / script), *args], capture_output=True, text=True,
                            timeout=90, cwd=PEERS)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.interop
def test_our_producer_feeds_a_pynsq_reader(nsqd):
    bodies = [b"ours-%d" % i for i in range(50)]

    async def publish():
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish("to_pynsq", bodies[:25])
            await asyncio.gather(*(producer.publish("to_pynsq", b) for b in bodies[25:]))

    asyncio.run(publish())
    received = json.loads(peer("pynsq_reader_peer.py", nsqd.tcp_address, "to_pynsq", "50"))
    assert sorted(received) == sorted(b.decode() for b in bodies)


@pytest.mark.interop
def test_a_gnsq_producer_feeds_our_consumer(nsqd):
    peer("gnsq_producer_peer.py", nsqd.tcp_address, "from_gnsq", "40")
    received = []

    async def handler(message):
        received.append(message.body)

    async def consume():
        consumer = Consumer("from_gnsq", "ours", handler, config=Config(max_in_flight=20))
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        async with asyncio.timeout(30):
            while len(received) < 40:
                await asyncio.sleep(0.02)
        await consumer.stop()

    asyncio.run(consume())
    assert sorted(received) == sorted(b"g%d" % i for i in range(40))
