"""A turn's connections are written in one run after the turn, then the busy poll's window starts."""

import asyncio

from nsqpy.nsqd.busypoll import BusyPoll
from nsqpy.nsqd.writes import Writes


class Connection:
    """What Writes needs of a ClientV2: a flush, recorded."""

    def __init__(self, name: str, flushed: list[str]):
        self.name = name
        self.flushed = flushed

    def flush(self) -> None:
        self.flushed.append(self.name)


class Broken(Connection):
    def flush(self) -> None:
        raise RuntimeError("a bug in one connection's flush")


def test_connections_are_written_after_the_turn_in_the_order_they_asked_and_the_window_starts_then():
    async def main():
        loop = asyncio.get_running_loop()
        poll = BusyPoll(loop, 10.0)
        writes = Writes(loop, poll)
        flushed: list[str] = []
        for name in ("a", "b", "c"):
            writes.later(Connection(name, flushed))
        during_the_turn = list(flushed)
        await asyncio.sleep(0)
        after_the_turn, polling = list(flushed), poll.polling
        writes.later(Connection("d", flushed))
        await asyncio.sleep(0)
        return during_the_turn, after_the_turn, polling, flushed

    during, after, polling, flushed = asyncio.run(asyncio.wait_for(main(), 10))
    assert during == []
    assert after == ["a", "b", "c"]
    assert polling
    assert flushed == ["a", "b", "c", "d"]  # a later turn has a run of its own


def test_a_flush_that_raises_is_reported_and_the_connections_after_it_are_still_written():
    async def main():
        loop = asyncio.get_running_loop()
        reported = []
        loop.set_exception_handler(lambda _, context: reported.append(context["exception"]))
        writes = Writes(loop, BusyPoll(loop, 0.0))
        flushed: list[str] = []
        for connection in (Connection("a", flushed), Broken("b", flushed), Connection("c", flushed)):
            writes.later(connection)
        for _ in range(3):
            await asyncio.sleep(0)
        return flushed, reported

    flushed, reported = asyncio.run(asyncio.wait_for(main(), 10))
    assert flushed == ["a", "c"]
    assert [str(error) for error in reported] == ["a bug in one connection's flush"]
