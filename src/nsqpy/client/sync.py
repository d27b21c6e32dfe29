"""Publishing without an event loop, for scripts and Spark executors.

    with SyncProducer("127.0.0.1:4150") as producer:
        producer.publish("topic", b"body")

A private event loop runs in a daemon thread; each call waits for nsqd's
answer, at most ``timeout`` seconds.
"""

import asyncio
import threading

from .config import Config
from .producer import Producer


class SyncProducer:
    def __init__(self, address: str, config: Config | None = None, *, timeout: float = 10.0):
        self.address = address
        self.timeout = timeout
        self._producer = Producer(address, config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"nsqpy-producer-{address}",
                                        daemon=True)
        self._thread.start()
        self._closed = False

    def __enter__(self) -> "SyncProducer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, coroutine):
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"nsqd at {self.address} did not answer in {self.timeout}s") from None

    def ping(self) -> None:
        self._call(self._producer.ping())

    def publish(self, topic: str, body: bytes) -> None:
        self._call(self._producer.publish(topic, body))

    def multi_publish(self, topic: str, bodies: list[bytes]) -> None:
        self._call(self._producer.multi_publish(topic, bodies))

    def deferred_publish(self, topic: str, delay: float, body: bytes) -> None:
        self._call(self._producer.deferred_publish(topic, delay, body))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._producer.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self.timeout)
            self._loop.close()
