"""nsqadmin's pages in a real headless Chromium (Debian's, driven by
Playwright): every page loads with no console errors and shows the real
figures; actions reach the daemons; delete asks first; charts draw; what a
client sends is shown as text and never runs. A screenshot of each page goes
to screenshots/ at the repository root."""

import contextlib
import os
import pathlib

import pytest

from tests.nsqadmin.helpers import call, departed_rows, wait_taken_over
from tests.replication.conftest import killed_holding, replicated  # noqa: F401 - the fixture
from tests.support.wire import http, http_json, wait_until

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "screenshots"
XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: the browser tests need Debian's chromium "
                    "(make test installs it, or: apt-get install -y chromium chromium-driver)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Tab:
    """A page that records console errors, uncaught exceptions and dialogs."""

    def __init__(self, page, admin):
        self.page = page
        self.admin = admin
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, path: str, screenshot: str | None = None):
        response = self.page.goto(self.admin.http_url + path)
        assert response.status == 200, (path, response.status)
        self.page.wait_for_load_state("networkidle")
        if screenshot:
            SCREENSHOTS.mkdir(exist_ok=True)
            self.page.screenshot(path=str(SCREENSHOTS / f"{screenshot}.png"), full_page=True)
        return self.page

    def text(self, selector: str) -> str:
        return self.page.locator(selector).inner_text().strip()

    def refresh_content(self) -> None:
        """What the page does every few seconds, now."""
        self.page.evaluate("() => window.nsqadmin.refresh()")


@contextlib.contextmanager
def open_tab(browser, admin):
    """A Tab on ``admin`` in a context of its own; no console error by its end."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)  # a wait for what should appear: ends when it does
    opened = Tab(page, admin)
    try:
        yield opened
    finally:
        context.close()
    assert opened.errors == [], opened.errors


@pytest.fixture
def tab(browser, admin):
    with open_tab(browser, admin) as opened:
        yield opened


@pytest.fixture
def busy_topic(cluster, topic, consumer):
    """``topic`` with 3 + 2 messages on the two nsqd, channel ``ch`` on both, a consumer on nsqd0."""
    for index, bodies in ((0, (b"a", b"b", b"c")), (1, (b"d", b"e"))):
        cluster.create_channel(index, topic, "ch")
        cluster.publish(index, topic, *bodies)
    cluster.wait_registered(topic, 2)
    consumer(0, topic, "ch", client_id="worker-1", hostname="consumer-host", user_agent="browser-test/1")
    return topic


def test_every_page_shows_the_real_figures(tab, cluster, busy_topic):
    page = tab.open("/", "topics")
    assert page.locator(f'#topics a:text-is("{busy_topic}")').count() == 1

    tab.open(f"/topics/{busy_topic}", "topic")
    assert tab.text("#topic-messages") == "5"
    assert page.locator("#topic-nodes tbody tr").count() == 2
    assert page.locator('#channels a:text-is("ch")').count() == 1

    tab.open(f"/topics/{busy_topic}/ch", "channel")
    assert tab.text("#channel-messages") == "5"
    assert tab.text("#clients .client-id") == "worker-1"
    assert "browser-test/1" in tab.text("#clients .client-agent")
    assert "consumer-host" in tab.text("#clients .client-host")

    tab.open("/nodes", "nodes")
    for index in (0, 1):
        port = str(cluster.nsqds[index].tcp_hostport[1])
        assert page.locator(f'#nodes td:text-is("{port}")').count() == 1

    tab.open(f"/nodes/{cluster.node(1)}", "node")
    _, stats = http_json("GET", f"{cluster.nsqds[1].http_url}/stats?format=json")
    assert tab.text("#node-messages") == f"{sum(t['message_count'] for t in stats['topics']):,}"

    tab.open("/counter", "counter")
    _, counter = call(tab.admin, "GET", "/api/counter")
    expected = sum(entry["message_count"] for entry in counter["stats"].values())
    page.wait_for_function("expected => document.getElementById('counter').dataset.total >= expected", arg=expected)
    assert int(tab.text("#counter").replace(",", "")) >= expected

    tab.open("/lookup", "lookup")
    assert page.locator("form#create").count() == 1


def test_policies_of_each_node_are_shown(tab, cluster, busy_topic):
    """Beyond NSQ: the dead-letter, TTL and bounded-queue settings each nsqd reports."""
    nsqd0, nsqd1 = (cluster.nsqds[i].http_url for i in (0, 1))
    assert http("POST", f"{nsqd0}/channel/config?topic={busy_topic}&channel=ch&max_attempts=3")[0] == 200
    assert http("POST", f"{nsqd1}/topic/config?topic={busy_topic}&ttl_ms=90000&max_depth=500"
                        "&full_policy=drop-oldest")[0] == 200
    tab.open(f"/topics/{busy_topic}/ch", "channel-policies")
    node0 = f'#policies tr[data-node="{cluster.node(0)}"]'
    node1 = f'#policies tr[data-node="{cluster.node(1)}"]'
    assert tab.text(f"{node0} .max-attempts") == "3"
    assert tab.text(f"{node0} .dead-letter-topic") == f"{busy_topic}.dead"
    assert tab.text(f"{node1} .max-attempts") == "off"
    assert tab.text(f"{node1} .ttl") == "90.0s"  # the channel follows its topic
    assert tab.text(f"{node1} .max-depth") == "unbounded"  # a topic's bound is the topic's
    tab.open(f"/topics/{busy_topic}", "topic-policies")
    assert tab.text(f"{node1} .max-depth") == "500"
    assert tab.text(f"{node1} .full-policy") == "drop-oldest"
    assert tab.text(f"{node0} .ttl") == "none"


def test_filter_box_hides_other_topics(tab, cluster, busy_topic):
    other = f"{busy_topic[:50]}_zzz"
    cluster.publish(0, other, b"x")
    cluster.wait_registered(other, 1)
    page = tab.open("/")
    page.fill("#filter", "zzz")
    assert page.locator(f'tr[data-name="{other}"]').is_visible()
    assert page.locator(f'tr[data-name="{busy_topic}"]').is_hidden()
    tab.refresh_content()  # the filter survives a refresh
    assert page.locator(f'tr[data-name="{busy_topic}"]').is_hidden()


def test_pause_from_the_page_pauses_every_nsqd(tab, cluster, busy_topic):
    page = tab.open(f"/topics/{busy_topic}/ch")
    page.click('button.action:text-is("Pause")')
    wait_until(lambda: all(cluster.nsqd_topic(i, busy_topic)["channels"][0]["paused"] for i in (0, 1)), timeout=15)
    page.wait_for_selector('button.action:text-is("Unpause")')
    assert page.locator("section .badge.paused").count() == 1
    page.click('button.action:text-is("Unpause")')
    wait_until(lambda: not any(cluster.nsqd_topic(i, busy_topic)["channels"][0]["paused"] for i in (0, 1)))


def test_delete_asks_for_confirmation(tab, cluster, busy_topic):
    page = tab.open(f"/topics/{busy_topic}/ch")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click('button.action:text-is("Delete")')
    for _ in range(100):  # the dialog, however long a busy machine takes to show it
        if asked:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(500)  # time for a delete that should not happen
    assert asked and "Delete channel ch" in asked[0]
    assert [c["channel_name"] for c in cluster.nsqd_topic(0, busy_topic)["channels"]] == ["ch"]

    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click('button.action:text-is("Delete")')
    assert page.url.endswith(f"/topics/{busy_topic}")
    assert cluster.nsqd_topic(0, busy_topic)["channels"] == []
    assert cluster.nsqd_topic(1, busy_topic)["channels"] == []


def test_create_from_the_lookup_page(tab, cluster, topic):
    page = tab.open("/lookup")
    page.fill('input[name="topic"]', topic)
    page.fill('input[name="channel"]', "made_here")
    page.click('form#create button[type="submit"]')
    wait_until(lambda: topic in cluster.lookupd_topics(), timeout=15)
    page.wait_for_selector(f'#inactive td.topic a:text-is("{topic}")')


def test_charts_draw_after_a_few_samples(tab, cluster, busy_topic):
    page = tab.open(f"/topics/{busy_topic}/ch")
    cluster.publish(1, busy_topic, *[b"more"] * 20)
    page.wait_for_function("() => [...document.querySelectorAll('figure.chart')]"
                           ".every(f => Number(f.dataset.drawn || 0) >= 3)", timeout=45_000)
    assert page.locator("figure.chart svg path.series").count() == 5
    assert page.locator("figure.chart .legend span").count() == 5
    assert tab.text(".history .rate-in").endswith("/s")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "channel-charts.png"), full_page=True)
    tab.open(f"/topics/{busy_topic}", "topic-charts")
    page.wait_for_function("() => Number(document.querySelector('figure.chart').dataset.drawn || 0) >= 2")


def test_what_clients_send_is_text_not_markup(tab, cluster, busy_topic, consumer):
    consumer(1, busy_topic, "ch", client_id=XSS, hostname='<img src=x onerror="window.pwned=1">',
             user_agent="<b>bold</b>")
    page = tab.open(f"/topics/{busy_topic}/ch", "channel-xss")
    page.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    row = page.locator(f'#clients tr.client:has(td.client-id:text-is("{XSS}"))')
    assert row.count() == 1
    assert "<b>bold</b>" in row.locator(".client-agent").inner_text()
    tab.refresh_content()  # content swapped in by script stays text too
    page.wait_for_timeout(500)
    assert page.locator(f'td.client-id:text-is("{XSS}")').count() == 1
    assert page.evaluate("() => window.pwned") is None
    assert page.locator("#clients img, #clients b").count() == 0
    assert tab.dialogs == []


def test_open_pages_refresh_themselves(tab, cluster, busy_topic):
    page = tab.open(f"/topics/{busy_topic}")
    assert tab.text("#topic-messages") == "5"
    cluster.publish(1, busy_topic, b"f", b"g", b"h")
    page.wait_for_function("() => document.getElementById('topic-messages').textContent.trim() === '8'",
                           timeout=30_000)  # pages refresh every 5 s (none at all would time out)


@pytest.mark.replication
def test_a_departed_node_is_listed_with_its_new_owner_until_cleared(browser, replicated, start_admin, topic):
    cluster = replicated()
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}")
    cluster.wait_connected()
    dead, epoch = killed_holding(cluster, 1, topic)
    owner = wait_taken_over(admin, dead.tcp_address)["taken_over_by"]
    with open_tab(browser, admin) as tab:
        page = tab.open("/nodes", "nodes-departed")
        listed = page.locator(f'#departed tr[data-node="{dead.tcp_address}"][data-epoch="{epoch}"]')
        assert listed.locator(".taken-over-by").inner_text().strip() == owner
        assert listed.locator("td.num").last.inner_text().strip() == "100"
        assert " ago (" in listed.locator(".left-at").inner_text()
        page.once("dialog", lambda dialog: dialog.accept())
        page.click('button.action:text-is("Clear")')
        page.wait_for_selector("#departed", state="detached")
        assert page.locator("#nodes tbody tr").count() == 2  # the live nodes stay
    assert departed_rows(admin) == []
