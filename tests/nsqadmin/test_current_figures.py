"""The figures a person reads as "now", in a real headless Chromium over
real daemons: once publishing has stopped for longer than the rate window
(one sample interval), the headline reads 0/s like the charts' last point
and no time to drain is estimated from old rates; a queue nobody consumes
says "no consumer"; the topic list's depth says it counts the channels too,
where the topic page's is the topic's own queue."""

import time

import pytest

from nsqpy.protocol import commands
from tests.nsqadmin.helpers import call
from tests.nsqadmin.test_browser import browser, tab  # noqa: F401 (fixtures: Chromium and a page in it)
from tests.support.wire import wait_until

pytestmark = pytest.mark.browser

DRAWN = "count => [...document.querySelectorAll('figure.chart')].every(f => Number(f.dataset.drawn || 0) >= count)"
LEGEND = "() => [...document.querySelectorAll('figure.chart')[0].querySelectorAll('.legend span')].map(s => s.textContent)"


def show_an_interval_after(tab, history: str, moment: float) -> None:
    """Wait until the last interval the page shows began after ``moment``
    (a ``time.time()``): the sample opening it was read after one recorded
    later than ``moment``, and the page has fetched it."""
    def points_so_far():
        _, answer = call(tab.admin, "GET", history)
        points = answer["points"]
        return len(points) if len(points) >= 3 and points[-3]["t"] > moment else None
    count = wait_until(points_so_far, timeout=60)
    tab.page.wait_for_function(DRAWN, arg=count, timeout=60_000)


def publish_until_the_headline_shows_traffic(tab, cluster, topic: str) -> float:
    """Publish batches until the headline shows messages coming in; the
    moment publishing stopped."""
    def shows_traffic():
        cluster.publish(0, topic, *[b"m"] * 10)
        return tab.text(".history .rate-in") not in ("–", "0.0/s")
    wait_until(shows_traffic, timeout=60, interval=0.1)
    return time.time()


def test_headline_reads_zero_once_publishing_stopped(tab, cluster, topic):
    cluster.create_channel(0, topic, "ch")
    cluster.wait_registered(topic, 1)
    page = tab.open(f"/topics/{topic}")
    stopped = publish_until_the_headline_shows_traffic(tab, cluster, topic)
    show_an_interval_after(tab, f"/api/history/topics/{topic}", stopped)
    assert page.evaluate(LEGEND) == ["in/s 0", "out/s 0"]
    assert tab.text(".history .rate-in") == "0.0/s"
    assert tab.text(".history .rate-out") == "0.0/s"
    assert tab.text(".history .drain") == "no consumer"

    tab.open(f"/topics/{topic}/ch", "channel-quiet")
    assert tab.text(".history .rate-in") == "0.0/s"
    assert tab.text(".history .drain") == "no consumer"
    tab.open("/")
    row = f'#topics tr[data-name="{topic}"]'
    assert [tab.text(f"{row} td.rate-in"), tab.text(f"{row} td.rate-out")] == ["0.0/s", "0.0/s"]


def test_time_to_drain_says_no_consumer_once_the_consumer_left(tab, cluster, topic, consumer):
    cluster.create_channel(0, topic, "ch")
    cluster.publish(0, topic, *[b"m"] * 20)
    cluster.wait_registered(topic, 1)
    history = f"/api/history/topics/{topic}/ch"
    wait_until(lambda: call(tab.admin, "GET", history)[1]["points"], timeout=60)  # sampled while all are queued
    page = tab.open(f"/topics/{topic}/ch")
    conn = consumer(0, topic, "ch", rdy=1)
    for _ in range(10):
        conn.send(commands.fin(conn.message().id))
    wait_until(lambda: any(p["rate_out"] > 0 for p in call(tab.admin, "GET", history)[1]["points"]), timeout=60)
    conn.close()
    wait_until(lambda: cluster.nsqd_topic(0, topic)["channels"][0]["client_count"] == 0, timeout=30)
    show_an_interval_after(tab, history, time.time())
    assert tab.text(".history .drain") == "no consumer"
    assert page.evaluate(LEGEND)[1] == "out/s 0"
    tab.open(f"/topics/{topic}", "topic-no-consumer")
    assert tab.text(".history .drain") == "no consumer"


def test_topic_list_depth_says_it_counts_the_channels(tab, cluster, topic):
    cluster.create_channel(0, topic, "ch")
    cluster.publish(0, topic, *[b"m"] * 7)
    cluster.wait_registered(topic, 1)
    page = tab.open("/")
    depth = f'#topics tr[data-name="{topic}"] td.depth'
    page.wait_for_function("selector => document.querySelector(selector).textContent.trim() === '7'", arg=depth,
                           timeout=60_000)  # the first stats sample with the topic, then a page refresh
    assert tab.text("#topics th.depth") == "Depth (topic + channels)"
    assert "topic's own queue" in tab.text("#topics-note")

    tab.open(f"/topics/{topic}")
    assert tab.text("#topic-depth") == "0"  # all 7 went on to channel ch
    assert "its channels" in tab.text("#topic-depth-note")
    assert "topic + channels" in tab.text(".history figure.chart:nth-of-type(2) figcaption")
