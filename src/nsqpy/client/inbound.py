"""nsqd's stream as a client reads it: the messages of a read in one pass.

``protocol.frames.FrameReader`` hands out every frame as a copied payload;
a consumer at hundreds of thousands of messages a second would then copy
each body twice and unpack two headers. Here a message frame costs one
struct unpack (size, type and the message header together) and one slice
(its body), and partial frames wait as a list of chunks until the frame is
whole, so a large message that arrives in many reads is joined once.
"""

import struct
from itertools import repeat
from typing import TypeAlias

from ..protocol.errors import E_BAD_BODY, E_BAD_MESSAGE, ProtocolError
from ..protocol.frames import FRAME_HEADER_SIZE, FRAME_TYPE_MESSAGE
from ..protocol.message import MESSAGE_HEADER_SIZE

_FRAME_HEADER = struct.Struct(">ii")
_MESSAGE_FRAME = struct.Struct(">iiqH16s")  # size, frame type, timestamp, attempts, id
_MESSAGE_START = _MESSAGE_FRAME.size  # where a message frame's body begins
_SMALLEST_MESSAGE = 4 + MESSAGE_HEADER_SIZE  # a message frame's size field, with an empty body
_UNLIMITED = repeat(None)  # loops over it until a break

#: A message as it arrived: ``(timestamp, attempts, id, body)``.
Arrival: TypeAlias = tuple[int, int, bytes, bytes]


class InboundReader:
    """Splits nsqd's bytes into messages ``(timestamp, attempts, id, body)``
    and the other frames ``(frame_type, data)``.

    ``max_size`` bounds a single frame so a corrupt length cannot make the
    reader buffer without limit.
    """

    def __init__(self, max_size: int = 64 * 1024 * 1024):
        self._max_size = max_size
        self._chunks: list[bytes] = []  # bytes received past the last whole frame
        self._buffered = 0
        self._wanted = 0  # bytes the frame in progress needs, once its size is known

    def feed(self, data: bytes, limit: int | None = None) -> tuple[list[Arrival], list[tuple[int, bytes]]]:
        """Messages and other frames complete so far, each list in stream
        order; with ``limit``, at most that many frames in all, the rest
        kept buffered (during the handshake, what follows an answer may
        belong to a layer not switched on yet)."""
        if data:
            self._chunks.append(data)
            self._buffered += len(data)
        if self._buffered < self._wanted or self._buffered < FRAME_HEADER_SIZE:
            return [], []
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        messages, others, pos = [], [], 0
        end = len(data)
        self._wanted = 0  # until a frame is found incomplete
        max_size = self._max_size
        unpack_message = _MESSAGE_FRAME.unpack_from
        for _ in _UNLIMITED if limit is None else range(limit):
            if end - pos < FRAME_HEADER_SIZE:
                break
            if end - pos >= _MESSAGE_START:
                size, frame_type, timestamp, attempts, message_id = unpack_message(data, pos)
            else:
                size, frame_type = _FRAME_HEADER.unpack_from(data, pos)
            if size < 4 or size > max_size:
                raise ProtocolError(E_BAD_BODY, f"invalid frame size {size}")
            frame_end = pos + 4 + size
            if frame_end > end:
                self._wanted = frame_end - pos
                break
            if frame_type == FRAME_TYPE_MESSAGE:
                if size < _SMALLEST_MESSAGE:
                    raise ProtocolError(E_BAD_MESSAGE, f"message frame too short ({size} bytes)")
                messages.append((timestamp, attempts, message_id, data[pos + _MESSAGE_START:frame_end]))
            else:
                others.append((frame_type, data[pos + FRAME_HEADER_SIZE:frame_end]))
            pos = frame_end
        rest = data[pos:] if pos < end else b""
        self._chunks = [rest] if rest else []
        self._buffered = len(rest)
        return messages, others

    def take_rest(self) -> bytes:
        """The bytes not yet parsed, handed over (and forgotten)."""
        rest = b"".join(self._chunks)
        self._chunks, self._buffered, self._wanted = [], 0, 0
        return rest
