"""The V2 TCP protocol: magic, command dispatch and one handler per command.

Checks run in nsqd's order so clients see the same error for the same
mistake. Every error is fatal (error frame, then close) except FIN, REQ and
TOUCH failures.
"""

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final, cast

from ..protocol import errors
from ..protocol.commands import ABORT, Command, CommandReader, TopicNames, check_mpub_body, parse_base10, v2_reader
from ..protocol.compression import CompressionError, new_codec
from ..protocol.errors import ProtocolError
from ..protocol.frames import CLOSE_WAIT_FRAME, MAGIC_V2, OK_FRAME, encode_error
from ..protocol.keyed import check_key, parse_kmpub_body
from ..protocol.identify import DEFAULT_HEARTBEAT_INTERVAL_MS, identify_response, negotiate
from ..protocol.message import MESSAGE_ID_LENGTH
from ..protocol.names import is_valid_channel_name
from ..protocol.replication import NotAMember, new_nonce
from ..protocol.v2 import ALLOWED, CONFIRM, START_TLS, State, invalid_in_state, upgrade_steps
from .auth import AuthError
from .busypoll import BusyPoll
from .client import ClientV2
from .deadline import Deadline
from .dirty import DirtyWriters
from .tls import connection_info
from .bounds import QueueFull
from .publish_keys import KeysRefused
from .publishing import publish, publish_keyed, publish_mpub, publish_pub
from .replication.links import ReplicationShort
from .topic import TopicExiting


def _invalid(description: str) -> ProtocolError:
    return ProtocolError(errors.E_INVALID, description)


def _name(raw: bytes) -> str:
    return raw.decode("latin-1")


_GO_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                      "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def _go_quoted(raw: bytes) -> str:
    """``raw`` as Go's ``%q`` prints it, as nsqd names a topic it refuses:
    printable UTF-8 as it came (``"héllo"``), a byte that is not UTF-8 as
    ``\\xff``, anything else escaped (``\\"``, ``\\n``, ``\\x01``, ``\\u200b``).
    Clients compare these error texts with nsqd's, byte for byte."""
    out: list[str] = []
    for char in raw.decode("utf-8", "surrogateescape"):
        code = ord(char)
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable():  # Python's printable is Go's strconv.IsPrint
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


class V2Protocol(asyncio.Protocol):
    """One V2 connection's I/O: the magic, the command reader, and two bounds
    that keep one client from hurting the daemon.

    *Whole-command deadline.* As in nsqd, a command must arrive complete
    within twice the connection's heartbeat interval after the previous one
    was handled (none with heartbeats disabled); before the magic and
    IDENTIFY that is twice the default interval. A client trickling bytes is
    dropped on time, and a half-sent body does not stay buffered.

    *Replies are backpressure.* When handling commands produced replies and
    the transport's write buffer is above its high-water mark, reading stops
    until the client reads its socket down to the low-water mark, and a
    client that does not do so within one heartbeat interval is dropped
    (nsqd's write deadline). Commands without replies (FIN, RDY, TOUCH)
    are read on, as nsqd reads them while a consumer's socket is full.
    """

    def __init__(self, nsqd) -> None:
        self.nsqd = nsqd
        # what every command reads of nsqd, fixed once it has started: held here,
        # as compiled code reads its own attributes in a step and nsqd's in a lookup
        self.dirty: DirtyWriters = nsqd.dirty
        self.busy_poll: BusyPoll = nsqd.busy_poll
        self.replication: Any = nsqd.replication
        self.auth_client: Any = nsqd.auth
        self.tls_required: bool = nsqd.tls_required_tcp
        self.transport: Any = None
        self.client: ClientV2 | None = None
        self.reader: CommandReader | None = None  # once the magic is read
        self.topic_names = TopicNames()  # the reader's and the handlers'
        self.upgrading = False
        self._magic = b""
        self._blocked: set[str] = set()  # why reading is paused: "replies", "command"
        self.deadline = Deadline(nsqd.loop, self._deadline_passed)

    # --- asyncio callbacks ----------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.deadline.set(self._command_time())  # the default interval until IDENTIFY

    def data_received(self, data: bytes) -> None:
        client = self.client
        if client is None:
            self._magic += data
            if len(self._magic) < 4:
                return
            magic, data = self._magic[:4], self._magic[4:]
            if magic != MAGIC_V2:
                self.nsqd.log.error("client(%s) bad protocol magic %r",
                                    self.transport.get_extra_info("peername"), magic)
                self.transport.write(encode_error(ProtocolError(errors.E_BAD_PROTOCOL,
                                                                f"client({magic!r}) bad protocol magic")))
                self._close()
                return
            options = self.nsqd.options
            client = self.client = self.nsqd.add_client(self.transport)
            self.reader = v2_reader(options.max_msg_size, options.max_body_size, int(options.max_req_timeout * 1000),
                                    None if self.replication is None else client.proved_member, self.topic_names)
            self.deadline.set(self._command_time())
            if not data:
                return
        if client.closed:
            return
        if client.codec is not None:
            try:
                data = client.codec.decode(data)
            except CompressionError as error:
                self.nsqd.log.error("[%s] %s; closing", client.remote_address, error)
                self._close()
                return
        commands = cast(CommandReader, self.reader).feed(data)  # made with the client
        if commands:
            self._run(client, commands)
        self.busy_poll.input()

    def eof_received(self) -> bool:
        """A client that stops sending hears the answers to what it sent
        (they may be waiting for the turn's writes), and one that hangs up
        inside a body hears what nsqd says then."""
        client = self.client
        if client is not None and not client.closed:
            error = cast(CommandReader, self.reader).truncation_error()  # made with the client
            if error is not None:
                self._failed(client, error)
            client.flush()
        return False

    def _run(self, client: ClientV2, commands: list[Command]) -> None:
        """Execute commands in order. A handler that must wait (AUTH asks a
        server) returns a coroutine: reading pauses, and the commands after it
        run once it is done, so answers keep their order."""
        handlers = _HANDLERS if self.replication is None else _REPLICATED_HANDLERS
        tls_required = self.tls_required and not client.tls
        replies = client.replies
        for index, command in enumerate(commands):
            if command is ABORT:
                self.nsqd.log.error("[%s] command line too long, closing", client.remote_address)
                self._close()
                return
            name = command.name
            try:
                if name == b"PUB" and not tls_required:
                    # the commonest command, valid in every state and changing none:
                    # called directly, without the tables' lookups
                    after = client.state
                    waiting = self.pub(client, command)
                else:
                    handler = handlers.get(name)
                    if handler is None:
                        raise _invalid(f"invalid command {_name(name)}")
                    if tls_required and name != b"IDENTIFY":
                        raise _invalid(f"cannot {_name(name)} in current state (TLS required)")
                    allowed = ALLOWED[client.state]
                    if name not in allowed:
                        raise invalid_in_state(name)
                    following = allowed[name]
                    if following is None:  # valid, without effect (RDY after CLS)
                        continue
                    after = following
                    waiting = handler(self, client, command)
                if waiting is not None:
                    client.flush()
                    self._block("command")
                    asyncio.get_running_loop().create_task(
                        self._resume_after(client, waiting, after, commands[index + 1:]))
                    return
                client.state = after
                if self.upgrading:
                    break  # the rest waits for the TLS handshake
            except ProtocolError as error:
                if self._failed(client, error):
                    return
        answered = client.replies - replies
        if answered > 1:
            # a client pipelining commands: its answers now, so that a peer that reads
            # none stops this connection's reading below (the loop reads a socket many
            # times in one turn, and the turn's writes come after)
            client.flush()
        else:
            client.flush_soon()
        if answered and client.write_paused:
            self._block("replies")
        else:
            self.deadline.set(self._command_time())

    def _failed(self, client: ClientV2, error: ProtocolError) -> bool:
        """Send the error; True when it is fatal and the connection is closed."""
        client.send_error(error)
        if not error.fatal:
            return False
        self.nsqd.log.error("[%s] %s", client.remote_address, error)
        self._close()
        return True

    async def _resume_after(self, client: ClientV2, waiting, after: State, rest: list[Command]) -> None:
        try:
            await waiting
            client.state = after
        except ProtocolError as error:
            if self._failed(client, error):
                return
        if client.closed:
            return
        self._unblock("command")
        self._run(client, rest)

    def connection_lost(self, exc) -> None:
        self.deadline.clear()
        if self.client is not None:
            self.client.connection_lost()

    def pause_writing(self) -> None:
        if self.client is not None:
            self.client.pause_writing()

    def resume_writing(self) -> None:
        if self.client is not None:
            self.client.resume_writing()
        self._unblock("replies")

    def _close(self) -> None:
        self.deadline.clear()
        if self.client is not None:
            self.client.close()
        else:
            self.transport.close()

    # --- reading paused, and the deadlines ----------------------------------------

    def _block(self, reason: str) -> None:
        if not self._blocked:
            self.transport.pause_reading()
        self._blocked.add(reason)
        if reason == "replies":
            self.deadline.set(self._command_time() / 2)  # nsqd's write deadline: one interval
        else:
            self.deadline.clear()  # the daemon is waiting, not the client

    def _unblock(self, reason: str) -> None:
        if reason not in self._blocked:
            return
        self._blocked.discard(reason)
        if not self._blocked and not self.upgrading:
            self.transport.resume_reading()
            self.deadline.set(self._command_time())

    def _command_time(self) -> float:
        """Seconds a whole command may take: twice the heartbeat interval, 0 for none."""
        client = self.client
        return client.command_time if client is not None else 2 * DEFAULT_HEARTBEAT_INTERVAL_MS / 1000

    def _deadline_passed(self) -> None:
        client = self.client
        where = client.remote_address if client is not None else self.transport.get_extra_info("peername")
        if "replies" in self._blocked:
            self.nsqd.log.error("[%s] client did not read its replies in time, closing", where)
            self.transport.abort()  # what is buffered will never be read
            return
        error = self.reader.truncation_error() if self.reader is not None else None
        if error is not None and client is not None:
            self._failed(client, error)
        else:
            self.nsqd.log.error("[%s] no complete command in %.1fs, closing", where, self._command_time())
            self._close()

    # --- shared checks -----------------------------------------------------------------

    def _topic_name(self, raw: bytes, command: str) -> str:
        name = self.topic_names.get(raw)
        if name is None:
            raise ProtocolError(errors.E_BAD_TOPIC, f"{command} topic name {_go_quoted(raw)} is not valid")
        return name

    @staticmethod
    def _message_id(command, name: str) -> bytes:
        if len(command.params) < (3 if name == "REQ" else 2):
            raise _invalid(f"{name} insufficient number of params")
        message_id = command.params[1]
        if len(message_id) != MESSAGE_ID_LENGTH:
            raise _invalid("invalid message ID")
        return message_id

    @staticmethod
    def _parse_ms(raw: bytes, what: str) -> int:
        try:
            return parse_base10(raw)
        except ValueError:
            raise _invalid(f"{what} {_name(raw)}") from None

    # --- commands ---------------------------------------------------------------------

    def identify(self, client: ClientV2, command: Command) -> None:
        if command.body_error is not None:
            raise command.body_error
        settings = negotiate(command.body, self.nsqd.identify_policy, client.settings)
        client.update_settings(settings)
        if not settings.feature_negotiation:
            client.send_frame(OK_FRAME)
            return
        answer = identify_response(settings, self.nsqd.identify_policy)
        client.send_response(answer)
        steps = upgrade_steps(json.loads(answer))
        if not steps:
            return
        client.flush()  # the answer goes out plain
        if steps[0] is START_TLS:
            # no command may be read before the handshake: stop reading now
            self.transport.pause_reading()
            self.upgrading = True
            self.deadline.clear()
            asyncio.get_running_loop().create_task(self._start_tls(client, steps[1:]))
        else:
            self._upgrade(client, steps)

    @staticmethod
    def _upgrade(client: ClientV2, steps) -> None:
        """The steps after TLS: switch compression on, and confirm each layer with an OK through it."""
        for step in steps:
            if step is CONFIRM:
                client.send_frame(OK_FRAME)
                client.flush()
            else:
                client.codec = new_codec(step.snappy, step.deflate, step.deflate_level)

    async def _start_tls(self, client: ClientV2, rest) -> None:
        """TLS handshake on the raw socket, then the rest of the upgrade."""
        try:
            async with asyncio.timeout(5):
                transport = await asyncio.get_running_loop().start_tls(
                    self.transport, self, self.nsqd.tls_context, server_side=True)
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as error:
            self.nsqd.log.error("[%s] TLS handshake failed: %s", client.remote_address, error or "timeout")
            self.transport.close()
            return
        self.transport = client.transport = transport
        client.tls = connection_info(transport)
        self.upgrading = False
        self.deadline.set(self._command_time())
        self._upgrade(client, rest)

    def auth(self, client: ClientV2, command: Command) -> Awaitable[None]:
        if len(command.params) != 1:
            raise _invalid("AUTH invalid number of parameters")
        if command.body_error is not None:
            raise command.body_error
        if client.auth is not None:
            raise _invalid("AUTH already set")
        if self.auth_client is None:
            raise ProtocolError(errors.E_AUTH_DISABLED, "AUTH disabled")
        return self._authenticate(client, command.body.decode("utf-8", "replace"))

    async def _authenticate(self, client: ClientV2, secret: str) -> None:
        state = await self._query_auth(client, secret)
        if not state.authorizations:
            raise ProtocolError(errors.E_UNAUTHORIZED, "AUTH no authorizations found")
        client.auth, client.auth_secret = state, secret
        client.send_response(json.dumps({"identity": state.identity, "identity_url": state.identity_url,
                                         "permission_count": len(state.authorizations)}).encode())

    async def _query_auth(self, client: ClientV2, secret: str):
        try:
            return await self.auth_client.query(secret, client.remote_ip, bool(client.tls), client.common_name)
        except AuthError:
            raise ProtocolError(errors.E_AUTH_FAILED, "AUTH failed") from None

    def _with_permission(self, client: ClientV2, name: str, permission: str, topic: str, channel: str,
                         action) -> Awaitable[None] | None:
        """Run ``action`` if AUTH allows it: at once while the grant is fresh,
        after asking the auth server again once its TTL has passed."""
        if self.auth_client is None:
            return action()
        state = client.auth
        if state is None:
            raise ProtocolError(errors.E_AUTH_FIRST, f"AUTH required before {name}")
        if state.expired:
            return self._recheck(client, name, permission, topic, channel, action)
        self._require(state, name, permission, topic, channel)
        return action()

    async def _recheck(self, client: ClientV2, name: str, permission: str, topic: str, channel: str, action) -> None:
        client.auth = await self._query_auth(client, client.auth_secret)
        self._require(client.auth, name, permission, topic, channel)
        waiting = action()
        if waiting is not None:
            await waiting

    @staticmethod
    def _require(state, name: str, permission: str, topic: str, channel: str) -> None:
        if not state.allows(permission, topic, channel):
            raise ProtocolError(errors.E_UNAUTHORIZED, f'AUTH failed for {name} on "{topic}" "{channel}"')

    def sub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        if client.settings.heartbeat_interval <= 0:
            raise _invalid("cannot SUB with heartbeats disabled")
        params = command.params
        if len(params) < 3:
            raise _invalid("SUB insufficient number of parameters")
        topic_name = self._topic_name(params[1], "SUB")
        channel_name = _name(params[2])
        if not is_valid_channel_name(channel_name):
            raise ProtocolError(errors.E_BAD_CHANNEL, f"SUB channel name {_go_quoted(params[2])} is not valid")
        return self._with_permission(client, "SUB", "subscribe", topic_name, channel_name,
                                     lambda: self._subscribe(client, topic_name, channel_name))

    def _subscribe(self, client: ClientV2, topic_name: str, channel_name: str) -> None:
        nsqd = self.nsqd
        try:
            topic = nsqd.get_topic(topic_name)
            channel = topic.get_channel(channel_name)
        except TopicExiting:
            raise ProtocolError(errors.E_SUB_FAILED, "SUB failed to add client") from None
        if channel.exiting:
            raise ProtocolError(errors.E_SUB_FAILED, "SUB failed to add client")
        limit = nsqd.options.max_channel_consumers
        if limit and len(channel.clients) >= limit:
            raise ProtocolError(
                errors.E_SUB_FAILED,
                f"SUB failed: channel consumers for {topic_name}:{channel_name} exceeds limit of {limit}",
            )
        channel.add_client(client)
        client.channel = channel
        client.send_frame(OK_FRAME)

    def rdy(self, client: ClientV2, command: Command) -> None:
        count = 1
        if len(command.params) > 1:
            raw = command.params[1]
            try:
                count = parse_base10(raw)
            except ValueError:
                raise _invalid(f"RDY could not parse count {_name(raw)}") from None
        limit = self.nsqd.options.max_rdy_count
        if count > limit:
            raise _invalid(f"RDY count {count} out of range 0-{limit}")
        opened = count > client.ready_count
        client.ready_count = count
        if opened:
            client.on_window_opened()

    def fin(self, client: ClientV2, command: Command) -> None:
        client.channel.finish(client, self._message_id(command, "FIN"))

    def req(self, client: ClientV2, command: Command) -> None:
        message_id = self._message_id(command, "REQ")
        delay_ms = self._parse_ms(command.params[2], "REQ could not parse timeout")
        max_ms = int(self.nsqd.options.max_req_timeout * 1000)
        if delay_ms > max_ms:
            self.nsqd.log.info("[%s] REQ timeout %d out of range 0-%d, clamping",
                               client.remote_address, delay_ms, max_ms)
            delay_ms = max_ms
        client.channel.requeue(client, message_id, delay_ms / 1000)

    def touch(self, client: ClientV2, command: Command) -> None:
        client.channel.touch(client, self._message_id(command, "TOUCH"), self.nsqd.options.max_msg_timeout)

    def cls(self, client: ClientV2, command: Command) -> None:
        client.ready_count = 0
        client.send_frame(CLOSE_WAIT_FRAME)

    def nop(self, client: ClientV2, command: Command) -> None:
        pass

    def pub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        if len(command.params) < 2:
            raise _invalid("PUB insufficient number of parameters")
        topic_name = self._topic_name(command.params[1], "PUB")
        if command.body_error is not None:
            raise command.body_error
        return self._publish(client, "PUB", topic_name, 1, errors.E_PUB_FAILED,
                             publish_pub, (self.nsqd, topic_name, command.body))

    def dpub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        params = command.params
        if len(params) < 3:
            raise _invalid("DPUB insufficient number of parameters")
        topic_name = self._topic_name(params[1], "DPUB")
        delay_ms = self._defer_ms(params[2], "DPUB")
        if command.body_error is not None:
            raise command.body_error
        return self._publish(client, "DPUB", topic_name, 1, errors.E_DPUB_FAILED,
                             publish, (self.nsqd, topic_name, [command.body], delay_ms / 1000))

    def _defer_ms(self, raw: bytes, name: str) -> int:
        delay_ms = self._parse_ms(raw, f"{name} could not parse timeout")
        max_ms = int(self.nsqd.options.max_req_timeout * 1000)
        if delay_ms > max_ms:
            raise _invalid(f"{name} timeout {delay_ms} out of range 0-{max_ms}")
        return delay_ms

    def mpub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        if len(command.params) < 2:
            raise _invalid("MPUB insufficient number of parameters")
        name = self._topic_name(command.params[1], "E_BAD_TOPIC MPUB")  # nsqd repeats the code for MPUB
        if command.body_error is not None:
            raise command.body_error
        options = self.nsqd.options
        body = command.body
        count = check_mpub_body(body, options.max_msg_size, options.max_body_size)
        return self._publish(client, "MPUB", name, count, errors.E_MPUB_FAILED,
                             publish_mpub, (self.nsqd, name, body, count))

    def kpub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        """Beyond NSQ: a PUB that may be repeated safely (protocol/keyed.py)."""
        params = command.params
        if len(params) < 3:
            raise _invalid("KPUB insufficient number of parameters")
        topic_name = self._topic_name(params[1], "KPUB")
        if command.body_error is not None:
            raise command.body_error
        keys = [check_key("KPUB", params[2])]
        return self._publish(client, "KPUB", topic_name, 1, errors.E_PUB_FAILED,
                             publish_keyed, (self.nsqd, topic_name, keys, [command.body]))

    def kdpub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        """Beyond NSQ: a DPUB that may be repeated safely."""
        params = command.params
        if len(params) < 4:
            raise _invalid("KDPUB insufficient number of parameters")
        topic_name = self._topic_name(params[1], "KDPUB")
        delay_ms = self._defer_ms(params[2], "KDPUB")
        if command.body_error is not None:
            raise command.body_error
        keys = [check_key("KDPUB", params[3])]
        return self._publish(client, "KDPUB", topic_name, 1, errors.E_DPUB_FAILED,
                             publish_keyed, (self.nsqd, topic_name, keys, [command.body], delay_ms / 1000))

    def kmpub(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        """Beyond NSQ: an MPUB whose every message may be repeated safely."""
        if len(command.params) < 2:
            raise _invalid("KMPUB insufficient number of parameters")
        name = self._topic_name(command.params[1], "KMPUB")
        if command.body_error is not None:
            raise command.body_error
        options = self.nsqd.options
        keys, bodies = parse_kmpub_body(command.body, options.max_msg_size, options.max_body_size)
        return self._publish(client, "KMPUB", name, len(bodies), errors.E_MPUB_FAILED,
                             publish_keyed, (self.nsqd, name, keys, bodies))

    def _publish(self, client: ClientV2, name: str, topic_name: str, count: int, code: str,
                 put: Callable[..., tuple], args: tuple) -> Awaitable[None] | None:
        """``put(*args)`` the ``count`` messages if AUTH allows it, then OK;
        nsqd's error for what refused them. (A function and its arguments,
        not a closure: a crowd of publishers pays for every object a PUB makes.)"""
        if self.auth_client is not None:
            return self._put_if_permitted(client, name, topic_name, count, code, put, args)
        return self._put(client, name, topic_name, count, code, put, args)

    def _put_if_permitted(self, client: ClientV2, name: str, topic_name: str, count: int, code: str,
                          put: Callable[..., tuple], args: tuple) -> Awaitable[None] | None:
        """(Apart from ``_publish``: the closure made here would be made for every publish there.)"""
        return self._with_permission(client, name, "publish", topic_name, "",
                                     lambda: self._put(client, name, topic_name, count, code, put, args))

    def _put(self, client: ClientV2, name: str, topic_name: str, count: int, code: str,
             put: Callable[..., tuple], args: tuple) -> Awaitable[None] | None:
        replication = self.replication
        if replication is not None:
            refused = replication.refusal()
            if refused is not None:
                raise ProtocolError(code, f"{name} failed {refused}")
        try:
            waiting = put(*args)
        except TopicExiting:
            raise ProtocolError(code, f"{name} failed exiting") from None
        except (QueueFull, KeysRefused, OSError) as error:
            raise ProtocolError(code, f"{name} failed {error}") from None
        client.pub_counts[topic_name] = client.pub_counts.get(topic_name, 0) + count
        acks = None if replication is None else replication.acks()
        if acks is None:
            client.send_frame(OK_FRAME)
            if waiting:
                self.dirty.answered_before_write(waiting, client, code, name)
            return None
        return self._ok_once(client, acks, code, name, replication.check_answer)

    @staticmethod
    async def _ok_once(client: ClientV2, waiting, code: str, name: str, check=None) -> None:
        """OK once ``waiting`` is done: a replicated nsqd's publish once its
        peers hold copies (``code`` when too few could, or when ``check``
        says its lease may have ended meanwhile); a peer's REPL batch once
        it is fsynced (--replication-ack=disk), where a write the disk
        refused closes the link and the origin gives the batch to another
        peer."""
        try:
            await asyncio.shield(waiting)  # shared by a turn's publishes: one connection's end cancels none
            if check is not None:
                check()
        except (OSError, ReplicationShort) as error:
            raise ProtocolError(code, f"{name} failed {error}") from None
        client.send_frame(OK_FRAME)

    def repl(self, client: ClientV2, command: Command) -> Awaitable[None] | None:
        """A peer's batch of what it accepted and what became of it
        (protocol/replication.py), kept for a takeover; OK once kept."""
        params = command.params
        if len(params) < 3:
            raise _invalid("REPL insufficient number of parameters")
        if not client.repl_member:
            raise ProtocolError(errors.E_UNAUTHORIZED, "REPL before RAUTH: only members of this cluster replicate")
        try:
            epoch = parse_base10(params[2])
            writing = self.replication.receive(params[1].decode("ascii"), epoch, command.body or b"")
        except (ValueError, UnicodeDecodeError) as error:
            raise ProtocolError(errors.E_BAD_BODY, f"REPL {error}") from None
        if writing is None:
            client.send_frame(OK_FRAME)
            return None
        return self._ok_once(client, writing, "E_REPL_FAILED", "REPL")

    def rauth(self, client: ClientV2, command: Command) -> None:
        """A peer proves it is a member of this replicated cluster
        (protocol/replication.py): ``RAUTH`` is answered with a nonce,
        ``RAUTH <node> <proof>`` with OK once the proof is good."""
        params = command.params
        if len(params) == 1:
            client.repl_nonce = new_nonce()
            client.send_response(client.repl_nonce)
            return
        if len(params) != 3 or not client.repl_nonce:
            raise _invalid("RAUTH needs a nonce first, then a node and its proof")
        node = params[1].decode("ascii", "replace")
        try:
            self.replication.check_proof(client.repl_nonce, node, params[2])
        except NotAMember as error:
            raise ProtocolError(errors.E_UNAUTHORIZED, str(error)) from None
        client.repl_nonce = b""
        client.repl_member = node
        client.send_frame(OK_FRAME)


_HANDLERS: Final = {
    b"IDENTIFY": V2Protocol.identify,
    b"AUTH": V2Protocol.auth,
    b"SUB": V2Protocol.sub,
    b"RDY": V2Protocol.rdy,
    b"FIN": V2Protocol.fin,
    b"REQ": V2Protocol.req,
    b"TOUCH": V2Protocol.touch,
    b"CLS": V2Protocol.cls,
    b"NOP": V2Protocol.nop,
    b"PUB": V2Protocol.pub,
    b"DPUB": V2Protocol.dpub,
    b"MPUB": V2Protocol.mpub,
    b"KPUB": V2Protocol.kpub,
    b"KDPUB": V2Protocol.kdpub,
    b"KMPUB": V2Protocol.kmpub,
}

#: a replicated nsqd also takes its peers' batches
_REPLICATED_HANDLERS: Final = {**_HANDLERS, b"RAUTH": V2Protocol.rauth, b"REPL": V2Protocol.repl}
