"""A connection's deadline: one timer, moved by every command.

NSQ sets a read deadline before each command; here a command only moves a
number. The timer fires at the earliest deadline set, re-arms itself if the
deadline moved later meanwhile, and calls ``expired`` once it has passed.
So a connection costs one timer, and a command a clock read (compiled with
the message path, setup.py: every command moves it).
"""

from collections.abc import Callable
from typing import Any


class Deadline:
    def __init__(self, loop: Any, expired: Callable[[], None]):
        self._loop = loop
        self._time: Callable[[], float] = loop.time  # held: a command reads the clock through it, looked up once
        self._expired = expired
        self._when: float | None = None
        self._timer: Any = None  # the loop's TimerHandle
        self._armed = 0.0  # when it fires

    def set(self, seconds: float) -> None:
        """Expire ``seconds`` from now; 0 means no deadline."""
        when = self._when = self._time() + seconds if seconds else None
        if when is not None and (self._timer is None or when < self._armed):
            self._arm(when)

    def clear(self) -> None:
        self._when = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed = when
        self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        when = self._when
        if when is None:
            return
        if self._time() < when:
            self._arm(when)
            return
        self._when = None
        self._expired()
