"""A well-behaved producer and consumer that run on their own connections
while the suite attacks the daemon on others: afterwards every message the
producer had acknowledged must have reached the consumer, exactly once."""

import threading
import time

from nsqpy.protocol import commands
from tests.support.wire import WireConn, http_json, wait_until


class HealthyTraffic:
    def __init__(self, nsqd, topic: str, interval: float = 0.005):
        self.nsqd = nsqd
        self.topic = topic
        self.interval = interval
        self.published: list[bytes] = []
        self.received: list[bytes] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._consumer = WireConn(nsqd.tcp_hostport, timeout=30)
        # its own msg_timeout: the daemon's may be short, and nothing it answers may come back, however
        # long a busy machine takes to FIN
        self._consumer.identify(msg_timeout=300_000)
        self._consumer.subscribe(topic, "healthy", rdy=200)
        self._threads = [threading.Thread(target=self._guard(self._produce), daemon=True),
                         threading.Thread(target=self._guard(self._consume), daemon=True)]

    def _guard(self, work):
        def run():
            try:
                work()
            except BaseException as error:  # noqa: BLE001 - reported by finish()
                self.errors.append(error)
        return run

    def _produce(self) -> None:
        with WireConn(self.nsqd.tcp_hostport, timeout=30) as producer:
            number = 0
            while not self._stop.is_set():
                body = b"healthy-%d" % number
                producer.publish(self.topic, body)
                self.published.append(body)
                number += 1
                time.sleep(self.interval)

    def _consume(self) -> None:
        consumer = self._consumer
        while not (self._stop.is_set() and len(self.received) >= len(self.published)):
            try:
                message = consumer.message(timeout=1.0)
            except TimeoutError:
                continue
            self.received.append(message.body)
            consumer.send(commands.fin(message.id))

    def __enter__(self) -> "HealthyTraffic":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self._consumer.close()

    def check(self) -> None:
        """After the with block: nothing lost, nothing doubled, no error."""
        assert not self.errors, self.errors
        assert self.published, "the producer published nothing"
        assert sorted(self.received) == sorted(self.published)


def assert_stats_consistent(nsqd, max_clients: int = 0, timeout: float = 30.0) -> dict:
    """No negative count anywhere, and once the attackers are gone no message
    in flight and at most ``max_clients`` connected."""
    def settled():
        _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json")
        clients = 0
        for topic in stats["topics"] or []:
            assert topic["depth"] >= 0 and topic["message_count"] >= 0 and topic["backend_depth"] >= 0, topic
            for channel in topic["channels"] or []:
                for key in ("depth", "in_flight_count", "deferred_count", "requeue_count", "timeout_count",
                            "message_count"):
                    assert channel[key] >= 0, (key, channel)
                if channel["in_flight_count"]:
                    return None
                clients += len(channel["clients"] or [])
        clients += len(stats.get("producers") or [])
        return stats if clients <= max_clients else None
    return wait_until(settled, timeout=timeout, interval=0.2)
