"""gnsq 1.0.2, which knows nothing of retention, reads one channel and
FINishes what it gets. argv: tcp_address topic channel count seconds.
Prints, as JSON, [id, body, timestamp] of each message in the order
received, once ``count`` arrived or ``seconds`` passed."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import gnsq  # noqa: E402

address, topic, channel = sys.argv[1:4]
count, seconds = int(sys.argv[4]), float(sys.argv[5])
received: list = []
consumer = gnsq.Consumer(topic, channel, nsqd_tcp_addresses=[address], max_in_flight=50, heartbeat_interval=1)


@consumer.on_message.connect
def collect(consumer, message):
    received.append([message.id.decode(), message.body.decode(), message.timestamp])
    if len(received) >= count:
        gevent.spawn_later(0.3, consumer.close)


gevent.spawn_later(seconds, consumer.close)
consumer.start(block=True)
print(json.dumps(received))
