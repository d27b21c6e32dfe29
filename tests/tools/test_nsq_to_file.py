"""nsq_to_file: NSQ's file names, exact bytes, gzip members, rotation, the
work dir, SIGHUP, and nothing FINished before it is fsynced."""

import gzip
import os
import resource
import signal
import socket
import subprocess
import time
import zlib

import pytest

from tests.support.wire import http_json
from tests.tools.helpers import channel_stats, create_channel, drain, eventually, lines, publish, wait_settled

SHORT_HOST = socket.gethostname().split(".")[0]


@pytest.fixture
def out(tmp_path):
    """Where the archive goes (tmp_path also holds the nsqd's data)."""
    path = tmp_path / "archive"
    path.mkdir()
    return path


def archive_args(nsqd, topic, out, *extra):
    return (f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}", f"--output-dir={out}",
            "--sync-interval=100ms", *extra)


def all_finished(nsqd, topic, count, channel="nsq_to_file"):
    eventually(lambda: (lambda s: s and s["message_count"] == count and s["depth"] == 0
                        and s["in_flight_count"] == 0)(channel_stats(nsqd, topic, channel)))


def gzip_members(data: bytes) -> list[bytes]:
    members = []
    while data:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        members.append(member.decompress(data))
        assert member.eof, "truncated gzip member"
        data = member.unused_data
    return members


def gzip_test(path) -> None:
    subprocess.run(["gzip", "-t", str(path)], check=True)


def test_bodies_exactly_in_nsqs_file_name(nsqd, topic, out, start_tool):
    bodies = [b"first", b"caf\xc3\xa9 \t tabs", b"x" * 5000, b"last"]
    started = time.time()
    publish(nsqd, topic, bodies)
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out))
    all_finished(nsqd, topic, len(bodies))
    assert tool.stop() == 0, tool.stderr.decode()
    [name] = os.listdir(out)
    assert name in {f"{topic}.{SHORT_HOST}.{time.strftime('%Y-%m-%d_%H', time.localtime(at))}.log"
                    for at in (started, time.time())}
    assert (out / name).read_bytes() == b"\n".join(bodies) + b"\n"


def test_filename_tokens_and_appending(nsqd, topic, out, start_tool):
    args = archive_args(nsqd, topic, out, "--filename-format=<TOPIC>/<HOST>.<DATETIME>.txt",
                        "--host-identifier=box-<SHORT_HOST>", "--datetime-format=%Y")
    publish(nsqd, topic, [b"one"])
    tool = start_tool("nsq_to_file", *args)
    all_finished(nsqd, topic, 1)
    assert tool.stop() == 0
    publish(nsqd, topic, [b"two"])
    tool = start_tool("nsq_to_file", *args)
    all_finished(nsqd, topic, 2)
    assert tool.stop() == 0
    assert (out / topic / f"box-{SHORT_HOST}.{time.strftime('%Y')}.txt").read_bytes() == b"one\ntwo\n"


def test_gzip_one_member_per_sync(nsqd, topic, out, start_tool):
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--gzip", "--gzip-level=1",
                                                     "--datetime-format=%Y"))
    tool.wait_for_log("connected to")
    sent = []
    for wave in range(3):
        batch = [b"wave %d message %d" % (wave, i) for i in range(50)]
        publish(nsqd, topic, batch)
        sent += batch
        all_finished(nsqd, topic, len(sent))
    assert tool.stop() == 0
    [name] = os.listdir(out)
    assert name == f"{topic}.{SHORT_HOST}-000000.{time.strftime('%Y')}.log.gz"
    gzip_test(out / name)
    data = (out / name).read_bytes()
    members = gzip_members(data)
    assert len(members) >= 3
    assert gzip.decompress(data) == b"".join(members) == b"\n".join(sent) + b"\n"


def test_rotation_by_size_never_splits_a_message(nsqd, topic, out, start_tool):
    bodies = [b"%04d " % i + b"s" * 44 for i in range(100)]  # 50 bytes a line
    publish(nsqd, topic, bodies)
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--rotate-size=1000",
                                                     "--datetime-format=%Y"))
    all_finished(nsqd, topic, len(bodies))
    assert tool.stop() == 0
    names = sorted(os.listdir(out))
    assert names == [f"{topic}.{SHORT_HOST}-{rev:06d}.{time.strftime('%Y')}.log" for rev in range(len(names))]
    contents = [(out / name).read_bytes() for name in names]
    assert b"".join(contents) == b"\n".join(bodies) + b"\n"
    assert all(1000 < len(content) <= 1050 for content in contents[:-1])


def test_rotation_by_interval(nsqd, topic, out, start_tool):
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--rotate-interval=600ms",
                                                     "--datetime-format=%Y"))
    tool.wait_for_log("connected to")
    publish(nsqd, topic, [b"early"])
    all_finished(nsqd, topic, 1)
    time.sleep(1.0)
    publish(nsqd, topic, [b"late"])
    all_finished(nsqd, topic, 2)
    assert tool.stop() == 0
    # an interval may also have ended before "early" came (a busy machine) or between the two, with
    # nothing written: NSQ leaves those files empty
    contents = [(out / name).read_bytes() for name in sorted(os.listdir(out))]
    assert [content for content in contents if content] == [b"early\n", b"late\n"]


def test_work_dir_moves_without_overwriting(nsqd, topic, tmp_path, start_tool):
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    taken = out / f"{topic}.{SHORT_HOST}-000000.{time.strftime('%Y')}.log"
    taken.write_bytes(b"already here\n")
    publish(nsqd, topic, [b"new"])
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, f"--work-dir={work}", "--datetime-format=%Y"))
    all_finished(nsqd, topic, 1)
    assert os.listdir(work) and not (out / taken.name.replace("-000000", "-000001")).exists()  # still in progress
    assert tool.stop() == 0
    assert taken.read_bytes() == b"already here\n"
    assert (out / taken.name.replace("-000000", "-000001")).read_bytes() == b"new\n"
    assert os.listdir(work) == []


def test_sighup_closes_the_file_and_the_next_message_opens_another(nsqd, topic, out, start_tool):
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--gzip", "--datetime-format=%Y"))
    tool.wait_for_log("connected to")
    publish(nsqd, topic, [b"before"])
    all_finished(nsqd, topic, 1)
    tool.signal(signal.SIGHUP)
    eventually(lambda: b"-000000" in tool.stderr and b" closed " in tool.stderr and len(os.listdir(out)) == 1)
    time.sleep(0.3)
    publish(nsqd, topic, [b"after"])
    all_finished(nsqd, topic, 2)
    assert tool.stop() == 0
    names = sorted(os.listdir(out))
    assert [gzip.decompress((out / name).read_bytes()) for name in names] == [b"before\n", b"after\n"]


def test_sigkill_loses_nothing(start_nsqd, topic, out, start_tool):
    """Everything FINished is in a file; everything else is still at nsqd."""
    nsqd = start_nsqd("--msg-timeout=1s")
    bodies = [b"message %06d" % i for i in range(30000)]
    create_channel(nsqd, topic, "nsq_to_file")
    publish(nsqd, topic, bodies, chunk=2000)
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--max-in-flight=1000",
                                                     "--sync-interval=20ms", "--datetime-format=%Y"))
    eventually(lambda: channel_stats(nsqd, topic, "nsq_to_file")["depth"] < len(bodies) - 3000)
    tool.process.kill()
    tool.wait()
    settled = wait_settled(nsqd, topic, "nsq_to_file")
    finished = len(bodies) - settled["depth"]
    assert 0 < finished < len(bodies)
    archived = set()
    for name in os.listdir(out):
        archived.update(lines((out / name).read_bytes()))
    remaining = set(drain(nsqd, topic, "nsq_to_file"))
    assert len(remaining) == settled["depth"]
    assert archived | remaining == set(bodies)  # nothing lost
    assert len(archived) >= finished  # and everything FINished was on disk


def _file_size_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_requeues_and_stops_with_one_line(nsqd, topic, out, start_tool):
    bodies = [b"record %04d " % i + b"f" * 88 for i in range(1000)]  # 100 bytes a line
    publish(nsqd, topic, bodies)
    tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--max-in-flight=50",
                                                     "--datetime-format=%Y"),
                      preexec_fn=_file_size_limit(20_000))
    assert tool.wait(30) == 1
    error_lines = [line for line in tool.stderr.decode().splitlines() if "ERROR" in line]
    assert "Traceback" not in tool.stderr.decode() and len(error_lines) == 1
    assert "File too large" in error_lines[0] and "requeued" in error_lines[0]
    [name] = os.listdir(out)
    archived = lines((out / name).read_bytes())
    assert archived == bodies[:len(archived)] and 0 < len(archived) <= 200  # whole records only
    settled = wait_settled(nsqd, topic, "nsq_to_file")
    assert settled["depth"] + settled["deferred_count"] == len(bodies) - len(archived)


def test_topic_pattern_through_lookupd_finds_new_topics(start_lookupd, start_nsqd, topic, out, start_tool):
    lookupd = start_lookupd()
    nsqd = start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}")
    topic = topic[:50]
    wanted, unwanted, later = f"{topic}_logs", f"x{topic}_other", f"{topic}_later"
    publish(nsqd, wanted, [b"w"])
    publish(nsqd, unwanted, [b"u"])
    eventually(lambda: {wanted, unwanted} <= set(http_json("GET", f"{lookupd.http_url}/topics")[1]["topics"]))
    tool = start_tool("nsq_to_file", f"--topic-pattern=^{topic}_", f"--lookupd-http-address={lookupd.http_address}",
                      f"--output-dir={out}", "--topic-refresh=200ms", "--sync-interval=100ms", "--datetime-format=%Y",
                      "--filename-format=<TOPIC>.log")
    all_finished(nsqd, wanted, 1)
    publish(nsqd, later, [b"l1", b"l2"])
    all_finished(nsqd, later, 2)
    assert tool.stop() == 0
    assert sorted(os.listdir(out)) == sorted([f"{wanted}.log", f"{later}.log"])
    assert (out / f"{later}.log").read_bytes() == b"l1\nl2\n"
    assert channel_stats(nsqd, unwanted, "nsq_to_file") == {}


def test_empty_files_as_nsq_makes_them_unless_skipped(nsqd, topic, out, start_tool):
    for skip, expected in ((False, 1), (True, 0)):
        tool = start_tool("nsq_to_file", *archive_args(nsqd, topic, out, "--datetime-format=%Y",
                                                         f"--skip-empty-files={str(skip).lower()}"))
        tool.wait_for_log("connected to")
        if skip:
            time.sleep(0.5)  # a few sync intervals, no message: no file
        else:
            eventually(lambda: os.listdir(out))  # made at the first sync interval, however late that comes
        assert tool.stop() == 0
        assert len(os.listdir(out)) == expected
        for name in os.listdir(out):
            assert (out / name).read_bytes() == b""
            os.unlink(out / name)
