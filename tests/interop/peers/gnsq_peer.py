"""gnsq 1.0.2 (gevent) Producer and Consumer against our nsqd. argv: tcp_address topic"""

from gevent import monkey

monkey.patch_all()

import ssl  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import gnsq  # noqa: E402

from scenario import DEFER_MS, DEFERRED, MPUBS, PUBS, REQUEUE_ME, TOUCH_EVERY, TOUCH_HOLD, TOUCH_ME, Record  # noqa: E402

address, topic = sys.argv[1], sys.argv[2]
# optional: "snappy", "deflate", "tls", "tls,snappy", "tls,deflate", "auth"; then the CA file for tls
features = {name: True for name in sys.argv[3].split(",")} if len(sys.argv) > 3 else {}
if features.pop("auth", False):
    features["auth_secret"] = b"interop"  # gnsq sends it as the body as given: bytes
if features.pop("tls", False):
    features.update(tls_v1=True, tls_options={"ca_certs": sys.argv[4], "cert_reqs": ssl.CERT_REQUIRED})
    if features.pop("client_cert", False):  # then argv: CA, certificate, key
        features["tls_options"].update(certfile=sys.argv[5], keyfile=sys.argv[6])
record = Record()

# gnsq 1.0.2's Producer breaks on any upgrade's OK (KeyError): it gets the AUTH secret only
producer = gnsq.Producer([address], **{k: v for k, v in features.items() if k == "auth_secret"})
producer.start()
for body in PUBS + [REQUEUE_ME, TOUCH_ME]:
    producer.publish(topic, body)
producer.multipublish(topic, MPUBS)
producer.publish(topic, DEFERRED, defer=DEFER_MS)
producer.close()
producer.join()

consumer = gnsq.Consumer(topic, "gnsq", nsqd_tcp_addresses=[address], max_in_flight=20,
                         max_backoff_duration=1, heartbeat_interval=1, **features)


def hold(message):
    for _ in range(int(TOUCH_HOLD / TOUCH_EVERY)):
        gevent.sleep(TOUCH_EVERY)
        message.touch()
    gevent.sleep(TOUCH_HOLD - int(TOUCH_HOLD / TOUCH_EVERY) * TOUCH_EVERY)
    message.finish()
    finished(message.body)


def finished(body):
    record.finish(body)
    if record.done:
        gevent.spawn_later(0.5, consumer.close)


@consumer.on_message.connect
def handler(consumer, message):
    record.delivered(message.body, message.attempts)
    if message.body == REQUEUE_ME and message.attempts == 1:
        message.enable_async()
        message.requeue(time_ms=100, backoff=True)
        return
    if message.body == TOUCH_ME:
        message.enable_async()
        gevent.spawn(hold, message)
        return
    finished(message.body)


gevent.spawn_later(45, consumer.close)  # a fallback: it stops once everything is finished
consumer.start(block=True)
record.report()
