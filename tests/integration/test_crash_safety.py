"""kill -9 under load with --mem-queue-size=0 --sync-every=1: every PUB and
DPUB answered OK is delivered after restart, including the messages that were in
flight or requeued at the moment of the crash. Duplicates are allowed
(at-least-once); loss is not."""

import random
import threading
import time

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from tests.support.wire import Closed, WireConn, http

SAFE = ("--mem-queue-size=0", "--sync-every=1")


def publish_until_closed(daemon, prefix: str, acked: list) -> None:
    try:
        with WireConn(daemon.tcp_hostport, timeout=2) as c:
            for i in range(100_000):
                body = f"{prefix}-{i}".encode()
                c.send(cmd.pub("crash", body) if i % 4 else cmd.dpub("crash", 200, body))
                c.expect_ok()
                acked.append(body)
    except (Closed, OSError, TimeoutError, AssertionError):
        pass


def consume_until_closed(daemon, finished: list) -> None:
    """FIN a third, requeue a third (at once or after 300 ms), leave a third in flight."""
    try:
        with WireConn(daemon.tcp_hostport, timeout=2) as c:
            c.subscribe("crash", "ch", rdy=50)
            n = 0
            while True:
                message = c.message(timeout=2)
                n += 1
                if n % 3 == 0:
                    c.send(cmd.fin(message.id))
                    finished.append(message.body)
                elif n % 3 == 1:
                    c.send(cmd.req(message.id, random.choice([0, 300])))
    except (Closed, OSError, TimeoutError, AssertionError):
        pass


def test_kill_9_loses_no_acknowledged_message(tmp_path):
    data = tmp_path / "crashing"
    data.mkdir()
    rng = random.Random(7)
    acked: list[bytes] = []
    finished: list[bytes] = []
    for round_ in range(3):
        daemon = nsqd_process(str(data), *SAFE).start()
        try:
            assert http("POST", f"{daemon.http_url}/topic/create?topic=crash")[0] == 200
            assert http("POST", f"{daemon.http_url}/channel/create?topic=crash&channel=ch")[0] == 200
            workers = [threading.Thread(target=publish_until_closed, args=(daemon, f"r{round_}", acked)),
                       threading.Thread(target=consume_until_closed, args=(daemon, finished))]
            for worker in workers:
                worker.start()
            time.sleep(rng.uniform(0.4, 1.5))
            daemon.process.kill()  # SIGKILL: no shutdown code runs
            daemon.process.wait(5)
            for worker in workers:
                worker.join(10)
        finally:
            daemon.kill()
    assert len(acked) > 100, "the load did not get going"

    with nsqd_process(str(data), *SAFE) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("crash", "ch", rdy=200)
            received = c.drain(quiet=2)
    lost = set(acked) - set(finished) - set(received)
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:5]}"
    duplicates = len(finished) + len(received) - len(set(finished) | set(received))
    print(f"\n{len(acked)} acknowledged, {len(finished)} finished before crashes, "
          f"{len(received)} delivered after restart, {duplicates} duplicates")


def test_deferred_publishes_keep_their_delay_across_kill_9(tmp_path):
    data = tmp_path / "deferred"
    data.mkdir()
    daemon = nsqd_process(str(data), *SAFE).start()
    try:
        assert http("POST", f"{daemon.http_url}/topic/create?topic=later")[0] == 200
        assert http("POST", f"{daemon.http_url}/channel/create?topic=later&channel=ch")[0] == 200
        with WireConn(daemon.tcp_hostport) as c:
            c.send(cmd.dpub("later", 2500, b"in 2.5 s"))
            c.expect_ok()
        sent = time.monotonic()
        daemon.process.kill()
        daemon.process.wait(5)
    finally:
        daemon.kill()
    with nsqd_process(str(data), *SAFE) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("later", "ch", rdy=1)
            c.expect_nothing(max(0.0, 2.0 - (time.monotonic() - sent)))  # still deferred after the crash
            message = c.message(timeout=3)
            assert message.body == b"in 2.5 s" and time.monotonic() - sent >= 2.4
            c.send(cmd.fin(message.id))
            c.expect_nothing(0.3)
