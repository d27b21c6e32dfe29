"""Publishers of three kinds at once, each recording exactly which bodies
a node answered OK, and when: raw V2 (PUB and MPUB on the protocol's
codecs), HTTP (``/pub`` and ``/mpub``) and gnsq (a third-party client, in
a process of its own). A publish that gets an error, or no answer within
``ANSWER_TIMEOUT``, is not acknowledged: its bodies are never sent again,
the next publish has new ones.

Each node gets a stream of its own (a task per node, a greenlet in the
gnsq process), so a node that does not answer slows only its own."""

import asyncio
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from nsqpy.protocol import commands
from tests.support.processes import GroupProcess

from .bodies import Bodies
from .directory import Directory
from .wire import ANSWER_TIMEOUT, V2

REPOSITORY = Path(__file__).parents[3]


@dataclass(frozen=True)
class Ack:
    body: str
    node: str  # the name of the node that answered OK
    at: float  # when, on the wall clock (the gnsq process shares it)


class NodeStreams:
    """Publishes to every node nsqlookupd lists, every ``interval`` seconds each."""

    kind = ""

    def __init__(self, directory: Directory, topics: list[str], acks: list[Ack], interval: float, batch: int):
        self.directory = directory
        self.topics = topics
        self.acks = acks
        self.interval = interval
        self.bodies = Bodies(self.kind, len(topics), batch)
        self.nodes: dict[str, str] = {}

    async def run(self, stopping: asyncio.Event) -> None:
        streams: dict[str, asyncio.Task] = {}
        try:
            while not stopping.is_set():
                try:
                    self.nodes = await self.directory.nodes()
                except (aiohttp.ClientError, TimeoutError):
                    pass  # the last list stands until nsqlookupd answers again
                for node in self.nodes:
                    if node not in streams or streams[node].done():
                        streams[node] = asyncio.create_task(self.stream(node, stopping))
                try:
                    await asyncio.wait_for(stopping.wait(), 0.5)
                except TimeoutError:
                    pass
            await asyncio.gather(*streams.values())
        finally:
            await self.close()

    async def stream(self, node: str, stopping: asyncio.Event) -> None:
        turn = 0
        while not stopping.is_set() and node in self.nodes:
            topic, bodies = self.bodies.next(turn)
            turn += 1
            try:
                await asyncio.wait_for(self.publish(node, self.topics[topic], bodies), ANSWER_TIMEOUT)
            except Exception:  # noqa: BLE001 - anything but OK: not acknowledged
                self.forget(node)
            else:
                at = time.time()
                self.acks.extend(Ack(body.decode(), node, at) for body in bodies)
            await asyncio.sleep(self.interval)
        self.forget(node)

    async def publish(self, node: str, topic: str, bodies: list[bytes]) -> None:
        """Returns once ``node`` answered OK; raises otherwise."""
        raise NotImplementedError

    def forget(self, node: str) -> None:
        """Drop what is kept open to ``node``: the next publish starts afresh."""

    async def close(self) -> None:
        pass


class RawPublisher(NodeStreams):
    kind = "raw"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.connections: dict[str, V2] = {}

    async def publish(self, node: str, topic: str, bodies: list[bytes]) -> None:
        if node not in self.connections:
            self.connections[node] = await V2.open(node)
        connection = self.connections[node]
        connection.send(commands.pub(topic, bodies[0]) if len(bodies) == 1 else commands.mpub(topic, bodies))
        answer = await connection.answer()
        if answer != b"OK":
            raise ConnectionError(f"{node} answered {answer!r}")

    def forget(self, node: str) -> None:
        connection = self.connections.pop(node, None)
        if connection is not None:
            connection.close()

    async def close(self) -> None:
        for node in list(self.connections):
            self.forget(node)


class HttpPublisher(NodeStreams):
    kind = "http"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.session: aiohttp.ClientSession | None = None

    async def publish(self, node: str, topic: str, bodies: list[bytes]) -> None:
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ANSWER_TIMEOUT))
        path = "pub" if len(bodies) == 1 else "mpub"
        async with self.session.post(f"http://{self.nodes[node]}/{path}?topic={topic}",
                                     data=b"\n".join(bodies)) as response:
            answer = await response.read()
            if response.status != 200:
                raise ConnectionError(f"{node} answered {response.status} {answer!r}")

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


class GnsqPublisher:
    """gnsq publishing from a process of its own (``gnsq_publisher.py``);
    its acknowledgements are read from its output once it has stopped."""

    kind = "gnsq"

    def __init__(self, lookupd_http_address: str, topics: list[str], interval: float, batch: int):
        self.process = GroupProcess(
            [sys.executable, "-m", "tests.replication.faults.gnsq_publisher", self.kind, str(interval), str(batch),
             f"http://{lookupd_http_address}", *topics],
            env={"PYTHONPATH": str(REPOSITORY)})
        try:
            self.process.wait_for("publishing", timeout=30)
        except AssertionError:
            self.kill()
            raise

    def stop(self) -> list[Ack]:
        self.process.signal(signal.SIGTERM)  # each stream ends after its last answer
        if self.process.wait(ANSWER_TIMEOUT + 15) != 0:
            raise AssertionError(f"the gnsq publisher failed:\n{self.process.output[-3000:]}")
        return [Ack(body, node, float(at)) for line in self.process.lines if line.startswith("ack ")
                for _, at, node, *bodies in [line.split()] for body in bodies]

    def kill(self) -> None:
        self.process.kill()
