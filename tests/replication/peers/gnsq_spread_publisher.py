"""gnsq publishing ``count`` bodies ``m0``.. in MPUBs of ``batch``, each
batch to the next nsqd in turn; a batch an nsqd does not acknowledge goes
to the next one. Prints ``acked <n>`` as it goes, then the acknowledged
bodies' numbers as JSON after `acknowledged `. argv: topic count batch tcp_address..."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gnsq  # noqa: E402

topic, count, batch, addresses = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
producers = [gnsq.Producer([address]) for address in addresses]
for producer in producers:
    producer.start()
acked: list[int] = []
turn = 0
for start in range(0, count, batch):
    numbers = list(range(start, min(start + batch, count)))
    for attempt in range(3 * len(producers)):
        producer = producers[turn % len(producers)]
        turn += 1
        try:
            producer.multipublish(topic, [b"m%d" % n for n in numbers], block=False, timeout=30)
        except Exception:  # noqa: BLE001 - a dead or refusing nsqd: the next one
            time.sleep(0.05)
            continue
        acked.extend(numbers)
        break
    if len(acked) // 1000 != (len(acked) - len(numbers)) // 1000:
        print(f"acked {len(acked)}", flush=True)
    time.sleep(0.002)  # a stream, not one burst: a kill lands mid-stream
print("acknowledged", json.dumps(acked), flush=True)
for producer in producers:
    producer.close()
