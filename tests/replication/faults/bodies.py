"""What every publisher sends, whatever it speaks: a single publish and a
multi-publish of ``batch`` in turn, to each topic in turn, bodies
``t<topic>-<publisher>-<n>`` unique per publisher, so that a delivery
says by itself which topic and publisher it came from. Plain Python: the
gnsq publisher imports it in a gevent process too."""

import itertools


class Bodies:
    def __init__(self, publisher: str, topics: int, batch: int):
        self.publisher = publisher
        self.topics = topics
        self.batch = batch
        self._numbers = itertools.count()

    def next(self, turn: int) -> tuple[int, list[bytes]]:
        """-> (the topic's index, the bodies) for a node's ``turn``-th publish:
        a body is never sent twice, not even after a publish that failed."""
        topic = turn // 2 % self.topics
        count = 1 if turn % 2 == 0 else self.batch
        return topic, [f"t{topic}-{self.publisher}-{next(self._numbers)}".encode() for _ in range(count)]


def topic_of(body: str) -> int:
    return int(body[1:body.index("-")])
