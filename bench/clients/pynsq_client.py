"""pynsq 0.9.1 (tornado). argv: pub|sub address topic seconds_or_count"""

import json
import sys
import time

import nsq
import tornado.ioloop

mode, address, topic, amount = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
loop = tornado.ioloop.IOLoop.current()
result = {}

if mode == "pub":
    batch = [b"a" * 200] * 200
    state = {"sent": 0, "started": None, "cpu": None}
    writer = nsq.Writer([address])

    def publish(conn=None, data=None):
        if isinstance(data, nsq.Error):
            raise SystemExit(str(data))
        if data is not None:
            state["sent"] += 200
        if state["started"] is None:
            state["started"], state["cpu"] = time.perf_counter(), time.process_time()
        elapsed = time.perf_counter() - state["started"]
        if elapsed >= amount:
            result.update(messages=state["sent"], seconds=elapsed, cpu=time.process_time() - state["cpu"])
            loop.stop()
            return
        writer.mpub(topic, batch, publish)

    loop.call_later(0.5, publish)
else:
    target = int(amount)
    state = {"count": 0, "started": time.perf_counter(), "cpu": time.process_time()}

    def handler(message):
        state["count"] += 1
        if state["count"] == target:
            result.update(messages=target, seconds=time.perf_counter() - state["started"],
                          cpu=time.process_time() - state["cpu"])
            loop.stop()
        return True

    nsq.Reader(topic=topic, channel="pynsq", message_handler=handler, nsqd_tcp_addresses=[address],
               max_in_flight=2500)
loop.start()
print(json.dumps(result))
