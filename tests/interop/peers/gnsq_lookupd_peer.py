"""gnsq Consumer given only nsqlookupd addresses. argv: topic channel count lookupd_url..."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import gnsq  # noqa: E402

topic, channel, count, lookupds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
bodies = []
consumer = gnsq.Consumer(topic, channel, lookupd_http_addresses=lookupds, lookupd_poll_interval=1,
                         max_in_flight=10)


@consumer.on_message.connect
def handler(consumer, message):
    bodies.append(message.body.decode())
    if len(set(bodies)) >= count:
        gevent.spawn_later(0.3, consumer.close)


gevent.spawn_later(45, consumer.close)  # a fallback: it stops once all arrived
consumer.start(block=True)
json.dump(sorted(set(bodies)), sys.stdout)
