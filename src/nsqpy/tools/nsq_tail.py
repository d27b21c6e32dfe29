"""nsq_tail: print the messages of one or more topics to stdout, one per line.

Each topic gets its own consumer on a fresh ephemeral channel (unless
``--channel`` names one). Lines are written and flushed once per event-loop
turn, so ``| grep`` sees them at once while a fast topic still costs one
write per batch; a message is FINished only after its line reached stdout.
"""

import asyncio
import dataclasses
import random
import sys

from ..client import Consumer
from ..options import option
from .app import ToolError, silence_stdout, user_agent
from .clientopts import client_config
from .consuming import stop_all, subscribe
from .options import SourceOptions, check_names, check_sources


@dataclasses.dataclass
class TailOptions(SourceOptions):
    topics: list[str] = option([], "NSQ topic (may be given multiple times)", flag="topic")
    channel: str = option("", "NSQ channel (default tail<6 random digits>#ephemeral)")
    n: int = option(0, "total messages to show (will wait if starved)")
    print_topic: bool = option(False, "print topic name where message was received")


class StdoutLines:
    """Collects lines during one loop turn, writes them in one go, then
    answers their messages: FIN once written; REQ for those past ``-n`` or
    after stdout closed, so nsqd keeps them for the next reader."""

    def __init__(self, loop, limit: int, on_done):
        self._loop = loop
        self._limit = limit
        self._on_done = on_done
        self._shown = 0
        self._lines: list[bytes] = []
        self._held: dict[str, list] = {}  # topic -> messages written this turn
        self.consumers: dict[str, Consumer] = {}
        self._scheduled = False
        self._closed = False
        self._out = sys.stdout.buffer

    def handler(self, topic: str, print_topic: bool):
        prefix = f"{topic} | ".encode() if print_topic else b""
        lines = self._lines

        async def handle(message) -> None:
            message.disable_auto_response()
            if self._closed or (self._limit and self._shown >= self._limit):
                message.requeue(0, backoff=False)
                return
            self._shown += 1
            lines.append(prefix + message.body + b"\n" if prefix else message.body + b"\n")
            self._held.setdefault(topic, []).append(message)
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self.flush)
            if self._limit and self._shown >= self._limit:
                self._on_done()

        return handle

    def flush(self) -> None:
        self._scheduled = False
        held, self._held = self._held, {}
        data = b"".join(self._lines)
        self._lines.clear()
        if data and not self._closed:
            try:
                self._out.write(data)
                self._out.flush()
            except BrokenPipeError:
                self._stdout_closed()
        for topic, messages in held.items():
            if self._closed:
                for message in messages:
                    message.requeue(0, backoff=False)
            else:
                self.consumers[topic].finish_all(messages)

    def _stdout_closed(self) -> None:
        """``| head`` has what it wanted: stop quietly, and keep Python from
        complaining about the pipe again at exit."""
        self._closed = True
        silence_stdout()
        self._on_done()


async def run(options: TailOptions, stop, log) -> int:
    check_sources(options)
    if not options.topics:
        raise ToolError("--topic required")
    channel = options.channel or f"tail{random.randrange(1_000_000):06d}#ephemeral"
    check_names(options.topics, channel)
    if options.n < 0:
        raise ToolError(f"-n must not be negative (got {options.n})")
    max_in_flight = min(options.max_in_flight, options.n) if options.n else options.max_in_flight
    config = client_config(user_agent("nsq_tail"), "consumer-opt", options.consumer_opts,
                           max_in_flight=max_in_flight)
    lines = StdoutLines(asyncio.get_running_loop(), options.n, stop.set)
    for topic in options.topics:
        log.info("Adding consumer for topic: %s", topic)
        lines.consumers[topic] = Consumer(topic, channel, lines.handler(topic, options.print_topic), config=config)
    consumers = list(lines.consumers.values())
    try:
        await subscribe(consumers, options)
        await stop.wait()
    finally:
        await stop_all(consumers)
    return 0
