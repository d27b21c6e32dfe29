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


def test_a_window_that_catches_no_input_halves_down_to_none():
    """A client pacing its commands further apart than the window: each
    window it spins for nothing halves the next, and below an eighth of
    --busy-poll the loop polls no more, as with --busy-poll=0."""
    longest = 0.005

    async def main():
        poll = BusyPoll(asyncio.get_running_loop(), longest)
        windows = []
        for _ in range(5):
            poll.input()
            async with asyncio.timeout(10):
                while poll.polling:
                    await asyncio.sleep(0.001)
            windows.append(poll.window)
            await asyncio.sleep(0.05)  # ten windows: a full one would not catch the next input either
        return windows

    windows = asyncio.run(asyncio.wait_for(main(), 30))
    assert windows == [longest / 2, longest / 4, longest / 8, 0.0, 0.0]


def test_a_window_that_catches_input_doubles_up_to_busy_poll():
    longest = 0.2

    async def main():
        poll = BusyPoll(asyncio.get_running_loop(), longest)
        for _ in range(10):
            poll.window, poll.last_activity = longest / 4, 0.0  # long asleep: the window stays as it is
            poll.input()
            await asyncio.sleep(0.01)
            if poll.polling:  # a busy machine can delay this look past the window: look again
                poll.input()
                break
        else:
            raise AssertionError("never looked within the window")
        async with asyncio.timeout(10):
            while poll.polling:
                await asyncio.sleep(0.01)
        return poll.window

    assert asyncio.run(asyncio.wait_for(main(), 30)) == longest / 2


def test_input_soon_after_the_loop_slept_brings_the_whole_window_back():
    """Input that found the loop asleep less than --busy-poll after its last
    activity would have been caught by a full window."""
    longest = 3600.0  # whatever this machine's pauses, the input comes within it
    loop = asyncio.new_event_loop()
    try:
        poll = BusyPoll(loop, longest)
        windows = []
        for window in (0.0, longest / 8):
            # the loop went to sleep just now, its window passed
            poll.window, poll.polling, poll.last_activity = window, False, time.perf_counter()
            poll.input()
            windows.append((poll.window, poll.polling))
    finally:
        loop.close()
    assert windows == [(longest, True), (longest, True)]


@pytest.mark.parametrize("value, ok", [(0.0, True), (50e-6, True), (0.01, True), (0.02, False)])
def test_the_window_is_a_moment_at_most(value, ok):
    options = NsqdOptions(busy_poll=value)
    if ok:
        options.validate()
    else:
        with pytest.raises(ValueError, match=r"--busy-poll 20ms must be in \[0, 10ms\]"):
            options.validate()
