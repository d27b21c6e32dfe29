"""Running the utilities as the operator does (their console entry points,
in subprocesses) against real nsqd on loopback, and looking at what they left."""

import signal
import subprocess
import sys
import threading

from nsqpy.protocol import commands
from nsqpy.protocol.errors import E_FIN_FAILED
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE
from nsqpy.protocol.message import decode_message
from tests.support.wire import WireConn, http_json, wait_until


def tool_command(name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"nsqpy.cli.{name}", *args]


def run_tool(name: str, *args: str, stdin: bytes = b"", timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(tool_command(name, *args), input=stdin, capture_output=True, timeout=timeout)


class ToolProcess:
    """A running tool; stdout and stderr collected by threads (never a full pipe)."""

    def __init__(self, name: str, args, **popen):
        popen.setdefault("stdin", subprocess.DEVNULL)
        self.process = subprocess.Popen(tool_command(name, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        **popen)
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._readers = [threading.Thread(target=self._read, args=(self.process.stdout, self.stdout), daemon=True),
                         threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True)]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(pipe, into: bytearray) -> None:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            into.extend(chunk)

    def wait_for_log(self, text: str, timeout: float = 15.0) -> None:
        try:
            wait_until(lambda: text.encode() in self.stderr or self.process.poll() is not None, timeout)
        except TimeoutError:
            raise AssertionError(f"no {text!r} in {timeout}s:\n{self.stderr.decode(errors='replace')}") from None
        assert text.encode() in self.stderr, f"exited {self.process.returncode}:\n{self.stderr.decode()}"

    def signal(self, number: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(number)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(5)
        return code

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, as an operator's supervisor stops it; the exit code."""
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def publish(nsqd, topic: str, bodies: list[bytes], chunk: int = 500) -> None:
    with WireConn(nsqd.tcp_hostport) as conn:
        for start in range(0, len(bodies), chunk):
            conn.send(commands.mpub(topic, bodies[start:start + chunk]))
            conn.expect_ok()


def channels(nsqd, topic: str) -> list[dict]:
    """The topic's channels in nsqd's /stats."""
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    return [channel for entry in stats["topics"] or [] for channel in entry["channels"]]


def channel_stats(nsqd, topic: str, channel: str) -> dict:
    """The channel's entry in nsqd's /stats ({} while it does not exist)."""
    return next((found for found in channels(nsqd, topic) if found["channel_name"] == channel), {})


def create_channel(nsqd, topic: str, channel: str) -> None:
    http_json("POST", f"{nsqd.http_url}/topic/create?topic={topic}")
    http_json("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel={channel}")


def drain(nsqd, topic: str, channel: str, quiet: float = 1.0) -> list[bytes]:
    """FIN and return everything the channel delivers, once each: as many
    messages as /stats says it holds (once none is in flight), each waited
    for however long a busy machine takes, then any more until none comes
    for ``quiet`` seconds (there should be none). On a machine busy enough,
    a message can time out before its FIN: nsqd refuses the FIN
    (E_FIN_FAILED) and delivers the message again, which is no new one."""
    held = 0
    if channel_stats(nsqd, topic, channel):
        settled = wait_settled(nsqd, topic, channel)
        held = settled["depth"] + settled["deferred_count"]
    received: dict[bytes, bytes] = {}  # id: body, in the order they first came
    with WireConn(nsqd.tcp_hostport) as conn:
        conn.identify(feature_negotiation=True)
        conn.subscribe(topic, channel, rdy=2500)
        try:
            while True:
                frame_type, data = conn.read_frame(timeout=15 if len(received) < held else quiet)
                if frame_type == FRAME_TYPE_ERROR and data.startswith(E_FIN_FAILED.encode()):
                    continue
                assert frame_type == FRAME_TYPE_MESSAGE, (frame_type, data)
                message = decode_message(data)
                received[message.id] = message.body
                conn.send(commands.fin(message.id))
        except TimeoutError:
            assert len(received) >= held, f"{len(received)} of the {held} messages held came"
    return list(received.values())


def wait_settled(nsqd, topic: str, channel: str, timeout: float = 30.0) -> dict:
    """The channel once nothing is in flight (timed-out messages back in its queue)."""
    return wait_until(lambda: (lambda s: s if s and s["in_flight_count"] == 0 else None)(
        channel_stats(nsqd, topic, channel)), timeout)


def eventually(predicate, timeout: float = 90.0):
    """``predicate()`` once true: the tools fsync their files, which a disk
    busy with another test's writeback can hold for tens of seconds."""
    return wait_until(predicate, timeout, interval=0.05)


def lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1] if data else []
