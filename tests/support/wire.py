"""A blocking V2 connection for tests: exact bytes out, decoded frames in,
every read bounded by a timeout.

The default timeouts (reads, HTTP calls, ``wait_until``) are generous: CI may
run the suite on two cores busy with other work, and each is a wait for
something that should happen, which ends as soon as it does. A check that
something does *not* happen passes its own, shorter, window."""

import json
import socket
import time
import urllib.error
import urllib.request

from nsqpy.protocol import commands
from nsqpy.protocol.errors import ProtocolError, parse_error_frame
from nsqpy.protocol.frames import (FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, FRAME_TYPE_RESPONSE,
                                   HEARTBEAT, MAGIC_V2, FrameReader)
from nsqpy.protocol.message import DecodedMessage, decode_message


class Closed(Exception):
    pass


class _Connection:
    """A blocking loopback socket that sends its protocol's magic first."""

    def __init__(self, hostport: tuple[str, int], magic: bytes, timeout: float):
        self.sock = socket.create_connection(hostport, timeout=timeout)
        self.timeout = timeout
        if magic:
            self.send(magic)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class WireConn(_Connection):
    def __init__(self, hostport: tuple[str, int], *, magic: bytes = MAGIC_V2, timeout: float = 15.0):
        self.reader = FrameReader()
        self.frames: list[tuple[int, bytes]] = []
        self.heartbeats = 0
        super().__init__(hostport, magic, timeout)

    def read_frame(self, timeout: float | None = None, skip_heartbeats: bool = True) -> tuple[int, bytes]:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            while self.frames:
                frame = self.frames.pop(0)
                if skip_heartbeats and frame == (FRAME_TYPE_RESPONSE, HEARTBEAT):
                    self.heartbeats += 1
                    continue
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no frame")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                raise TimeoutError("no frame") from None
            except ConnectionResetError:
                data = b""
            if not data:
                raise Closed()
            self.frames.extend(self.reader.feed(data))

    def response(self, timeout: float | None = None) -> bytes:
        frame_type, data = self.read_frame(timeout)
        if frame_type == FRAME_TYPE_ERROR:
            raise parse_error_frame(data)
        assert frame_type == FRAME_TYPE_RESPONSE, (frame_type, data)
        return data

    def expect_ok(self) -> None:
        assert self.response() == b"OK"

    def error(self, timeout: float | None = None) -> ProtocolError:
        frame_type, data = self.read_frame(timeout)
        assert frame_type == FRAME_TYPE_ERROR, (frame_type, data)
        return parse_error_frame(data)

    def message(self, timeout: float | None = None) -> DecodedMessage:
        frame_type, data = self.read_frame(timeout)
        assert frame_type == FRAME_TYPE_MESSAGE, (frame_type, data)
        return decode_message(data)

    def messages(self, count: int, timeout: float | None = None) -> list[DecodedMessage]:
        return [self.message(timeout) for _ in range(count)]

    def drain(self, quiet: float = 1.5) -> list[bytes]:
        """Receive and FIN messages until none arrives for ``quiet`` seconds."""
        bodies = []
        try:
            while True:
                message = self.message(timeout=quiet)
                bodies.append(message.body)
                self.send(commands.fin(message.id))
        except TimeoutError:
            return bodies

    def answers_handled(self) -> list[DecodedMessage]:
        """FIN an id nobody holds: its error comes after nsqd has handled
        every answer sent before it. -> the messages that arrived meanwhile."""
        self.send(commands.fin(b"0" * 16))
        arrived = []
        while True:
            frame_type, data = self.read_frame()
            if frame_type == FRAME_TYPE_ERROR:
                assert parse_error_frame(data).code == "E_FIN_FAILED"
                return arrived
            assert frame_type == FRAME_TYPE_MESSAGE, (frame_type, data)
            arrived.append(decode_message(data))

    def expect_nothing(self, wait: float) -> None:
        """No frame (other than heartbeats) arrives within ``wait`` seconds."""
        try:
            frame = self.read_frame(wait)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected frame {frame!r}")

    def expect_closed(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            try:
                self.read_frame(deadline - time.monotonic())
            except Closed:
                return
            except TimeoutError:
                break
        raise AssertionError("connection still open")

    # conveniences for the common handshakes
    def identify(self, **settings) -> dict | bytes:
        self.send(commands.identify(settings))
        data = self.response()
        return json.loads(data) if data.startswith(b"{") else data

    def subscribe(self, topic: str, channel: str, rdy: int | None = None) -> None:
        self.send(commands.sub(topic, channel))
        self.expect_ok()
        if rdy is not None:
            self.send(commands.rdy(rdy))

    def publish(self, topic: str, body: bytes) -> None:
        self.send(commands.pub(topic, body))
        self.expect_ok()


def http(method: str, url: str, body: bytes | None = None, timeout: float = 15.0):
    """-> (status, headers, body) for any status."""
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def http_json(method: str, url: str, body: bytes | None = None):
    status, _, data = http(method, url, body)
    return status, json.loads(data) if data else None


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.02):
    """The first true value of ``predicate()``, polled every ``interval``;
    TimeoutError once ``timeout`` seconds passed without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(interval)


class LookupConn(_Connection):
    """A blocking V1 connection to nsqlookupd, as nsqd holds one."""

    def __init__(self, hostport: tuple[str, int], *, magic: bytes = b"  V1", timeout: float = 15.0):
        from nsqpy.protocol.lookup import ResponseReader

        self.reader = ResponseReader()
        self.answers: list[bytes] = []
        super().__init__(hostport, magic, timeout)

    def request(self, command: bytes) -> bytes:
        self.send(command)
        while not self.answers:
            data = self.sock.recv(65536)
            if not data:
                raise Closed()
            self.answers.extend(self.reader.feed(data))
        return self.answers.pop(0)

    def expect_closed(self) -> None:
        assert self.sock.recv(65536) == b""
