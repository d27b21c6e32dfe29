"""Busy polling keeps the event loop from sleeping for its window after input, then lets it sleep."""

import asyncio
import time

import pytest

from nsqpy.nsqd.busypoll import BusyPoll
from nsqpy.nsqd.options import NsqdOptions


def test_the_loop_polls_through_the_window_then_sleeps():
    """Still polling when looked at within the window (a look that a busy
    machine delayed past it proves nothing, and is made again), and done
    polling once the window has passed since the last input, not before."""
    window = 0.2

    async def main():
        poll = BusyPoll(asyncio.get_running_loop(), window)
        for _ in range(10):
            arrived = time.perf_counter()
            poll.restart()
            await asyncio.sleep(0.01)
            during, looked = poll.polling, time.perf_counter() - arrived
            if looked < window:
                break
        assert looked < window, "never looked within the window"
        async with asyncio.timeout(10):
            while poll.polling:
                await asyncio.sleep(0.01)
        return during, poll.polling, time.perf_counter() - arrived

    during, after, stopped = asyncio.run(asyncio.wait_for(main(), 30))
    assert (during, after) == (True, False)
    assert stopped >= window


def test_a_zero_window_never_polls():
    async def main():
        poll = BusyPoll(asyncio.get_running_loop(), 0.0)
        poll.restart()
        return poll.polling

    assert asyncio.run(asyncio.wait_for(main(), 5)) is False


@pytest.mark.parametrize("value, ok", [(0.0, True), (50e-6, True), (0.01, True), (0.02, False)])
def test_the_window_is_a_moment_at_most(value, ok):
    options = NsqdOptions(busy_poll=value)
    if ok:
        options.validate()
    else:
        with pytest.raises(ValueError, match=r"--busy-poll 20ms must be in \[0, 10ms\]"):
            options.validate()
