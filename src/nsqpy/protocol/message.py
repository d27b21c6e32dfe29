"""The message layout shared by message frames and disk queue records.

``[int64 timestamp ns][uint16 attempts][16 bytes ASCII hex id][body]``
"""

import struct
from typing import Final, NamedTuple

from .errors import ProtocolError, E_BAD_MESSAGE
from .frames import FRAME_TYPE_MESSAGE

MESSAGE_ID_LENGTH: Final = 16
MESSAGE_HEADER: Final = struct.Struct(">qH16s")
MESSAGE_HEADER_SIZE: Final = MESSAGE_HEADER.size  # 26

# A message frame's size/type prefix and the message header in one pack.
_MESSAGE_FRAME_HEADER: Final = struct.Struct(">iiqH16s")


class DecodedMessage(NamedTuple):
    timestamp: int
    attempts: int
    id: bytes
    body: bytes


def encode_message(timestamp: int, attempts: int, message_id: bytes, body: bytes) -> bytes:
    """The 26+N byte layout (what the disk queue stores)."""
    return MESSAGE_HEADER.pack(timestamp, attempts, message_id) + body


def message_fields(payload: bytes) -> tuple[int, int, bytes, bytes]:
    """``(timestamp, attempts, id, body)``: the hot paths' decoder (a plain tuple)."""
    if len(payload) < MESSAGE_HEADER_SIZE:
        raise ProtocolError(E_BAD_MESSAGE, f"message too short ({len(payload)} bytes)")
    timestamp, attempts, message_id = MESSAGE_HEADER.unpack_from(payload)
    return timestamp, attempts, message_id, payload[MESSAGE_HEADER_SIZE:]


def decode_message(payload: bytes) -> DecodedMessage:
    return DecodedMessage._make(message_fields(bytes(payload)))


def message_frame_header(timestamp: int, attempts: int, message_id: bytes, body_length: int) -> bytes:
    """Everything of a message frame before the body, so the body is never copied
    just to be prefixed."""
    return _MESSAGE_FRAME_HEADER.pack(
        MESSAGE_HEADER_SIZE + 4 + body_length, FRAME_TYPE_MESSAGE, timestamp, attempts, message_id
    )
