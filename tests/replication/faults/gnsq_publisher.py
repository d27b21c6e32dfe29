"""gnsq publishing to every nsqd that nsqlookupd lists, a greenlet per
node, bodies as ``bodies.py`` says; prints ``ack <wall time> <node>
<body>...`` for each publish answered OK (an error or no answer within
ANSWER_TIMEOUT: nothing printed), until SIGTERM.
argv: publisher interval batch lookupd_url topic..."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402

import gevent  # noqa: E402
import gevent.event  # noqa: E402
import gnsq  # noqa: E402

from tests.replication.faults.bodies import Bodies  # noqa: E402
from tests.replication.faults.wire import ANSWER_TIMEOUT  # noqa: E402

publisher, interval, batch, lookupd, topics = (sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                               sys.argv[5:])
bodies = Bodies(publisher, len(topics), batch)
stopping = gevent.event.Event()
nodes: set[str] = set()


def registered() -> set[str]:
    with urllib.request.urlopen(f"{lookupd}/nodes", timeout=ANSWER_TIMEOUT) as response:
        return {f"{p['broadcast_address']}:{p['tcp_port']}" for p in json.load(response)["producers"]}


def stream(node: str) -> None:
    producer = gnsq.Producer([node], max_backoff_duration=1)
    producer.start()
    turn = 0
    try:
        while not stopping.is_set() and node in nodes:
            topic, batch_bodies = bodies.next(turn)
            turn += 1
            try:
                if len(batch_bodies) == 1:
                    answer = producer.publish(topics[topic], batch_bodies[0], block=False, raise_error=False)
                else:
                    answer = producer.multipublish(topics[topic], batch_bodies, block=False, raise_error=False)
                answer.get(timeout=ANSWER_TIMEOUT)
            except (Exception, gevent.Timeout):  # noqa: BLE001 - no connection, an error, no answer: not acknowledged
                pass
            else:
                print("ack", time.time(), node, *(body.decode() for body in batch_bodies), flush=True)
            stopping.wait(interval)
    finally:
        producer.close()


gevent.signal_handler(signal.SIGTERM, stopping.set)
streams: dict[str, gevent.Greenlet] = {}
print("publishing", flush=True)
while not stopping.is_set():
    try:
        nodes = registered()
    except OSError:
        pass  # the last list stands until nsqlookupd answers again
    for node in nodes:
        if node not in streams or streams[node].dead:
            streams[node] = gevent.spawn(stream, node)
    stopping.wait(0.5)
gevent.joinall(list(streams.values()), timeout=ANSWER_TIMEOUT + 5)
