"""Durable mode (--mem-queue-size=0 --sync-every=1) on a retained topic: a
channel reads the log through a cursor, so each message is written once,
and every durable-mode promise holds as on a plain topic: nothing
acknowledged lost, nothing finished returned, attempts kept, through
kill -9; a paused topic holds its channels back, across a restart too."""

import glob

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from tests.support.gonsqd import GO_NSQD, export_for_go
from tests.support.wire import WireConn, http_json

SAFE = ("--mem-queue-size=0", "--sync-every=1", "--msg-timeout=10m", "--retention=1h")


def post(nsqd, path: str) -> tuple[int, dict]:
    return http_json("POST", f"{nsqd.http_url}{path}")


def make_channel(nsqd, topic: str, channel: str) -> None:
    assert post(nsqd, f"/topic/create?topic={topic}")[0] == 200
    assert post(nsqd, f"/channel/create?topic={topic}&channel={channel}")[0] == 200


def publish(nsqd, topic: str, bodies: list[bytes]) -> None:
    """The first half as PUBs, the rest as MPUBs of 50."""
    with WireConn(nsqd.tcp_hostport) as c:
        half = len(bodies) // 2
        for body in bodies[:half]:
            c.send(cmd.pub(topic, body))
            c.expect_ok()
        for start in range(half, len(bodies), 50):
            c.send(cmd.mpub(topic, bodies[start:start + 50]))
            c.expect_ok()


def finish_first(nsqd, count: int) -> list:
    """Channel c of topic t: the first ``count`` messages FINished, and
    nsqd seen to have handled every FIN. -> those messages."""
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe("t", "c", rdy=count)
        taken = c.messages(count, timeout=30)
        c.send(cmd.rdy(0))
        for message in taken:
            c.send(cmd.fin(message.id))
        assert c.answers_handled() == []
    return taken


def channel_files(data, topic: str, channel: str) -> list[str]:
    return glob.glob(str(data / f"{topic}:{channel}.diskqueue.*.dat"))


def test_two_channels_read_the_log_once_and_keep_their_answers_through_kill_9(tmp_path):
    data = tmp_path / "data"
    bodies = [b"m%04d" % i for i in range(800)]
    with nsqd_process(str(data), *SAFE) as nsqd:
        addresses = (f"--tcp-address={nsqd.tcp_address}", f"--http-address={nsqd.http_address}")
        for channel in ("c1", "c2"):
            make_channel(nsqd, "t", channel)
        publish(nsqd, "t", bodies)
        # the log holds every message; no channel wrote one again
        assert not channel_files(data, "t", "c1") and not channel_files(data, "t", "c2")
        stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic=t")[1]["topics"][0]
        assert [channel["depth"] for channel in stats["channels"]] == [800, 800]
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c1", rdy=1000)
            received = c.messages(800, timeout=30)
            assert [m.body for m in received] == bodies and {m.attempts for m in received} == {1}
            kept = [m for i, m in enumerate(received) if i % 3 == 0]
            for message in reversed([m for i, m in enumerate(received) if i % 3]):  # out of order
                c.send(cmd.fin(message.id))
            for message in kept[:10]:
                c.send(cmd.req(message.id, 0))
            again = c.messages(10, timeout=30)
            assert sorted(m.body for m in again) == [m.body for m in kept[:10]]
            assert {m.attempts for m in again} == {2}
            assert c.answers_handled() == []
            nsqd.process.kill()
            nsqd.process.wait(10)
    with nsqd_process(str(data), *SAFE, *addresses) as nsqd:
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c1", rdy=1000)
            after = c.messages(len(kept), timeout=30)
            c.expect_nothing(1.5)
        assert sorted(m.body for m in after) == [m.body for m in kept]
        attempts = {m.body: m.attempts for m in after}
        assert {attempts[m.body] for m in kept[:10]} == {3} and {attempts[m.body] for m in kept[10:]} == {2}
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c2", rdy=1000)
            assert c.drain() == bodies
        assert not channel_files(data, "t", "c1") and not channel_files(data, "t", "c2")


def test_a_paused_topic_holds_its_reading_channels_back_across_a_restart(tmp_path):
    data = tmp_path / "data"
    with nsqd_process(str(data), *SAFE) as nsqd:
        addresses = (f"--tcp-address={nsqd.tcp_address}", f"--http-address={nsqd.http_address}")
        make_channel(nsqd, "t", "c")
        publish(nsqd, "t", [b"before"])
        assert post(nsqd, "/topic/pause?topic=t")[0] == 200
        publish(nsqd, "t", [b"paused-1", b"paused-2"])
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=10)
            assert c.drain() == [b"before"]
            nsqd.process.kill()
            nsqd.process.wait(10)
    with nsqd_process(str(data), *SAFE, *addresses) as nsqd:
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=10)
            c.expect_nothing(1.5)
            assert post(nsqd, "/topic/unpause?topic=t")[0] == 200
            assert c.drain() == [b"paused-1", b"paused-2"]


def test_a_reading_channel_rewinds_and_a_deferred_publish_comes_once(tmp_path):
    data = tmp_path / "data"
    with nsqd_process(str(data), *SAFE) as nsqd:
        make_channel(nsqd, "t", "c")
        publish(nsqd, "t", [b"a", b"b"])
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=10)
            assert c.drain() == [b"a", b"b"]
            c.send(cmd.dpub("t", 300, b"later"))
            c.expect_ok()
            assert c.drain(quiet=3) == [b"later"]
            assert post(nsqd, "/channel/rewind?topic=t&channel=c&from=earliest")[0] == 200
            assert sorted(c.drain(quiet=3)) == [b"a", b"b", b"later"]


def test_turning_retention_on_and_off_moves_a_durable_channel_to_the_log_and_back(tmp_path):
    data = tmp_path / "data"
    with nsqd_process(str(data), *SAFE[:3]) as nsqd:
        make_channel(nsqd, "t", "c")
        publish(nsqd, "t", [b"queued-1", b"queued-2"])
        assert post(nsqd, "/topic/config?topic=t&retention=1h")[0] == 200
        publish(nsqd, "t", [b"logged"])
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=10)
            held = c.messages(3, timeout=30)
            assert sorted(m.body for m in held) == [b"logged", b"queued-1", b"queued-2"]
            status, answer = post(nsqd, "/topic/config?topic=t&retention=0")
            assert status == 400 and "still reads from the log" in answer["message"]
            for message in held:
                c.send(cmd.fin(message.id))
            assert c.answers_handled() == []
            assert post(nsqd, "/topic/config?topic=t&retention=0")[0] == 200
            publish(nsqd, "t", [b"plain"])
            assert c.drain() == [b"plain"]
        assert channel_files(data, "t", "c")  # its own disk queue again


def test_a_restart_out_of_durable_mode_and_back_loses_nothing_a_channel_had_to_read(tmp_path):
    data = tmp_path / "data"
    bodies = [b"m%02d" % i for i in range(20)]
    with nsqd_process(str(data), *SAFE) as nsqd:
        make_channel(nsqd, "t", "c")
        publish(nsqd, "t", bodies[:10])
        finish_first(nsqd, 4)
    memory = ("--retention=1h", "--mem-queue-size=3")
    with nsqd_process(str(data), *memory) as nsqd:  # the cursor becomes a replay
        publish(nsqd, "t", bodies[10:])
        first = finish_first(nsqd, 5)
    with nsqd_process(str(data), *SAFE) as nsqd:  # and the replay a cursor again
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=20)
            rest = c.drain()
    assert sorted([m.body for m in first] + rest) == bodies[4:]


def test_nsqs_own_nsqd_gets_what_a_reading_channel_had_yet_to_finish(tmp_path):
    data = tmp_path / "data"
    bodies = [b"m%02d" % i for i in range(30)]
    with nsqd_process(str(data), *SAFE) as nsqd:
        make_channel(nsqd, "t", "c")
        publish(nsqd, "t", bodies)
        finish_first(nsqd, 10)
    exported = export_for_go(data)
    assert exported.returncode == 0, exported.stderr
    executable = str(GO_NSQD) if GO_NSQD.exists() else None  # ours on the exported directory otherwise
    with nsqd_process(str(data), executable=executable) as nsqd:
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=30)
            assert sorted(c.drain()) == bodies[10:]


def test_retention_is_not_turned_off_under_what_a_paused_topic_holds_back(tmp_path):
    with nsqd_process(str(tmp_path / "data"), *SAFE) as nsqd:
        make_channel(nsqd, "t", "c")
        assert post(nsqd, "/topic/pause?topic=t")[0] == 200
        publish(nsqd, "t", [b"held back"])
        topic = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic=t")[1]["topics"][0]
        assert (topic["depth"], topic["channels"][0]["depth"]) == (1, 0)  # the topic's, as NSQ's would count it
        status, answer = post(nsqd, "/topic/config?topic=t&retention=0")
        assert status == 400 and "still reads from the log" in answer["message"]
        assert post(nsqd, "/topic/unpause?topic=t")[0] == 200
        with WireConn(nsqd.tcp_hostport) as c:
            c.subscribe("t", "c", rdy=10)
            assert c.drain() == [b"held back"]
            assert c.answers_handled() == []
        assert post(nsqd, "/topic/config?topic=t&retention=0")[0] == 200
