"""A retained topic's log through kill -9, a full disk, and NSQ's own nsqd
on the same data directory."""

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from nsqpy.topiclog.log import BACKLOG_FILE
from tests.retention import logreader
from tests.support.gonsqd import GO_NSQD, export_for_go
from tests.support.wire import WireConn, http, http_json, wait_until




class Publisher(threading.Thread):
    """PUBs or MPUBs of 10 over its own connection until stopped or cut
    off; ``acknowledged`` holds every body answered OK."""

    def __init__(self, nsqd, topic: str, name: str, batch: int):
        super().__init__(daemon=True)
        self.conn = WireConn(nsqd.tcp_hostport)
        self.topic, self.name, self.batch = topic, name, batch
        self.acknowledged: list[bytes] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        number = 0
        try:
            while not self.stopping.is_set():
                bodies = [b"%s-%06d" % (self.name.encode(), number + i) for i in range(self.batch)]
                number += self.batch
                self.conn.send(cmd.mpub(self.topic, bodies) if self.batch > 1 else cmd.pub(self.topic, bodies[0]))
                self.conn.expect_ok()
                self.acknowledged += bodies
        except Exception:  # the daemon was killed under it
            pass
        finally:
            self.conn.close()


@pytest.mark.parametrize("mode", [("--mem-queue-size=0", "--sync-every=1"), ("--mem-queue-size=10000",)],
                         ids=["durable", "memory"])
def test_kill_9_while_publishing_loses_no_acknowledged_record_and_reuses_no_offset(start_nsqd, topic, tmp_path, mode):
    data = tmp_path / "data"
    acknowledged: list[bytes] = []
    for round_number in range(3):
        nsqd = start_nsqd("--retention=1h", "--max-bytes-per-file=65536", *mode, data_path=data)
        assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
        assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=c")[0] == 200
        publishers = [Publisher(nsqd, topic, f"r{round_number}p{i}", batch) for i, batch in enumerate((1, 10, 1, 10))]
        for publisher in publishers:
            publisher.start()
        wait_until(lambda: sum(len(p.acknowledged) for p in publishers) >= 600, timeout=60)
        nsqd.kill()
        for publisher in publishers:
            publisher.stopping.set()
            publisher.join(30)
            acknowledged += publisher.acknowledged

    with nsqd_process(str(data), "--retention=1h") as nsqd:
        records = logreader.read_all(nsqd.http_url, topic)
    assert [offset for offset, _, _, _ in records] == list(range(len(records)))  # contiguous, none reused
    bodies = [body for _, _, _, body in records]
    assert len(set(bodies)) == len(bodies)  # each once
    assert not set(acknowledged) - set(bodies)  # every acknowledged one



def test_a_first_channel_nsqd_dat_never_listed_leaves_the_backlog_to_the_topic(start_nsqd, topic, tmp_path):
    """A retained topic's backlog marker goes only once nsqd.dat lists the
    first channel, which took the backlog by its replay cursor. nsqd killed
    in between (made here: nsqd.dat and the marker put back as they were)
    starts with the backlog still the topic's, and without that channel's
    cursor, so the next first channel gets the whole backlog."""
    data = tmp_path / "data"
    flags = ("--retention=1h", "--mem-queue-size=10")  # the replay waits for a consumer: its cursor stays
    nsqd = start_nsqd(*flags, data_path=data)
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    bodies = [b"backlog-%03d" % n for n in range(100)]
    assert http("POST", f"{nsqd.http_url}/mpub?topic={topic}", b"\n".join(bodies))[0] == 200
    log_dir = data / f"{topic}.log"
    marker = (log_dir / BACKLOG_FILE).read_bytes()
    metadata_before = (data / "nsqd.dat").read_text()  # the topic, no channel
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=first")[0] == 200
    assert not (log_dir / BACKLOG_FILE).exists() and (log_dir / "first.replay").exists()
    nsqd.kill()
    (data / "nsqd.dat").write_text(metadata_before)
    (log_dir / BACKLOG_FILE).write_bytes(marker)
    nsqd = start_nsqd(*flags, data_path=data)
    assert not (log_dir / "first.replay").exists()
    stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")[1]
    assert [(t["depth"], t["channels"]) for t in stats["topics"]] == [(100, [])]
    with WireConn(nsqd.tcp_hostport) as conn:
        conn.subscribe(topic, "next", rdy=200)
        assert sorted(message.body for message in conn.messages(100)) == bodies


@pytest.mark.parametrize("finished", [8_000, 12_000], ids=["mid-replay", "caught-up"])
@pytest.mark.parametrize("start", ["from-earliest", "first-channel"])
def test_kill_9_during_a_replay_skips_no_retained_message(start_nsqd, topic, tmp_path, start, finished):
    """nsqd's defaults (memory mode): a channel replaying the log (made
    ``from=earliest``, or the first channel taking the topic's backlog)
    holds up to --mem-queue-size of its records queued and 50 in flight.
    kill -9 loses those from memory; the log still has them, and the
    restarted replay resumes from the oldest record not finished, so every
    message is delivered (some twice: at least once). With 12,000 finished
    the replay has reached the log's end before the kill, and what it
    queued is still owed."""
    data = tmp_path / "data"
    nsqd = start_nsqd("--retention=1h", data_path=data)
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    bodies = [b"replayed-%05d" % n for n in range(20_000)]
    with WireConn(nsqd.tcp_hostport) as c:
        for first in range(0, len(bodies), 1000):
            c.send(cmd.mpub(topic, bodies[first:first + 1000]))
            c.expect_ok()
    if start == "from-earliest":
        assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=c&from=earliest")[0] == 200
    before: set[bytes] = set()
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe(topic, "c", rdy=50)
        while len(before) < finished:
            message = c.message()
            before.add(message.body)
            c.send(cmd.fin(message.id))
        c.answers_handled()
        wait_until(lambda: "c" in (data / "nsqd.dat").read_text())  # a first channel's cursor is kept once listed
        time.sleep(1.5)  # the replay's position is written at most a second behind
        nsqd.kill()
    nsqd = start_nsqd("--retention=1h", data_path=data)
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe(topic, "c", rdy=500)
        after = c.drain(quiet=2)
    missing = set(bodies) - before - set(after)
    assert not missing, f"{len(missing)} of {len(bodies)} never delivered ({len(before)} before, {len(after)} after)"
    assert len(after) <= len(bodies) - finished + 1000  # repeats: what finished within the last second or so


def publish_until_refused(nsqd, topic: str) -> list[bytes]:
    """PUBs of 1 KiB, each waiting for its answer, until one is refused
    (E_PUB_FAILED) -> the bodies answered OK."""
    accepted = []
    with WireConn(nsqd.tcp_hostport) as c:
        for i in range(400):
            body = b"%04d" % i + b"." * 1020
            c.send(cmd.pub(topic, body))
            frame_type, data_or_error = c.read_frame()
            if data_or_error != b"OK":
                assert b"E_PUB_FAILED" in data_or_error
                return accepted
            accepted.append(body)
    pytest.fail("the disk never filled")


def fill(filesystem) -> Path:
    filler = filesystem / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(filesystem).free - 64 * 1024))
    return filler


def test_a_full_disk_refuses_the_retained_topic_only_and_keeps_what_it_took(start_nsqd, small_filesystem):
    data = small_filesystem / "data"
    data.mkdir()
    nsqd = start_nsqd("--retention=1h", "--max-bytes-per-file=65536", data_path=data)
    assert http("POST", f"{nsqd.http_url}/topic/create?topic=plain")[0] == 200
    assert http("POST", f"{nsqd.http_url}/topic/config?topic=plain&retention=0")[0] == 200
    filler = fill(small_filesystem)
    accepted = publish_until_refused(nsqd, "kept")
    with WireConn(nsqd.tcp_hostport) as c:  # another topic, in memory, is not refused
        c.send(cmd.pub("plain", b"still"))
        c.expect_ok()
    assert nsqd.process.poll() is None

    filler.unlink()
    with WireConn(nsqd.tcp_hostport) as c:
        c.send(cmd.pub("kept", b"after"))
        c.expect_ok()
    bodies = [body for _, _, _, body in logreader.read_all(nsqd.http_url, "kept")]
    # a refused publish whose records were queued already (its write was the turn's) may be kept too
    assert bodies[:len(accepted)] == accepted and bodies[-1] == b"after" and len(bodies) <= len(accepted) + 2


def test_a_write_the_full_disk_refuses_at_the_end_of_a_turn_refuses_its_publishes(start_nsqd, small_filesystem):
    """In memory mode a turn's publishes are written once, before their
    answers go out: when that write fails they are refused, not answered
    OK, so nsqd killed while the disk is full loses no acknowledged one."""
    data = small_filesystem / "data"
    data.mkdir()
    nsqd = start_nsqd("--retention=1h", "--max-bytes-per-file=65536", data_path=data)
    filler = fill(small_filesystem)
    accepted = publish_until_refused(nsqd, "kept")
    nsqd.kill()
    filler.unlink()
    nsqd = start_nsqd("--retention=1h", "--max-bytes-per-file=65536", data_path=data)
    assert [body for _, _, _, body in logreader.read_all(nsqd.http_url, "kept")] == accepted


def test_a_log_nsqd_dat_does_not_list_is_made_its_topic_again(start_nsqd, tmp_path):
    """A publish made the topic and nsqd stopped before nsqd.dat listed it
    (kill -9, or a full disk refusing the file): the acknowledged records
    are in the topic's log, and the topic comes back with them, listed."""
    data = tmp_path / "data"
    data.mkdir()
    nsqd = start_nsqd("--retention=1h", data_path=data)
    bodies = [b"a", b"b", b"c"]
    with WireConn(nsqd.tcp_hostport) as c:
        for body in bodies:
            c.send(cmd.pub("unlisted", body))
            c.expect_ok()
        c.send(cmd.pub("listed", b"x"))
        c.expect_ok()
    nsqd.stop()
    saved = json.loads((data / "nsqd.dat").read_bytes())
    saved["topics"] = [topic for topic in saved["topics"] if topic["name"] != "unlisted"]
    (data / "nsqd.dat").write_text(json.dumps(saved))

    nsqd = start_nsqd("--retention=1h", data_path=data)
    assert [body for _, _, _, body in logreader.read_all(nsqd.http_url, "unlisted")] == bodies
    assert [body for _, _, _, body in logreader.read_all(nsqd.http_url, "listed")] == [b"x"]
    wait_until(lambda: "unlisted" in (data / "nsqd.dat").read_text(), timeout=30)


def test_nsqs_own_nsqd_delivers_every_channel_of_a_data_dir_with_retained_topics(tmp_path):
    if not GO_NSQD.exists():
        pytest.skip(f"NSQ's nsqd is not at {GO_NSQD} (../shared/reference)")
    data = tmp_path / "data"
    bodies = [b"m%03d" % i for i in range(100)]
    with nsqd_process(str(data), "--retention=1h") as nsqd:
        assert http("POST", f"{nsqd.http_url}/topic/create?topic=kept")[0] == 200
        for channel in ("a", "b"):
            assert http("POST", f"{nsqd.http_url}/channel/create?topic=kept&channel={channel}")[0] == 200
        with WireConn(nsqd.tcp_hostport) as c:
            c.send(cmd.mpub("kept", bodies))
            c.expect_ok()
    assert (data / "kept.log").is_dir()
    with nsqd_process(str(data), executable=str(GO_NSQD)) as go_nsqd:
        for channel in ("a", "b"):
            with WireConn(go_nsqd.tcp_hostport) as c:
                c.subscribe("kept", channel, rdy=200)
                received = c.drain(quiet=2)
            assert sorted(received) == bodies


@pytest.mark.parametrize("executable", ["nsqpy", "go"])
def test_what_a_log_holds_for_channels_is_exported_for_nsqs_own_nsqd(tmp_path, executable):
    """A channel reads what did not fit in its memory back from the log, a
    channel made ``from=earliest`` replays it, a topic with no channel keeps
    its backlog there: NSQ's nsqd reads no log, so ``--export-for-go``
    writes each into its queue, and every message is delivered once (by
    ours too, on the exported directory)."""
    if executable == "go" and not GO_NSQD.exists():
        pytest.skip(f"NSQ's nsqd is not at {GO_NSQD} (../shared/reference)")
    data = tmp_path / "data"
    lagging = [b"l%04d" % i for i in range(1000)]
    waiting = [b"w%04d" % i for i in range(300)]
    with nsqd_process(str(data), "--retention=1h", "--mem-queue-size=100") as nsqd:
        for topic in ("lagging", "waiting"):
            assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
        assert http("POST", f"{nsqd.http_url}/channel/create?topic=lagging&channel=slow")[0] == 200
        with WireConn(nsqd.tcp_hostport) as c:
            for topic, bodies in (("lagging", lagging), ("waiting", waiting)):
                c.send(cmd.mpub(topic, bodies))
                c.expect_ok()
        assert http("POST", f"{nsqd.http_url}/channel/create?topic=lagging&channel=again&from=earliest")[0] == 200
    exported = export_for_go(data)
    assert exported.returncode == 0, exported.stderr
    assert "lagging:slow: 900 log records" in exported.stderr and "waiting: 300 log records" in exported.stderr
    with nsqd_process(str(data), executable=None if executable == "nsqpy" else str(GO_NSQD)) as nsqd:
        for topic, channel, bodies in (("lagging", "slow", lagging), ("lagging", "again", lagging),
                                       ("waiting", "first", waiting)):
            with WireConn(nsqd.tcp_hostport) as c:
                c.subscribe(topic, channel, rdy=500)
                received = c.drain(quiet=2)
            assert sorted(received) == bodies, (topic, channel, len(received))
