"""Origins that died together with every peer that held their copies.

A takeover needs a survivor holding a shadow. When an origin and all of
its successors leave the members at once (two nodes killed together
with R=2), nobody holds its copies and nobody claims it: what it had
acknowledged is gone unless it comes back with its data dir. Nothing
else would say so, so every survivor watches departures and, once a
takeover had its time, says it loudly and counts it.
"""

import time

HORIZON = 10  # graces a departure is watched for: a replica's lease may end late on a busy etcd


def successors(node: str, members: set[str], count: int) -> list[str]:
    """The ``count`` members after ``node`` in the order of node names,
    wrapping around: where ``node`` sends its copies."""
    ordered = sorted(members - {node})
    return ([other for other in ordered if other > node] + [other for other in ordered if other < node])[:count]


class Departures:
    """Epochs that left the members: once ``grace`` seconds have passed
    (a takeover's time, in which their replicas' leases end too, each at
    its own moment), those whose replicas all left as well are due."""

    def __init__(self, copies: int, grace: float, clock=time.monotonic):
        self.copies = copies  # how many successors hold an origin's copies
        self.grace = grace
        self._clock = clock
        self._last: dict[str, int] = {}  # node -> epoch, as of the last look (this node included)
        self._left: dict[str, tuple[int, float]] = {}  # node -> (epoch, when) of recent departures
        self._waiting: dict[tuple[str, int], tuple[float, dict[str, int]]] = {}  # -> (left at, its replicas)

    def look(self, members: dict[str, int]) -> list[tuple[str, int]]:
        """The members now (node -> epoch, this node included).
        -> the (node, epoch) that left since the last look (a node back
        under a new epoch left under its old one)."""
        now = self._clock()
        before, self._last = self._last, dict(members)
        for node, (_, left) in list(self._left.items()):
            if now - left > HORIZON * self.grace:
                del self._left[node]
        # an origin's replicas are its successors among the members before any of the recent
        # departures: a replica whose lease ended a moment before its origin's is still one
        known = {**{node: epoch for node, (epoch, _) in self._left.items()}, **before}
        gone = [(node, epoch) for node, epoch in before.items() if members.get(node) != epoch]
        for node, epoch in gone:
            replicas = {replica: known[replica] for replica in successors(node, set(known), self.copies)}
            if replicas:
                self._waiting[(node, epoch)] = (now, replicas)
            self._left[node] = (epoch, now)
        return gone

    def due(self) -> list[tuple[str, int, list[str]]]:
        """Origins whose grace has passed and whose replicas are all gone
        as well: (node, epoch, those replicas), each once."""
        now = self._clock()
        found = []
        for key, (left, replicas) in list(self._waiting.items()):
            if now - left < self.grace:
                continue
            if all(self._last.get(replica) != epoch for replica, epoch in replicas.items()):
                found.append((*key, sorted(replicas)))
                del self._waiting[key]
            elif now - left > HORIZON * self.grace:  # a replica lived on: it took the origin over
                del self._waiting[key]
        return found
