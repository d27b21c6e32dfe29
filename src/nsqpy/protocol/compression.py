"""Stream compression NSQ negotiates through IDENTIFY, sans-IO.

* deflate: one raw DEFLATE stream per direction (no zlib header), a sync
  flush after every write so the peer can decode at once.
* snappy: the snappy *framing* format (stream identifier, then chunks with a
  masked CRC-32C). Each write is a complete framed stream; readers accept
  repeated stream identifiers (pynsq starts a new stream per write too).
"""

import zlib

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"


class CompressionError(Exception):
    """The peer's compressed stream cannot be decoded; the connection is unusable."""


class DeflateCodec:
    def __init__(self, level: int = 6):
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
        self._decompressor = zlib.decompressobj(-15)

    def encode(self, data: bytes) -> bytes:
        return self._compressor.compress(data) + self._compressor.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, data: bytes) -> bytes:
        try:
            return self._decompressor.decompress(data)
        except zlib.error as error:
            raise CompressionError(f"deflate: {error}") from None


class SnappyCodec:
    def __init__(self):
        import cramjam  # loaded by the first connection that asks for snappy, not by every program

        self._snappy = cramjam.snappy
        self._buffer = b""

    def encode(self, data: bytes) -> bytes:
        return bytes(self._snappy.compress(data))

    def decode(self, data: bytes) -> bytes:
        """Decode every complete chunk received so far; keep a partial one."""
        buffer = self._buffer + data if self._buffer else data
        pos, end = 0, len(buffer)
        while end - pos >= 4:
            kind = buffer[pos]
            if 0x02 <= kind <= 0x7F:
                raise CompressionError(f"snappy: unskippable chunk type {kind:#04x}")
            length = int.from_bytes(buffer[pos + 1:pos + 4], "little")
            if end - pos - 4 < length:
                break
            pos += 4 + length
        complete, self._buffer = buffer[:pos], buffer[pos:]
        if not complete:
            return b""
        if not complete.startswith(STREAM_IDENTIFIER):
            complete = STREAM_IDENTIFIER + complete
        try:
            return bytes(self._snappy.decompress(complete))
        except Exception as error:  # cramjam raises its own DecompressionError
            raise CompressionError(f"snappy: {error}") from None


def new_codec(snappy: bool, deflate: bool, deflate_level: int):
    """The codec a negotiated IDENTIFY asks for, or None."""
    if snappy:
        return SnappyCodec()
    if deflate:
        return DeflateCodec(deflate_level)
    return None
