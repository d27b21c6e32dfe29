"""The operator views found missing side by side with NSQ's own nsqadmin, in
a real headless Chromium over real daemons: the lookup page's nsqlookupd
hosts and deletes, clients and tombstones on a node's page, a topic only
nsqlookupd knows, the nodes page's count and topic badges, the versions,
an honest time to drain, and a create form that says which names it takes."""

import re
import threading
import urllib.parse

import pytest

from nsqpy import __version__
from nsqpy.protocol import NSQ_VERSION, commands
from tests.nsqadmin.helpers import call
from tests.nsqadmin.test_browser import browser, tab  # noqa: F401 (fixtures: Chromium and a page in it)
from tests.support.wire import http_json, wait_until

pytestmark = pytest.mark.browser

CLIENT_HOST = '<img src=x onerror="window.pwned=1">'


def accept_dialogs(page) -> list[str]:
    """Say yes to every confirm() the page asks, and keep what it asked."""
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    return asked


def lookupd_create(cluster, topic: str, *channels: str) -> None:
    """Register ``topic`` (and channels) with nsqlookupd only: no nsqd has it."""
    url = cluster.lookupd.http_url
    assert http_json("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    for channel in channels:
        assert http_json("POST", f"{url}/channel/create?topic={topic}&channel={channel}")[0] == 200


def lookupd_channels(cluster, topic: str) -> list[str]:
    return http_json("GET", f"{cluster.lookupd.http_url}/channels?topic={topic}")[1]["channels"]


def test_lookup_page_lists_lookupds_links_names_and_deletes_inactive_ones(tab, cluster, topic):
    lookupd_create(cluster, topic, "first", "second")
    page = tab.open("/lookup", "lookup-inactive")
    assert tab.text("#lookupds td") == cluster.lookupd.http_address
    entry = f'#inactive tr[data-topic="{topic}"]'
    assert page.locator(f"{entry} td.topic a").get_attribute("href") == f"/topics/{topic}"
    assert page.locator(f'{entry} li[data-channel="first"] a').get_attribute("href") == f"/topics/{topic}/first"

    asked = accept_dialogs(page)
    page.click(f'{entry} li[data-channel="first"] button.delete-channel')
    wait_until(lambda: lookupd_channels(cluster, topic) == ["second"], timeout=30)
    page.wait_for_selector(f'{entry} li[data-channel="first"]', state="detached")
    assert asked and topic in asked[0] and "first" in asked[0]

    page.click(f"{entry} button.delete-topic")
    wait_until(lambda: topic not in cluster.lookupd_topics(), timeout=30)
    page.wait_for_selector(entry, state="detached")


def test_node_page_lists_each_channels_clients_and_tombstones_a_topic(tab, cluster, topic, consumer):
    cluster.create_channel(0, topic, "ch")
    cluster.create_channel(0, topic, "idle")
    cluster.wait_registered(topic, 1)
    consumer(0, topic, "ch", client_id="node-view-1", hostname=CLIENT_HOST, user_agent="<b>agent</b>")
    page = tab.open(f"/nodes/{cluster.node(0)}", "node-clients")
    clients = page.locator(f'#node-topics tbody[data-topic="{topic}"] tr.clients-of[data-channel="ch"]')
    assert clients.locator("td.client-id").inner_text() == "node-view-1"
    assert clients.locator("td.client-host").inner_text().startswith(CLIENT_HOST)  # text, not an <img>
    assert "<b>agent</b>" in clients.locator("td.client-agent").inner_text()
    assert page.locator("#node-topics img, #node-topics b").count() == 0
    idle = page.locator(f'#node-topics tbody[data-topic="{topic}"] tr.clients-of[data-channel="idle"]')
    assert "No clients" in idle.inner_text()

    asked = accept_dialogs(page)
    page.click(f'#node-topics tbody[data-topic="{topic}"] button.tombstone')
    wait_until(lambda: cluster.nsqd_topic(0, topic) is None, timeout=30)
    page.wait_for_selector(f'#node-topics tbody[data-topic="{topic}"]', state="detached")
    assert asked and topic in asked[0] and cluster.node(0) in asked[0]
    assert page.evaluate("() => window.pwned") is None


def test_a_topic_only_nsqlookupd_knows_is_shown_and_can_be_deleted(tab, cluster, topic):
    lookupd_create(cluster, topic, "waiting")
    page = tab.open("/")
    with page.expect_navigation():
        page.click(f'#topics a:text-is("{topic}")')
    assert "UPSTREAM_ERROR: failed to query any nsqd" in tab.text("#lookupd-only")
    tab.open(f"/topics/{topic}", "topic-lookupd-only")
    assert page.locator('#lookupd-channels a:text-is("waiting")').get_attribute("href") == f"/topics/{topic}/waiting"

    tab.open(f"/topics/{topic}/waiting", "channel-lookupd-only")
    assert "UPSTREAM_ERROR: failed to query any nsqd" in tab.text("#lookupd-only")
    asked = accept_dialogs(page)
    with page.expect_navigation():
        page.click('button.action:text-is("Delete")')
    assert page.url.endswith(f"/topics/{topic}")
    assert lookupd_channels(cluster, topic) == [] and "waiting" in asked[0]

    with page.expect_navigation():
        page.click('button.action:text-is("Delete")')
    wait_until(lambda: topic not in cluster.lookupd_topics(), timeout=30)
    assert call(tab.admin, "GET", f"/topics/{topic}")[0] == 404  # now unknown everywhere


def test_nodes_page_counts_the_nodes_and_links_their_topics(tab, cluster, topic):
    cluster.publish(1, topic, b"x")
    cluster.wait_registered(topic, 1)
    page = tab.open("/nodes", "nodes-badges")
    assert re.fullmatch(r"NSQd nodes \(2\)", tab.text("h1"))
    row = page.locator(f'#nodes tr[data-node="{cluster.node(1)}"]')
    assert row.locator("td.topics .count").inner_text() == str(len(row.locator("td.topics a.topic").all()))
    with page.expect_navigation():
        row.locator(f'td.topics a.topic:text-is("{topic}")').click()
    assert urllib.parse.unquote(page.url).endswith(f"/topics/{topic}")
    page.wait_for_selector("#topic-nodes")


def test_versions_of_nsqadmin_and_of_each_nsqd(tab, cluster):
    page = tab.open("/", "versions")
    assert tab.text(".bar .version .nsq") == f"v{NSQ_VERSION}"
    assert tab.text(".bar .version .nsqpy") == f"nsqpy {__version__}"
    assert page.locator('.bar a:text-is("Documentation")').get_attribute("href").startswith("https://")
    assert page.locator('.bar a:text-is("GitHub")').get_attribute("href").startswith("https://github.com/")
    tab.open("/nodes")
    for index in (0, 1):
        _, info = http_json("GET", f"{cluster.nsqds[index].http_url}/info")
        assert tab.text(f'#nodes tr[data-node="{cluster.node(index)}"] td.version') == info["version"]
    tab.open(f"/nodes/{cluster.node(1)}")
    assert tab.text("#node-version") == info["version"]


class Pump:
    """Publishes four messages and finishes at most one every tick, until
    stopped: the channel's depth grows whatever pace the machine keeps."""

    def __init__(self, cluster, topic: str, conn):
        self.cluster, self.topic, self.conn = cluster, topic, conn
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(0.2):
            self.cluster.publish(0, self.topic, b"m", b"m", b"m", b"m")
            try:
                message = self.conn.message(timeout=0.05)
            except TimeoutError:
                continue
            self.conn.send(commands.fin(message.id))

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)


SHOWS = """wanted => Object.entries(wanted).every(([selector, pattern]) =>
    new RegExp(pattern).test(document.querySelector(selector).textContent.trim()))"""


def test_time_to_drain_says_growing_and_leaves_out_paused_channels(tab, cluster, topic, consumer):
    cluster.create_channel(0, topic, "slow")
    cluster.wait_registered(topic, 1)
    pump = Pump(cluster, topic, consumer(0, topic, "slow", rdy=1))
    try:
        page = tab.open(f"/topics/{topic}/slow")
        leaving = r"^(?!0\.0/)[\d,.]+/s$"  # messages do leave, only more slowly than they come
        page.wait_for_function(SHOWS, arg={".history .drain": r"^growing \(\+[\d,.]+/s\)$",
                                           ".history .rate-out": leaving}, timeout=60_000)
        tab.open(f"/topics/{topic}", "topic-growing")
        page.wait_for_function(SHOWS, arg={".history .drain": r"^growing \(\+"}, timeout=60_000)
    finally:
        pump.stop()

    page = tab.open(f"/topics/{topic}/slow")
    page.click('button.action:text-is("Pause")')
    page.wait_for_function(SHOWS, arg={".history .drain": "^paused$"}, timeout=60_000)
    tab.open(f"/topics/{topic}", "topic-paused-drain")
    page.wait_for_function(SHOWS, arg={".history .drain": "^paused$"}, timeout=60_000)


def test_create_form_says_which_names_are_allowed(tab, cluster, topic):
    page = tab.open("/lookup")
    page.fill('input[name="topic"]', "no spaces!")
    page.click('form#create button[type="submit"]')
    message = page.evaluate("() => document.querySelector('input[name=topic]').validationMessage")
    assert "1-64" in message and "#ephemeral" in message and "letters" in message, message
    assert "#ephemeral" in tab.text("form#create .rule")
    page.fill('input[name="topic"]', topic)
    assert page.evaluate("() => document.querySelector('input[name=topic]').validationMessage") == ""
    page.fill('input[name="channel"]', "bad/channel")
    assert "1-64" in page.evaluate("() => document.querySelector('input[name=channel]').validationMessage")
    page.fill('input[name="channel"]', "fine#ephemeral")
    page.click('form#create button[type="submit"]')
    wait_until(lambda: topic in cluster.lookupd_topics(), timeout=30)
    assert "no spaces!" not in cluster.lookupd_topics()
