"""Garbage in: random and truncated frames, wrong-state commands and oversized
bodies from many connections must not crash nsqd, disturb a well-behaved
client, or lose anything it published."""

import random
import socket
import struct

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.frames import MAGIC_V2
from tests.support.wire import WireConn, http

VALID = [
    cmd.pub("g", b"x"), cmd.mpub("g", [b"a", b"b"]), cmd.dpub("g", 10, b"d"), cmd.sub("g", "c"),
    cmd.rdy(5), cmd.fin(b"0123456789abcdef"), cmd.req(b"0123456789abcdef", 5), cmd.touch(b"0" * 16),
    cmd.NOP, cmd.CLS, cmd.identify({"feature_negotiation": True}), cmd.auth(b"s"),
]


def garbage(rng: random.Random) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 400))
    if kind == 1:  # a valid command cut short
        command = rng.choice(VALID)
        return command[: rng.randrange(1, len(command) + 1)]
    if kind == 2:  # valid commands in a random order (wrong states)
        return b"".join(rng.choice(VALID) for _ in range(rng.randrange(1, 8)))
    if kind == 3:  # a body length that is a lie
        return b"PUB g\n" + struct.pack(">i", rng.choice([-1, 0, 2**31 - 1, 1048577, 50])) + b"short"
    if kind == 4:
        return b"MPUB g\n" + struct.pack(">ii", 12, rng.choice([-5, 0, 10**6, 3])) + rng.randbytes(4)
    if kind == 5:  # a valid command with mangled bytes
        command = bytearray(rng.choice(VALID))
        for _ in range(rng.randrange(1, 4)):
            command[rng.randrange(len(command))] = rng.randrange(256)
        return bytes(command)
    return b"IDENTIFY\n" + struct.pack(">i", 20) + b'{"heartbeat_interval"'


def test_garbage_does_not_hurt_a_well_behaved_client(nsqd, topic):
    rng = random.Random(1234)
    good = WireConn(nsqd.tcp_hostport)
    good.subscribe(topic, "ch", rdy=100)
    publisher = WireConn(nsqd.tcp_hostport)
    published = []
    for round_ in range(300):
        with socket.create_connection(nsqd.tcp_hostport, timeout=15) as sock:
            sock.sendall((MAGIC_V2 if rng.random() < 0.9 else rng.randbytes(4)) + garbage(rng))
            if rng.random() < 0.5:
                sock.settimeout(0.05)
                try:
                    sock.recv(4096)
                except OSError:
                    pass
        if round_ % 10 == 0:
            body = f"good-{round_}".encode()
            publisher.publish(topic, body)
            published.append(body)
    received = []
    while len(received) < len(published):
        message = good.message(timeout=30)
        received.append(message.body)
        good.send(cmd.fin(message.id))
    assert sorted(received) == sorted(published)
    good.close()
    publisher.close()
    status, _, body = http("GET", f"{nsqd.http_url}/ping")
    assert (status, body) == (200, b"OK")
    assert "Traceback" not in nsqd.output
    assert nsqd.process.poll() is None
