"""Exactly once through a pipeline: a retained topic read by the log
reader, transformed, written keyed by the nsq sink to another topic, while
faults are injected mid-batch: a Python worker SIGKILLed, the driver killed
-9 and restarted from its checkpoint, nsqd killed -9 (durable mode) and
restarted on its ports. The output topic holds each input's result once,
counted by content."""

import sys
import time
from pathlib import Path

import pytest

from nsqpy.localcluster import nsqd_process
from tests.support.processes import GroupProcess
from tests.support.wire import WireConn, http, http_json, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

DRIVER = Path(__file__).parent / "pipeline" / "keyed_driver.py"
COUNT = 12_000
DURABLE = ("--mem-queue-size=0", "--sync-every=1")


def post(daemon, path: str) -> None:
    status, _, body = http("POST", f"{daemon.http_url}{path}")
    assert status == 200, body


def published(daemon, topic: str) -> int:
    _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
    return sum(entry["message_count"] for entry in stats["topics"] or [])


def drained(daemon, topic: str) -> list[bytes]:
    with WireConn(daemon.tcp_hostport) as conn:
        conn.subscribe(topic, "check", rdy=2500)
        return conn.drain(quiet=3)


def test_a_keyed_pipeline_through_worker_driver_and_nsqd_kills_is_exactly_once(tmp_path, topic, archiver):
    data = tmp_path / "data"
    data.mkdir()
    source, dest = f"{topic[:50]}_in", f"{topic[:50]}_out"
    checkpoint, marker = tmp_path / "ck", tmp_path / "worker-killed"
    with nsqd_process(str(data), *DURABLE, "--retention=1h") as nsqd:
        ports = (f"--tcp-address={nsqd.tcp_address}", f"--http-address={nsqd.http_address}")
        post(nsqd, f"/topic/create?topic={dest}")
        post(nsqd, f"/channel/create?topic={dest}&channel=check")
        bodies = [b"m%05d" % i for i in range(COUNT)]
        with WireConn(nsqd.tcp_hostport) as conn:
            for start in range(0, COUNT, 500):
                conn.send(b"MPUB %s\n" % source.encode() + _mpub_body(bodies[start:start + 500]))
                conn.expect_ok()
        addresses = (nsqd.tcp_address, nsqd.http_address)

        def driver(*extra: str) -> GroupProcess:
            return archiver([sys.executable, str(DRIVER), *addresses, source, dest, str(checkpoint), *extra])

        # 1. a Python worker dies mid-batch: the query fails, the rows it published stay published
        first = driver("m04000", str(marker))
        assert first.wait(300) != 0
        assert marker.exists()
        after_worker = published(nsqd, dest)
        assert 0 < after_worker < COUNT, after_worker

        # 2. the driver is killed -9 mid-batch, after some more batches
        second = driver()
        wait_until(lambda: published(nsqd, dest) >= after_worker + 2000, timeout=300, interval=0.1)
        second.kill()
        after_driver = published(nsqd, dest)
        assert after_driver < COUNT

    # 3. nsqd killed -9 under the restarted query, and started again on its ports
    nsqd = nsqd_process(str(data), *DURABLE, "--retention=1h", *ports).start()
    try:
        third = driver()
        wait_until(lambda: published(nsqd, dest) >= 500, timeout=300, interval=0.05)
        nsqd.kill()
        time.sleep(1)
        nsqd = nsqd_process(str(data), *DURABLE, "--retention=1h", *ports).start()
        outcome = third.wait(300)
        for _ in range(3):  # a run the kill failed is restarted from its checkpoint, as an operator would
            if outcome == 0 and any(line.strip() == "done" for line in third.lines):
                break
            third = driver()
            outcome = third.wait(300)
        assert outcome == 0, third.output[-3000:]
        results = drained(nsqd, dest)
    finally:
        nsqd.stop()
        nsqd.kill()
    assert len(results) == len(set(results)), f"{len(results) - len(set(results))} results twice"
    assert sorted(results) == [b"M%05d" % i for i in range(COUNT)]


def _mpub_body(bodies: list[bytes]) -> bytes:
    from nsqpy.protocol.commands import encode_mpub_body
    body = encode_mpub_body(bodies)
    return len(body).to_bytes(4, "big") + body
