"""Retained topics (beyond NSQ) in nsqadmin, in a real headless Chromium
over real daemons: a topic page shows each nsqd's log and its retention; a
channel page shows its log lag and replays the log from a point on every
nsqd, through nsqadmin's JSON API; a value nsqd refuses is shown in nsqd's
words and changes nothing; a plain topic shows none of it."""

import pytest

from nsqpy.nsqadmin import aggregate, figures
from tests.nsqadmin.helpers import call
from tests.nsqadmin.test_browser import browser, tab  # noqa: F401 (fixtures: Chromium and a page in it)
from tests.nsqadmin.test_operator_views import accept_dialogs
from tests.support.wire import http_json, wait_until

pytestmark = pytest.mark.browser

COUNTS = (3, 2)  # messages published to nsqd0 and nsqd1


@pytest.fixture
def retained_topic(cluster, topic):
    """``topic`` retained for 1h on both nsqd, channels ``first`` and
    ``second`` on both, 3 + 2 messages published after."""
    for index, count in enumerate(COUNTS):
        for channel in ("first", "second"):
            cluster.create_channel(index, topic, channel)
        url = f"{cluster.nsqds[index].http_url}/topic/config?topic={topic}&retention=1h"
        assert http_json("POST", url)[0] == 200
        cluster.publish(index, topic, *[b"m%d" % i for i in range(count)])
    cluster.wait_registered(topic, 2)
    # a new topic hands messages out once nsqlookupd has told it its channels: wait for that
    for index, count in enumerate(COUNTS):
        for channel in ("first", "second"):
            wait_until(lambda: channel_on(cluster, index, topic, channel)["depth"] == count, timeout=30)
    return topic


def channel_on(cluster, index: int, topic: str, channel: str) -> dict:
    """One channel as nsqd itself reports it."""
    return next(c for c in cluster.nsqd_topic(index, topic)["channels"] if c["channel_name"] == channel)


def submit_replay(tab, start: str) -> list[str]:
    """Type ``start`` in the replay form, send it, say yes when asked; -> what was asked."""
    page = tab.page
    asked = accept_dialogs(page)
    page.fill('#replay input[name="from"]', start)
    page.click('#replay button[type="submit"]')
    wait_until(lambda: asked, timeout=15)
    return asked


def test_topic_page_shows_each_nodes_log_and_the_total(tab, cluster, retained_topic):
    tab.open(f"/topics/{retained_topic}", "topic-retention")
    for index, count in enumerate(COUNTS):
        log = cluster.nsqd_topic(index, retained_topic)["log"]
        row = f'#retention tr[data-node="{cluster.node(index)}"]'
        assert (tab.text(f"{row} .earliest-offset"), tab.text(f"{row} .latest-offset")) == ("0", str(count))
        assert log["latest_offset"] == count
        assert tab.text(f"{row} .log-messages") == str(count)
        assert tab.text(f"{row} .log-bytes") == figures.size(log["bytes"]) and log["bytes"] > 0
        assert tab.text(f"{row} .earliest-time") == figures.moment(log["earliest_timestamp"])
        assert tab.text(f"{row} .latest-time").endswith(" UTC")
        assert tab.text(f"{row} .segments") == str(log["segments"])
        assert tab.text(f"{row} .retention") == "1h0m0s"
    total = '#retention tr[data-node="*"]'
    assert tab.text(f"{total} .log-messages") == str(sum(COUNTS))
    assert "published since each nsqd started" in tab.text("#log-counts")  # why the two counts may differ
    assert tab.text(f"{total} .earliest-offset") == "–"  # each nsqd numbers its own log


def test_replay_from_earliest_on_the_channel_page_refills_it_on_every_nsqd(tab, cluster, retained_topic):
    for index in (0, 1):
        url = f"{cluster.nsqds[index].http_url}/channel/empty?topic={retained_topic}&channel=first"
        assert http_json("POST", url)[0] == 200
        assert channel_on(cluster, index, retained_topic, "first")["log_lag"] == 0
    page = tab.open(f"/topics/{retained_topic}/first", "channel-retention")
    assert tab.text('#log-position tr[data-node="*"] .log-lag') == "0"

    asked = submit_replay(tab, "earliest")
    assert "Replay channel first from earliest?" in asked[0]
    page.wait_for_selector("#flash:not([hidden])")
    assert tab.text("#flash") == "Replay: done"

    def refilled():
        channels = [channel_on(cluster, index, retained_topic, "first") for index in (0, 1)]
        return [(c["depth"], c["log_lag"]) for c in channels] == [(n, n) for n in COUNTS]
    wait_until(refilled, timeout=15)
    page.wait_for_function(  # the page's own refresh (every 5 s) shows it
        "total => document.querySelector('#log-position tr[data-node=\"*\"] .log-lag').textContent.trim() === total",
        arg=str(sum(COUNTS)), timeout=30_000)
    for index, count in enumerate(COUNTS):  # the other channel is left alone
        assert channel_on(cluster, index, retained_topic, "second")["message_count"] == count


def test_a_value_nsqd_refuses_is_shown_and_changes_nothing(tab, cluster, retained_topic):
    before = [channel_on(cluster, index, retained_topic, "second") for index in (0, 1)]
    page = tab.open(f"/topics/{retained_topic}/second")
    submit_replay(tab, "yesterday")
    page.wait_for_selector("#flash.error:not([hidden])")
    # another flash (a refresh that timed out on a busy machine) may come first: wait for this one
    wait_until(lambda: tab.text("#flash").startswith("Replay failed:"), timeout=30)
    shown = tab.text("#flash")
    assert shown.startswith("Replay failed: INVALID_FROM from 'yesterday' is not earliest"), shown
    assert "UPSTREAM" not in shown and "http://" not in shown  # nsqd's one line, not a URL
    assert tab.errors == ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]
    tab.errors.clear()  # the refused request itself, as Chromium logs it
    after = [channel_on(cluster, index, retained_topic, "second") for index in (0, 1)]
    for old, new in zip(before, after):
        assert (new["depth"], new["message_count"], new["log_lag"], new["replay_offset"]) == \
            (old["depth"], old["message_count"], old["log_lag"], None)


def test_replay_on_the_json_api(admin, cluster, retained_topic):
    path = f"/api/topics/{retained_topic}/second"
    assert call(admin, "POST", path, {"action": "replay", "from": "1"}) == (200, {"message": ""})
    wait_until(lambda: [channel_on(cluster, i, retained_topic, "second")["depth"] for i in (0, 1)] == [2, 1])
    status, answer = call(admin, "POST", path, {"action": "replay", "from": "9"})
    assert status == 400 and answer["message"].startswith("OFFSET_OUT_OF_RANGE offset 9 is past the end")
    assert call(admin, "POST", path, {"action": "replay"}) == (400, {"message": "MISSING_ARG_FROM"})
    assert call(admin, "POST", path, {"action": "replay", "from": ""})[1]["message"] == "MISSING_ARG_FROM"
    assert call(admin, "POST", path, {"action": "replay", "from": 0})[1]["message"].startswith("INVALID_FROM")
    assert call(admin, "POST", f"/api/topics/{retained_topic}", {"action": "replay", "from": "earliest"}) == \
        (400, {"message": "INVALID_ACTION"})
    status, channel = call(admin, "GET", path)
    assert status == 200 and channel["log_position"] == {"log_lag": 3, "replay_offset": None}
    status, topic = call(admin, "GET", f"/api/topics/{retained_topic}")
    assert topic["log"]["messages"] == sum(COUNTS) and topic["log"]["earliest_offset"] is None


def test_a_plain_topic_shows_no_retention(tab, admin, cluster, topic):
    cluster.create_channel(0, topic, "ch")
    cluster.publish(0, topic, b"x")
    cluster.wait_registered(topic, 1)
    page = tab.open(f"/topics/{topic}")
    assert page.locator("#retention").count() == 0 and "Retained log" not in page.content()
    page = tab.open(f"/topics/{topic}/ch")
    assert page.locator("#log-position, #replay").count() == 0 and "Retained log" not in page.content()
    status, answer = call(admin, "POST", f"/api/topics/{topic}/ch", {"action": "replay", "from": "earliest"})
    assert status == 400 and answer["message"].startswith("TOPIC_NOT_RETAINED")
    assert channel_on(cluster, 0, topic, "ch")["depth"] == 1


def test_logs_merge_over_nodes_that_keep_one():
    kept = aggregate.topic_log({"retention_ms": 60_000, "retention_bytes": 0, "log": {
        "earliest_offset": 4, "latest_offset": 10, "earliest_timestamp": 5, "latest_timestamp": 9,
        "bytes": 2048, "segments": 1}})
    empty = {**kept, "earliest_offset": 7, "latest_offset": 7, "messages": 0, "earliest_timestamp": 0,
             "latest_timestamp": 0, "bytes": 0}
    merged = aggregate.merge_logs([kept, None, empty])
    assert (merged["messages"], merged["bytes"], merged["segments"]) == (6, 2048, 2)
    assert (merged["earliest_timestamp"], merged["latest_timestamp"]) == (5, 9)
    assert aggregate.merge_logs([None]) is None and aggregate.topic_log({"retention_ms": 0}) is None
    assert figures.retention(kept["retention_ms"], 1 << 30) == "1m0s · 1.0 GiB"
    assert figures.moment(1_764_320_400_999_000_000) == "2025-11-28 09:00:00 UTC"
    assert [figures.size(n) for n in (0, 1023, 1536)] == ["0 B", "1023 B", "1.5 KiB"]
