"""pynsq Reader given only nsqlookupd addresses. argv: topic channel count lookupd_url..."""

import json
import sys

import nsq
import tornado.ioloop

topic, channel, count, lookupds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
loop = tornado.ioloop.IOLoop.current()
bodies = []


def handler(message):
    bodies.append(message.body.decode())
    if len(set(bodies)) >= count:
        loop.call_later(0.3, loop.stop)
    return True


nsq.Reader(topic=topic, channel=channel, message_handler=handler, lookupd_http_addresses=lookupds,
           lookupd_poll_interval=1, max_in_flight=10)
loop.call_later(45, loop.stop)  # a fallback: it stops once all arrived
loop.start()
json.dump(sorted(set(bodies)), sys.stdout)
