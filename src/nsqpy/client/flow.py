"""RDY flow control and backoff for a consumer of many nsqd, as go-nsq does it, sans-IO.

The Consumer reports events (a connection added or removed, a message
received, finished or requeued, its timer fired, a tick of the
redistribution loop) and sends whatever RDY counts the controller answers
with; it schedules the backoff timer when asked. No sockets, no event loop:
the clock is passed in, so tests drive it with a fake one.

- ``max_in_flight`` is shared out as RDY over the connections and never
  exceeded in total (capped per connection by nsqd's ``max_rdy_count``).
- With more connections than ``max_in_flight``, each tick takes RDY 1 from a
  connection idle for ``low_rdy_idle_timeout`` (or holding it for
  ``low_rdy_timeout``) and gives it to the one without RDY that has waited
  longest, so every nsqd is served in turn: with N connections each is read
  within N - 1 holders' time. go-nsq picks at random among all, the holder
  too, and a node with thousands of messages could wait minutes.
- A failure raises the backoff level: RDY 0 everywhere for the backoff
  duration, then RDY 1 on one connection; the next result decides (a success
  lowers the level, and at 0 everyone gets its share back; a failure backs
  off longer). One result per backoff window counts.
"""

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, Never, TypeVar, TypeVarTuple

from .backoff import backoff_duration
from .config import Config

DEFAULT_MAX_RDY = 2500  # assumed when nsqd does not say
STARVED_RATIO = 0.85

Key = TypeVar("Key", bound=Hashable)  # a connection, as the consumer names it
Key_co = TypeVar("Key_co", bound=Hashable, covariant=True)
Args = TypeVarTuple("Args")  # a decision step's


class Decisions(NamedTuple, Generic[Key_co]):
    """What the consumer is to do after an event: send these RDY counts,
    and maybe start the backoff timer."""

    rdy: Sequence[tuple[Key_co, int]]  # (connection, count) pairs to send, in order
    wake_in: float | None = None  # call backoff_ended() after this many seconds


NOTHING: Decisions[Never] = Decisions([])


@dataclass
class ConnectionFlow:
    """What the controller knows of one connection."""

    max_rdy: int
    ready: int = 0  # the RDY last sent
    in_flight: int = 0  # received, not yet finished or requeued
    last_message_at: float = 0.0
    last_rdy_at: float = 0.0  # when RDY last changed: held since, or (at 0) waiting since
    closing: bool = False  # CLS sent: no RDY any more


@dataclass
class FlowController(Generic[Key]):
    """One consumer's RDY counts and backoff, over its connections (any
    hashable key: the consumer's are its ``Connection`` objects)."""

    config: Config
    clock: Callable[[], float]
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.max_in_flight = self.config.max_in_flight
        self.connections: dict[Key, ConnectionFlow] = {}
        self.backoff_level = 0
        self.backoff_pending = False  # a backoff window is running
        self.stopping = False
        self._rdy: list[tuple[Key, int]] = []

    # --- what the consumer asks ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return sum(flow.in_flight for flow in self.connections.values())

    def ready_counts(self) -> dict[Key, int]:
        return {key: flow.ready for key, flow in self.connections.items()}

    def is_starved(self) -> bool:
        """Some connection has nearly filled its RDY window: a batch processor
        should act on what it holds."""
        return any(f.in_flight > 0 and f.in_flight >= STARVED_RATIO * f.ready and not f.closing
                   for f in self.connections.values())

    def is_saturated(self) -> bool:
        """nsqd sends nothing more until something is answered: every
        connection holds as many messages as its RDY allows."""
        return bool(self.connections) and all(f.in_flight >= f.ready for f in self.connections.values())

    # --- events ----------------------------------------------------------------------------------

    def added(self, key: Key, max_rdy: int | None) -> Decisions[Key]:
        self.connections[key] = ConnectionFlow(max_rdy or DEFAULT_MAX_RDY)
        return self._decided(self._rebalance)

    def removed(self, key: Key) -> Decisions[Key]:
        if self.connections.pop(key, None) is None:
            return NOTHING
        return self._decided(self._rebalance)

    def received(self, key: Key, count: int = 1) -> None:
        flow = self.connections.get(key)
        if flow is not None:
            flow.in_flight += count
            flow.last_message_at = self.clock()

    def finished(self, key: Key, count: int = 1) -> Decisions[Key]:
        flow = self.connections.get(key)
        if flow is not None:
            flow.in_flight -= count
        if not self.backoff_level:  # the common case: a success changes nothing
            return NOTHING
        return self._decided(self._backoff_result, True)

    def requeued(self, key: Key, backoff: bool) -> Decisions[Key]:
        self._answered(key, 1)
        return self._decided(self._backoff_result, False) if backoff else NOTHING

    def closing(self, key: Key) -> None:
        """CLS was sent on ``key``: it gets no more RDY."""
        if key in self.connections:
            self.connections[key].closing = True

    def set_max_in_flight(self, count: int) -> Decisions[Key]:
        """0 pauses the consumer."""
        self.max_in_flight = max(0, count)
        return self._decided(self._rebalance)

    def stop(self) -> None:
        self.stopping = True

    def backoff_ended(self) -> Decisions[Key]:
        """The backoff window is over: test the waters with RDY 1 on one connection."""
        self.backoff_pending = False
        if self.stopping or not self.connections:
            return NOTHING
        return self._decided(self._set, self.rng.choice(list(self.connections)), 1)

    def tick(self) -> Decisions[Key]:
        """The redistribution loop (every ``rdy_redistribute_interval``)."""
        return self._decided(self._redistribute)

    # --- decisions -------------------------------------------------------------------------------

    def _decided(self, step: Callable[[*Args], float | None], *args: *Args) -> Decisions[Key]:
        self._rdy = []
        wake_in = step(*args)
        return Decisions(self._rdy, wake_in) if self._rdy or wake_in is not None else NOTHING

    def _answered(self, key: Key, count: int) -> None:
        flow = self.connections.get(key)
        if flow is not None:
            flow.in_flight -= count

    def _set(self, key: Key, count: int) -> None:
        flow = self.connections[key]
        count = min(count, flow.max_rdy)
        if count != flow.ready and not flow.closing:
            flow.ready = count
            flow.last_rdy_at = self.clock()
            self._rdy.append((key, count))

    def _per_connection(self) -> int:
        count = len(self.connections) or 1
        return min(max(1, self.max_in_flight // count), self.max_in_flight)

    def _rebalance(self) -> None:
        """Every connection its share, never more than max_in_flight in total."""
        if self.stopping or self.backoff_level or not self.connections:
            return
        target = self._per_connection()
        highest_first = sorted(self.connections, key=lambda k: -self.connections[k].ready)
        for key in highest_first:  # lower the excess first, so the total never overshoots
            if self.connections[key].ready > target:
                self._set(key, target)
        for key in highest_first:
            flow = self.connections[key]
            total = sum(f.ready for f in self.connections.values())
            budget = self.max_in_flight - (total - flow.ready)
            self._set(key, max(0, min(target, budget)))

    def _backoff_result(self, success: bool) -> float | None:
        config = self.config
        if config.max_backoff_duration == 0 or self.backoff_pending or self.stopping:
            return None
        level = self.backoff_level
        if success:
            if level == 0:
                return None
            level -= 1
        else:
            if backoff_duration("exponential", config.backoff_multiplier, level + 1) <= config.max_backoff_duration:
                level += 1
            elif level == 0:
                return None
        self.backoff_level = level
        if level == 0:
            self._rebalance()
            return None
        for key in self.connections:
            self._set(key, 0)
        self.backoff_pending = True
        return min(backoff_duration(config.backoff_strategy, config.backoff_multiplier, level),
                   config.max_backoff_duration)

    def _redistribute(self) -> None:
        """Move RDY 1 away from idle connections when connections outnumber
        max_in_flight (or while backing off with several)."""
        connections = self.connections
        if self.backoff_pending or not connections or self.stopping:
            return
        if not (len(connections) > self.max_in_flight or (self.backoff_level and len(connections) > 1)):
            return
        now, config = self.clock(), self.config
        for key, flow in connections.items():
            if flow.ready > 0 and (now - flow.last_message_at > config.low_rdy_idle_timeout
                                   or now - flow.last_rdy_at > config.low_rdy_timeout):
                self._set(key, 0)
        budget = (1 if self.backoff_level else self.max_in_flight) - sum(f.ready for f in connections.values())
        idle = [key for key, flow in connections.items() if flow.ready == 0 and not flow.closing]
        self.rng.shuffle(idle)  # ties (never served yet, or given up together) at random, as go-nsq picks
        idle.sort(key=lambda key: connections[key].last_rdy_at)  # the longest waiting first
        for key in idle[:max(0, budget)]:
            self._set(key, 1)
