"""A consumer's handler at work: ``concurrency`` workers fed from one queue.

A coroutine function runs on the event loop, each worker taking one message
after another. A plain function runs on a pool of ``concurrency`` threads,
and each crossing to a thread and back costs more than a small handler: so
a worker's thread takes message after message from the queue itself (a
deque: its ``popleft`` is atomic) until the queue is empty or ``BATCH_TIME``
has passed, and the messages it handled are then answered together. No
message waits behind another's handler while a thread is free, and no
answer waits longer than about ``BATCH_TIME`` plus one handler call.

Returning answers FIN, raising answers REQ, unless the handler took the
answer in hand (``message.disable_auto_response()``). Messages arrive by the
read (``deliver``): workers are woken once per read, not once per message.
"""

import asyncio
import concurrent.futures
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias, cast

from .message import Message

log = logging.getLogger("nsqpy.client")

BATCH_TIME = 0.01  # seconds a thread keeps handling one batch before its answers go out

#: A consumer's handler: an ``async def`` function of the message, or a plain
#: one (run in a thread); what it returns is not used.
Handler: TypeAlias = Callable[[Message], object]
AsyncHandler: TypeAlias = Callable[[Message], Awaitable[object]]


class Workers:
    """The handler's workers, fed by ``deliver``, started and stopped with the consumer."""

    def __init__(self, handler: Handler, concurrency: int, name: str):
        """``name`` (``topic/channel``) prefixes the log lines."""
        self.handler = handler
        self.concurrency = concurrency
        self.queue: deque[Message] = deque()  # messages waiting for a worker
        self.in_handler = 0  # handler calls (on the loop) or runs of them (in threads) under way
        self._name = name
        self._is_async = _is_coroutine_callable(handler)
        self._executor = None if self._is_async else concurrent.futures.ThreadPoolExecutor(concurrency)
        self._idle: deque[asyncio.Future[None]] = deque()  # one per sleeping worker, resolved to wake it
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def busy(self) -> bool:
        return bool(self.queue) or self.in_handler > 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        work = self._work_on_loop if self._is_async else self._work_in_threads
        self._tasks = [loop.create_task(work()) for _ in range(self.concurrency)]

    def stop(self) -> None:
        """Workers end now: what waits is dropped, and a handler running in
        a thread finishes unanswered (nsqd delivers those messages again)."""
        self.queue.clear()  # so that no thread takes another
        for task in self._tasks:
            task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def deliver(self, messages: Iterable[Message]) -> None:
        """Queue messages and wake as many sleeping workers as they need."""
        self.queue.extend(messages)
        idle, waiting = self._idle, len(self.queue)
        while idle and waiting:
            waiter = idle.popleft()
            if not waiter.done():  # a cancelled worker's is
                waiter.set_result(None)
                waiting -= 1

    async def _sleep(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        await waiter

    async def _work_on_loop(self) -> None:
        queue, handler = self.queue, cast(AsyncHandler, self.handler)  # start() runs this for one only
        while True:
            if not queue:
                await self._sleep()
                continue
            message = queue.popleft()
            self.in_handler += 1
            try:
                await handler(message)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._failed(message, error)
            else:
                if message.auto_response:
                    message.finish()
            finally:
                self.in_handler -= 1

    async def _work_in_threads(self) -> None:
        queue, loop = self.queue, asyncio.get_running_loop()
        while True:
            if not queue:
                await self._sleep()
                continue
            self.in_handler += 1
            try:
                handled = await loop.run_in_executor(self._executor, _handle_for_a_while, self.handler, queue)
            finally:
                self.in_handler -= 1
            for message, error in handled:
                if error is not None:
                    self._failed(message, error)
                elif message.auto_response:
                    message.finish()

    def _failed(self, message: Message, error: Exception) -> None:
        log.error("consumer %s: handler failed on %s", self._name, message.id.decode(),
                  exc_info=(type(error), error, error.__traceback__))
        if message.auto_response:
            message.requeue()


def _handle_for_a_while(handler: Handler, queue: deque[Message]) -> list[tuple[Message, Exception | None]]:
    """In a pool thread: messages taken from ``queue`` and handled until it
    is empty or ``BATCH_TIME`` has passed, each with its outcome (None, or
    the exception raised)."""
    handled: list[tuple[Message, Exception | None]] = []
    deadline = time.monotonic() + BATCH_TIME
    while time.monotonic() < deadline:
        try:
            message = queue.popleft()
        except IndexError:
            break
        try:
            handler(message)
        except Exception as error:
            handled.append((message, error))
        else:
            handled.append((message, None))
    return handled


def _is_coroutine_callable(handler: object) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))
