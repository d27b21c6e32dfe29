"""gnsq 1.0.2, which knows nothing of dead-letter topics, requeues every
message it gets on one channel and reads the dead-letter topic on another.
argv: tcp_address topic channel dead_letter_topic. Prints, as JSON, the
attempts it saw per body and the bodies that reached the dead-letter topic."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import gnsq  # noqa: E402

address, topic, channel, dead_topic = sys.argv[1:5]
expected_dead = int(sys.argv[5])
attempts: dict[str, list[int]] = {}
dead: list[str] = []

failing = gnsq.Consumer(topic, channel, nsqd_tcp_addresses=[address], max_in_flight=10, heartbeat_interval=1)
reader = gnsq.Consumer(dead_topic, "dlq", nsqd_tcp_addresses=[address], max_in_flight=10, heartbeat_interval=1)


@failing.on_message.connect
def always_fail(consumer, message):
    attempts.setdefault(message.body.decode(), []).append(message.attempts)
    message.enable_async()
    message.requeue(time_ms=0, backoff=False)


@reader.on_message.connect
def read_dead(consumer, message):
    dead.append(message.body.decode())
    if len(dead) >= expected_dead:
        gevent.spawn_later(0.3, failing.close)
        gevent.spawn_later(0.3, reader.close)


for consumer in (failing, reader):
    gevent.spawn_later(60, consumer.close)  # a fallback: it stops once the dead letters came
gevent.joinall([gevent.spawn(failing.start), gevent.spawn(reader.start)], timeout=65)
print(json.dumps({"attempts": attempts, "dead": dead}))
