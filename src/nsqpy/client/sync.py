"""Publishing without an event loop, for scripts and Spark executors.

    with SyncProducer("127.0.0.1:4150") as producer:
        producer.publish("topic", b"body")

A private event loop runs in a daemon thread (so that heartbeats are
answered between calls); each call waits for nsqd's answer, at most
``timeout`` seconds. Each call crosses threads twice, which costs about as
much as the publish itself: the loop is uvloop's when installed, whose
crossing is about a third cheaper than asyncio's. Several addresses,
nsqlookupd and replicas work as with ``Producer``.
"""

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from ..eventloop import new_event_loop
from .config import Config
from .producer import NodeStats, Producer

_GRACE = 1.0  # beyond the Producer's timeout, for its answer to cross threads

T = TypeVar("T")


class SyncProducer:
    """A ``Producer`` for code without an event loop: the same calls, blocking."""

    def __init__(self, addresses: str | Iterable[str] = (), config: Config | None = None, *,
                 timeout: float = 10.0, **options: Any):
        """The arguments of ``Producer`` (one address or many,
        ``lookupd_http_addresses``, ``replicas``, ...); ``timeout`` bounds each call."""
        self._producer = Producer(addresses, config, timeout=timeout, **options)
        self.address = self._producer.address
        self.timeout = timeout
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"nsqpy-producer-{self.address}",
                                        daemon=True)
        self._thread.start()
        self._closed = False

    def __enter__(self) -> "SyncProducer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(self.timeout + _GRACE)
        except TimeoutError:  # the Producer's own timeout should have answered first
            future.cancel()
            raise TimeoutError(f"nsqd at {self.address} did not answer in {self.timeout}s") from None

    def stats(self) -> dict[str, NodeStats]:
        """As ``Producer.stats``."""
        return self._producer.stats()

    def ping(self) -> None:
        """As ``Producer.ping``, blocking."""
        self._call(self._producer.ping())

    def publish(self, topic: str, body: bytes, *, key: str | bytes | None = None) -> str:
        """As ``Producer.publish``, blocking."""
        return self._call(self._producer.publish(topic, body, key=key))

    def multi_publish(self, topic: str, bodies: list[bytes], *, keys: list[str | bytes] | None = None) -> str:
        """As ``Producer.multi_publish``, blocking."""
        return self._call(self._producer.multi_publish(topic, bodies, keys=keys))

    def deferred_publish(self, topic: str, delay: float, body: bytes, *, key: str | bytes | None = None) -> str:
        """As ``Producer.deferred_publish``, blocking."""
        return self._call(self._producer.deferred_publish(topic, delay, body, key=key))

    def close(self) -> None:
        """Close the Producer and end its thread's loop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._producer.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self.timeout)
            self._loop.close()
