"""Finding 5: nsqd out of file descriptors (``prlimit --nofile``) neither
spins nor floods its log, publishes to a new topic into memory, and serves
new connections again once descriptors are free."""

import socket
import time

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol.frames import MAGIC_V2
from tests.reliability.conftest import assert_no_traceback
from tests.reliability.memory import cpu_seconds, open_fds
from tests.support.wire import Closed, WireConn, http

pytestmark = pytest.mark.reliability

LIMIT = 128


@pytest.fixture
def limited_nsqd(tmp_path):
    with nsqd_process(str(tmp_path), wrapper=("prlimit", f"--nofile={LIMIT}", "--")) as daemon:
        yield daemon


def _accepted(address, timeout: float = 3.0) -> WireConn | None:
    """A connection nsqd answers, or None when it does not answer in ``timeout``."""
    conn = WireConn(address, timeout=timeout)
    try:
        conn.identify()
        return conn
    except (TimeoutError, OSError, Closed):
        conn.close()
        return None


def test_out_of_descriptors_no_spin_in_memory_publish_and_recovery(limited_nsqd, topic):
    address = limited_nsqd.tcp_hostport
    pid = limited_nsqd.process.pid
    held, waiting = [], []
    try:
        while open_fds(pid) < LIMIT:  # a descriptor left: nsqd answers, however busy the machine
            conn = _accepted(address, timeout=30.0)
            assert conn is not None, f"no answer with {open_fds(pid)} of {LIMIT} descriptors open"
            held.append(conn)
        assert 2 <= len(held) < LIMIT
        for _ in range(50):  # more connects queue up in the backlog, unaccepted
            sock = socket.create_connection(address, timeout=2)
            sock.sendall(MAGIC_V2)
            waiting.append(sock)

        cpu_before = cpu_seconds(pid)
        time.sleep(2.0)
        idle_cpu = cpu_seconds(pid) - cpu_before
        print(f"out of descriptors: {len(held)} clients held, CPU {idle_cpu:.2f}s over 2s")
        assert idle_cpu < 0.5  # no accept spin

        producer, consumer = held[0], held[1]
        producer.publish(topic, b"kept in memory")  # a new topic, no descriptor to spare
        consumer.subscribe(topic, "ch", rdy=1)
        assert consumer.message(timeout=15).body == b"kept in memory"
        errors = [line for line in limited_nsqd.log_lines if "ERROR" in line]
        assert len(errors) < 20, errors  # not one line per failed accept
    finally:
        for conn in held:
            conn.close()
        for sock in waiting:
            sock.close()

    # descriptors free again: new clients are served
    deadline = time.monotonic() + 30
    while (conn := _accepted(address)) is None:
        assert time.monotonic() < deadline, "nsqd did not recover"
    with conn:
        conn.publish(topic, b"after recovery")
    assert http("GET", f"{limited_nsqd.http_url}/ping")[0] == 200
    assert_no_traceback(limited_nsqd)

