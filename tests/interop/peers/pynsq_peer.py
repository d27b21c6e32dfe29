"""pynsq 0.9.1 (tornado) Writer and Reader against our nsqd. argv: tcp_address topic"""

import ssl
import sys

import nsq
import tornado.ioloop

from scenario import DEFER_MS, DEFERRED, MPUBS, PUBS, REQUEUE_ME, TOUCH_EVERY, TOUCH_HOLD, TOUCH_ME, Record

address, topic = sys.argv[1], sys.argv[2]
# optional: "snappy", "deflate", "tls", "tls,snappy", "tls,deflate", "auth"; then the CA file for tls
features = {name: True for name in sys.argv[3].split(",")} if len(sys.argv) > 3 else {}
if features.pop("auth", False):
    features["auth_secret"] = "interop"
if features.pop("tls", False):
    features.update(tls_v1=True, tls_options={"ca_certs": sys.argv[4], "cert_reqs": ssl.CERT_REQUIRED})
    if features.pop("client_cert", False):  # then argv: CA, certificate, key
        features["tls_options"].update(certfile=sys.argv[5], keyfile=sys.argv[6])
loop = tornado.ioloop.IOLoop.current()
record = Record()
writer = nsq.Writer([address], **features)


def check(conn, data):
    if isinstance(data, nsq.Error):
        print(f"publish failed: {data}", file=sys.stderr)
        sys.exit(1)


def publish():
    """pynsq's Writer connects in the background and refuses a PUB until it
    is ready, so this waits for that rather than for a fixed time."""
    if not any(conn.connected() for conn in writer.conns.values()):
        loop.call_later(0.05, publish)
        return
    for body in PUBS + [REQUEUE_ME, TOUCH_ME]:
        writer.pub(topic, body, check)
    writer.mpub(topic, MPUBS, check)
    writer.dpub(topic, DEFER_MS, DEFERRED, check)


def handler(message):
    record.delivered(message.body, message.attempts)
    if message.body == REQUEUE_ME and message.attempts == 1:
        message.enable_async()
        message.requeue(time_ms=100, backoff=True)
        return None
    if message.body == TOUCH_ME:
        message.enable_async()
        for i in range(1, int(TOUCH_HOLD / TOUCH_EVERY) + 1):
            loop.call_later(i * TOUCH_EVERY, message.touch)
        loop.call_later(TOUCH_HOLD, lambda: (message.finish(), record.finish(message.body), stop_if_done()))
        return None
    record.finish(message.body)
    stop_if_done()
    return True


def stop_if_done():
    if record.done:
        loop.call_later(0.5, loop.stop)


reader = nsq.Reader(topic=topic, channel="pynsq", message_handler=handler, nsqd_tcp_addresses=[address],
                    max_in_flight=20, max_backoff_duration=1, heartbeat_interval=1, **features)
loop.call_later(0.5, publish)
loop.call_later(45, loop.stop)  # a fallback: it stops once everything is finished
loop.start()
record.report()
