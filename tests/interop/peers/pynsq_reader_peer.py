"""pynsq Reader consuming what nsqpy's Producer published. argv: tcp_address topic count"""

import json
import sys

import nsq
import tornado.ioloop

address, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
loop = tornado.ioloop.IOLoop.current()
bodies = []


def handler(message):
    bodies.append(message.body.decode())
    if len(bodies) >= count:
        loop.call_later(0.2, loop.stop)
    return True


nsq.Reader(topic=topic, channel="pynsq", message_handler=handler, nsqd_tcp_addresses=[address], max_in_flight=50)
loop.call_later(45, loop.stop)  # a fallback: it stops once all arrived
loop.start()
json.dump(bodies, sys.stdout)
