"""One TCP connection to nsqd, for producers and consumers alike.

The handshake (magic, IDENTIFY with feature negotiation) runs on connect;
heartbeats are answered with NOP; responses are matched in order to the
commands that expect one; messages go to ``on_message``. Writes made in
one loop iteration leave in one ``transport.write``.
"""

import asyncio
import json
import logging
from collections import deque

from ..protocol import commands
from ..protocol.errors import NON_FATAL_CODES, parse_error_frame
from ..protocol.frames import (FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, FRAME_TYPE_RESPONSE, HEARTBEAT,
                               MAGIC_V2, FrameReader)
from ..protocol.message import MESSAGE_HEADER
from ..net import split_host_port
from .config import Config
from .errors import ConnectionClosedError

log = logging.getLogger("nsqpy.client")


class Connection(asyncio.Protocol):
    def __init__(self, address: str, config: Config, *, on_message=None, on_close=None):
        self.address = address
        self.config = config
        self.on_message = on_message  # callable(conn, timestamp, attempts, id, body)
        self.on_close = on_close  # callable(conn)
        self.identity: dict = {}  # nsqd's IDENTIFY answer
        self.closed = False
        self.ready_count = 0  # the RDY last sent
        self.in_flight = 0
        self.last_message_at = 0.0
        self.last_rdy_at = 0.0
        self.closing = False  # CLS sent

        self._transport = None
        self._reader = FrameReader()
        self._pending: deque[asyncio.Future] = deque()
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._loop = None

    def __repr__(self) -> str:
        return f"Connection({self.address})"

    # --- lifecycle ---------------------------------------------------------------------

    async def connect(self) -> dict:
        loop = self._loop = asyncio.get_running_loop()
        host, port = split_host_port(self.address)
        try:
            async with asyncio.timeout(self.config.dial_timeout):
                await loop.create_connection(lambda: self, host, port)
        except (OSError, asyncio.TimeoutError) as error:
            raise ConnectionClosedError(f"cannot connect to nsqd at {self.address}: {error or 'timeout'}") from None
        self._transport.write(MAGIC_V2)
        answer = await self.request(commands.identify(self.config.identify_body()))
        self.identity = json.loads(answer) if answer.startswith(b"{") else {}
        if self.identity.get("auth_required"):
            self.close()
            raise ConnectionClosedError(f"nsqd at {self.address} requires AUTH, which this client "
                                        "does not support yet")
        return self.identity

    def connection_made(self, transport) -> None:
        self._transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        error = ConnectionClosedError(f"connection to nsqd at {self.address} closed"
                                      + (f": {exc}" if exc else ""))
        while self._pending:
            future = self._pending.popleft()
            if not future.done():
                future.set_exception(error)
        if self.on_close is not None:
            self.on_close(self)

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self._flush()
            self._transport.close()
        self.closed = True

    # --- writing -------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Queue a command that expects no answer (FIN, REQ, TOUCH, RDY, NOP)."""
        if self.closed:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def request(self, data: bytes) -> asyncio.Future:
        """Send a command whose answer (OK, JSON, or an error) resolves the future."""
        future = self._loop.create_future()
        if self.closed:
            future.set_exception(ConnectionClosedError(f"connection to nsqd at {self.address} is closed"))
            return future
        self._pending.append(future)
        self.send(data)
        return future

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and not self.closed:
            self._transport.write(b"".join(self._out))
        self._out.clear()

    # --- reading ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
        except Exception as error:
            log.error("%s: unreadable data from nsqd (%s); closing", self.address, error)
            self.close()
            return
        for frame_type, payload in frames:
            if frame_type == FRAME_TYPE_MESSAGE:
                self.in_flight += 1
                self.last_message_at = self._loop.time()
                timestamp, attempts, message_id = MESSAGE_HEADER.unpack_from(payload)
                self.on_message(self, timestamp, attempts, message_id, payload[26:])
            elif frame_type == FRAME_TYPE_RESPONSE:
                if payload == HEARTBEAT:
                    self.send(commands.NOP)
                elif self._pending:
                    future = self._pending.popleft()
                    if not future.done():
                        future.set_result(payload)
            elif frame_type == FRAME_TYPE_ERROR:
                error = parse_error_frame(payload)
                if error.code in NON_FATAL_CODES:
                    log.warning("%s: %s", self.address, error)
                    continue
                log.error("%s: %s", self.address, error)
                if self._pending:
                    future = self._pending.popleft()
                    if not future.done():
                        future.set_exception(error)
                self.close()
