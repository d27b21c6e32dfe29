"""gnsq Consumer given only nsqlookupd: prints each body it handles (and
FINs) on a line of its own, until SIGTERM. argv: topic channel lookupd_url..."""

from gevent import monkey

monkey.patch_all()

import signal  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import gnsq  # noqa: E402

topic, channel, lookupds = sys.argv[1], sys.argv[2], sys.argv[3:]
consumer = gnsq.Consumer(topic, channel, lookupd_http_addresses=lookupds, lookupd_poll_interval=1,
                         max_in_flight=200)


@consumer.on_message.connect
def handler(consumer, message):
    sys.stdout.write(message.body.decode() + "\n")


@consumer.on_finish.connect
def flushed(consumer, message_id):
    sys.stdout.flush()


gevent.signal_handler(signal.SIGTERM, consumer.close)
print("reading", flush=True)
consumer.start(block=True)
sys.stdout.flush()
