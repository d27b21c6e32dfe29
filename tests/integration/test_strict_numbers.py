"""Integers and durations a person types reach nsqd as Go's nsqd reads them:
ASCII decimal digits (none of the ``1_000``, ``+5``, `` 5 `` or other
scripts' digits that Python's ``int()`` takes), and flags and config files
held to the ranges the HTTP API takes, refused at startup in one line."""

import pytest

from tests.integration.nsqd_policies import create
from tests.integration.test_nsqd_cli import run_nsqd
from tests.support.wire import http, http_json

# 1_000, +5, " 5 ", "٣" (Arabic-Indic three), "5\n": each an integer to int()
NOT_DECIMAL = ["1_000", "%2B5", "%205%20", "%D9%A3", "5%0A"]


@pytest.mark.parametrize("value", NOT_DECIMAL)
@pytest.mark.parametrize("path,setting,message", [
    ("topic/config?topic={topic}", "ttl_ms", "INVALID_TTL"),
    ("topic/config?topic={topic}", "max_depth", "INVALID_MAX_DEPTH"),
    ("channel/config?topic={topic}&channel=ch", "max_attempts", "INVALID_MAX_ATTEMPTS"),
    ("channel/config?topic={topic}&channel=ch", "ttl_ms", "INVALID_TTL"),
    ("channel/config?topic={topic}&channel=ch", "max_depth", "INVALID_MAX_DEPTH"),
])
def test_policy_settings_take_decimal_digits_only(shared_nsqd, topic, path, setting, message, value):
    topic = topic[:50]  # room for its dead-letter topic, <topic>.dead
    url = f"{shared_nsqd.http_url}/{path.format(topic=topic)}"
    create(shared_nsqd, topic, "ch")
    before = http_json("GET", url)
    assert http_json("POST", f"{url}&{setting}={value}") == (400, {"message": message})
    assert http_json("GET", url) == before
    assert http_json("POST", f"{url}&{setting}=5")[1][setting] == 5  # digits are still taken


@pytest.mark.parametrize("value", NOT_DECIMAL)
def test_pub_defer_and_deferred_limit_take_decimal_digits_only(shared_nsqd, topic, value):
    url = shared_nsqd.http_url
    assert http_json("POST", f"{url}/pub?topic={topic}&defer={value}", b"x") == (400, {"message": "INVALID_DEFER"})
    assert http("POST", f"{url}/pub?topic={topic}&defer=5000", b"x")[0] == 200
    _, stats = http_json("GET", f"{url}/stats?format=json&topic={topic}")
    assert stats["topics"][0]["message_count"] == 1  # the refused one was not published
    create(shared_nsqd, topic, "ch")
    query = f"topic={topic}&channel=ch"
    assert http_json("GET", f"{url}/channel/deferred?{query}&limit={value}") == (400, {"message": "INVALID_LIMIT"})
    assert http_json("GET", f"{url}/channel/deferred?{query}&limit=5")[0] == 200


@pytest.mark.parametrize("flag,status,line", [
    ("--max-attempts=1_0", 2, "--max-attempts: '1_0' is not a number"),
    ("--max-attempts=65536", 1, "--max-attempts 65536 must be in [0, 65535]"),
    ("--max-depth=" + "9" * 26, 2, f"--max-depth: {'9' * 26} is out of range"),
    ("--max-depth=4611686018427387905", 1, "--max-depth 4611686018427387905 must be in [0, 4611686018427387904]"),
    ("--message-ttl=9999999999999h", 2, "--message-ttl: duration '9999999999999h' is out of range"),
    ("--message-ttl=87601h", 1, "--message-ttl 87601h0m0s must be in [0, 87600h0m0s]"),
    ("--mem-queue-size=+5", 2, "--mem-queue-size: '+5' is not a number"),
    ("--mem-queue-size=\u0663", 2, "--mem-queue-size: '\u0663' is not a number"),
    ("--msg-timeout=1_0s", 2, "--msg-timeout: invalid duration '1_0s'"),
    ("--msg-timeout=2562048h", 2, "--msg-timeout: duration '2562048h' is out of range"),
])
def test_flags_out_of_range_or_not_decimal_stop_startup_in_one_line(tmp_path, flag, status, line):
    assert_refused(tmp_path, flag, status, line)


@pytest.mark.parametrize("setting,status,line", [
    ("max_attempts = 65536", 1, "--max-attempts 65536 must be in [0, 65535]"),
    (f"max_depth = {'9' * 26}", 2, f"max_depth: {'9' * 26} is out of range"),
    ('message_ttl = "9999999999999h"', 2, "message_ttl: duration '9999999999999h' is out of range"),
    ("message_ttl = 9999999999999999999", 2, "message_ttl: duration '9999999999999999999ms' is out of range"),
    ("message_ttl = 315363600000", 1, "--message-ttl 87601h0m0s must be in [0, 87600h0m0s]"),
    ('msg_timeout = "1_0s"', 2, "msg_timeout: invalid duration '1_0s'"),
])
def test_config_file_values_are_held_to_the_same_ranges(tmp_path, setting, status, line):
    config = tmp_path / "nsqd.cfg"
    config.write_text(setting + "\n")
    assert_refused(tmp_path, f"--config={config}", status, line)


def assert_refused(tmp_path, argument: str, status: int, line: str) -> None:
    """nsqd with ``argument`` exits with ``status`` (2: parsing, 1: a range
    checked at startup) and says ``line``, with no traceback."""
    result = run_nsqd(f"--data-path={tmp_path}", "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
                      argument, timeout=10)
    assert result.returncode == status, result.stderr
    assert line in result.stderr
    assert "Traceback" not in result.stderr
