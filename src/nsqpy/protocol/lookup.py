"""nsqlookupd's TCP protocol V1, spoken by nsqd to register its topics.

Commands are text lines (IDENTIFY carries a JSON body); every answer is
``[int32 size][data]`` with no frame type: ``OK``, JSON, or ``E_CODE text``
(all errors are fatal).
"""

import json
import struct

from .commands import CommandReader, check_body_size, encode_command
from .errors import E_BAD_BODY, ProtocolError
from .identify import decode_identify_body

MAGIC_V1 = b"  V1"
PING = b"PING\n"

_SIZE = struct.Struct(">i")

#: IDENTIFY fields a peer must send, non-empty and non-zero.
REQUIRED_PEER_FIELDS = ("broadcast_address", "tcp_port", "http_port", "version")
PEER_FIELDS = {"broadcast_address": str, "hostname": str, "tcp_port": int, "http_port": int,
               "version": str, "topology_zone": str, "topology_region": str}


def v1_reader(max_body_size: int) -> CommandReader:
    return CommandReader({b"IDENTIFY": (check_body_size, max_body_size)}, trim=True)


def encode_response(data: bytes) -> bytes:
    return _SIZE.pack(len(data)) + data


def encode_error(error: ProtocolError) -> bytes:
    return encode_response(error.frame_data)


def is_error(data: bytes) -> bool:
    return data.startswith(b"E_")


class ResponseReader:
    """Splits nsqlookupd's answers out of a byte stream."""

    def __init__(self, max_size: int = 64 * 1024 * 1024):
        self._buffer = b""
        self._max_size = max_size

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer + data
        responses = []
        pos = 0
        while len(buffer) - pos >= 4:
            size = _SIZE.unpack_from(buffer, pos)[0]
            if size < 0 or size > self._max_size:
                raise ProtocolError(E_BAD_BODY, f"invalid response size {size}")
            if len(buffer) - pos - 4 < size:
                break
            responses.append(buffer[pos + 4:pos + 4 + size])
            pos += 4 + size
        self._buffer = buffer[pos:]
        return responses


def parse_peer_info(body: bytes) -> dict:
    """An IDENTIFY body -> the peer's fields, or the ``E_BAD_BODY`` lookupd answers."""
    fields = decode_identify_body(body, PEER_FIELDS)
    info = {key: fields.get(key, kind()) for key, kind in PEER_FIELDS.items()}
    if not all(info[key] for key in REQUIRED_PEER_FIELDS):
        raise ProtocolError(E_BAD_BODY, "IDENTIFY missing fields")
    return info


def identify(info: dict) -> bytes:
    return encode_command(b"IDENTIFY", body=json.dumps(info).encode())


def register(topic: str, channel: str | None = None) -> bytes:
    return encode_command(b"REGISTER", topic, *([channel] if channel else []))


def unregister(topic: str, channel: str | None = None) -> bytes:
    return encode_command(b"UNREGISTER", topic, *([channel] if channel else []))
