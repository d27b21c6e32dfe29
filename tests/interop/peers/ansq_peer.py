"""ansq 0.3.0 (asyncio) writer and reader against our nsqd. argv: tcp_address topic"""

import asyncio
import sys

import ansq
from ansq.tcp.types import ConnectionFeatures, ConnectionOptions

from scenario import ALL, DEFER_MS, DEFERRED, MPUBS, PUBS, REQUEUE_ME, TOUCH_EVERY, TOUCH_HOLD, TOUCH_ME, Record


async def hold(message, record):
    held = 0.0
    while held + TOUCH_EVERY < TOUCH_HOLD:
        await asyncio.sleep(TOUCH_EVERY)
        held += TOUCH_EVERY
        await message.touch()
    await asyncio.sleep(TOUCH_HOLD - held)
    await message.fin()
    record.finish(message.body)


async def main(address: str, topic: str, compression: dict) -> None:
    record = Record()
    writer = await ansq.create_writer(nsqd_tcp_addresses=[address], connection_options=ConnectionOptions(
        features=ConnectionFeatures(**compression)))
    for body in PUBS + [REQUEUE_ME, TOUCH_ME]:
        await writer.pub(topic, body)
    await writer.mpub(topic, *MPUBS)
    await writer.dpub(topic, DEFERRED, DEFER_MS)
    await writer.close()

    options = ConnectionOptions(features=ConnectionFeatures(heartbeat_interval=1000, **compression))
    reader = await ansq.create_reader(topic=topic, channel="ansq", nsqd_tcp_addresses=[address],
                                      connection_options=options)
    # ansq 0.3.0 keeps RDY at 1 (set_max_in_flight is not implemented)
    tasks = []
    async for message in reader.messages():
        record.delivered(message.body, message.attempts)
        if message.body == REQUEUE_ME and message.attempts == 1:
            await message.req(100)
        elif message.body == TOUCH_ME:
            tasks.append(asyncio.create_task(hold(message, record)))
        else:
            await message.fin()
            record.finish(message.body)
        if record.finished | {TOUCH_ME} >= ALL:
            await asyncio.gather(*tasks)  # only the held message is left
        if record.done:
            break
    await reader.close()
    record.report()


compression = {sys.argv[3]: True} if len(sys.argv) > 3 else {}  # snappy or deflate
asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2], compression), 45))
