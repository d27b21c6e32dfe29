"""Server-to-client framing: ``[int32 size][int32 frame type][data]``.

``size`` counts the type field and the data but not itself.
"""

import struct

from .errors import ProtocolError, E_BAD_BODY

MAGIC_V2 = b"  V2"

FRAME_TYPE_RESPONSE = 0
FRAME_TYPE_ERROR = 1
FRAME_TYPE_MESSAGE = 2

HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"

_FRAME_HEADER = struct.Struct(">ii")
FRAME_HEADER_SIZE = _FRAME_HEADER.size  # size and frame type, before every frame's data


def encode_frame(frame_type: int, data: bytes) -> bytes:
    return _FRAME_HEADER.pack(len(data) + 4, frame_type) + data


def encode_response(data: bytes) -> bytes:
    return encode_frame(FRAME_TYPE_RESPONSE, data)


def encode_error(error: ProtocolError) -> bytes:
    return encode_frame(FRAME_TYPE_ERROR, error.frame_data)


OK_FRAME = encode_response(OK)
HEARTBEAT_FRAME = encode_response(HEARTBEAT)
CLOSE_WAIT_FRAME = encode_response(CLOSE_WAIT)


class FrameReader:
    """Splits a byte stream from nsqd into ``(frame_type, data)`` pairs.

    ``max_size`` bounds a single frame so a corrupt length cannot make the
    reader buffer without limit.
    """

    def __init__(self, max_size: int = 64 * 1024 * 1024):
        self._buffer = bytearray()
        self._max_size = max_size

    def feed(self, data: bytes, limit: int | None = None) -> list[tuple[int, bytes]]:
        """Complete frames so far; at most ``limit`` (the rest stays buffered:
        after IDENTIFY, what follows the answer may be compressed)."""
        buffer = self._buffer
        buffer += data
        frames = []
        pos = 0
        end = len(buffer)
        while end - pos >= 8 and (limit is None or len(frames) < limit):
            size, frame_type = _FRAME_HEADER.unpack_from(buffer, pos)
            if size < 4 or size > self._max_size:
                raise ProtocolError(E_BAD_BODY, f"invalid frame size {size}")
            if end - pos - 4 < size:
                break
            frames.append((frame_type, bytes(buffer[pos + 8 : pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buffer[:pos]
        return frames

    def take_rest(self) -> bytes:
        """The bytes not yet parsed, handed over (and forgotten)."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest
