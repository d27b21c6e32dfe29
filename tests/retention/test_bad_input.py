"""Bad input to retained topics: a documented 400 (or 416 for a read out of
range) or a one-line flag error, and nothing changed, nothing lost."""

import subprocess
import sys

import pytest

from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, http_json

FUTURE = "2999-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def retained(tmp_path_factory):
    """One nsqd with a retained topic "kept" of 100 messages, offsets 40-99
    still retained (the first segments removed by a byte limit), a channel
    "c" holding all 100, and a plain topic "plain"."""
    from nsqpy.localcluster import nsqd_process

    with nsqd_process(str(tmp_path_factory.mktemp("nsqd")), "--max-bytes-per-file=2048") as nsqd:
        url = nsqd.http_url
        for path in ("/topic/create?topic=kept", "/channel/create?topic=kept&channel=c", "/topic/create?topic=plain",
                     "/channel/create?topic=plain&channel=c", "/topic/config?topic=kept&retention=1h"):
            assert http("POST", url + path)[0] == 200
        with WireConn(nsqd.tcp_hostport) as c:
            for i in range(100):
                c.send(cmd.pub("kept", b"m%03d" % i + b"." * 40))
                c.expect_ok()
        earliest = _offsets(nsqd)["earliest_offset"]
        assert earliest == 0
        assert http("POST", f"{url}/topic/config?topic=kept&retention_bytes=4000")[0] == 200
        from tests.support.wire import wait_until
        wait_until(lambda: _offsets(nsqd)["earliest_offset"] > 0)
        yield nsqd


def _offsets(nsqd) -> dict:
    return http_json("GET", f"{nsqd.http_url}/topic/offsets?topic=kept")[1]


def _state(nsqd) -> tuple:
    """What a refused request must leave as it was."""
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json")
    channels = {(t["topic_name"], c["channel_name"]): (c["depth"], c["replay_offset"] if "log_lag" in c else None)
                for t in stats["topics"] for c in t["channels"]}
    return _offsets(nsqd), channels


@pytest.mark.parametrize("method,path,status,code", [
    ("POST", "/channel/rewind?topic=kept&channel=c&from=" + FUTURE, 400, "INVALID_FROM"),
    ("POST", "/channel/rewind?topic=kept&channel=c&from=99999999999999ms", 400, "INVALID_FROM"),  # the future
    ("POST", "/channel/rewind?topic=kept&channel=c&from=101", 400, "OFFSET_OUT_OF_RANGE"),
    ("POST", "/channel/rewind?topic=kept&channel=c&from=soon", 400, "INVALID_FROM"),
    ("POST", "/channel/rewind?topic=kept&channel=c&from=-1", 400, "INVALID_FROM"),
    ("POST", "/channel/rewind?topic=kept&channel=c&from=2026-11-28", 400, "INVALID_FROM"),  # no time, no zone
    ("POST", "/channel/rewind?topic=kept&channel=c&from=" + "9" * 26, 400, "INVALID_FROM"),
    ("POST", "/channel/rewind?topic=kept&channel=c", 400, "MISSING_ARG_FROM"),
    ("POST", "/channel/rewind?topic=plain&channel=c&from=earliest", 400, "TOPIC_NOT_RETAINED"),
    ("POST", "/channel/rewind?topic=kept&channel=nope&from=earliest", 404, "CHANNEL_NOT_FOUND"),
    ("POST", "/channel/rewind?topic=bad%20name&channel=c&from=earliest", 400, "INVALID_ARG_TOPIC"),
    ("POST", "/channel/create?topic=kept&channel=c&from=earliest", 400, "CHANNEL_EXISTS"),
    ("POST", "/channel/create?topic=kept&channel=new%23ephemeral&from=earliest", 400, "EPHEMERAL_CHANNEL"),
    ("POST", "/channel/create?topic=plain&channel=new&from=earliest", 400, "TOPIC_NOT_RETAINED"),
    ("GET", "/topic/read?topic=kept&from=0", 416, "OFFSET_OUT_OF_RANGE"),  # removed by retention
    ("GET", "/topic/read?topic=kept&from=101", 416, "OFFSET_OUT_OF_RANGE"),
    ("GET", "/topic/read?topic=kept&from=60&to=50", 400, "INVALID_RANGE"),
    ("GET", "/topic/read?topic=kept&from=60&max_bytes=1000000000", 400, "INVALID_MAX_BYTES"),
    ("GET", "/topic/read?topic=kept&from=60&max_bytes=0", 400, "INVALID_MAX_BYTES"),
    ("GET", "/topic/read?topic=kept&from=x", 400, "INVALID_FROM"),
    ("GET", "/topic/read?topic=kept", 400, "MISSING_ARG_FROM"),
    ("GET", "/topic/read?topic=plain&from=0", 400, "TOPIC_NOT_RETAINED"),
    ("GET", "/topic/read?topic=a%2Fb&from=0", 400, "INVALID_TOPIC"),
    ("GET", "/topic/offsets?topic=kept&time=yesterday", 400, "INVALID_TIME"),
    ("GET", "/topic/offsets?topic=kept&time=12", 400, "INVALID_TIME"),  # an offset, not a time
    ("GET", "/topic/offsets?topic=missing", 404, "TOPIC_NOT_FOUND"),
    ("POST", "/topic/config?topic=kept&retention=-1s", 400, "INVALID_RETENTION"),
    ("POST", "/topic/config?topic=kept&retention=1h%E2%80%8B", 400, "INVALID_RETENTION"),  # a zero-width space
    ("POST", "/topic/config?topic=kept&retention=" + "9" * 26 + "s", 400, "INVALID_RETENTION"),
    ("POST", "/topic/config?topic=kept&retention=100000h", 400, "INVALID_RETENTION"),
    ("POST", "/topic/config?topic=kept&retention_bytes=-5", 400, "INVALID_RETENTION_BYTES"),
])
def test_refused_with_its_code_and_nothing_changes(retained, method, path, status, code):
    before = _state(retained)
    answer_status, answer = http_json(method, retained.http_url + path)
    assert answer_status == status and answer["message"].split()[0] == code, answer
    assert "\n" not in answer["message"]
    assert _state(retained) == before
    assert retained.process.poll() is None


def test_a_point_before_the_earliest_offset_starts_at_the_earliest(retained):
    earliest = _offsets(retained)["earliest_offset"]
    for point in ("0", "2000-01-01T00:00:00Z", "946684800000ms"):
        status, answer = http_json("POST", f"{retained.http_url}/channel/rewind?topic=kept&channel=c&from={point}")
        assert (status, answer["offset"]) == (200, earliest)


@pytest.mark.parametrize("flag,message", [
    ("--retention=-1s", "--retention -1s must be in [0, 87600h]"),
    ("--retention=1h\u200b", "invalid duration"),
    ("--retention=" + "9" * 26 + "s", "out of range"),
    ("--retention-bytes=-1", "--retention-bytes -1 must be in"),
])
def test_bad_flags_are_one_line(flag, message, tmp_path):
    result = subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", f"--data-path={tmp_path}", flag],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "retention" in line]  # (after nsqd's version line)
    assert message in line, result.stderr


@pytest.mark.parametrize("time", [FUTURE, "99999999999999ms"])
def test_offsets_at_a_time_in_the_future_is_the_logs_end(retained, time):
    status, answer = http_json("GET", f"{retained.http_url}/topic/offsets?topic=kept&time={time}")
    assert status == 200, answer
    assert answer["offset_at_time"] == answer["latest_offset"] == 100
