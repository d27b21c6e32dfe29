"""The nodes that left the cluster while this nsqd watched, for operators.

Once an nsqd dies nobody names it any more: nsqlookupd forgets a producer
when its connection closes, and etcd's member key goes with its lease.
An operator who comes later still wants to know which node left, when,
and who delivers what it had accepted. So every replicated nsqd keeps
the departures it saw (departures.py: an epoch present at one look at
the members and gone at the next), the wall-clock time it saw each go,
and the owner etcd's takeover key names (membership.py) once somebody
claimed it: a survivor, or the node itself at a clean stop.
"""

import time
from typing import Awaitable, Callable

KEPT = 64  # departures remembered: days of restarts in a busy cluster, a few KB of /stats
OWNER_READS = 4  # etcd reads per look at the members, for departures nobody is known to own yet


class Departure:
    __slots__ = ("node", "epoch", "left_at", "taken_over_by", "asked")

    def __init__(self, node: str, epoch: int, left_at: float):
        self.node = node
        self.epoch = epoch
        self.left_at = left_at  # Unix seconds, when this nsqd saw it gone (up to a look after its lease ended)
        self.taken_over_by: str | None = None
        self.asked = 0  # looks at which etcd was asked who owns it: the least asked are asked next


class DepartureLog:
    def __init__(self, clock=time.time):
        self._clock = clock
        self._departures: list[Departure] = []  # oldest first

    def left(self, node: str, epoch: int) -> None:
        """``node``'s ``epoch`` is no member any more."""
        self._departures.append(Departure(node, epoch, round(self._clock(), 3)))
        del self._departures[:-KEPT]

    async def find_owners(self, owner_of: Callable[[str, int], Awaitable]) -> None:
        """Ask etcd (``owner_of``: Membership.owner) who owns the departures
        whose owner is not known yet, at most OWNER_READS of them, those
        asked least first: a departure nobody ever claims (lost with its
        replicas) costs a read now and then, not one at every look."""
        unknown = sorted((d for d in self._departures if d.taken_over_by is None), key=lambda d: d.asked)
        for departure in unknown[:OWNER_READS]:
            departure.asked += 1
            owner = await owner_of(departure.node, departure.epoch)
            if owner is not None:
                departure.taken_over_by = owner.node

    def entries(self, adopted_here: Callable[[tuple[str, int]], int]) -> list[dict]:
        """Newest first, as /stats lists them; ``adopted_here``: how many
        messages of a (node, epoch) this nsqd adopted."""
        return [{"node": d.node, "epoch": d.epoch, "left_at": d.left_at, "taken_over_by": d.taken_over_by,
                 "messages_adopted": adopted_here((d.node, d.epoch))} for d in reversed(self._departures)]
