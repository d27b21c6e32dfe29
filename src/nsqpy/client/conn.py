"""One TCP connection to nsqd, for producers and consumers alike.

The handshake (magic, IDENTIFY with feature negotiation) runs on connect;
heartbeats are answered with NOP; responses are matched in order to the
commands that expect one; the messages of each read go to ``on_messages``
in one call. Writes made in
one loop iteration leave in one ``transport.write``.

As go-nsq, a connection that receives nothing (not even a heartbeat) for
``read_timeout``, or cannot get its writes out for ``write_timeout``, is
closed with the reason: a frozen nsqd is noticed, and every pending call
fails instead of waiting for it.
"""

import asyncio
import json
import logging
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, cast

from ..protocol import commands
from ..protocol.compression import DeflateCodec, SnappyCodec, new_codec
from ..protocol.errors import NON_FATAL_CODES
from ..protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_RESPONSE, HEARTBEAT, MAGIC_V2, OK
from ..protocol.v2 import CONFIRM, START_TLS, EnableCodec, upgrade_steps
from ..net import peer_host_port
from .config import Config, tls_context
from .errors import ConnectionClosedError, InvalidArgumentError, ProtocolError
from .inbound import Arrival, InboundReader

log = logging.getLogger("nsqpy.client")


class Connection(asyncio.Protocol):
    """One connection to nsqd, of a Producer or a Consumer (a message's
    ``connection``): ``connect()`` dials and runs the handshake, then
    commands are queued with ``send``, ``finish`` and ``request``."""

    def __init__(self, address: str, config: Config, *,
                 on_messages: Callable[["Connection", list[Arrival]], None] | None = None,
                 on_close: Callable[["Connection"], None] | None = None):
        """``on_messages(conn, arrivals)``: the messages of each read;
        ``on_close(conn)``: once, when the connection has closed."""
        self.address = address
        self.config = config
        self.on_messages = on_messages
        self.on_close = on_close
        # nsqd refusing a FIN, REQ or TOUCH (the message timed out and went back
        # to the queue): logged, or given to this callable when one is set
        self.on_refused: Callable[["Connection", ProtocolError], None] | None = None
        self.identity: dict[str, Any] = {}  # nsqd's IDENTIFY answer (JSON)
        self.auth_identity: dict[str, Any] = {}  # nsqd's AUTH answer, when it requires AUTH
        self.closed = False

        self._transport: asyncio.Transport | None = None
        self._reader = InboundReader()
        self._pending: deque[asyncio.Future[bytes]] = deque()
        self._out: list[bytes] = []
        self._fins: list[bytes] = []  # ids of the FINs queued after the last entry of _out
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop  # set by connect(), before any other use
        self._codec: SnappyCodec | DeflateCodec | None = None  # once negotiated
        # during the handshake frames are read one at a time: what follows the
        # IDENTIFY answer (or an OK) may belong to a layer not switched on yet
        self._handshaking = False
        self._last_read_at = 0.0
        self._write_stalled_since: float | None = None  # when the write buffer last stopped draining
        self._write_backlog = 0
        self._watchdog: asyncio.TimerHandle | None = None
        self._close_reason = ""
        self._lost: asyncio.Future[None] | None = None  # for close_gracefully

    def __repr__(self) -> str:
        return f"Connection({self.address})"

    @property
    def max_rdy_count(self) -> int | None:
        """nsqd's cap on RDY (from IDENTIFY's answer), if it said."""
        count: int | None = self.identity.get("max_rdy_count")
        return count

    @property
    def msg_timeout(self) -> float:
        """Seconds nsqd waits for an answer to a message before redelivering it."""
        milliseconds: int = self.identity.get("msg_timeout") or 60000
        return milliseconds / 1000

    # --- lifecycle ---------------------------------------------------------------------

    async def connect(self) -> dict[str, Any]:
        """Dial, handshake (and AUTH when nsqd asks for it); returns nsqd's
        IDENTIFY answer."""
        loop = self._loop = asyncio.get_running_loop()
        host, port = nsqd_host_port(self.address)
        try:
            async with asyncio.timeout(self.config.dial_timeout):
                transport, _ = await loop.create_connection(lambda: self, host, port)
        except (OSError, asyncio.TimeoutError) as error:
            reason = str(error) or f"no answer within {self.config.dial_timeout:g}s (dial_timeout)"
            raise ConnectionClosedError(f"cannot connect to nsqd at {self.address}: {reason}") from None
        transport.write(MAGIC_V2)
        config = self.config
        self._handshaking = True
        answer = await self.request(commands.identify(config.identify_body()))
        self.identity = json.loads(answer) if answer.startswith(b"{") else {}
        for step in upgrade_steps(self.identity):
            if step is CONFIRM:
                continue  # awaited with the step it confirms, below
            ok = self._expect_frame()  # before the step: nsqd's OK may follow it at once
            if step is START_TLS:
                await self._start_tls(host)
            else:
                self._enable_codec(step)
            await self._confirm(ok)
        self._handshaking = False
        self._on_frames(*self._reader.feed(b""))  # anything that came behind the handshake
        if self.identity.get("auth_required"):
            if not config.auth_secret:
                self.close()
                raise ConnectionClosedError(f"nsqd at {self.address} requires AUTH: set Config(auth_secret=...)")
            self.auth_identity = json.loads(await self.request(commands.auth(config.auth_secret.encode())))
        return self.identity

    async def _start_tls(self, host: str) -> None:
        assert self._transport is not None  # connected
        try:
            async with asyncio.timeout(self.config.dial_timeout + 5):
                self._transport = await self._loop.start_tls(self._transport, self, tls_context(self.config),
                                                             server_hostname=host)
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as error:
            self.close()
            raise ConnectionClosedError(f"TLS with nsqd at {self.address} failed: {error or 'timeout'}") from None

    def _enable_codec(self, step: EnableCodec) -> None:
        """Compress from here on; bytes already received past the last frame
        read came compressed."""
        self._codec = new_codec(step.snappy, step.deflate, step.deflate_level)
        behind = self._reader.take_rest()
        if behind:
            self._reader.feed(self._codec.decode(behind), limit=0)

    def _expect_frame(self) -> asyncio.Future[bytes]:
        future = self._loop.create_future()
        future.add_done_callback(_retrieve)  # unawaited when the step before it failed
        self._pending.append(future)
        return future

    async def _confirm(self, ok: asyncio.Future[bytes]) -> None:
        """nsqd's OK through the layer just switched on (it may be buffered already)."""
        self._on_frames(*self._reader.feed(b"", limit=1))
        try:
            async with asyncio.timeout(self.config.dial_timeout + 5):
                answer = await ok
        except asyncio.TimeoutError:
            self.close()
            raise ConnectionClosedError(f"nsqd at {self.address} did not confirm the upgrade") from None
        if answer != OK:
            self.close()
            raise ConnectionClosedError(f"nsqd at {self.address} answered the upgrade with {answer[:60]!r}")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # a stream's: it writes
        self._last_read_at = self._loop.time()
        if self._watchdog is None:
            self._schedule_watchdog()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        reason = self._close_reason or self._unanswered_handshake(exc) or (str(exc) if exc else "")
        error = ConnectionClosedError(f"connection to nsqd at {self.address} closed"
                                      + (f": {reason}" if reason else ""))
        while self._pending:
            future = self._pending.popleft()
            if not future.done():
                future.set_exception(error)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self.on_close is not None:
            self.on_close(self)

    def _unanswered_handshake(self, exc: Exception | None) -> str:
        """nsqd answers IDENTIFY (or refuses it with an error frame); a peer
        that hangs up on it instead is most likely another daemon's port
        (nsqlookupd's TCP port does so, sometimes with a reset)."""
        if not self._handshaking or self.identity:  # IDENTIFY answered: an upgrade step failed
            return ""
        return (f"{exc or 'hung up'} before answering IDENTIFY: is this nsqd's TCP port? "
                "(its --tcp-address, 4150 by default; nsqlookupd's TCP port hangs up so)")

    def close(self, reason: str = "") -> None:
        if self._transport is not None and not self.closed:
            self._close_reason = reason
            self._flush()
            self._transport.close()
        self.closed = True

    async def close_gracefully(self, timeout: float) -> None:
        """Close once nsqd has read everything sent: end our side of the
        stream and wait (at most ``timeout``) for nsqd to close its side.
        Closing at once while messages nsqd pushed are still unread here
        resets the connection, and nsqd drops the FINs it had not read yet."""
        if self.closed:
            return
        assert self._transport is not None  # connected
        self._flush()
        if self._transport.can_write_eof():
            self._lost = self._loop.create_future()
            self._transport.write_eof()
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(self._lost)
            except TimeoutError:
                pass
        self.close()

    async def flushed(self) -> None:
        """Until everything sent so far has been written to the socket (or
        the connection has closed: nsqd then redelivers what was unanswered)."""
        self._flush()
        while not self.closed and self._transport is not None and self._transport.get_write_buffer_size():
            await asyncio.sleep(0.001)

    # --- deadlines ------------------------------------------------------------------------------

    def _schedule_watchdog(self) -> None:
        config = self.config
        period = min(config.write_timeout, config.read_timeout) / 2
        self._watchdog = self._loop.call_later(period, self._check_deadlines)

    def _check_deadlines(self) -> None:
        """Reading: nothing for read_timeout (nsqd sends heartbeats, so a live
        node always has something to say; skipped when heartbeats are off).
        Writing: the buffer not draining for write_timeout."""
        if self.closed:
            return
        assert self._transport is not None  # connected: the watchdog starts with the transport
        now, config = self._loop.time(), self.config
        backlog = self._transport.get_write_buffer_size()
        if backlog and backlog >= self._write_backlog:
            self._write_stalled_since = self._write_stalled_since or now
        else:
            self._write_stalled_since = None
        self._write_backlog = backlog
        if config.heartbeat_interval != -1 and now - self._last_read_at > config.read_timeout:
            log.error("%s: nothing received for %gs (read_timeout); closing", self.address, config.read_timeout)
            self.close(f"i/o timeout: nothing received for {config.read_timeout:g}s")
        elif self._write_stalled_since is not None and now - self._write_stalled_since > config.write_timeout:
            log.error("%s: writes stalled for %gs (write_timeout); closing", self.address, config.write_timeout)
            self.close(f"i/o timeout: writes stalled for {config.write_timeout:g}s")
        else:
            self._schedule_watchdog()

    # --- writing -------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Queue a command that expects no answer (REQ, TOUCH, RDY, NOP)."""
        if self.closed:
            return
        if self._fins:
            self._end_fin_run()
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def finish(self, message_ids: Iterable[bytes]) -> None:
        """Queue a FIN for each id. FIN is a consumer's commonest command:
        kept as bare ids, a run of them is encoded with one join when it is
        written (``FIN <id>\n`` back to back), in order with the rest."""
        if self.closed:
            return
        self._fins += message_ids
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _end_fin_run(self) -> None:
        self._out.append(commands.fin_many(self._fins))
        self._fins = []

    def request(self, data: bytes) -> asyncio.Future[bytes]:
        """Send a command whose answer (OK, JSON, or an error) resolves the future."""
        future = self._loop.create_future()
        future.add_done_callback(_retrieve)  # a caller that gave up leaves no "never retrieved" error
        if self.closed:
            future.set_exception(ConnectionClosedError(f"connection to nsqd at {self.address} is closed"))
            return future
        self._pending.append(future)
        self.send(data)
        return future

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._fins:
            self._end_fin_run()
        if self._out and not self.closed:
            data = b"".join(self._out)
            if self._codec is not None:
                data = self._codec.encode(data)
            assert self._transport is not None  # connected: nothing is sent before
            self._transport.write(data)
        self._out.clear()

    # --- reading ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._last_read_at = self._loop.time()
        if self._handshaking and data.startswith(b"HTTP/"):  # else read as a frame size: 1213486160, "HTTP"
            self.close("it answers in HTTP, so this looks like an HTTP port (nsqd's --http-address); "
                       "give its TCP port (--tcp-address, 4150 by default)")
            return
        try:
            if self._codec is not None:
                data = self._codec.decode(data)
            messages, others = self._reader.feed(data, limit=1 if self._handshaking else None)
        except Exception as error:
            log.error("%s: unreadable data from nsqd (%s); closing", self.address, error)
            self.close()
            return
        self._on_frames(messages, others)

    def _on_frames(self, messages: list[Arrival], others: list[tuple[int, bytes]]) -> None:
        """Answers and errors first, in order; then the messages, in one call."""
        for frame_type, payload in others:
            if frame_type == FRAME_TYPE_RESPONSE:
                if payload == HEARTBEAT:
                    self.send(commands.NOP)
                elif self._pending:
                    future = self._pending.popleft()
                    if not future.done():
                        future.set_result(payload)
            elif frame_type == FRAME_TYPE_ERROR:
                error = ProtocolError.from_frame(payload)
                if error.code in NON_FATAL_CODES:
                    if self.on_refused is not None:
                        self.on_refused(self, error)
                    else:
                        log.warning("%s: %s", self.address, error)
                    continue
                waiting = self._pending.popleft() if self._pending else None
                if waiting is not None and not waiting.done():
                    waiting.set_exception(error)  # the caller hears of it: raised, not logged too
                else:
                    log.error("%s: %s", self.address, error)
                self.close()
        if messages and self.on_messages is not None:
            self.on_messages(self, messages)


def nsqd_host_port(address: str) -> tuple[str, int]:
    """An nsqd address to dial, or an ``InvalidArgumentError`` naming it."""
    try:
        return peer_host_port(address)
    except ValueError as error:
        raise InvalidArgumentError(f"nsqd address {error} (e.g. 127.0.0.1:4150)") from None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
