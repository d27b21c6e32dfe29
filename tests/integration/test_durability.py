"""What survives bad disks and bad files: a full disk, corrupt and missing
segments, a data directory written by NSQ's own nsqd."""

import json
import shutil
import struct

import pytest

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.message import encode_message
from tests.support.wire import WireConn, http, http_json, wait_until



def drain(daemon, topic: str, count: int) -> list[bytes]:
    """``count`` messages FINished, and then no more (waits on the messages
    themselves, not on a quiet second, which a busy machine can fake)."""
    with WireConn(daemon.tcp_hostport) as c:
        c.subscribe(topic, "ch", rdy=100)
        bodies = received(c, count)
    return bodies


def received(c: WireConn, count: int) -> list[bytes]:
    bodies = []
    for _ in range(count):
        message = c.message(timeout=30)
        bodies.append(message.body)
        c.send(cmd.fin(message.id))
    c.expect_nothing(1.0)
    return bodies


def test_full_disk_fails_publishes_reports_unhealthy_and_recovers(start_nsqd, small_filesystem):
    data = small_filesystem / "data"
    data.mkdir()
    daemon = start_nsqd("--mem-queue-size=0", "--max-bytes-per-file=65536", data_path=data)
    url = daemon.http_url
    filler = small_filesystem / "filler"
    free = shutil.disk_usage(small_filesystem).free
    filler.write_bytes(b"\0" * (free - 96 * 1024))

    accepted = []
    for i in range(400):
        body = b"%04d" % i + b"." * 1020
        status, _, answer = http("POST", f"{url}/pub?topic=full", body)
        if status != 200:
            assert (status, json.loads(answer)) == (500, {"message": "INTERNAL_ERROR"})
            break
        accepted.append(body)
    else:
        pytest.fail("the disk never filled")
    assert 10 < len(accepted) < 100
    status, _, answer = http("GET", f"{url}/ping")
    assert status == 500 and answer.startswith(b"NOK - ") and b"No space left" in answer
    with WireConn(daemon.tcp_hostport) as c:  # over TCP: NSQ's error code, connection closed
        c.send(cmd.pub("full", b"x" * 1024))
        error = c.error()
        assert error.code == "E_PUB_FAILED"
    assert daemon.process.poll() is None

    filler.unlink()  # space comes back: the daemon recovers by itself
    assert http("POST", f"{url}/pub?topic=full", b"after")[0] == 200
    assert http("GET", f"{url}/ping")[:3:2] == (200, b"OK")
    received = drain(daemon, "full", len(accepted) + 1)
    assert sorted(received) == sorted(accepted + [b"after"])  # nothing acknowledged was lost


def write_nsq_data_dir(path, topic: str, channel: str, records: list[bytes], *, per_file: int):
    """A data directory as NSQ's nsqd 1.2/1.3 leaves it: nsqd.dat and
    go-diskqueue segments and meta files."""
    (path / "nsqd.dat").write_text(json.dumps({"topics": [{"name": topic, "paused": False, "channels": [
        {"name": channel, "paused": False}]}], "version": "1.3.0"}, separators=(",", ":")))
    name = f"{topic}:{channel}"
    files = [records[i:i + per_file] for i in range(0, len(records), per_file)]
    for number, chunk in enumerate(files):
        data = b"".join(struct.pack(">i", len(r)) + r for r in chunk)
        (path / f"{name}.diskqueue.{number:06d}.dat").write_bytes(data)
    last = len(files) - 1
    last_size = (path / f"{name}.diskqueue.{last:06d}.dat").stat().st_size
    (path / f"{name}.diskqueue.meta.dat").write_text(f"{len(records)}\n0,0\n{last},{last_size}\n")
    return name


def nsq_records(count: int, prefix: bytes = b"m") -> list[bytes]:
    return [encode_message(1_700_000_000_000_000_000 + i, 1, b"%016x" % (0xabc000 + i), prefix + b"%03d" % i)
            for i in range(count)]


def test_a_data_dir_written_by_nsq_is_served(start_nsqd, tmp_path):
    data = tmp_path / "from_nsq"
    data.mkdir()
    records = nsq_records(30)
    write_nsq_data_dir(data, "migrated", "ch", records, per_file=10)
    daemon = start_nsqd(data_path=data)
    with WireConn(daemon.tcp_hostport) as c:
        c.subscribe("migrated", "ch", rdy=50)
        messages = c.messages(30)
    assert sorted(m.body for m in messages) == [b"m%03d" % i for i in range(30)]
    first = min(messages, key=lambda m: m.body)
    assert (first.id, first.timestamp, first.attempts) == (b"%016x" % 0xabc000, 1_700_000_000_000_000_000, 2)


@pytest.mark.parametrize("damage", ["bad size", "truncated record", "missing segment", "garbage meta"])
def test_corrupt_files_are_set_aside_and_the_good_data_served(start_nsqd, tmp_path, damage):
    data = tmp_path / "damaged"
    data.mkdir()
    name = write_nsq_data_dir(data, "hurt", "ch", nsq_records(30), per_file=10)
    segment = data / f"{name}.diskqueue.000001.dat"  # the middle segment: records 10..19
    if damage == "bad size":
        segment.write_bytes(struct.pack(">i", 10**8) + segment.read_bytes()[4:])
    elif damage == "truncated record":
        segment.write_bytes(segment.read_bytes()[:-7])
    elif damage == "missing segment":
        segment.unlink()
    else:
        (data / f"{name}.diskqueue.meta.dat").write_text("not\na meta file")
    daemon = start_nsqd(data_path=data)
    if damage == "garbage meta":
        # unreadable positions: nothing is guessed, the queue starts empty and says so
        daemon.wait_for_log("unreadable metadata")
        _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic=hurt")
        assert stats["topics"][0]["channels"][0]["depth"] == 0
        assert (data / f"{name}.diskqueue.meta.dat.bad").exists()
        assert http("POST", f"{daemon.http_url}/pub?topic=hurt", b"new")[0] == 200
        assert drain(daemon, "hurt", 1) == [b"new"]
        assert len((data / f"{name}.diskqueue.000000.dat").read_bytes()) > 0  # old segments untouched
        return
    expected = [b"m%03d" % i for i in range(30)]
    if damage == "truncated record":
        intact = expected[:19] + expected[20:]  # only the torn last record of that segment is lost
    else:
        intact = expected[:10] + expected[20:]
    with WireConn(daemon.tcp_hostport) as c:
        c.subscribe("hurt", "ch", rdy=50)
        bodies = received(c, len(intact))
    assert sorted(bodies) == intact
    daemon.wait_for_log(r"renamed it \.bad|missing")
    bad = sorted(f.name for f in data.iterdir() if f.name.endswith(".bad"))
    assert bad == ([] if damage == "missing segment" else [f"{name}.diskqueue.000001.dat.bad"])
    stats = wait_until(lambda: http_json("GET", f"{daemon.http_url}/stats?format=json&topic=hurt")[1])
    assert stats["topics"][0]["channels"][0]["depth"] == 0  # depth corrected, not stuck
    assert daemon.process.poll() is None
