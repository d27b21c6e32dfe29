"""nsqpy's client. argv: pub|pub1|sub address topic seconds_or_count [snappy|deflate|tls|tls,snappy|tls,deflate CA]

``pub`` sends MPUBs of 200 messages, ``pub1`` one PUB per round trip.

Prints messages, wall seconds and the CPU seconds this process spent meanwhile.
"""

import asyncio
import json
import sys
import time

from nsqpy.client import Config, Consumer, Producer

mode, address, topic, amount = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
compression = {name: True for name in sys.argv[5].split(",")} if len(sys.argv) > 5 else {}
if compression.pop("tls", False):
    compression.update(tls_v1=True, tls_root_ca_file=sys.argv[6])
channel = sys.argv[5].replace(",", "_") if len(sys.argv) > 5 else "nsqpy"


async def pub(size: int):
    batch = [b"a" * 200] * size
    sent = 0
    async with Producer(address, Config(**compression)) as producer:
        started, cpu = time.perf_counter(), time.process_time()
        while time.perf_counter() - started < amount:
            if size == 1:
                await producer.publish(topic, batch[0])
            else:
                await producer.multi_publish(topic, batch)
            sent += size
        return sent, time.perf_counter() - started, time.process_time() - cpu


async def sub():
    target = int(amount)
    done = asyncio.Event()
    count = 0

    async def handler(message):
        nonlocal count
        count += 1
        if count >= target:
            done.set()

    consumer = Consumer(topic, channel, handler, config=Config(max_in_flight=2500, **compression), concurrency=1)
    started, cpu = time.perf_counter(), time.process_time()
    await consumer.connect_to_nsqd(address)
    await done.wait()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await consumer.stop()
    return count, elapsed, cpu


try:
    import uvloop
    uvloop.install()
except ImportError:
    pass
messages, seconds, cpu = asyncio.run(sub() if mode == "sub" else pub(200 if mode == "pub" else 1))
print(json.dumps({"messages": messages, "seconds": seconds, "cpu": cpu}))
