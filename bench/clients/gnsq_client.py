"""gnsq 1.0.2 (gevent). argv: pub|sub address topic seconds_or_count"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gnsq  # noqa: E402

mode, address, topic, amount = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

if mode == "pub":
    batch = [b"a" * 200] * 200
    producer = gnsq.Producer([address])
    producer.start()
    sent = 0
    started, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - started < amount:
        producer.multipublish(topic, batch)
        sent += 200
    result = {"messages": sent, "seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu}
    producer.close()
else:
    target = int(amount)
    state = {"count": 0}
    consumer = gnsq.Consumer(topic, "gnsq", nsqd_tcp_addresses=[address], max_in_flight=2500)

    @consumer.on_message.connect
    def handler(consumer, message):
        state["count"] += 1
        if state["count"] == target:
            state["seconds"] = time.perf_counter() - started
            state["cpu"] = time.process_time() - cpu
            consumer.close()

    started, cpu = time.perf_counter(), time.process_time()
    consumer.start(block=True)
    result = {"messages": state["count"], "seconds": state["seconds"], "cpu": state["cpu"]}
print(json.dumps(result))
