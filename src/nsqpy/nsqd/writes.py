"""What connections have to say, written once per turn of the event loop.

A command's reply or a burst of messages waits in its connection's buffer
(``ClientV2.flush_soon``) until the loop has handled the input of its turn;
then every connection with something to say is written in one run. With
many connections readable at once (a worker pool at RDY 1, hundreds of
publishers with one PUB in flight each) the peers woken by the first
writes are still awake for the next: on loopback, waking a sleeping
thread is most of what a small write costs (200 publishers on 2 cores,
with the PUB path's trims made beside it: 26-29k -> 37-50k PUBs/s,
nsqd's CPU per PUB 34-38 -> 20-27 µs).

The busy poll's window (busypoll.py) starts again after the run: a client
with one command in flight sends its next once it has read its answer, so
that is when nsqd should stay awake for it.

Before the run, what the turn left for the disk is written (``before``:
``DirtyWriters.flush``, dirty.py): a retained topic's records, so that no OK leaves
before the record it acknowledges is in its log's file.
"""

from typing import Any


class Writes:
    __slots__ = ("loop", "busy_poll", "before", "waiting")

    def __init__(self, loop, busy_poll: Any, before: Any = None):
        self.loop = loop
        self.busy_poll = busy_poll
        self.before = before
        self.waiting: list[Any] = []  # ClientV2s, each once, in the order they asked

    def later(self, client: Any) -> None:
        """``client.flush()`` at the end of this turn (the client asks once)."""
        if not self.waiting:
            self.loop.call_soon(self.run)
        self.waiting.append(client)

    def run(self) -> None:
        if self.before is not None:
            self.before()
        waiting, self.waiting = self.waiting, []
        for index, client in enumerate(waiting):
            try:
                client.flush()
            except BaseException:
                # the loop's handler reports it, as for any callback; the
                # connections after this one are still written, in a run of their own
                for rest in waiting[index + 1:]:
                    self.later(rest)
                raise
        self.busy_poll.restart()
