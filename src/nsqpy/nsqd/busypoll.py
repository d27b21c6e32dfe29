"""Busy polling: after network input, and after the writes answering it,
the event loop keeps polling its sockets for a moment before it sleeps.

A client that publishes one message at a time waits for each OK before it
sends the next. If nsqd's thread has gone to sleep meanwhile, the kernel
must wake it for the next command, and on a virtual machine that wake-up is
a good part of the round trip. Go's scheduler spins before it parks for the
same reason, and Linux offers the same for network cards
(``net.core.busy_poll``). ``--busy-poll`` says how long at most (default
50µs; 0 turns it off).

A window that no input comes within is CPU spent for nothing: a client
pacing its PUBs 125µs apart kept most of a core spinning. So the window
adapts to what it catches. One that caught input is doubled, up to
``--busy-poll``; one that caught none is halved, and below an eighth of
``--busy-poll`` the loop sleeps at once. Input that finds the loop asleep
less than ``--busy-poll`` after its last activity brings the whole window
back, since a full one would have caught it. That input's time includes
the wake-up, so a client whose next command comes just within the window
can be missed. The cost is then at most the window after each burst of
input: nothing at rest, a core under a steady request-response load that
the window catches, and about what no polling costs under one it does not
catch.
"""

from time import perf_counter
from typing import Final

SMALLEST_SHARE: Final = 8  # a window under --busy-poll / SMALLEST_SHARE is none


class BusyPoll:
    __slots__ = ("loop", "longest", "window", "last_activity", "polling", "_input_since", "_caught")

    def __init__(self, loop, longest: float):
        self.loop = loop
        self.longest = longest  # --busy-poll
        self.window = longest  # how long the loop polls now, adapted to what it catches
        self.last_activity = 0.0
        self.polling = False
        self._input_since = False  # activity since the poll last looked
        self._caught = False  # input came while polling

    def input(self) -> None:
        """Network input was handled. While polling, the poll has caught it.
        After a sleep, input soon enough brings the whole window back."""
        if self.polling:
            self._input_since = True
            self._caught = True
        elif self.longest:
            now = perf_counter()
            if now - self.last_activity <= self.longest:
                self.window = self.longest
            self._start(now)

    def restart(self) -> None:
        """Poll for a window from now (after the writes answering input).
        While polling, the poll's next look moves the window's start: one
        clock read per turn of the loop, not one per call."""
        if self.polling:
            self._input_since = True
        elif self.longest:
            self._start(perf_counter())

    def _start(self, now: float) -> None:
        self.last_activity = now
        if self.window:
            self.polling = True
            self._caught = False
            self.loop.call_soon(self._poll)

    def _poll(self) -> None:
        """While a callback is ready the loop polls without waiting: this one
        stays ready until a window has passed since the last activity."""
        now = perf_counter()
        if self._input_since:
            self._input_since = False
            self.last_activity = now
        if now - self.last_activity < self.window:
            self.loop.call_soon(self._poll)
            return
        self.polling = False
        if self._caught:
            self.window = min(self.longest, 2 * self.window)
        else:
            half = self.window / 2
            self.window = half if half >= self.longest / SMALLEST_SHARE else 0.0
