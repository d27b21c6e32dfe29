"""Which destination gets the next message, for ``--mode`` of nsq_to_http
and nsq_to_nsq.

* ``round-robin``: each in turn, whatever happened before.
* ``hostpool`` (NSQ's default): in turn among the healthy; one that failed
  rests 30 s, doubling per failure up to 15 min, then gets a retry; if all
  rest, all are tried again (a pool never refuses to answer).
* ``epsilon-greedy``: as hostpool, but mostly the fastest of the last
  responses (mean over a sliding window), and a random one 10% of the time
  so a slow host that got faster is noticed.

NSQ sends every message to every destination when ``--mode`` is anything
else; ``selector`` answers None for that case.
"""

import random
import time
from collections import deque

MODES = ("hostpool", "round-robin", "epsilon-greedy")
FIRST_REST = 30.0
LONGEST_REST = 900.0
EXPLORE = 0.1
WINDOW = 100


class RoundRobin:
    def __init__(self, hosts: list[str]):
        self.hosts = list(hosts)
        self._next = 0

    def pick(self) -> str:
        host = self.hosts[self._next % len(self.hosts)]
        self._next += 1
        return host

    def mark(self, host: str, ok: bool, seconds: float = 0.0) -> None:
        """What a request to ``host`` did; round-robin does not care."""


class HostPool(RoundRobin):
    def __init__(self, hosts: list[str], clock=time.monotonic):
        super().__init__(hosts)
        self._clock = clock
        self._rest_until: dict[str, float] = {}
        self._rest: dict[str, float] = {}

    def healthy(self) -> list[str]:
        now = self._clock()
        hosts = [host for host in self.hosts if self._rest_until.get(host, 0.0) <= now]
        if not hosts:  # everyone rests: try them all again
            self._rest_until.clear()
            hosts = self.hosts
        return hosts

    def pick(self) -> str:
        hosts = self.healthy()
        host = hosts[self._next % len(hosts)]
        self._next += 1
        return host

    def mark(self, host: str, ok: bool, seconds: float = 0.0) -> None:
        if ok:
            self._rest.pop(host, None)
            self._rest_until.pop(host, None)
            return
        rest = min(self._rest.get(host, FIRST_REST / 2) * 2, LONGEST_REST)
        self._rest[host] = rest
        self._rest_until[host] = self._clock() + rest


class EpsilonGreedy(HostPool):
    def __init__(self, hosts: list[str], clock=time.monotonic, rng=random.random):
        super().__init__(hosts, clock)
        self._rng = rng
        self._timings = {host: deque(maxlen=WINDOW) for host in hosts}

    def pick(self) -> str:
        hosts = self.healthy()
        if self._rng() < EXPLORE:
            return hosts[int(self._rng() * len(hosts)) % len(hosts)]
        untried = [host for host in hosts if not self._timings[host]]
        if untried:
            return untried[0]
        return min(hosts, key=lambda host: sum(self._timings[host]) / len(self._timings[host]))

    def mark(self, host: str, ok: bool, seconds: float = 0.0) -> None:
        super().mark(host, ok, seconds)
        if ok:
            self._timings[host].append(seconds)


def selector(mode: str, hosts: list[str]) -> RoundRobin | None:
    """None: NSQ's behaviour for any other mode, every message to every host."""
    kinds = {"round-robin": RoundRobin, "hostpool": HostPool, "epsilon-greedy": EpsilonGreedy}
    kind = kinds.get(mode)
    return kind(hosts) if kind else None
