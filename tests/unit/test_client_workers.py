"""The consumer's workers (client/workers.py) on a real event loop, with
messages that record their answers: coroutine handlers on the loop, plain
ones in batches on threads that never hold an answer back long."""

import asyncio
import threading
import time

import pytest

from nsqpy.client import Consumer
from nsqpy.client import workers as workers_module
from nsqpy.client.workers import Workers

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


class Recorded:
    """A message that records how it was answered, and when."""

    def __init__(self, number: int):
        self.id = b"%016d" % number
        self.number = number
        self.auto_response = True
        self.answer: str | None = None
        self.answered_at = 0.0
        self.handled_at = 0.0
        self.thread = ""

    def finish(self):
        self.answer, self.answered_at = "FIN", time.monotonic()

    def requeue(self):
        self.answer, self.answered_at = "REQ", time.monotonic()


async def run_until_answered(workers: Workers, messages, timeout: float = 30) -> None:
    workers.start(asyncio.get_running_loop())
    try:
        for start in range(0, len(messages), 100):  # as reads bring them
            workers.deliver(messages[start:start + 100])
        async with asyncio.timeout(timeout):
            while workers.busy or any(m.answer is None for m in messages if m.auto_response):
                await asyncio.sleep(0.005)
    finally:
        workers.stop()


def fails_on_sevens(message):
    message.handled_at, message.thread = time.monotonic(), threading.current_thread().name
    if message.number % 7 == 0:
        raise ValueError(f"seven ({message.number})")


async def async_fails_on_sevens(message):
    fails_on_sevens(message)


@pytest.mark.parametrize("handler", [fails_on_sevens, async_fails_on_sevens])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_returning_finishes_and_raising_requeues(handler, concurrency, caplog):
    messages = [Recorded(n) for n in range(1, 1001)]
    asyncio.run(run_until_answered(Workers(handler, concurrency, "t/c"), messages))
    assert [m.answer for m in messages] == ["REQ" if m.number % 7 == 0 else "FIN" for m in messages]
    failures = [r for r in caplog.records if "handler failed" in r.getMessage()]
    assert len(failures) == 1000 // 7 and failures[0].getMessage().startswith("consumer t/c: handler failed on")
    assert failures[0].exc_info[0] is ValueError


def test_plain_handlers_share_out_the_queue_over_their_threads():
    barrier = threading.Barrier(4, timeout=30)

    def meet(message):
        message.thread = threading.current_thread().name
        if message.number <= 4:
            barrier.wait()  # only passes if four threads hold a message each at once

    messages = [Recorded(n) for n in range(1, 5)]
    workers = Workers(meet, 4, "t/c")

    async def main():
        workers.start(asyncio.get_running_loop())
        workers.deliver(messages)
        async with asyncio.timeout(30):
            while any(m.answer is None for m in messages):
                await asyncio.sleep(0.005)
        workers.stop()

    asyncio.run(main())
    assert len({m.thread for m in messages}) == 4
    assert all(m.answer == "FIN" for m in messages)


def test_a_blocked_handler_holds_back_no_other_message():
    """While one thread waits in the handler, the other takes every message
    after it: the first is released only once all the rest are handled."""
    rest_handled = threading.Event()
    messages = [Recorded(n) for n in range(200)]

    def first_waits_for_the_rest(message):
        if message.number == 0:
            assert rest_handled.wait(30), "a message was held behind the blocked handler"
        elif sum(m.handled_at > 0 for m in messages) == len(messages) - 2:
            rest_handled.set()
        message.handled_at = time.monotonic()

    asyncio.run(run_until_answered(Workers(first_waits_for_the_rest, 2, "t/c"), messages))
    assert all(m.answer == "FIN" for m in messages)


def test_a_batch_of_slow_handlers_answers_as_it_goes(monkeypatch):
    """With a plain handler of 5 ms and batches cut at 20 ms, the first
    message's FIN leaves long before the last one is handled."""
    monkeypatch.setattr(workers_module, "BATCH_TIME", 0.02)

    def slow(message):
        message.handled_at = time.monotonic()
        time.sleep(0.005)

    messages = [Recorded(n) for n in range(40)]  # 0.2 s in all, one thread
    asyncio.run(run_until_answered(Workers(slow, 1, "t/c"), messages))
    assert all(m.answer == "FIN" for m in messages)
    assert [m.handled_at for m in messages] == sorted(m.handled_at for m in messages)  # order kept
    assert messages[0].answered_at < messages[-1].handled_at


def test_an_answer_taken_in_hand_is_left_to_the_handler():
    held = []

    def hold(message):
        message.auto_response = False
        held.append(message)

    messages = [Recorded(n) for n in range(10)]
    asyncio.run(run_until_answered(Workers(hold, 2, "t/c"), messages))
    assert sorted(m.number for m in held) == list(range(10)) and all(m.answer is None for m in messages)


def test_a_consumer_stopped_before_it_ever_connected_stops_quietly():
    async def stop_unconnected():
        consumer = Consumer("t", "c", lambda message: None)
        await asyncio.wait_for(consumer.stop(timeout=1.0), 5)

    asyncio.run(stop_unconnected())
