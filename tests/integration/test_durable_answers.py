"""Durable mode (--mem-queue-size=0 --sync-every=1) keeps consumers' answers
across kill -9: a FIN is final however many wait behind a held message, a
message's attempts count every delivery, and a restarted nsqd delivers at once.
Between syncs (any --sync-every), a FIN nsqd has handled survives kill -9 too."""

import time

from nsqpy.diskqueue.journal import ACKED, whole_entries
from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, http_json, wait_until

SAFE = ("--mem-queue-size=0", "--sync-every=1", "--msg-timeout=10m")  # held messages stay held
TIMER_SYNCED = ("--mem-queue-size=0", "--sync-every=1000000", "--sync-timeout=100ms", "--msg-timeout=10m")
BEHIND = 20_000  # past the 16,384 acknowledgements the meta file once listed


def create_channel(daemon, topic: str) -> None:
    assert http("POST", f"{daemon.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{daemon.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200


def mpub(daemon, topic: str, bodies: list[bytes]) -> None:
    for start in range(0, len(bodies), 5000):
        assert http("POST", f"{daemon.http_url}/mpub?topic={topic}", b"\n".join(bodies[start:start + 5000]))[0] == 200


def acknowledged_in(journal) -> int:
    """How many acknowledgements out of order a disk queue's journal holds
    (read only: ``Journal.load`` would cut a torn entry nsqd is writing)."""
    data = journal.read_bytes() if journal.exists() else b""
    return sum(state == ACKED for _, _, state in whole_entries(data))


def ping(daemon) -> bool:
    try:
        return http("GET", f"{daemon.http_url}/ping", timeout=2)[0] == 200
    except OSError:
        return False


def test_fins_behind_a_held_message_stay_finished_and_a_restart_delivers_at_once(tmp_path):
    """The journal has no cap. Synced by nsqd's timer rather than once per
    FIN (20,000 fsyncs take minutes on a busy disk): the test kills nsqd
    once the journal holds every FIN."""
    journal = tmp_path / "held:ch.diskqueue.journal.dat"
    with nsqd_process(str(tmp_path), *TIMER_SYNCED) as daemon:
        create_channel(daemon, "held")
        mpub(daemon, "held", [b"m%05d" % i for i in range(BEHIND + 1)])
        with WireConn(daemon.tcp_hostport, timeout=60) as c:
            c.subscribe("held", "ch", rdy=2500)
            held = c.message()
            finished = 0
            while finished < BEHIND:
                message = c.message()
                c.send(cmd.fin(message.id))
                finished += 1
            assert c.answers_handled() == []
            wait_until(lambda: acknowledged_in(journal) >= BEHIND, timeout=60)  # every FIN behind the held one
            daemon.process.kill()
            daemon.process.wait(10)

    with nsqd_process(str(tmp_path), *SAFE) as daemon:
        wait_until(lambda: ping(daemon), timeout=30)
        answered = time.monotonic()
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("held", "ch", rdy=100)
            first = c.message(timeout=30)
            took = time.monotonic() - answered
            c.send(cmd.fin(first.id))
            assert [first.body, *c.drain(quiet=2)] == [held.body]  # none of the 20,000 finished
    # generous for a busy machine (bench/restart_bench.py measures it): it once took 4 s
    assert took < 2.0, f"first delivery {took:.2f} s after /ping"


def test_attempts_survive_kill_9(tmp_path):
    """Every delivery is requeued (at once or deferred) and nsqd is killed
    while messages are in flight, round after round: a message is delivered at most max_attempts
    times, plus once per crash that caught it in flight."""
    max_attempts = 3
    options = (*SAFE, f"--max-attempts={max_attempts}")
    deliveries: dict[bytes, int] = {}
    crashes_in_flight: dict[bytes, int] = {}
    with nsqd_process(str(tmp_path), *options) as daemon:
        create_channel(daemon, "tries")
        mpub(daemon, "tries", [b"t%04d" % i for i in range(300)])
    for round_ in range(6):
        with nsqd_process(str(tmp_path), *options) as daemon:
            with WireConn(daemon.tcp_hostport, timeout=30) as c:
                c.subscribe("tries", "ch", rdy=20)
                for i in range(60 + 20 * round_):
                    message = c.message()
                    deliveries[message.body] = deliveries.get(message.body, 0) + 1
                    c.send(cmd.req(message.id, 100 * (i % 2)))  # at once, or deferred for 100 ms
                # every REQ handled; what arrives from now on stays in flight until nsqd dies
                held = c.answers_handled()
                try:
                    while len(held) < 20:
                        held.append(c.message(timeout=1))
                except TimeoutError:
                    pass
                for message in held:
                    deliveries[message.body] = deliveries.get(message.body, 0) + 1
                    crashes_in_flight[message.body] = crashes_in_flight.get(message.body, 0) + 1
                daemon.process.kill()
                daemon.process.wait(10)
    over = {body: count for body, count in deliveries.items()
            if count > max_attempts + crashes_in_flight.get(body, 0)}
    assert not over, f"{len(over)} messages delivered past max_attempts: {sorted(over.items())[:5]}"
    assert max(deliveries.values()) >= max_attempts, "the rounds never reached max_attempts"


def test_fins_survive_kill_9_between_syncs(tmp_path):
    """At nsqd's default --sync-every, with a sync timer that never fires:
    FINs followed by a reply (here the error of a FIN nobody holds, as a
    consumer confirms its answers), and FINs nsqd has simply handled, are
    not delivered again after kill -9, though no sync made them durable."""
    data = tmp_path / "data"
    data.mkdir()
    flags = ("--mem-queue-size=0", "--sync-timeout=1h", "--msg-timeout=10m")
    bodies = [b"m%04d" % i for i in range(2000)]
    with nsqd_process(str(data), *flags) as daemon:
        create_channel(daemon, "t")
        mpub(daemon, "t", bodies)
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("t", "ch", rdy=1000)
            confirmed = c.messages(1000, timeout=30)
            c.send(cmd.rdy(0))
            for message in confirmed:
                c.send(cmd.fin(message.id))
            assert c.answers_handled() == []
            c.send(cmd.rdy(1000))
            handled = c.messages(1000, timeout=30)
            for message in handled[:-1]:  # the last one stays in flight
                c.send(cmd.fin(message.id))
            wait_until(lambda: http_json("GET", f"{daemon.http_url}/stats?format=json&topic=t")[1]
                       ["topics"][0]["channels"][0]["in_flight_count"] == 1, timeout=30)
            daemon.process.kill()
            daemon.process.wait(10)
    killed = daemon
    with nsqd_process(str(data), *flags) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("t", "ch", rdy=100)
            again = c.drain(quiet=1.5)
        # should it fail: what both nsqd said of their disk queues (a journal refused, a flush failed)
        said = [line for line in (*killed.log_lines, *daemon.log_lines) if "diskqueue" in line.lower()]
        assert again == [handled[-1].body], said


def test_a_new_topic_and_channel_finished_before_their_first_sync_stay_finished(tmp_path):
    """A topic published to before any channel existed, its channel
    subscribed, every message FINished, then kill -9 before either disk
    queue's first sync (an nsqd killed seconds after its topics appeared):
    the topic does not give its backlog again, the channel delivers nothing."""
    data = tmp_path / "data"
    data.mkdir()
    flags = ("--mem-queue-size=0", "--sync-timeout=1h", "--msg-timeout=10m")
    bodies = [b"m%03d" % i for i in range(100)]
    with nsqd_process(str(data), *flags) as daemon:
        with WireConn(daemon.tcp_hostport) as p:
            for body in bodies:
                p.send(cmd.pub("fresh", body))
                p.expect_ok()
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("fresh", "ch", rdy=1000)
            received = c.messages(len(bodies), timeout=30)
            for message in received:
                c.send(cmd.fin(message.id))
            assert c.answers_handled() == []
            daemon.process.kill()
            daemon.process.wait(10)
    assert sorted(message.body for message in received) == bodies
    with nsqd_process(str(data), *flags) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("fresh", "ch", rdy=1000)
            assert c.drain(quiet=1.5) == []
