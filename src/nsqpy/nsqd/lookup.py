"""nsqd's connections to nsqlookupd: identify, register everything it hosts,
keep the registrations current, PING every 15 s, reconnect when dropped.

Each peer runs one session at a time. Answers come back in request order,
so a reader task resolves them FIFO; the same task notices at once when
lookupd closes the connection, and the peer reconnects (with backoff) and
registers everything again.
"""

import asyncio
import json
import socket
from collections import deque

from ..net import split_host_port
from ..protocol import NSQ_VERSION
from ..protocol import lookup as v1

PING_INTERVAL = 15.0
DIAL_TIMEOUT = 1.0
ANSWER_TIMEOUT = 1.0
MIN_BACKOFF = 0.1
MAX_BACKOFF = 15.0


class LookupdError(Exception):
    pass


class LookupPeer:
    def __init__(self, nsqd, address: str):
        self.nsqd = nsqd
        self.address = address
        self.info: dict | None = None  # lookupd's answer to IDENTIFY
        self._commands: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        # set once the first session has registered everything, or failed
        self.first_attempt = asyncio.Event()

    @property
    def connected(self) -> bool:
        return self._commands is not None

    @property
    def http_address(self) -> str | None:
        if not self.info:
            return None
        return f"{self.info['broadcast_address']}:{self.info['http_port']}"

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, timeout: float = 2.0) -> None:
        """End the session; the lookupd drops our registrations when the
        connection closes. Bounded: a stuck task never blocks shutdown."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=timeout)

    def send(self, command: bytes) -> None:
        """Queue a REGISTER/UNREGISTER; while disconnected it is dropped, since
        every (re)connection registers the whole current state."""
        if self._commands is not None:
            self._commands.put_nowait(command)

    async def _run(self) -> None:
        log = self.nsqd.log
        backoff = MIN_BACKOFF
        while not self._stopping:
            try:
                await self._session()
            except (OSError, asyncio.TimeoutError, EOFError, LookupdError, ValueError) as error:
                log.error("LOOKUPD(%s): %s; reconnecting in %.1fs", self.address, error or type(error).__name__,
                          backoff)
            self.first_attempt.set()
            if self.info is not None:
                backoff = MIN_BACKOFF  # it worked before: retry quickly
                self.info = None
            else:
                backoff = min(backoff * 2, MAX_BACKOFF)
            await asyncio.sleep(backoff)

    async def _session(self) -> None:
        host, port = split_host_port(self.address)
        self.nsqd.log.info("LOOKUP connecting to %s", self.address)
        async with asyncio.timeout(DIAL_TIMEOUT):
            reader, writer = await asyncio.open_connection(host, port)
        pending: deque[asyncio.Future] = deque()
        answers = asyncio.get_running_loop().create_task(self._read_answers(reader, pending))
        try:
            writer.write(v1.MAGIC_V1)
            info = json.loads(await self._request(writer, pending, v1.identify(self._identity())))
            if not isinstance(info, dict):
                raise LookupdError(f"IDENTIFY answered {info!r}, not a JSON object")
            self._commands = asyncio.Queue()
            for command in self.nsqd.registration_commands():
                await self._request(writer, pending, command)
            self.info = info
            self.first_attempt.set()
            self.nsqd.log.info("LOOKUPD(%s): peer info {TCPPort:%s HTTPPort:%s Version:%s BroadcastAddress:%s}",
                               self.address, info.get("tcp_port"), info.get("http_port"), info.get("version"),
                               info.get("broadcast_address"))
            commands = self._commands
            while not self._stopping:
                command = await self._next_command(commands, answers)
                await self._request(writer, pending, command)
        finally:
            self._commands = None
            if answers.done() and not answers.cancelled():
                answers.exception()  # already raised to us through a request
            answers.cancel()
            writer.close()

    @staticmethod
    async def _next_command(commands: asyncio.Queue, answers: asyncio.Task) -> bytes:
        """The next queued command, PING after PING_INTERVAL idle, or the reason
        the connection ended (raised from the answer reader) as soon as it ends."""
        get = asyncio.ensure_future(commands.get())
        try:
            done, _ = await asyncio.wait({get, answers}, timeout=PING_INTERVAL,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not get.done():
                get.cancel()
        if get in done:
            return get.result()
        if answers in done:
            answers.result()
        return v1.PING

    def _identity(self) -> dict:
        nsqd = self.nsqd
        options = nsqd.options
        return {
            "version": NSQ_VERSION,
            "tcp_port": options.broadcast_tcp_port or nsqd.tcp_port,
            "http_port": options.broadcast_http_port or nsqd.http_port,
            "hostname": socket.gethostname(),
            "broadcast_address": options.broadcast_address,
        }

    async def _request(self, writer, pending: deque, command: bytes) -> bytes:
        answer = asyncio.get_running_loop().create_future()
        pending.append(answer)
        writer.write(command)
        async with asyncio.timeout(ANSWER_TIMEOUT):
            data = await answer
        if v1.is_error(data):
            raise LookupdError(f"{command.split(b' ')[0].strip().decode()} failed: {data.decode()}")
        return data

    async def _read_answers(self, reader, pending: deque) -> None:
        responses = v1.ResponseReader(self.nsqd.options.max_body_size)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    raise EOFError("connection closed by nsqlookupd")
                for answer in responses.feed(data):
                    if pending:
                        future = pending.popleft()
                        if not future.done():
                            future.set_result(answer)
        except Exception as error:  # wake whoever waits, with the reason
            for future in pending:
                if not future.done():
                    future.set_exception(error)
            raise
