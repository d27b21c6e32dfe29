"""Keyed publishes: a publish that may be repeated safely (KPUB, KDPUB, KMPUB).

A publisher that cannot know whether nsqd took a message (its answer was
lost, a Spark task ran again, a republisher crashed before it FINished its
source) sends it again with the same key; nsqd queues the first message
with a key and answers ``OK`` to a repeat within the topic's window
without queuing it again. The commands are new names, not parameters on
PUB: NSQ's nsqd ignores a PUB's extra parameters and would queue every
repeat silently, while it refuses an unknown command with
``E_INVALID invalid command KPUB``, so a keyed publish is exact or fails.

    KPUB <topic> <key>\\n[int32 size][body]
    KDPUB <topic> <defer_ms> <key>\\n[int32 size][body]
    KMPUB <topic>\\n[int32 size][int32 count]([uint8 key size][key][int32 size][body])*

A key is 1 to 128 bytes of printable ASCII without spaces (``!`` to ``~``),
so it fits a command line and an HTTP query.
"""

import struct
from typing import Final

from .errors import E_BAD_BODY, E_BAD_KEY, E_BAD_MESSAGE, ProtocolError

MAX_KEY_SIZE: Final = 128

_INT32: Final = struct.Struct(">i")
_KEY_BYTES: Final = frozenset(range(0x21, 0x7F))


def key_problem(key: bytes) -> str | None:
    """Why ``key`` is not a publish key, or None."""
    if not key:
        return "is empty"
    if len(key) > MAX_KEY_SIZE:
        return f"is {len(key)} bytes, more than {MAX_KEY_SIZE}"
    if not _KEY_BYTES.issuperset(key):
        return "has a byte outside printable ASCII (! to ~, no spaces)"
    return None


def check_key(command: str, key: bytes) -> bytes:
    problem = key_problem(key)
    if problem is not None:
        raise ProtocolError(E_BAD_KEY, f"{command} key {problem}")
    return key


def parse_kmpub_body(body: bytes, max_msg_size: int, max_body_size: int) -> tuple[list[bytes], list[bytes]]:
    """``(keys, bodies)`` of a whole KMPUB body, all or nothing (MPUB's rules
    for counts and sizes, plus each key's)."""
    length = len(body)
    if length < 4:
        raise ProtocolError(E_BAD_BODY, "KMPUB failed to read message count")
    count = _INT32.unpack_from(body, 0)[0]
    if count <= 0 or count > (max_body_size - 4) // 7:  # each a key byte, a size and a byte at least
        raise ProtocolError(E_BAD_BODY, f"KMPUB invalid message count {count}")
    keys: list[bytes] = []
    bodies: list[bytes] = []
    pos = 4
    for index in range(count):
        if pos >= length:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB failed to read message({index}) key size")
        key_end = pos + 1 + body[pos]
        if key_end + 4 > length:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB failed to read message({index}) key and body size")
        keys.append(check_key(f"KMPUB message({index})", body[pos + 1 : key_end]))
        size = _INT32.unpack_from(body, key_end)[0]
        if size <= 0:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB invalid message({index}) body size {size}")
        if size > max_msg_size:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB message too big {size} > {max_msg_size}")
        pos = key_end + 4 + size
        if pos > length:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB failed to read message({index}) body")
        bodies.append(body[key_end + 4 : pos])
    if pos != length:
        raise ProtocolError(E_BAD_BODY, f"KMPUB body has {length - pos} bytes after message({count - 1})")
    return keys, bodies


def keyed_lines(body: bytes, max_msg_size: int) -> tuple[list[bytes], list[bytes]]:
    """``(keys, bodies)`` of HTTP ``/kmpub``'s text form: one message per
    line, ``<key> <body>`` (empty lines skipped, as /mpub skips them)."""
    keys: list[bytes] = []
    bodies: list[bytes] = []
    for index, line in enumerate(piece for piece in body.split(b"\n") if piece):
        key, space, message = line.partition(b" ")
        if not space or not message:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB line {index} is not '<key> <body>'")
        if len(message) > max_msg_size:
            raise ProtocolError(E_BAD_MESSAGE, f"KMPUB message too big {len(message)} > {max_msg_size}")
        keys.append(check_key(f"KMPUB line {index}", key))
        bodies.append(message)
    return keys, bodies


# --- client-side encoders -------------------------------------------------------------------


def encode_kmpub_body(keys: list[bytes], bodies: list[bytes]) -> bytes:
    parts = [_INT32.pack(len(bodies))]
    for key, body in zip(keys, bodies, strict=True):
        parts += (bytes((len(key),)), key, _INT32.pack(len(body)), body)
    return b"".join(parts)


def kpub(topic: str, key: bytes, body: bytes) -> bytes:
    return b"KPUB %s %s\n%s%s" % (topic.encode(), key, _INT32.pack(len(body)), body)


def kdpub(topic: str, delay_ms: int, key: bytes, body: bytes) -> bytes:
    return b"KDPUB %s %d %s\n%s%s" % (topic.encode(), delay_ms, key, _INT32.pack(len(body)), body)


def kmpub(topic: str, keys: list[bytes], bodies: list[bytes]) -> bytes:
    body = encode_kmpub_body(keys, bodies)
    return b"KMPUB %s\n%s%s" % (topic.encode(), _INT32.pack(len(body)), body)
