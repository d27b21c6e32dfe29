"""V2 commands: the server-side reader and the client-side encoders.

A command is ``NAME[ param]*\\n``; IDENTIFY, AUTH, PUB, DPUB and MPUB (and
keyed.py's KPUB, KDPUB and KMPUB) are followed by ``[int32 length][body]``.
"""

import json
import struct
from collections.abc import Callable
from typing import Final

from .errors import ProtocolError, E_BAD_BODY, E_BAD_MESSAGE
from .names import is_valid_topic_name

MAX_LINE_LENGTH: Final = 16 * 1024  # nsqd's buffered reader size: a line and its newline must fit in it

_INT32: Final = struct.Struct(">i")


class Command:
    """One parsed command. ``body`` stays empty until one is read (no
    command takes an empty one). ``body_error`` is set when the body length
    was refused before reading it: the handler reports it after checking the
    parameters, which is the order nsqd checks them in."""

    __slots__ = ("name", "params", "body", "body_error")

    def __init__(self, name: bytes, params: list[bytes], body: bytes = b"",
                 body_error: ProtocolError | None = None):
        self.name = name
        self.params = params
        self.body = body
        self.body_error = body_error

    def __repr__(self) -> str:
        return f"Command({self.name!r}, {self.params!r}, body={self.body!r})"


#: Returned in place of a command when the stream can no longer be parsed
#: without an error frame to send (a line longer than nsqd's read buffer).
ABORT: Final = Command(b"", [])


def check_message_size(name: bytes, size: int, max_msg_size: int) -> ProtocolError | None:
    if size <= 0:
        return ProtocolError(E_BAD_MESSAGE, f"{name.decode()} invalid message body size {size}")
    if size > max_msg_size:
        return ProtocolError(E_BAD_MESSAGE, f"{name.decode()} message too big {size} > {max_msg_size}")
    return None


def check_body_size(name: bytes, size: int, max_body_size: int) -> ProtocolError | None:
    if size <= 0:
        return ProtocolError(E_BAD_BODY, f"{name.decode()} invalid body size {size}")
    if size > max_body_size:
        return ProtocolError(E_BAD_BODY, f"{name.decode()} body too big {size} > {max_body_size}")
    return None


#: a body command's length check and limit: the check words the error of a
#: length outside 1 to the limit
BodyLimit = tuple[Callable[[bytes, int, int], ProtocolError | None], int]


# nsqd checks a body command's parameters before it reads the body; with
# the wrong count, a bad topic name or a bad DPUB timeout it answers at once
# (a fatal error), and no body is waited for.
_BODY_PARAM_COUNTS: Final = {b"PUB": 2, b"MPUB": 2, b"DPUB": 3, b"IDENTIFY": 1, b"REPL": 3,
                               b"KPUB": 3, b"KMPUB": 2, b"KDPUB": 4}


#: Topic names one connection remembers as checked: a publisher names the
#: same few topics command after command, and a lookup costs a fraction of
#: decoding the name and matching its pattern.
KNOWN_TOPICS_PER_CONNECTION: Final = 64


class TopicNames:
    """The topic names one connection has used, each checked and decoded
    once: by the reader, before a body is waited for, and by the handler of
    the command. The name is then one string object, whose hash the topic
    and counter lookups that follow do not compute again."""

    def __init__(self) -> None:
        self._known: dict[bytes, str] = {}

    def get(self, raw: bytes) -> str | None:
        """``raw`` as a topic name; None when it is not a legal one."""
        name = self._known.get(raw)
        if name is None:
            name = raw.decode("latin-1")
            if not is_valid_topic_name(name):
                return None
            if len(self._known) < KNOWN_TOPICS_PER_CONNECTION:
                self._known[raw] = name
        return name


class BodyRule:
    """Whether a body follows a body command's line: always (nsqlookupd's
    IDENTIFY). A class, not a function, so the reader's compiled code calls
    it directly, once per body command."""

    def expects(self, name: bytes, params: list[bytes]) -> bool:
        return True


class V2BodyRule(BodyRule):
    """nsqd's: no body is waited for after a line it refuses."""

    def __init__(self, max_defer_ms: int, repl_allowed: Callable[[], bool] | None, topic_names: TopicNames):
        self._max_defer_ms = max_defer_ms
        self._repl_allowed = repl_allowed
        self._topic_names = topic_names

    def expects(self, name: bytes, params: list[bytes]) -> bool:
        if name == b"AUTH":
            return len(params) == 1
        if len(params) < _BODY_PARAM_COUNTS[name]:
            return False
        if name == b"IDENTIFY":
            return True
        if name == b"REPL":
            return self._repl_allowed is not None and self._repl_allowed()
        if self._topic_names.get(params[1]) is None:
            return False
        if name == b"DPUB" or name == b"KDPUB":
            try:
                return parse_base10(params[2]) <= self._max_defer_ms
            except ValueError:
                return False
        return True


# What nsqd answers when a body command's bytes stop coming (the client hung
# up, or the whole-command deadline passed): before the length, then inside it.
_TRUNCATED: Final = {
    b"PUB": ((E_BAD_MESSAGE, "PUB failed to read message body size"),
             (E_BAD_MESSAGE, "PUB failed to read message body")),
    b"DPUB": ((E_BAD_MESSAGE, "DPUB failed to read message body size"),
              (E_BAD_MESSAGE, "DPUB failed to read message body")),
    b"MPUB": ((E_BAD_BODY, "MPUB failed to read body size"), None),
    b"IDENTIFY": ((E_BAD_BODY, "IDENTIFY failed to read body size"),
                  (E_BAD_BODY, "IDENTIFY failed to read body")),
    b"AUTH": ((E_BAD_BODY, "AUTH failed to read body size"),
              (E_BAD_BODY, "AUTH failed to read body")),
    b"REPL": ((E_BAD_BODY, "REPL failed to read body size"),
              (E_BAD_BODY, "REPL failed to read body")),
    b"KPUB": ((E_BAD_MESSAGE, "KPUB failed to read message body size"),
              (E_BAD_MESSAGE, "KPUB failed to read message body")),
    b"KDPUB": ((E_BAD_MESSAGE, "KDPUB failed to read message body size"),
               (E_BAD_MESSAGE, "KDPUB failed to read message body")),
    b"KMPUB": ((E_BAD_BODY, "KMPUB failed to read body size"),
               (E_BAD_BODY, "KMPUB failed to read body")),
}


def _truncated_mpub(partial: bytes) -> ProtocolError:
    """nsqd reads an MPUB body piece by piece: the error names the piece
    that was cut."""
    if len(partial) < 4:
        return ProtocolError(E_BAD_BODY, "MPUB failed to read message count")
    pos, index = 4, 0
    while True:
        if pos + 4 > len(partial):
            return ProtocolError(E_BAD_MESSAGE, f"MPUB failed to read message({index}) body size")
        size = _INT32.unpack_from(partial, pos)[0]
        if size <= 0:
            return ProtocolError(E_BAD_MESSAGE, f"MPUB invalid message({index}) body size {size}")
        pos += 4 + size
        if pos > len(partial):
            return ProtocolError(E_BAD_MESSAGE, f"MPUB failed to read message({index}) body")
        index += 1


def v2_reader(max_msg_size: int, max_body_size: int, max_defer_ms: int = 3_600_000,
              repl_allowed=None, topic_names: TopicNames | None = None) -> "CommandReader":
    """The reader for nsqd's V2 protocol; with ``repl_allowed``, also for the
    ``REPL`` batches of a replicated nsqd's peers (replication.py). A REPL
    body is read only while ``repl_allowed()`` says the connection proved
    itself a member: anyone else's is refused on its line, before nsqd
    buffers up to a batch's size for it. ``topic_names``: the connection's,
    which its command handlers read too."""
    body_limits: dict[bytes, BodyLimit] = {
        b"PUB": (check_message_size, max_msg_size),
        b"DPUB": (check_message_size, max_msg_size),
        b"MPUB": (check_body_size, max_body_size),
        b"KPUB": (check_message_size, max_msg_size),
        b"KDPUB": (check_message_size, max_msg_size),
        b"KMPUB": (check_body_size, max_body_size),
        b"IDENTIFY": (check_body_size, max_body_size),
        b"AUTH": (check_body_size, max_body_size),
    }
    if repl_allowed is not None:  # a batch holds up to a turn of MPUBs
        body_limits[b"REPL"] = (check_body_size, max(REPL_MAX_BODY, 4 * max_body_size))
    return CommandReader(body_limits, V2BodyRule(max_defer_ms, repl_allowed,
                                                 TopicNames() if topic_names is None else topic_names))


#: a replicated nsqd's batches are cut at 16 MiB between records of at most
#: 8 MiB of bodies (or one MPUB's)
REPL_MAX_BODY: Final = 32 * 1024 * 1024


def _int32(data: bytes, pos: int) -> int:
    """The big-endian signed 32-bit integer at ``pos`` (a body's length):
    four byte reads, which compiled code does without a call."""
    value = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    return value - (1 << 32) if value >= 1 << 31 else value


class CommandReader:
    """Incremental parser for text command lines, some followed by a
    length-prefixed body (nsqd's V2 and nsqlookupd's V1 protocols).

    ``body_limits`` maps each body command to ``(check, limit)``: a length
    outside 1 to ``limit`` is refused, with the error ``check(name, size,
    limit)`` words; ``body_rule`` says whether a body follows a line.
    ``trim`` strips surrounding white space from lines (nsqlookupd does).

    ``feed()`` returns the commands completed by the new bytes. After a
    refused body length or an over-long line the stream is out of step, so the
    reader yields that last event and then ignores everything that follows.
    """

    def __init__(self, body_limits: dict[bytes, BodyLimit], body_rule: BodyRule = BodyRule(), trim: bool = False):
        self._body_limits = body_limits
        self._body_rule = body_rule
        self._trim = trim
        self._buffer = b""
        self._pending: Command | None = None  # a body command waiting for its body
        self._pending_limits: BodyLimit = (check_body_size, 0)  # its check and limit
        self._pending_size = -1
        self._body_parts: list[bytes] = []
        self._body_have = 0
        self._body_need = 0
        self._dead = False

    def feed(self, data: bytes) -> list[Command]:
        if self._dead:
            return []
        if self._body_parts:
            # a large body arriving in pieces is joined once, when complete
            self._body_parts.append(data)
            self._body_have += len(data)
            if self._body_have < self._body_need:
                return []
            data = b"".join(self._body_parts)
            self._body_parts = []
            buffer = data
        else:
            buffer = self._buffer + data if self._buffer else data
        pos = 0
        end = len(buffer)
        commands = []
        body_limits = self._body_limits
        while pos < end:
            pending = self._pending
            if pending is not None:
                if self._pending_size < 0:
                    if end - pos < 4:
                        break
                    size = _int32(buffer, pos)
                    pos += 4
                    check, limit = self._pending_limits
                    if size <= 0 or size > limit:
                        pending.body_error = check(pending.name, size, limit)
                        commands.append(pending)
                        self._pending = None
                        self._dead = True
                        self._buffer = b""
                        return commands
                    self._pending_size = size
                size = self._pending_size
                if end - pos < size:
                    self._body_parts = [buffer[pos:]]
                    self._body_have = end - pos
                    self._body_need = size
                    self._buffer = b""
                    return commands
                pending.body = buffer[pos : pos + size]
                pos += size
                commands.append(pending)
                self._pending = None
                self._pending_size = -1
                continue
            newline = buffer.find(b"\n", pos)
            if newline < 0:
                if end - pos >= MAX_LINE_LENGTH:
                    return self._abort(commands)
                break
            if newline - pos >= MAX_LINE_LENGTH:
                return self._abort(commands)
            if self._trim:
                line = buffer[pos:newline].strip()
            elif newline > pos and buffer[newline - 1] == 13:  # \r\n
                line = buffer[pos:newline - 1]
            else:
                line = buffer[pos:newline]
            pos = newline + 1
            params = line.split(b" ")
            name = params[0]
            command = Command(name, params)
            limits = body_limits.get(name)
            if limits is not None and self._body_rule.expects(name, params):
                self._pending = command
                self._pending_limits = limits
            else:
                commands.append(command)
        self._buffer = buffer[pos:] if pos < end else b""
        return commands

    def truncation_error(self) -> ProtocolError | None:
        """The error nsqd sends when the stream ends here: inside a body
        command's length or body there is one; inside a line there is none."""
        pending = self._pending
        if pending is None or self._dead:
            return None
        missing_length, missing_body = _TRUNCATED[pending.name]
        if self._pending_size < 0:
            return ProtocolError(*missing_length)
        if missing_body is None:
            return _truncated_mpub(b"".join(self._body_parts) if self._body_parts else self._buffer)
        return ProtocolError(*missing_body)

    def _abort(self, commands: list[Command]) -> list[Command]:
        self._dead = True
        self._buffer = b""
        commands.append(ABORT)
        return commands


def parse_base10(value: bytes) -> int:
    """nsqd's unsigned decimal parse: digits only (no sign); empty means 0."""
    if value and not value.isdigit():
        raise ValueError(value)
    return int(value) if value else 0


def check_mpub_body(body: bytes, max_msg_size: int, max_body_size: int, *, exact: bool = True) -> int:
    """Validates ``[int32 count]([int32 size][bytes])*`` whole (MPUB is all or
    nothing) and returns the count. ``exact``: bytes after the last message
    are an error (V2, where they would put the stream out of step); nsqd's
    HTTP ``/mpub?binary=true`` ignores them."""
    length = len(body)
    if length < 4:
        raise ProtocolError(E_BAD_BODY, "MPUB failed to read message count")
    count = int32_at(body, 0)
    max_messages = (max_body_size - 4) // 5  # each a size and one byte at least
    if count <= 0 or count > max_messages:
        raise ProtocolError(E_BAD_BODY, f"MPUB invalid message count {count}")
    pos = 4
    for index in range(count):
        if pos + 4 > length:
            raise ProtocolError(E_BAD_MESSAGE, f"MPUB failed to read message({index}) body size")
        size = int32_at(body, pos)
        if size <= 0:
            raise ProtocolError(E_BAD_MESSAGE, f"MPUB invalid message({index}) body size {size}")
        if size > max_msg_size:
            raise ProtocolError(E_BAD_MESSAGE, f"MPUB message too big {size} > {max_msg_size}")
        pos += 4 + size
        if pos > length:
            raise ProtocolError(E_BAD_MESSAGE, f"MPUB failed to read message({index}) body")
    if exact and pos != length:
        raise ProtocolError(E_BAD_BODY, f"MPUB body has {length - pos} bytes after message({count - 1})")
    return count


def parse_mpub_body(body: bytes, max_msg_size: int, max_body_size: int, *, exact: bool = True) -> list[bytes]:
    """The message bodies of a valid MPUB body (``check_mpub_body``)."""
    bodies: list[bytes] = []
    pos = 4
    for _ in range(check_mpub_body(body, max_msg_size, max_body_size, exact=exact)):
        end = pos + 4 + int32_at(body, pos)
        bodies.append(body[pos + 4 : end])
        pos = end
    return bodies


def int32_at(data: bytes, pos: int) -> int:
    """The big-endian signed int32 at ``pos`` (plain int arithmetic: compiled,
    no object is made for it)."""
    value = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    return value - (1 << 32) if value & 0x80000000 else value


# --- client-side encoders -------------------------------------------------


def _as_bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def encode_command(name: bytes, *params, body: bytes | None = None) -> bytes:
    line = b" ".join([name, *(_as_bytes(p) for p in params)]) + b"\n"
    if body is None:
        return line
    return line + _INT32.pack(len(body)) + body


_TABLED_SIZES: Final = 4096  # sizes below this keep their packed field; larger ones are packed each time
_size_fields: dict[int, bytes] = {}


def _size_field(size: int) -> bytes:
    field = _size_fields.get(size)
    if field is None:
        field = _INT32.pack(size)
        if size < _TABLED_SIZES:
            _size_fields[size] = field
    return field


def _mpub_body_parts(bodies: list[bytes]) -> tuple[list[bytes], int]:
    """``[count]([size][body])*`` as parts to join, and its length. Every
    body is copied once, by the join: the size fields come from a bounded
    table and are interleaved with the bodies by slice assignment (a
    producer's batch is the largest thing the client encodes)."""
    sizes = list(map(len, bodies))
    parts: list[bytes] = [b""] * (2 * len(sizes) + 1)
    parts[0] = _INT32.pack(len(sizes))
    parts[1::2] = map(_size_field, sizes)
    parts[2::2] = bodies
    return parts, _INT32.size * (1 + len(sizes)) + sum(sizes)


def encode_mpub_body(bodies: list[bytes]) -> bytes:
    return b"".join(_mpub_body_parts(bodies)[0])


def identify(settings: dict) -> bytes:
    return encode_command(b"IDENTIFY", body=json.dumps(settings).encode())


def auth(secret: bytes) -> bytes:
    return encode_command(b"AUTH", body=secret)


def sub(topic: str, channel: str) -> bytes:
    return encode_command(b"SUB", topic, channel)


def rdy(count: int) -> bytes:
    return encode_command(b"RDY", count)


def fin(message_id: bytes) -> bytes:
    return b"FIN " + message_id + b"\n"  # a consumer's commonest command: no generic encoding


def fin_many(message_ids: list[bytes]) -> bytes:
    """One FIN per id, back to back, in one join: what a batch consumer writes at once."""
    return b"FIN " + b"\nFIN ".join(message_ids) + b"\n" if message_ids else b""


def req(message_id: bytes, delay_ms: int) -> bytes:
    return encode_command(b"REQ", message_id, delay_ms)


def touch(message_id: bytes) -> bytes:
    return b"TOUCH " + message_id + b"\n"


def pub(topic: str, body: bytes) -> bytes:
    return encode_command(b"PUB", topic, body=body)


def dpub(topic: str, delay_ms: int, body: bytes) -> bytes:
    return encode_command(b"DPUB", topic, delay_ms, body=body)


def mpub(topic: str, bodies: list[bytes]) -> bytes:
    """``MPUB <topic>\n[size][count]([size][body])*``, joined once."""
    parts, size = _mpub_body_parts(bodies)
    parts[0] = b"MPUB %s\n%s%s" % (topic.encode(), _INT32.pack(size), parts[0])
    return b"".join(parts)


NOP: Final = b"NOP\n"
CLS: Final = b"CLS\n"
