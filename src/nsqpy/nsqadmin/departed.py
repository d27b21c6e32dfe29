"""Which departed nsqd an operator has cleared from the nodes page.

Replicated nsqd go on reporting the members they saw leave (each its
last 64), so a dead node stays listed after nobody else names it; an
operator who has dealt with it clears the list. What was cleared is
nsqadmin's to remember, not the nsqd's: each nsqadmin over a cluster
has its own. It lives in this process only (nsqadmin keeps no data dir):
a restarted nsqadmin lists every departure the nsqd still report.
"""

import time

CLEARED_KEPT = 4096  # (node, epoch) remembered: more than 64 nsqd report; older ones are behind the clear time too


class ClearedDepartures:
    def __init__(self, clock=time.time):
        self._clock = clock
        self._cleared: dict[tuple[str, int], None] = {}  # an ordered set, oldest first
        self._before = 0.0  # departures that left before the last clear are hidden too

    def clear(self, departed: list[dict]) -> None:
        """Hide ``departed`` (what is listed now) and anything that left
        before now. Both: an nsqd's clock may run ahead of nsqadmin's, and
        an nsqd that did not answer now may report an older one later."""
        self._before = self._clock()
        for departure in departed:
            self._cleared[(departure["node"], departure["epoch"])] = None
        for key in list(self._cleared)[:-CLEARED_KEPT]:
            del self._cleared[key]

    def visible(self, departed: list[dict]) -> list[dict]:
        return [departure for departure in departed if departure["left_at"] > self._before
                and (departure["node"], departure["epoch"]) not in self._cleared]
