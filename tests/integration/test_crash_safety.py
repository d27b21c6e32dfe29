"""kill -9 under load with --mem-queue-size=0 --sync-every=1: every PUB and
DPUB answered OK is delivered after restart, including the messages that were in
flight or requeued at the moment of the crash. Duplicates are allowed
(at-least-once); loss is not."""

import random
from collections import Counter
import threading
import time

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from tests.support.wire import Closed, WireConn, http, http_json, wait_until

SAFE = ("--mem-queue-size=0", "--sync-every=1")


def publish_until_closed(daemon, topic: str, prefix: str, acked: list) -> None:
    """PUB (and every fourth a DPUB of 200 ms) until nsqd goes away."""
    try:
        with WireConn(daemon.tcp_hostport, timeout=2) as c:
            for i in range(100_000):
                body = f"{prefix}-{i}".encode()
                c.send(cmd.pub(topic, body) if i % 4 else cmd.dpub(topic, 200, body))
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


def kill_9_under_load(daemon, after: float, acked: list, *workers) -> None:
    """Run each (function, args) in a thread, SIGKILL nsqd ``after`` seconds
    later (no shutdown code runs) once at least 40 more publishes were
    acknowledged (a busy machine may take longer to get there), and wait
    for the threads to notice."""
    threads = [threading.Thread(target=function, args=args) for function, args in workers]
    before = len(acked)
    for thread in threads:
        thread.start()
    time.sleep(after)
    wait_until(lambda: len(acked) >= before + 40, timeout=60)
    daemon.process.kill()
    daemon.process.wait(5)
    for thread in threads:
        thread.join(10)


def receive_all(c, expected: set[bytes], timeout: float = 60.0) -> list[bytes]:
    """Receive and FIN until every body in ``expected`` came (or ``timeout``
    passed: the caller names what is missing), then whatever else comes
    within a second (copies). A restarted nsqd on a busy machine may pause
    longer than any fixed quiet window between two deliveries."""
    received: list[bytes] = []
    missing = set(expected)
    deadline = time.monotonic() + timeout
    while missing and time.monotonic() < deadline:
        try:
            message = c.message(timeout=min(5.0, max(0.1, deadline - time.monotonic())))
        except TimeoutError:
            continue
        received.append(message.body)
        missing.discard(message.body)
        c.send(cmd.fin(message.id))
    return received + c.drain(quiet=1)


@pytest.mark.parametrize("retained", [(), ("--retention=1h",)], ids=["plain", "retained"])
def test_kill_9_loses_no_acknowledged_message(tmp_path, retained):
    """On a retained topic the channel reads the log through a cursor
    (topiclog/cursor.py): the same promise, with one write per message."""
    data = tmp_path / "crashing"
    data.mkdir()
    rng = random.Random(7)
    acked: list[bytes] = []
    finished: list[bytes] = []
    for round_ in range(3):
        with nsqd_process(str(data), *SAFE, *retained) as daemon:
            assert http("POST", f"{daemon.http_url}/topic/create?topic=crash")[0] == 200
            assert http("POST", f"{daemon.http_url}/channel/create?topic=crash&channel=ch")[0] == 200
            kill_9_under_load(daemon, rng.uniform(0.4, 1.5), acked,
                              (publish_until_closed, (daemon, "crash", f"r{round_}", acked)),
                              (consume_until_closed, (daemon, finished)))
    assert len(acked) > 100, "the load did not get going"

    with nsqd_process(str(data), *SAFE, *retained) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("crash", "ch", rdy=200)
            received = receive_all(c, set(acked) - set(finished))
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
            c.send(cmd.dpub("later", 5000, b"in 5 s"))
            c.expect_ok()
        sent = time.monotonic()
        daemon.process.kill()
        daemon.process.wait(5)
    finally:
        daemon.kill()
    with nsqd_process(str(data), *SAFE) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("later", "ch", rdy=1)
            c.expect_nothing(max(0.0, 4.5 - (time.monotonic() - sent)))  # still deferred after the crash
            message = c.message(timeout=30)
            assert message.body == b"in 5 s" and time.monotonic() - sent >= 4.9
            c.send(cmd.fin(message.id))
            c.expect_nothing(0.3)


def requeue_until_closed(daemon, topic: str) -> None:
    try:
        with WireConn(daemon.tcp_hostport, timeout=2) as c:
            c.subscribe(topic, "ch", rdy=50)
            while True:
                c.send(cmd.req(c.message(timeout=2).id, 0))
    except (Closed, OSError, TimeoutError, AssertionError):
        pass


def test_kill_9_while_dead_lettering_loses_nothing_and_dead_letters_nothing_twice(tmp_path):
    """--max-attempts=1 and every delivery requeued: each message is dead-lettered
    on its second dispatch, all the time, while kill -9 lands wherever it lands.
    Every acknowledged PUB ends up on the dead-letter topic exactly once."""
    data = tmp_path / "dead-lettering"
    data.mkdir()
    rng = random.Random(11)
    acked: list[bytes] = []
    flags = (*SAFE, "--max-attempts=1")
    for round_ in range(3):
        with nsqd_process(str(data), *flags) as daemon:
            for path in ("topic/create?topic=poison", "channel/create?topic=poison&channel=ch",
                         "topic/create?topic=poison.dead", "channel/create?topic=poison.dead&channel=dl"):
                assert http("POST", f"{daemon.http_url}/{path}")[0] == 200
            kill_9_under_load(daemon, rng.uniform(0.5, 2.0), acked,
                              (publish_until_closed, (daemon, "poison", f"r{round_}", acked)),
                              (requeue_until_closed, (daemon, "poison")))
    assert len(acked) > 30, "the load did not get going"

    with nsqd_process(str(data), *flags) as daemon:
        requeue_until_closed(daemon, "poison")  # what was never delivered goes the same way
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("poison.dead", "dl", rdy=200)
            dead = receive_all(c, set(acked))
        source = http_json("GET", f"{daemon.http_url}/stats?format=json&topic=poison")[1]["topics"][0]
    left = {name: source["channels"][0][name] for name in ("depth", "in_flight_count", "deferred_count")}
    lost = set(acked) - set(dead)
    assert not lost, (f"{len(lost)} acknowledged messages never dead-lettered, e.g. {sorted(lost)[:5]}; "
                      f"left at the source: topic depth {source['depth']}, channel {left}")
    twice = [body for body, count in Counter(dead).items() if count > 1]
    assert not twice, f"{len(twice)} messages dead-lettered more than once, e.g. {twice[:5]}"
    assert left == {"depth": 0, "in_flight_count": 0, "deferred_count": 0}
    print(f"\n{len(acked)} acknowledged, {len(dead)} dead-lettered once each")
