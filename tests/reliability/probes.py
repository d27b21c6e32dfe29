"""Hostile clients as plain functions of an nsqd address, measured from the
client side: the suite runs them against our daemon, and the same calls
against NSQ's Go nsqd give the figures we compare with."""

import socket
import struct
import threading
import time

from nsqpy.protocol import commands
from nsqpy.protocol.errors import parse_error_frame
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, MAGIC_V2, FrameReader


def hostport_of(address: str) -> tuple[str, int]:
    """``127.0.0.1:4150`` -> ("127.0.0.1", 4150)."""
    host, _, port = address.rpartition(":")
    return host, int(port)


def _connect(hostport, magic: bytes = MAGIC_V2) -> socket.socket:
    sock = socket.create_connection(hostport, timeout=15)
    if magic:
        sock.sendall(magic)
    return sock


def _identify_heartbeat(sock: socket.socket, interval_ms: int) -> None:
    sock.sendall(commands.identify({"heartbeat_interval": interval_ms}))
    _read_frames_until(sock, lambda frames: frames, 15)


def _read_frames_until(sock: socket.socket, done, timeout: float) -> list:
    reader, frames = FrameReader(), []
    deadline = time.monotonic() + timeout
    while not done(frames):
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = sock.recv(65536)
        if not data:
            break
        frames.extend(reader.feed(data))
    return frames


def dropped_after(sock: socket.socket, started: float, trickle: bytes = b"", every: float = 0.5,
                  limit: float = 90.0) -> tuple[float, list[str]]:
    """Send ``trickle`` one byte per ``every`` seconds until the server
    closes; -> (seconds from ``started`` to the close, error frames seen)."""
    reader, errors = FrameReader(), []
    deadline = started + limit
    position = 0
    next_byte = time.monotonic()
    while time.monotonic() < deadline:
        now = time.monotonic()
        if position < len(trickle) and now >= next_byte:
            try:
                sock.sendall(trickle[position:position + 1])
            except OSError:
                break
            position += 1
            next_byte = now + every
        sock.settimeout(max(min(next_byte, deadline) - time.monotonic(), 0.001)
                        if position < len(trickle) else max(deadline - now, 0.001))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            break
        if not data:
            break
        for frame_type, body in reader.feed(data):
            if frame_type == FRAME_TYPE_ERROR:
                errors.append(parse_error_frame(body).code)
    return time.monotonic() - started, errors


def trickling_line(hostport, heartbeat_ms: int = 1000):
    """A command line sent one byte every half second, after IDENTIFY."""
    with _connect(hostport) as sock:
        _identify_heartbeat(sock, heartbeat_ms)
        started = time.monotonic()
        return dropped_after(sock, started, b"PUB trickle_topic_with_a_long_name_to_keep_sending\n")


def trickling_body(hostport, heartbeat_ms: int = 1000):
    """A PUB whose 100-byte body comes one byte every half second."""
    with _connect(hostport) as sock:
        _identify_heartbeat(sock, heartbeat_ms)
        sock.sendall(b"PUB trickle\n" + struct.pack(">i", 100))
        started = time.monotonic()
        return dropped_after(sock, started, b"x" * 100)


def half_sent_body(hostport, heartbeat_ms: int = 1000):
    """A PUB with half its body, then silence."""
    with _connect(hostport) as sock:
        _identify_heartbeat(sock, heartbeat_ms)
        sock.sendall(b"PUB halfbody\n" + struct.pack(">i", 100) + b"x" * 50)
        return dropped_after(sock, time.monotonic())


def silent_after_identify(hostport, heartbeat_ms: int = 1000):
    """Heartbeats are sent but never answered."""
    with _connect(hostport) as sock:
        _identify_heartbeat(sock, heartbeat_ms)
        return dropped_after(sock, time.monotonic())


def magic_only(hostport):
    """The magic, then nothing: the default heartbeat interval applies."""
    started = time.monotonic()
    with _connect(hostport) as sock:
        return dropped_after(sock, started)


def hang_up_mid_body(hostport, body_prefix: bytes = b"PUB cut\n" + struct.pack(">i", 100) + b"x" * 10):
    """Half a command, then shutdown(SHUT_WR): -> the error codes the server sent."""
    with _connect(hostport) as sock:
        sock.sendall(body_prefix)
        sock.shutdown(socket.SHUT_WR)
        return dropped_after(sock, time.monotonic(), limit=15)[1]


def _retransmissions(sock: socket.socket) -> int:
    """Segments the kernel sent again on ``sock`` (TCP_INFO's tcpi_total_retrans):
    for a connect, SYNs that went unanswered for the initial RTO (one second)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("=I", info, 100)[0]


def simultaneous_connects(hostport, count: int, timeout: float = 10.0) -> tuple[float, int, int]:
    """Open ``count`` non-blocking connections at once; -> (seconds until all
    are established, how many were, how many of them had a SYN sent again:
    dropped by a full backlog, retried after a second, whatever the
    machine's load)."""
    import selectors

    socks = []
    selector = selectors.DefaultSelector()
    started = time.monotonic()
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex(hostport)
            selector.register(sock, selectors.EVENT_WRITE)
            socks.append(sock)
        pending = count
        established = retried = 0
        deadline = started + timeout
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(max(deadline - time.monotonic(), 0)):
                selector.unregister(key.fileobj)
                pending -= 1
                if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    established += 1
                    retried += _retransmissions(key.fileobj) > 0
        return time.monotonic() - started, established, retried
    finally:
        selector.close()
        for sock in socks:
            sock.close()


def pipeline_without_reading(hostport, payload: bytes, repeat: int, stall: float = 2.0,
                             setup: bytes = b"", magic: bytes = MAGIC_V2) -> int:
    """Send ``payload`` ``repeat`` times without ever reading; stop when the
    server has not taken a byte for ``stall`` seconds. -> copies sent."""
    with _connect(hostport, magic) as sock:
        if setup:
            sock.sendall(setup)
        sock.settimeout(stall)
        chunk_copies = max(1, 65536 // len(payload))
        chunk = payload * chunk_copies
        sent = 0
        try:
            while sent < repeat:
                copies = min(chunk_copies, repeat - sent)
                sock.sendall(chunk if copies == chunk_copies else payload * copies)
                sent += copies
        except (socket.timeout, OSError):
            pass
        return sent


def in_thread(function, *args):
    """Run ``function`` in a thread; -> a callable returning its result."""
    result = {}

    def run():
        try:
            result["value"] = function(*args)
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            result["error"] = error
    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join(timeout: float = 120.0):
        thread.join(timeout)
        if "error" in result:
            raise result["error"]
        return result["value"]
    return join


def no_magic(hostport):
    """Connected, nothing sent: nsqd's client timeout (60 s) applies."""
    started = time.monotonic()
    with _connect(hostport, magic=b"") as sock:
        return dropped_after(sock, started)
