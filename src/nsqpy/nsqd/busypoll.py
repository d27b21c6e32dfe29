"""Busy polling: after network input, and after the writes answering it,
the event loop keeps polling its sockets for a moment before it sleeps.

A client that publishes one message at a time waits for each OK before it
sends the next. If nsqd's thread has gone to sleep meanwhile, the kernel
must wake it for the next command, and on a virtual machine that wake-up is
a good part of the round trip. Go's scheduler spins before it parks for the
same reason, and Linux offers the same for network cards
(``net.core.busy_poll``). ``--busy-poll`` says how long (default 50µs; 0
turns it off). It costs at most that much CPU after each burst of input:
nothing at rest, up to a core under a steady request-response load, which
is when it pays.
"""

from time import perf_counter


class BusyPoll:
    __slots__ = ("loop", "window", "last_activity", "polling", "_input_since")

    def __init__(self, loop, window: float):
        self.loop = loop
        self.window = window
        self.last_activity = 0.0
        self.polling = False
        self._input_since = False  # input since the poll last looked

    def restart(self) -> None:
        """Poll for a window from now (after input, and after the writes
        answering it). While polling, the poll's next look moves the window's
        start: one clock read per turn of the loop, not one per input."""
        if self.window:
            if self.polling:
                self._input_since = True
            else:
                self.polling = True
                self.last_activity = perf_counter()
                self.loop.call_soon(self._poll)

    def _poll(self) -> None:
        """While a callback is ready the loop polls without waiting: this one
        stays ready until a window has passed since the last restart."""
        now = perf_counter()
        if self._input_since:
            self._input_since = False
            self.last_activity = now
        if now - self.last_activity < self.window:
            self.loop.call_soon(self._poll)
        else:
            self.polling = False
