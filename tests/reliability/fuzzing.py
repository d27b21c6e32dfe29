"""The fuzzing machinery the suite shares: a seeded mutation fuzzer over
valid sessions, and a runner that plays many short connections at once.

Each case is one connection: the case's bytes, then a half-close, then
everything the daemon answers until it closes. A case that is not closed
within ``CASE_TIMEOUT`` counts as hung (a daemon must close on EOF; the
timeout is generous because a busy machine may be slow to get there, and a
case ends as soon as it is closed)."""

import asyncio
import random
import socket
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CASE_TIMEOUT = 30.0

INTERESTING_INT32 = (0, 1, -1, 2, 4, 5, 100, 16383, 16384, 0x7FFFFFFF, -0x80000000, 1 << 20, 5 << 20)
INTERESTING_TOKENS = (b"\n", b" ", b"\r\n", b"\x00", b"\xff", b"{", b"}", b"[", b'"', b"%", b"#ephemeral",
                      b"-1", b"99999999999999999999", b"\r\n\r\n")


#: JSON nested up to 5,000 levels (complete or cut off): past any parser's recursion limit.
nested_json = st.tuples(st.integers(1, 5000), st.sampled_from([b"[", b'{"a":', b'{"client_id":[']),
                        st.booleans()).map(
    lambda a: a[1] * a[0] + (b"1" + (b"]" if a[1] == b"[" else b"}") * a[0] if a[2] else b""))


class Mutator:
    """Byte-level mutations of valid sessions: flips, inserts, deletions,
    duplications, truncations, int32 fields set to edge values, interesting
    tokens, splices of two sessions, and short runs repeated thousands of
    times. Seeded, so a failure replays."""

    def __init__(self, corpus: list[bytes], seed: int):
        self.corpus = corpus
        self.rng = random.Random(seed)

    def case(self) -> bytes:
        rng = self.rng
        data = bytearray(rng.choice(self.corpus))
        for _ in range(rng.randint(1, 4)):
            if not data:
                data += rng.randbytes(rng.randint(1, 16))
                continue
            i = rng.randrange(len(data))
            op = rng.randrange(10)
            if op == 0:
                data[i] ^= 1 << rng.randrange(8)
            elif op == 1:
                data[i:i] = rng.randbytes(rng.randint(1, 8))
            elif op == 2:
                del data[i:i + rng.randint(1, 16)]
            elif op == 3:
                data[i:i] = data[i:i + rng.randint(1, 64)]
            elif op == 4:
                del data[i:]
            elif op == 5:
                data[i:i + 4] = struct.pack(">i", rng.choice(INTERESTING_INT32))
            elif op == 6:
                data[i:i] = rng.choice(INTERESTING_TOKENS)
            elif op == 7:
                other = rng.choice(self.corpus)
                data[i:] = other[rng.randrange(len(other) + 1):]
            elif op == 8:
                data[i] = rng.randrange(256)
            else:  # a short run repeated: deep nesting, long lines, floods of one command
                run = data[i:i + rng.randint(1, 6)] if rng.random() < 0.5 else rng.choice(INTERESTING_TOKENS)
                data[i:i] = run * rng.randint(100, 3000)
        return bytes(data)

    def cases(self, count: int):
        for _ in range(count):
            yield self.case()


async def _play(host: str, port: int, data: bytes) -> tuple[bytes, bool]:
    """-> (everything answered, whether the daemon closed in time)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(data)
        try:
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            pass
        chunks = []
        try:
            async with asyncio.timeout(CASE_TIMEOUT):
                while chunk := await reader.read(65536):
                    chunks.append(chunk)
        except TimeoutError:
            return b"".join(chunks), False
        except (ConnectionError, OSError):
            pass
        return b"".join(chunks), True
    finally:
        writer.close()


def play_all(hostport: tuple[str, int], cases, prefix: bytes = b"", concurrency: int = 32, check=None) -> dict:
    """Play every case (each after ``prefix``, e.g. the magic) on its own
    connection, ``concurrency`` at a time. ``check(case, answer)`` may
    return a problem (a string) to report. -> counts and the first problems."""
    host, port = hostport
    report = {"cases": 0, "hung": 0, "problems": []}

    async def worker(queue: asyncio.Queue) -> None:
        while True:
            case = await queue.get()
            if case is None:
                return
            answer, closed = await _play(host, port, prefix + case)
            report["cases"] += 1
            if not closed:
                report["hung"] += 1
                if len(report["problems"]) < 10:
                    report["problems"].append(f"hung: {case[:200]!r}")
            elif check is not None and (problem := check(case, answer)) and len(report["problems"]) < 10:
                report["problems"].append(problem)

    async def main() -> None:
        queue: asyncio.Queue = asyncio.Queue(maxsize=concurrency * 4)
        workers = [asyncio.create_task(worker(queue)) for _ in range(concurrency)]
        for case in cases:
            await queue.put(case)
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)

    asyncio.run(main())
    return report


def play_one(hostport: tuple[str, int], data: bytes) -> None:
    """One case, blocking (for hypothesis): send, half-close, read to the end."""
    with socket.create_connection(hostport, timeout=CASE_TIMEOUT) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # reset or closed by the daemon while we wrote: a fatal error, as meant


def play_generated(hostport: tuple[str, int], prefix: bytes, streams, examples: int) -> None:
    """``examples`` command streams drawn by hypothesis from ``streams`` (lists
    of byte strings), each played after ``prefix`` on its own connection.
    Derandomized: a run replays exactly."""
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(streams)
    def one(stream):
        play_one(hostport, prefix + b"".join(stream))
    one()
