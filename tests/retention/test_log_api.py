"""The retained topic's HTTP API: offsets, reads decoded by an independent
reader (ranges at segment boundaries, reads while retention removes
segments, ``max_bytes`` as a bound), retention by time and by bytes,
per-topic settings kept across restarts (the docs' example as printed), and
the figures in /stats and /metrics."""

import os
import re
import time
import urllib.error
from pathlib import Path

from tests.retention import logreader
from tests.retention.test_replay import mpub, publish
from tests.support.wire import http, http_json, wait_until


def offsets(nsqd, topic: str) -> dict:
    status, answer = http_json("GET", f"{nsqd.http_url}/topic/offsets?topic={topic}")
    assert status == 200, answer
    return answer


def segment_bases(data, topic: str) -> list[int]:
    return sorted(int(name[:-4]) for name in os.listdir(data / f"{topic}.log") if name.endswith(".seg"))


def test_reads_give_every_record_once_in_order_across_segment_boundaries(start_nsqd, topic, tmp_path):
    data = tmp_path / "data"
    nsqd = start_nsqd("--retention=1h", "--max-bytes-per-file=16384", data_path=data)
    bodies = [b"body-%04d-" % i + b"x" * (i % 50) for i in range(1000)]
    before = time.time_ns()
    publish(nsqd, topic, bodies)
    extent = offsets(nsqd, topic)
    assert (extent["earliest_offset"], extent["latest_offset"]) == (0, 1000)
    assert before <= extent["earliest_timestamp"] <= extent["latest_timestamp"] <= time.time_ns()

    records = logreader.read_all(nsqd.http_url, topic)
    assert [offset for offset, _, _, _ in records] == list(range(1000))
    assert [body for _, _, _, body in records] == bodies
    assert len({message_id for _, _, message_id, _ in records}) == 1000
    bases = segment_bases(data, topic)
    assert len(bases) > 5 and extent["segments"] == len(bases)
    for base in bases[1:]:  # around each boundary, every narrow range is exact
        for start, end in ((base - 1, base), (base, base + 1), (base - 1, base + 1), (base - 2, base + 3)):
            part, headers = logreader.read(nsqd.http_url, topic, start, end)
            assert [offset for offset, _, _, _ in part] == list(range(start, end))
            assert [body for _, _, _, body in part] == bodies[start:end]
            assert (headers["X-NSQ-First-Offset"], headers["X-NSQ-Next-Offset"]) == (str(start), str(end))
    middle = records[500][1]
    status, answer = http_json("GET", f"{nsqd.http_url}/topic/offsets?topic={topic}&time={middle // 1_000_000}ms")
    assert status == 200 and answer["offset_at_time"] <= 500
    assert records[answer["offset_at_time"]][1] >= middle // 1_000_000 * 1_000_000


def test_retention_by_time_empties_the_log_and_offsets_go_on(start_nsqd, topic):
    nsqd = start_nsqd("--retention=2s", "--max-bytes-per-file=4096")
    publish(nsqd, topic, [b"old-%03d" % i for i in range(300)])
    assert offsets(nsqd, topic)["segments"] > 2
    wait_until(lambda: offsets(nsqd, topic)["earliest_offset"] == 300, timeout=30)
    extent = offsets(nsqd, topic)
    assert (extent["latest_offset"], extent["segments"], extent["bytes"]) == (300, 1, 0)
    publish(nsqd, topic, [b"new"])
    assert [(offset, body) for offset, _, _, body in logreader.read_all(nsqd.http_url, topic, 300)] == [(300, b"new")]


def test_retention_by_bytes_removes_whole_segments_during_reads(start_nsqd, topic, tmp_path):
    data = tmp_path / "data"
    nsqd = start_nsqd("--max-bytes-per-file=8192", data_path=data)
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http_json("POST", f"{nsqd.http_url}/topic/config?topic={topic}&retention=1h")[0] == 200
    bodies = [b"m%05d" % i + b"." * 100 for i in range(3000)]
    publish(nsqd, topic, bodies)
    assert http_json("POST", f"{nsqd.http_url}/topic/config?topic={topic}&retention_bytes=65536")[0] == 200
    refused = 0
    deadline = time.monotonic() + 30
    while offsets(nsqd, topic)["bytes"] > 65536 and time.monotonic() < deadline:
        start = 0
        try:  # every read while segments go is whole and exact, or refused as out of range
            part, _ = logreader.read(nsqd.http_url, topic, start, max_bytes=1 << 20)
            assert [body for _, _, _, body in part] == bodies[part[0][0]:part[0][0] + len(part)]
        except urllib.error.HTTPError as error:
            assert error.code == 416 and b"OFFSET_OUT_OF_RANGE" in error.read()
            refused += 1
    extent = offsets(nsqd, topic)
    assert extent["bytes"] <= 65536
    assert extent["earliest_offset"] == segment_bases(data, topic)[0] > 0  # whole segments only
    records = logreader.read_all(nsqd.http_url, topic, extent["earliest_offset"])
    assert [body for _, _, _, body in records] == bodies[extent["earliest_offset"]:]


def test_a_topics_retention_is_kept_across_restarts_turned_off_and_on_and_offsets_never_reused(start_nsqd, topic, tmp_path):
    data = tmp_path / "data"
    nsqd = start_nsqd(data_path=data)
    url = nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    status, answer = http_json("GET", f"{url}/topic/offsets?topic={topic}")
    assert status == 400 and answer["message"].startswith("TOPIC_NOT_RETAINED")
    status, config = http_json("POST", f"{url}/topic/config?topic={topic}&retention=24h&retention_bytes=1000000")
    assert status == 200 and (config["retention_ms"], config["retention_bytes"]) == (86_400_000, 1_000_000)
    publish(nsqd, topic, [b"a", b"b"])
    nsqd.stop()

    nsqd = start_nsqd(data_path=data)  # no flag: the topic's own setting holds
    url = nsqd.http_url
    assert offsets(nsqd, topic)["latest_offset"] == 2
    assert http_json("GET", f"{url}/topic/config?topic={topic}")[1]["retention_ms"] == 86_400_000
    assert http_json("POST", f"{url}/topic/config?topic={topic}&retention=0&retention_bytes=0")[0] == 200
    assert not (data / f"{topic}.log").exists()
    assert http_json("GET", f"{url}/topic/offsets?topic={topic}")[0] == 400
    # retained again, then deleted and made again: offsets go on, never reused
    assert http_json("POST", f"{url}/topic/config?topic={topic}&retention=1h")[0] == 200
    assert (offsets(nsqd, topic)["earliest_offset"], offsets(nsqd, topic)["latest_offset"]) == (2, 2)
    publish(nsqd, topic, [b"c"])
    assert http("POST", f"{url}/topic/delete?topic={topic}")[0] == 200
    assert http("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    assert http_json("POST", f"{url}/topic/config?topic={topic}&retention=1h")[0] == 200
    publish(nsqd, topic, [b"d"])
    assert (offsets(nsqd, topic)["earliest_offset"], offsets(nsqd, topic)["latest_offset"]) == (3, 4)
    assert [(offset, body) for offset, _, _, body in logreader.read_all(url, topic, 3)] == [(3, b"d")]


def test_a_restart_without_the_flag_keeps_the_log_untouched(start_nsqd, topic, tmp_path):
    data = tmp_path / "data"
    nsqd = start_nsqd("--retention=1h", data_path=data)
    publish(nsqd, topic, [b"a", b"b", b"c"])
    nsqd.stop()
    files = sorted(os.listdir(data / f"{topic}.log"))
    nsqd = start_nsqd(data_path=data)
    nsqd.wait_for_log("kept but not written or served")
    publish(nsqd, topic, [b"d"])
    assert sorted(os.listdir(data / f"{topic}.log")) == files
    nsqd.stop()
    nsqd = start_nsqd("--retention=1h", data_path=data)  # back: nothing was lost, offsets go on
    publish(nsqd, topic, [b"e"])
    assert [body for _, _, _, body in logreader.read_all(nsqd.http_url, topic)] == [b"a", b"b", b"c", b"e"]


def test_stats_and_metrics_show_the_log_and_each_channels_lag(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h")
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=c")[0] == 200
    publish(nsqd, topic, [b"m%d" % i for i in range(100)])
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    (entry,) = stats["topics"]
    assert (entry["log"]["earliest_offset"], entry["log"]["latest_offset"], entry["log"]["segments"]) == (0, 100, 1)
    assert entry["channels"][0]["log_lag"] == 100
    _, _, text_stats = http("GET", f"{nsqd.http_url}/stats?topic={topic}")
    assert "      log: offsets 0-100 bytes: " in text_stats.decode() and "lag: c=100" in text_stats.decode()
    _, _, metrics = http("GET", f"{nsqd.http_url}/metrics")
    text = metrics.decode()
    assert f'nsqd_topic_log_latest_offset{{topic="{topic}"}} 100' in text
    assert f'nsqd_channel_log_lag{{topic="{topic}",channel="c"}} 100' in text
    assert "nsqd_topic_log_bytes" in text


def read_sized(nsqd, topic: str, start: int, max_bytes: int) -> tuple[list, int, int]:
    """-> (records, bytes of the answer, next offset) of one read."""
    part, headers = logreader.read(nsqd.http_url, topic, start, max_bytes=max_bytes)
    return part, int(headers["Content-Length"]), int(headers["X-NSQ-Next-Offset"])


def test_max_bytes_bounds_a_read_inside_one_big_chunk_and_a_read_makes_progress(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h")
    bodies = [b"m%03d-" % i + b"x" * 150 for i in range(250)]
    mpub(nsqd, topic, bodies, per=250)  # one publish: one chunk of 250
    for start in (0, 10):  # at the chunk's start, and inside it
        part, size, next_offset = read_sized(nsqd, topic, start, 1)  # a message bigger than the budget: alone
        assert [(offset, body) for offset, _, _, body in part] == [(start, bodies[start])]
        assert (next_offset, size) == (start + 1, 32 + 8 + 16 + 2 * 4 + 160)  # header, arrays, body padded to 8
        part, size, next_offset = read_sized(nsqd, topic, start, 10_000)
        assert 1 < len(part) < 250 and size <= 10_000 and next_offset == start + len(part)
        assert [body for _, _, _, body in part] == bodies[start:next_offset]
    whole = read_sized(nsqd, topic, 0, 1 << 20)
    assert len(whole[0]) == 250


def test_max_bytes_holds_across_segments_and_reads_in_steps_get_everything(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h", "--max-bytes-per-file=1024")
    bodies = [b"b%02d-" % i + b"y" * (i % 7 * 20) for i in range(60)]
    publish(nsqd, topic, bodies)  # MPUBs of 50 and PUBs: chunks of many sizes over many segments
    for max_bytes in (1, 150, 400, 1000, 5000):
        for start in range(60):
            part, size, next_offset = read_sized(nsqd, topic, start, max_bytes)
            assert size <= max_bytes or len(part) == 1, (max_bytes, start, size, len(part))
            assert [body for _, _, _, body in part] == bodies[start:next_offset] and next_offset > start
        offset, got = 0, []
        while offset < 60:
            part, _, offset = read_sized(nsqd, topic, offset, max_bytes)
            got += [body for _, _, _, body in part]
        assert got == bodies


def test_the_per_topic_example_in_the_docs_works_as_printed(start_nsqd):
    nsqd = start_nsqd()
    text = (Path(__file__).parents[2] / "docs" / "retention.md").read_text()
    block = text.split("Per topic, over HTTP", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = re.findall(r"curl -X ([A-Z]+) '(http://127\.0\.0\.1:4151[^']+)'", block)
    assert len(commands) >= 2
    for method, url in commands:
        status, _, answer = http(method, url.replace("http://127.0.0.1:4151", nsqd.http_url))
        assert status == 200, (url, answer)
